-- protocall quickstart: `make run` runs it (build/release/protocall examples/quickstart.lua).
-- With `--target http://127.0.0.1:PORT` it calls a real gRPC server instead of the
-- in-process one (examples/route_server.py serves the same demo.Router).
local pc = require "protocall"

local target
for i = 1, #arg do
  if arg[i] == "--target" then target = arg[i + 1] end
end
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."

-- 1. Schemas: load a .proto file (imports resolve through import_paths).
local file = assert(pc.load_file(here .. "/route.proto", { import_paths = { here } }))
print(("loaded %s: messages %s; service %s"):format(file.name, table.concat(file.messages, ", "),
  file.services[1]))
local Point, Route, Distance = pc.type("demo.Point"), pc.type("demo.Route"), pc.type("demo.Distance")

-- 2. Messages: compact C slots used like tables, checked on every write.
local route = Route { name = "triangle", points = { { x = 0, y = 0 }, { x = 3, y = 4 } } }
route.points[#route.points + 1] = Point { x = 3, y = 0 } -- or table.insert (Lua 5.4)
route.labels.kind = "demo"
print("route:   " .. tostring(route))
local _, err = pcall(function() route.points[1].x = "four" end)
print("bad write: " .. tostring(err))

-- 3. Wire format: byte-exact encode and decode.
local bytes = pc.encode(route)
print(("encoded: %d bytes: %s"):format(#bytes, (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))))
assert(pc.decode(Route, bytes) == route)
local _, decode_err = pc.decode(Route, bytes:sub(1, 5))
print("decoding 5 bytes of it: " .. tostring(decode_err))

-- 4. A service: a deliberately flaky in-process handler, called through a
-- client whose methods are cached callables with a retry policy.
local transport
local attempts = 0
if target then
  transport = pc.grpc(target)
  print("calling demo.Router at " .. target)
else
  local server = pc.server {
    ["demo.Router"] = {
      Measure = function(r, ctx)
        attempts = attempts + 1
        print(("  server: attempt %d, deadline in %.2f s"):format(attempts, ctx.deadline - pc.now()))
        if attempts < 3 then error(pc.Error { code = "UNAVAILABLE", message = "flaky server" }) end
        local len = 0
        for i = 2, #r.points do
          local a, b = r.points[i - 1], r.points[i]
          len = len + math.sqrt((a.x - b.x) ^ 2 + (a.y - b.y) ^ 2)
        end
        return Distance { length = len, legs = #r.points - 1 }
      end,
      Walk = function(r, ctx)
        for _, p in pc.ipairs(r.points) do ctx.send(p) end -- pc.ipairs: LuaJIT too
      end,
    },
  }
  transport = pc.inproc(server)
  print("calling demo.Router in process")
end

local router = pc.client("demo.Router", {
  transport = transport,
  timeout = 5,
  retry = pc.Retry { initial = 0.02, maximum = 0.1,
    on_error = function(e) print("  client: retrying after " .. tostring(e)) end },
  sleep = function(s)
    print(("  client: sleeping %.3f s (full jitter)"):format(s))
    pc.sleep(s)
  end,
})
local distance = router:Measure(route)
print(("Measure -> %s"):format(tostring(distance)))
io.write("Walk ->")
for p in router:Walk(route) do io.write((" (%d,%d)"):format(p.x, p.y)) end
print()

-- 5. JSON, as a gateway sees it: a proto3 JSON request in, the call, the
-- response out as JSON (json_name keys, 64-bit integers as strings).
local request = assert(pc.from_json(Route,
  '{"name": "json", "points": [{"x": 1, "y": 1}, {"x": 4, "y": 5}], "labels": {"via": "gateway"}}'))
print("JSON request:  " .. pc.to_json(request))
print("JSON response: " .. pc.to_json(router:Measure(request)))
local _, json_err = pc.from_json(Route, '{"name": "json", "points": [{"x": "four"}]}')
print("bad JSON: " .. tostring(json_err))
