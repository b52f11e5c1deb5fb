-- The scheduler (lua/protocall/sched.lua) resumes a task when its own
-- event comes (a message, the end of its call, the send window, its
-- timer), not every waiting task on every round of I/O: the cost of a
-- round follows the work that is ready, not the tasks that exist. Counted
-- with sched.stats() (rounds of the loop, task resumptions), not timed;
-- the held calls run in a process of their own (spec/sched_held.lua) under
-- the runtime of this pass.
local pc = require "protocall"
local sched = require "protocall.sched"
local R = require "runtime"

-- The command that runs a Lua script with the build under test: the
-- LuaJIT module in a stock luajit, else the protocall command
-- ($PROTOCALL_BIN, set by .ci/busted: the release or the sanitizer build).
local function runner()
  if R.luajit then
    return "LUA_CPATH='" .. (os.getenv("PROTOCALL_LUAJIT_BUILD") or "build/luajit") .. "/?.so;;' luajit"
  end
  return os.getenv("PROTOCALL_BIN") or "build/release/protocall"
end

-- {rounds =, resumes =} during 5 unary calls while `n` half-open calls
-- are held (with `clients`, a client task waiting on each too).
local function during_calls(n, clients)
  local cmd = ("%s spec/sched_held.lua %d %d 5"):format(runner(), n, clients and 1 or 0)
  local out, ok = R.capture(cmd .. " 2>&1")
  assert(ok, cmd .. ": " .. out)
  local rounds, resumes = out:match("rounds (%d+) resumes (%d+)")
  assert(rounds, cmd .. ": " .. out)
  return { rounds = tonumber(rounds), resumes = tonumber(resumes) }
end

local function per_round(c)
  assert.is_true(c.rounds > 0)
  -- per round: the serve loop, the calling task, the unary call's handler
  assert.is_true(c.resumes / c.rounds < 4, c.resumes .. " resumptions in " .. c.rounds .. " rounds")
end

describe("the scheduler", function()
  it("resumes no handler task waiting on a held call while another call is served", function()
    per_round(during_calls(200, false))
    per_round(during_calls(2000, false))
  end)

  it("resumes no client task waiting on a held call either", function()
    per_round(during_calls(200, true))
    per_round(during_calls(2000, true))
  end)

  it("sends a stream's message and starts its call while the task sleeps", function()
    local l, got = require("grpc_helper").recording_router(pc) -- got: what the handler saw, in order
    local result
    pc.spawn(function()
      local c = pc.client("demo.Router", { transport = pc.grpc("http://127.0.0.1:" .. l.port) })
      local stream = c:Record()
      stream:send({ x = 7 })
      -- nothing but this sleep: no task waits on the channel meanwhile
      local by = pc.now() + 5
      repeat pc.sleep(0.05) until #got >= 2 or pc.now() > by
      assert.equals("started 7", table.concat(got, " "))
      -- the open call is pumped while nothing comes, without spinning
      local before = sched.stats().rounds
      pc.sleep(0.3)
      local rounds = sched.stats().rounds - before
      assert.is_true(rounds < 30, rounds .. " rounds in a 0.3 s sleep")
      result = stream:close_and_recv()
      l:shutdown()
    end)
    pc.run()
    assert.equals(0, result.legs)
  end)

  it("counts its rounds and resumptions", function()
    local before = sched.stats()
    pc.spawn(function() pc.sleep(0.001) end)
    pc.run()
    local after = sched.stats()
    assert.equals(2, after.resumes - before.resumes) -- started, then woken by its timer
    assert.is_true(after.rounds > before.rounds)
  end)

  it("raises from pc.run for a task that yields outside its waits, and runs again after", function()
    local other = 0
    pc.spawn(function() coroutine.yield() end)
    pc.spawn(function() pc.sleep(0.01); other = other + 1 end)
    pc.spawn(function() pc.sleep(3); error("pc.run went on without the task") end)
    assert.has_error(function() pc.run() end, "pc.run: a task yielded outside protocall's waits"
      .. " (a bare coroutine.yield: wait with pc.sleep or a call, or yield in a coroutine of your own)")
    pc.spawn(function() pc.sleep(0.001); other = other + 10 end)
    pc.run()
    assert.equals(10, other) -- the other task was dropped with the loop
  end)

  it("refuses an argument to pc.run, which would have been dropped unrun", function()
    local ran = false
    local ok, err = pcall(pc.run, function() ran = true end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'run' (no argument expected, got function: pc.spawn(fn) starts a task,"
      .. " then pc.run())", err, 1, true)
    assert.is_false(ran)
    pc.run() -- nothing was left spawned
  end)
end)
