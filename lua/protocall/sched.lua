--- The scheduler of coroutines: pc.spawn, pc.run, pc.step, pc.poll_fds and
-- pc.sleep. A task waiting for a channel, a listener or a timer yields to
-- the loop, which pumps what the tasks wait on (core.grpc_pump: sockets,
-- TLS, HTTP/2; bindings/lua/lpc_net.c) and resumes the tasks whose wait
-- ended. Outside any task a wait runs the pump itself, so a call made
-- outside blocks only itself.
local core = require "protocall.core"
local compat = require "protocall.compat"

local type, error, pairs, next, select, tostring, pcall = type, error, pairs, next, select, tostring, pcall
local co_create, co_running, co_yield, co_resume, co_status =
  coroutine.create, coroutine.running, coroutine.yield, coroutine.resume, coroutine.status
local unpack_args, huge = compat.unpack, math.huge
local monotonic, core_pump, core_sleep = core.monotonic, core.grpc_pump, core.sleep

local M = {}

local tasks = {}      -- coroutine -> true while pc.run runs it
local queue = {}      -- coroutines to start or resume, in order
local waiting = {}    -- coroutine -> channel it waits on, or false (sleeping)
local wake_at = {}    -- coroutine -> monotonic time its sleep ends
local running_loop = false
-- Incremented when a loop drops its tasks after an error: what the dropped
-- tasks held (a host driver's roles, lua/protocall/transport/driver.lua) is
-- free again.
local epoch = 0

--- in_task() -> whether the running coroutine is a task of pc.run (so a
-- wait can yield to the others); asked instead of coroutine.running, which
-- tells the main coroutine apart only on Lua 5.4.
function M.in_task()
  return tasks[co_running()] == true
end

--- epoch() -> a number that changes when a loop dropped its tasks.
function M.epoch() return epoch end

-- A task waits for `waitable` (a channel or listener of core, or a list of
-- channels) at most `seconds` (nil: no limit): it yields to the loop, which
-- pumps every waitable a task waits on and resumes them all. False outside
-- a task.
local function task_wait(waitable, seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co] = waitable
  if seconds then wake_at[co] = monotonic() + seconds end
  co_yield()
  return true
end
M.task_wait = task_wait

--- wait(waitable): until a channel or listener of core may have moved on:
-- inside a task the loop pumps it while the others run; outside, one pump
-- of at most a second.
function M.wait(waitable)
  if task_wait(waitable) then return end
  core_pump({ waitable }, 1)
end

--- pump(list, seconds): one round of I/O over the channels in `list`,
-- waiting at most `seconds` (a task yields to the loop meanwhile).
function M.pump(list, seconds)
  if task_wait(list, seconds) then return end
  core_pump(list, seconds)
end

local function task_sleep(seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co] = false
  wake_at[co] = monotonic() + seconds
  co_yield()
  return true
end

--- wait_signal(sig, seconds) -> false outside a task, else waits until
-- fire(sig) or `seconds` passed, then true. `sig` is a table the waiters
-- note themselves in (a host driver's connection).
function M.wait_signal(sig, seconds)
  local co = co_running()
  if not tasks[co] then return false end
  sig[co] = true
  waiting[co] = false
  wake_at[co] = monotonic() + seconds
  co_yield()
  sig[co] = nil
  return true
end

--- fire(sig): readies the tasks waiting on `sig`.
function M.fire(sig)
  for co in pairs(sig) do
    sig[co] = nil
    if waiting[co] == false then
      waiting[co], wake_at[co] = nil, nil
      queue[#queue + 1] = co
    end
  end
end

local function step(co, ...)
  local ok, err = co_resume(co, ...)
  if co_status(co) == "dead" then
    tasks[co], waiting[co], wake_at[co] = nil, nil, nil
    if not ok then error(err, 0) end
  end
end

--- co = pc.spawn(fn, ...): runs `fn(...)` as a task of the next (or the
-- running) `pc.run()`. gRPC calls made inside a task wait without
-- stopping the other tasks, so calls of many tasks interleave on one
-- connection; `pc.sleep` inside a task lets the others run too. Returns
-- the task's coroutine. Raises when `fn` is not a function.
function M.spawn(fn, ...)
  if type(fn) ~= "function" then
    error("bad argument #1 to 'spawn' (function expected, got " .. type(fn) .. ")", 2)
  end
  local args, n = { ... }, select("#", ...)
  local co = co_create(function() return fn(unpack_args(args, 1, n)) end)
  tasks[co] = true
  queue[#queue + 1] = co
  return co
end

-- The channels and listeners the waiting tasks wait on (each once) and
-- the end of the first sleep (nil: none).
local function waited()
  local chans, seen, soonest = {}, {}, nil
  for co, ch in pairs(waiting) do
    if type(ch) == "table" then -- a list of channels (transport:wait)
      for i = 1, #ch do
        local c = ch[i]
        if not seen[c] then
          seen[c] = true
          chans[#chans + 1] = c
        end
      end
    elseif ch and not seen[ch] then
      seen[ch] = true
      chans[#chans + 1] = ch
    end
    local w = wake_at[co]
    if w and (soonest == nil or w < soonest) then soonest = w end
  end
  return chans, soonest
end

-- One round of the scheduler: runs the ready tasks; then, unless one is
-- ready again, one round of I/O over what the others wait on for at
-- most `max_wait` seconds (less when a sleep ends sooner); readies the
-- tasks whose wait ended. Returns whether any task is left.
local function round(max_wait)
  local ready = queue
  queue = {}
  for i = 1, #ready do step(ready[i]) end
  if next(tasks) == nil then return false end
  local chans, soonest = waited()
  if #queue == 0 then
    local t = soonest and soonest - monotonic() or 1
    if t > max_wait then t = max_wait end
    if #chans > 0 then
      core_pump(chans, t)
    elseif t > 0 then
      core_sleep(t)
    end
  end
  local now = monotonic()
  for co, ch in pairs(waiting) do
    if ch or wake_at[co] <= now then
      waiting[co], wake_at[co] = nil, nil
      queue[#queue + 1] = co
    end
  end
  return true
end

-- Runs `fn(...)` as the loop: no other pc.run or pc.step meanwhile; an
-- error drops every task and is raised.
local function as_loop(name, fn, ...)
  if running_loop then error(name .. ": called inside pc.run or a task", 3) end
  running_loop = true
  local ok, a, b = pcall(fn, ...)
  running_loop = false
  if not ok then
    tasks, queue, waiting, wake_at = {}, {}, {}, {}
    epoch = epoch + 1
    error(a, 0)
  end
  return a, b
end

local function count_tasks()
  local n = 0
  for _ in pairs(tasks) do n = n + 1 end
  return n
end

--- pc.run(): runs the spawned tasks (and tasks they spawn) until all have
-- finished. An error in a task stops the loop and is raised here (the
-- other tasks stay suspended and are dropped). Raises when called from
-- inside a task.
function M.run()
  as_loop("pc.run", function()
    while round(huge) do end
  end)
end

--- n = pc.step([seconds]): one step of the pc.run loop, for a host that
-- runs its own event loop: runs the tasks that are ready, then one round
-- of I/O over the channels and listeners the others wait on (sending,
-- accepting, reading, deadlines), waiting at most `seconds` for a socket
-- (default 0: not at all; less when a task's sleep ends sooner), then runs
-- the tasks that can go on. Returns the number of tasks left (0: all have
-- finished). A task's error is raised here, the other tasks dropped, as
-- pc.run does. Raises inside a task or pc.run, or for `seconds` not a
-- number >= 0.
function M.step(seconds)
  if seconds == nil then seconds = 0 end
  if type(seconds) ~= "number" or not (seconds >= 0) then -- luacheck: ignore 581 (NaN must fail)
    local got = type(seconds) ~= "number" and type(seconds) or seconds ~= seconds and "nan" or tostring(seconds)
    error("bad argument #1 to 'step' (seconds >= 0 expected, got " .. got .. ")", 2)
  end
  return (as_loop("pc.step", function()
    if round(seconds) then
      local ready = queue
      queue = {}
      for i = 1, #ready do step(ready[i]) end
    end
    return count_tasks()
  end))
end

--- fds, timeout = pc.poll_fds(): what the host's loop should wait on
-- before the next pc.step(0): `fds` lists `{fd, events}` (events "r",
-- "w" or "rw", as luv's uv.new_poll takes them) of the sockets of the
-- channels and listeners the tasks wait on; `timeout` is the seconds
-- until pc.step must run even with no socket ready (0: a task is ready
-- now; a sleep ending, a call's deadline, a connection timer), nil when
-- only a socket can wake the tasks (or there are none). Sends what is
-- queued meanwhile. Raises inside a task or pc.run.
function M.poll_fds()
  if running_loop then error("pc.poll_fds: called inside pc.run or a task", 2) end
  local chans, soonest = waited()
  local timeout = soonest and soonest - monotonic() or nil
  if timeout == huge then timeout = nil end -- pc.sleep(math.huge): only a socket wakes it
  if #queue > 0 then timeout = 0 end
  local fds, due = core.grpc_poll_fds(chans, timeout or 3600)
  if timeout or due < 3600 then timeout = due end
  if timeout and timeout < 0 then timeout = 0 end
  return fds, timeout
end

--- pc.sleep(seconds): inside a task, lets the other tasks run meanwhile;
-- outside, the host's sleep (protocall_settime) or nanosleep, which resumes
-- after a signal until the time has passed. The default sleep of callables
-- (retry backoff).
function M.sleep(seconds)
  if type(seconds) == "number" and seconds > 0 and task_sleep(seconds) then return end
  return core_sleep(seconds)
end

--- seconds = pc.now(): the monotonic clock callables use by default
-- (the host's clock, protocall_settime, else clock_gettime(CLOCK_MONOTONIC));
-- handlers compare it with ctx.deadline.
M.now = monotonic

return M
