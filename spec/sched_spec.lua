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

  it("counts its rounds and resumptions", function()
    local before = sched.stats()
    pc.spawn(function() pc.sleep(0.001) end)
    pc.run()
    local after = sched.stats()
    assert.equals(2, after.resumes - before.resumes) -- started, then woken by its timer
    assert.is_true(after.rounds > before.rounds)
  end)
end)
