-- The quickstart's service served by protocall itself: demo.Router from
-- examples/route.proto over HTTP/2 (h2c), the Lua twin of
-- examples/route_server.py.
--
--     lua5.4 examples/route_server.lua [PORT]      (or: protocall examples/route_server.lua)
--
-- Then `lua5.4 examples/quickstart.lua --target http://127.0.0.1:PORT`.
-- Measure fails twice with UNAVAILABLE for each route name, then answers,
-- so the client's retry policy shows. PORT 0 picks a free one (default
-- 50051). Prints the address it listens on; stops on Ctrl-C.
local pc = require "protocall"

local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
local port = arg[1] or "50051"
assert(pc.load_file(here .. "/route.proto", { import_paths = { here } }))
local Distance = pc.type("demo.Distance")

local failures = {}
local server = pc.server {
  ["demo.Router"] = {
    Measure = function(route)
      local n = failures[route.name] or 0
      if n < 2 then
        failures[route.name] = n + 1
        error(pc.Error { code = "UNAVAILABLE", message = "flaky server" })
      end
      local len = 0
      for i = 2, #route.points do
        local a, b = route.points[i - 1], route.points[i]
        len = len + math.sqrt((a.x - b.x) ^ 2 + (a.y - b.y) ^ 2)
      end
      return Distance { length = len, legs = math.max(#route.points - 1, 0) }
    end,
    Walk = function(route, ctx)
      for _, p in ipairs(route.points) do ctx.send(p) end
    end,
  },
}

local listener = pc.listen(server, "127.0.0.1:" .. port)
print(("demo.Router listening on http://127.0.0.1:%d"):format(listener.port))
io.stdout:flush()
listener:serve()
