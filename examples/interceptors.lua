-- Interceptors, a few lines each: an auth header, logging, a metrics
-- counter and a circuit breaker around demo.Router calls, plus a server-side
-- auth check. Run: build/release/protocall examples/interceptors.lua
-- (spec/examples_spec.lua runs it). An interceptor is fn(call, next): it may
-- change call.request, call.metadata and call.options, answer without next,
-- raise, and read call.status, call.attempts and call.elapsed after next.
local pc = require "protocall"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
assert(pc.load_file(here .. "/route.proto", { import_paths = { here } }))

-- Auth: a header on every attempt ({per_attempt = fn} runs once per attempt).
local function auth(token)
  return { per_attempt = function(call, next)
    call.metadata[#call.metadata + 1] = { "authorization", "Bearer " .. token }
    return next(call)
  end }
end

-- Logging: one line per call with its outcome.
local function logging(print_line)
  return function(call, next)
    local ok, res = pcall(next, call)
    print_line(("%s -> %s after %d attempt(s)"):format(call.method, call.status, call.attempts or 0))
    if not ok then error(res, 0) end
    return res
  end
end

-- Metrics: calls counted by method and status.
local counts = {}
local function metrics(call, next)
  local ok, res = pcall(next, call)
  local key = call.name .. " " .. call.status
  counts[key] = (counts[key] or 0) + 1
  if not ok then error(res, 0) end
  return res
end

-- Circuit breaker: after `limit` failed calls in a row, fail fast for
-- `cooldown` seconds without calling the server.
local function breaker(limit, cooldown, clock)
  local failures, open_until = 0, -math.huge
  return function(call, next)
    if clock() < open_until then
      error(pc.Error { code = "UNAVAILABLE", message = "circuit open", ["local"] = true }, 0)
    end
    local ok, res = pcall(next, call)
    failures = ok and 0 or failures + 1
    if failures >= limit then open_until, failures = clock() + cooldown, 0 end
    if not ok then error(res, 0) end
    return res
  end
end

-- The server: it checks the header with a server interceptor and fails
-- while `down` is set.
local down = false
local server = pc.server({ ["demo.Router"] = {
  Measure = function(route)
    if down then error(pc.Error { code = "UNAVAILABLE", message = "down" }, 0) end
    return { length = #route.points, legs = #route.points - 1 }
  end,
} }, { interceptors = { function(call, next)
  for _, kv in ipairs(call.metadata) do
    if kv[1] == "authorization" and kv[2] == "Bearer s3cret" then return next(call) end
  end
  error(pc.Error { code = "UNAUTHENTICATED", message = "no token" }, 0)
end } })

local t = 0 -- a fake clock, so the breaker's cooldown runs at once
local function clock() return t end
local stub = pc.client("demo.Router", {
  transport = pc.inproc(server),
  retry = pc.Retry { initial = 0.1, max_attempts = 3 },
  clock = clock, sleep = function(s) t = t + s end,
  interceptors = { logging(print), metrics, breaker(2, 30, clock), auth("s3cret") },
})

local route = { points = { { x = 0, y = 0 }, { x = 3, y = 4 } } }
print("Measure: legs = " .. stub:Measure(route).legs)
down = true
for _ = 1, 3 do print("Measure: " .. tostring(select(2, pcall(stub.Measure, stub, route)))) end
t = t + 31
down = false
print("Measure after the cooldown: legs = " .. stub:Measure(route).legs)
local names = {}
for k in pairs(counts) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print(("count %s = %d"):format(k, counts[k])) end
