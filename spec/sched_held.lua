-- For spec/sched_spec.lua, in a process of its own (the thousands of calls
-- it holds leave nothing behind in the busted process):
--   <runtime> spec/sched_held.lua N CLIENTS CALLS
-- holds N half-open calls against a pc.listen server (each sends its
-- headers and no message, so each handler task waits in ctx:recv(); with
-- CLIENTS "1" a task per call waits in call:recv() too), then makes CALLS
-- unary calls one after the other on the same connection, and prints
-- "rounds R resumes T": the rounds of the loop and the task resumptions
-- during those calls (sched.stats()). Exits non-zero on a failed check.
local pc = require "protocall"
local sched = require "protocall.sched"

local n, clients, calls = tonumber(arg[1]), arg[2] == "1", tonumber(arg[3])
local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package sched;
message Point { int32 x = 1; int32 y = 2; }
message Sum { int64 total = 1; }
service S {
  rpc Add(Point) returns (Sum);
  rpc Hold(stream Point) returns (stream Point);
}
]], { name = "sched/s.proto" }))
local ADD = pc.encode(pool:type("sched.Point") { x = 20, y = 22 })

local entered, left = 0, 0
local server = pc.server({ ["sched.S"] = {
  Add = function(p) return { total = p.x + p.y } end,
  Hold = function(ctx)
    entered = entered + 1
    local ok = pcall(function() while ctx:recv() do end end)
    left = left + (ok and 0 or 1)
  end,
} }, { pool = pool })
local l = pc.listen(server, "127.0.0.1:0", { max_concurrent_streams = 5000 })
local t = pc.grpc("http://127.0.0.1:" .. l.port)
local held, done, counted, sum = {}, 0, nil, nil
pc.spawn(function() l:serve() end)
pc.spawn(function()
  for i = 1, n do held[i] = t:stream("/sched.S/Hold") end
  if clients then
    for i = 1, n do
      pc.spawn(function()
        local ok, err = pcall(held[i].recv, held[i])
        assert(not ok and err.code == "CANCELLED", tostring(err))
        done = done + 1
      end)
    end
  end
  -- a unary call pumps the connection: the held calls' headers go out with it
  while entered < n do assert(t:unary("/sched.S/Add", ADD)) end
  local before = sched.stats()
  for _ = 1, calls do sum = t:unary("/sched.S/Add", ADD) end
  local after = sched.stats()
  counted = { rounds = after.rounds - before.rounds, resumes = after.resumes - before.resumes }
  for i = 1, n do held[i]:cancel() end
  while left < n or (clients and done < n) do pc.sleep(0.005) end
  for i = 1, n do held[i]:close() end
  l:shutdown(1)
end)
pc.run()
t:close()
assert(pc.decode(pool:type("sched.Sum"), sum).total == 42, "the unary calls' answer")
assert(left == n, left .. " of " .. n .. " held handlers saw their call cancelled")
print(("rounds %d resumes %d"):format(counted.rounds, counted.resumes))
