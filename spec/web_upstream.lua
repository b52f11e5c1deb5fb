-- A pc.listen for spec/nginx_web_spec.lua, in a process of its own:
--   lua5.4 spec/web_upstream.lua [CERT KEY]
-- serves srv.Calc (gRPC, gRPC-Web, gRPC-Web-Text and Connect over HTTP/2
-- and HTTP/1.1; TLS with CERT and KEY) on 127.0.0.1 (a free port), prints
-- "PORT PID" and ends after 120 s (or when killed). Add answers x + y
-- (note "details": INVALID_ARGUMENT with a google.rpc.ErrorInfo; "sleep":
-- waits for its cancellation), Count streams 1..x.
local pc = require "protocall"

local cert, key = ...
local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package srv;
message Point { int32 x = 1; int32 y = 2; string note = 3; }
message Sum { int64 total = 1; uint32 count = 2; }
service Calc {
  rpc Add(Point) returns (Sum);
  rpc Count(Point) returns (stream Point);
}
]], { name = "srv/calc.proto" }))

local server = pc.server({ ["srv.Calc"] = {
  Add = function(p, ctx)
    if p.note == "details" then
      error(pc.Error { code = "INVALID_ARGUMENT", message = "too far",
        details = { pc.type("google.rpc.ErrorInfo") { reason = "TOO_FAR", domain = "srv" } } })
    end
    if p.note == "sleep" then
      while not ctx:cancelled() do pc.sleep(0.01) end
      return {}
    end
    return { total = p.x + p.y }
  end,
  Count = function(p, ctx)
    for i = 1, p.x do ctx.send { x = i } end
  end,
} }, { pool = pool })

local l = pc.listen(server, "127.0.0.1:0", cert and { cert_file = cert, key_file = key } or nil)
local stat = assert(io.open("/proc/self/stat"))
local pid = stat:read("*n")
stat:close()
io.stdout:write(l.port, " ", pid, "\n")
io.stdout:flush()
pc.spawn(function() l:serve() end)
pc.spawn(function()
  pc.sleep(120)
  l:shutdown(0)
end)
pc.run()
