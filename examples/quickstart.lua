-- protocall quickstart: run with `make run` (or build/release/protocall examples/quickstart.lua).
local pc = require "protocall"

print(("protocall %s"):format(pc.VERSION))
print(("status UNAVAILABLE is code %d"):format(pc.codes.UNAVAILABLE))

-- A call retried through a deliberately flaky function: it fails twice with
-- UNAVAILABLE, then answers. Sleeps are real but tiny (initial 10 ms).
local attempts = 0
local function flaky(request, timeout)
  attempts = attempts + 1
  print(("  attempt %d: request %q, timeout %.3f s"):format(attempts, request, timeout))
  if attempts < 3 then
    error(pc.Error { code = "UNAVAILABLE", message = "connection refused" })
  end
  return "hello, " .. request
end
local core = require "protocall.core"
local say_hello = pc.wrap_method(flaky, {
  retry = pc.Retry { initial = 0.01, maximum = 0.05,
    on_error = function(err) print("  retrying after: " .. tostring(err)) end },
  timeout = 2,
  sleep = function(s)
    print(("  sleeping %.4f s"):format(s))
    core.sleep(s)
  end,
})
print("calling a flaky method with pc.Retry:")
print("  -> " .. say_hello("world"))
