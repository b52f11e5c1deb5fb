-- A pc.listen for spec/stall_spec.lua, in a process of its own (the spec
-- stops and continues it with SIGSTOP / SIGCONT):
--   lua5.4 spec/stall_upstream.lua
-- serves st.Echo on 127.0.0.1 (a free port), prints "PORT PID" and ends
-- after 300 s (or when killed). Say answers the request's text (one
-- starting "slow:" after 1 s; "?count": how many it answered before and
-- how many "slow:" ones were cancelled, how many Tick streams ended and
-- how many were cancelled), Tick (a server stream) "1" .. "50" 0.1 s
-- apart, Join (a
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
  rpc Tick(Msg) returns (stream Msg);
}
]], { name = "st/echo.proto" }))

-- Say calls answered, and those of "slow:..." cancelled while they waited
-- (the text "?count" asks for both: "ANSWERED CANCELLED")
local said, cancelled = 0, 0
-- Tick streams that sent all 50 messages, and those cancelled before
local ticked, unticked = 0, 0
local server = pc.server({ ["st.Echo"] = {
  Say = function(m, ctx)
    if m.text == "?count" then return { text = said .. " " .. cancelled .. " " .. ticked .. " " .. unticked } end
    if m.text:sub(1, 5) == "slow:" then -- answered after 1 s, unless cancelled meanwhile
      ctx.sleep(1)
      if ctx:cancelled() then
        cancelled = cancelled + 1
        return {}
      end
    end
    said = said + 1
    return { text = m.text }
  end,
  Tick = function(_, ctx)
    for i = 1, 50 do
      if ctx:cancelled() then
        unticked = unticked + 1
        return
      end
      ctx.send({ text = tostring(i) })
      ctx.sleep(0.1)
    end
    ticked = ticked + 1
  end,
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
