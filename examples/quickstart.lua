-- protocall quickstart: run with `make run` (or build/release/protocall examples/quickstart.lua).
local pc = require "protocall"

print(("protocall %s"):format(pc.VERSION))
print(("status UNAVAILABLE is code %d"):format(pc.codes.UNAVAILABLE))

-- Messages: declare types in Lua (or load .proto files), then use them like tables.
local Point = pc.message("demo.Point", { { "x", "int32", 1 }, { "y", "int32", 2 } })
local Shape = pc.message("demo.Shape", {
  { "name", "string", 1 },
  { "corners", "demo.Point", 2, repeated = true },
  { "tags", "map<string,int64>", 3 },
})
local s = Shape { name = "triangle", corners = { { x = 0, y = 0 }, { x = 4, y = 0 } } }
table.insert(s.corners, Point { x = 0, y = 3 })
s.tags.sides = 3
print(s) --> demo.Shape{name="triangle", corners={demo.Point{}, demo.Point{x=4}, demo.Point{y=3}}, tags={["sides"]=3}}
print(("%d corners, the last at y=%d"):format(#s.corners, s.corners[3].y))
local ok, err = pcall(function() s.corners[1].x = "four" end)
print(ok, err) --> false  ...: demo.Point.x: integer expected, got string

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
