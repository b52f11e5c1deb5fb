-- A pc.listen for spec/stall_spec.lua, in a process of its own (the spec
-- stops and continues it with SIGSTOP / SIGCONT):
--   lua5.4 spec/stall_upstream.lua
-- serves st.Echo on 127.0.0.1 (a free port), prints "PORT PID" and ends
-- after 300 s (or when killed). Say answers the request's text, Join (a
-- client stream) "COUNT BYTES" of the texts it got.
local pc = require "protocall"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package st;
message Msg { string text = 1; }
service Echo {
  rpc Say(Msg) returns (Msg);
  rpc Join(stream Msg) returns (Msg);
}
]], { name = "st/echo.proto" }))

local server = pc.server({ ["st.Echo"] = {
  Say = function(m) return { text = m.text } end,
  Join = function(ctx)
    local n, bytes = 0, 0
    while true do
      local m = ctx:recv()
      if m == nil then break end
      n, bytes = n + 1, bytes + #m.text
    end
    return { text = n .. " " .. bytes }
  end,
} }, { pool = pool })

local l = pc.listen(server, "127.0.0.1:0")
local stat = assert(io.open("/proc/self/stat"))
local pid = stat:read("*n")
stat:close()
io.stdout:write(l.port, " ", pid, "\n")
io.stdout:flush()
pc.spawn(function() l:serve() end)
pc.spawn(function()
  pc.sleep(300)
  l:shutdown(0)
end)
pc.run()
