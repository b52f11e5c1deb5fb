-- The scheduler (lua/protocall/sched.lua) resumes a task when its own
-- event comes (a message, the end of its call, the send window, its
-- timer), not every waiting task on every round of I/O: the cost of a
-- round follows the work that is ready, not the tasks that exist. Counted
-- with sched.stats() (rounds of the loop, task resumptions), not timed.
local pc = require "protocall"
local sched = require "protocall.sched"

local pool = pc.pool() -- let go in teardown: busted keeps a spec file's upvalues
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

local PATH_ADD, PATH_HOLD = "/sched.S/Add", "/sched.S/Hold"
local ADD = pc.encode(pool:type("sched.Point") { x = 20, y = 22 })

-- Holds `n` half-open calls against a pc.listen server (each sends its
-- headers and no message, so each handler task waits in ctx:recv();
-- with `clients`, a task per call waits in call:recv() too), then makes
-- `calls` unary calls one after the other on the same connection.
-- Returns the rounds of the loop and the task resumptions during those.
local function during_calls(n, clients, calls)
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
    for i = 1, n do held[i] = t:stream(PATH_HOLD) end
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
    while entered < n do assert(t:unary(PATH_ADD, ADD)) end
    local before = sched.stats()
    for _ = 1, calls do sum = t:unary(PATH_ADD, ADD) end
    local after = sched.stats()
    counted = { rounds = after.rounds - before.rounds, resumes = after.resumes - before.resumes }
    for i = 1, n do held[i]:cancel() end
    while left < n or (clients and done < n) do pc.sleep(0.005) end
    for i = 1, n do held[i]:close() end
    l:shutdown(1)
  end)
  pc.run()
  t:close()
  assert.equals(42, pc.decode(pool:type("sched.Sum"), sum).total)
  assert.equals(n, left) -- every held handler saw its call cancelled
  return counted
end

describe("the scheduler", function()
  after_each(function() collectgarbage() end)
  teardown(function()
    pool, ADD = nil, nil
    collectgarbage()
  end)

  it("resumes no handler task waiting on a held call while another call is served", function()
    local small, big = during_calls(100, false, 5), during_calls(1000, false, 5)
    -- per round: the serve loop, the calling task, the unary call's handler
    assert.is_true(small.resumes / small.rounds < 4, small.resumes .. " resumptions in " .. small.rounds .. " rounds")
    assert.is_true(big.resumes / big.rounds < 4, big.resumes .. " resumptions in " .. big.rounds .. " rounds")
  end)

  it("resumes no client task waiting on a held call either", function()
    local small, big = during_calls(100, true, 5), during_calls(1000, true, 5)
    assert.is_true(small.resumes / small.rounds < 4, small.resumes .. " resumptions in " .. small.rounds .. " rounds")
    assert.is_true(big.resumes / big.rounds < 4, big.resumes .. " resumptions in " .. big.rounds .. " rounds")
  end)

  it("counts its rounds and resumptions", function()
    local before = sched.stats()
    pc.spawn(function() pc.sleep(0.001) end)
    pc.run()
    local after = sched.stats()
    assert.equals(2, after.resumes - before.resumes) -- started, then woken by its timer
    assert.is_true(after.rounds > before.rounds)
  end)
end)
