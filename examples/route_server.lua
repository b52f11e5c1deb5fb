-- The quickstart's service served by protocall itself: demo.Router from
-- examples/route.proto over HTTP/2 (h2c), with health and server reflection
-- on (handlers in examples/route_services.lua), the Lua twin of
-- examples/route_server.py.
--
--     build/release/protocall examples/route_server.lua [PORT]
--     (or LUA_CPATH='build/release/?.so;;' lua5.4 examples/route_server.lua)
--
-- Then `build/release/protocall examples/quickstart.lua --target http://127.0.0.1:PORT`.
-- Measure fails twice with UNAVAILABLE for each route name, then answers,
-- so the client's retry policy shows. PORT 0 picks a free one (default
-- 50051). Prints the address it listens on; stops on Ctrl-C.
local pc = require "protocall"

local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
local port = arg[1] or "50051"
local services = dofile(here .. "/route_services.lua")
local server = pc.server(services, { health = true, reflection = true })

local listener = pc.listen(server, "127.0.0.1:" .. port)
print(("demo.Router listening on http://127.0.0.1:%d"):format(listener.port))
io.stdout:flush()
listener:serve()
