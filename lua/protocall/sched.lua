--- The scheduler of coroutines: pc.spawn, pc.run, pc.step, pc.poll_fds and
-- pc.sleep. A task waiting for a call, a channel, a listener or a timer
-- yields to the loop, which pumps what the tasks wait on (core.grpc_pump:
-- sockets, TLS, HTTP/2; bindings/lua/lpc_net.c) and resumes the tasks whose
-- wait ended. Outside any task a wait runs the pump itself, so a call made
-- outside blocks only itself: the spawned tasks wait meanwhile, and a
-- server spawned in the same state answers only calls made from tasks.
--
-- A task waiting on one call (wait_call) is resumed only when the pump
-- hands out that call's wake token (core/net/wake.h: a message, its end,
-- room to send...), so a round costs what is ready, not the tasks that
-- wait; a task waiting on a channel or listener as a whole (wait, pump:
-- the accept loop, transport:wait over started calls) is resumed after
-- every round of I/O; timers sit in a heap. A channel with a stream or a
-- started call (track) is pumped in every round too while it has calls,
-- waited on or not: a message a task sent goes out, its connection is
-- made and what arrives is read while the task sleeps or does other work.
local core = require "protocall.core"
local compat = require "protocall.compat"
local argerror = require("protocall.internal").argerror

local type, error, pairs, next, select, tostring, pcall = type, error, pairs, next, select, tostring, pcall
local co_create, co_running, co_yield, co_resume, co_status =
  coroutine.create, coroutine.running, coroutine.yield, coroutine.resume, coroutine.status
local unpack_args, co_close, huge, floor = compat.unpack, compat.co_close, math.huge, math.floor
local monotonic, core_pump, core_sleep = core.monotonic, core.grpc_pump, core.sleep

local M = {}

local tasks = {}      -- coroutine -> true while pc.run runs it
local ntasks = 0      -- how many
local queue = {}      -- coroutines to start or resume, in order
local spare = {}      -- an empty table, the next queue (a round allocates nothing)
-- What each waiting task waits on: false (its timer or a signal alone),
-- else a channel, a listener or a list of channels: as a whole when
-- wide[co], else the call whose wake token is on_call[co].
local waiting = {}
local wide = {}       -- coroutine -> true: waits on its waitable as a whole
local on_call = {}    -- coroutine -> the wake token of the call it waits on
local by_token = {}   -- wake token -> the coroutine waiting on that call, or a set of them
local callers = {}    -- waitable -> {[co] = true}: the tasks waiting on one of its calls
local ncallers = {}   -- waitable -> how many
local sets = {}       -- empty tables for callers, to use again
local tokens = {}     -- the wake tokens core.grpc_pump hands out, at 1..n
local wake_at = {}    -- coroutine -> monotonic time its wait ends
-- The timers, a binary heap by time; an entry whose task no longer waits
-- until that time (wake_at) is dropped when it comes up, or when such
-- entries outnumber the timers (ntimed) and the heap is built anew: it
-- holds no finished task long.
local heap_at, heap_co, heap_n = {}, {}, 0
local ntimed = 0 -- tasks with a wake_at
-- Tasks of spawn_guarded: coroutine -> {on_stray, args...} (see there).
local guards = {}
local running_loop = false
local rounds, resumes = 0, 0 -- for M.stats
-- Incremented when a loop drops its tasks after an error: what the dropped
-- tasks held (a host driver's roles, lua/protocall/transport/driver.lua) is
-- free again.
local epoch = 0

local function heap_add(co, at)
  heap_n = heap_n + 1
  local i = heap_n
  while i > 1 do
    local p = floor(i / 2)
    if heap_at[p] <= at then break end
    heap_at[i], heap_co[i] = heap_at[p], heap_co[p]
    i = p
  end
  heap_at[i], heap_co[i] = at, co
end

local function timer_add(co, at)
  if wake_at[co] == nil then ntimed = ntimed + 1 end
  wake_at[co] = at
  if heap_n >= 2 * ntimed + 64 then -- mostly entries of waits that ended
    heap_at, heap_co, heap_n = {}, {}, 0
    for c, t in pairs(wake_at) do heap_add(c, t) end
  else
    heap_add(co, at)
  end
end

local function timer_pop()
  local at, co = heap_at[1], heap_co[1]
  local last_at, last_co = heap_at[heap_n], heap_co[heap_n]
  heap_at[heap_n], heap_co[heap_n] = nil, nil
  heap_n = heap_n - 1
  if heap_n > 0 then
    local i = 1
    while true do
      local c = 2 * i
      if c > heap_n then break end
      if c < heap_n and heap_at[c + 1] < heap_at[c] then c = c + 1 end
      if heap_at[c] >= last_at then break end
      heap_at[i], heap_co[i] = heap_at[c], heap_co[c]
      i = c
    end
    heap_at[i], heap_co[i] = last_at, last_co
  end
  return at, co
end

-- The end of the first wait with a timer (nil: none).
local function soonest()
  while heap_n > 0 do
    if wake_at[heap_co[1]] == heap_at[1] then return heap_at[1] end
    timer_pop()
  end
end

-- Ends the wait of `co`; false when it was not waiting.
local function unwait(co)
  local w = waiting[co]
  if w == nil then return false end
  if wake_at[co] ~= nil then ntimed = ntimed - 1 end
  waiting[co], wake_at[co] = nil, nil
  if wide[co] then
    wide[co] = nil
    return true
  end
  local token = on_call[co]
  if token ~= nil then
    on_call[co] = nil
    local b = by_token[token]
    if b == co then
      by_token[token] = nil
    elseif type(b) == "table" then
      b[co] = nil
      if next(b) == nil then by_token[token] = nil end
    end
    local set, n = callers[w], ncallers[w] - 1
    set[co] = nil
    if n == 0 then
      callers[w], ncallers[w] = nil, nil
      sets[#sets + 1] = set
    else
      ncallers[w] = n
    end
  end
  return true
end

-- Readies `co` if it waits.
local function wake(co)
  if unwait(co) then queue[#queue + 1] = co end
end

-- Readies the tasks a pump's results name: those waiting on the calls of
-- the `n` tokens it put in `tokens`, and every task waiting on a call of a
-- waitable in `all` (one closed, or with more news than its wake list
-- held).
local function deliver(n, all)
  for i = 1, n do
    local b = by_token[tokens[i]]
    if type(b) == "table" then
      for co in pairs(b) do wake(co) end
    elseif b ~= nil then
      wake(b)
    end
  end
  if all then
    for i = 1, #all do
      local set = callers[all[i]]
      if set then
        for co in pairs(set) do wake(co) end
      end
    end
  end
end

--- in_task() -> whether the running coroutine is a task of pc.run (so a
-- wait can yield to the others); asked instead of coroutine.running, which
-- tells the main coroutine apart only on Lua 5.4.
function M.in_task()
  return tasks[co_running()] == true
end

--- epoch() -> a number that changes when a loop dropped its tasks.
function M.epoch() return epoch end

-- A task waits for `waitable` (a channel or listener of core, or a list of
-- channels) as a whole at most `seconds` (nil: no limit): it yields to the
-- loop, which resumes it after the next round of I/O. False outside a
-- task.
local function task_wait(waitable, seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co], wide[co] = waitable, true
  if seconds then timer_add(co, monotonic() + seconds) end
  co_yield()
  return true
end
M.task_wait = task_wait

--- wait(waitable): until a channel or listener of core may have moved on
-- (a new call to accept): inside a task the loop resumes it after its
-- next round of I/O while the others run; outside, one pump of at most a
-- second.
function M.wait(waitable)
  if task_wait(waitable) then return end
  deliver(core_pump({ waitable }, 1, tokens))
end

--- wait_call(waitable, call): until something happened to `call`, a call
-- of core made on the channel `waitable` or taken from the listener
-- `waitable` (a message or headers arrived, room to send, its end, a
-- reset, its deadline: core/net/wake.h): inside a task the loop resumes
-- it only then (or when `waitable` closed), while the others run;
-- outside, one pump of at most a second. A task checks its call first,
-- then waits: whatever happens after the check wakes it.
function M.wait_call(waitable, call)
  local co = co_running()
  if not tasks[co] then
    deliver(core_pump({ waitable }, 1, tokens))
    return
  end
  local token = call:wake_token()
  waiting[co], on_call[co] = waitable, token
  local b = by_token[token]
  if b == nil then
    by_token[token] = co
  elseif type(b) == "table" then
    b[co] = true
  else -- a second task on the call (one reads while another sends)
    by_token[token] = { [b] = true, [co] = true }
  end
  local set = callers[waitable]
  if set == nil then
    local k = #sets
    if k > 0 then
      set, sets[k] = sets[k], nil
    else
      set = {}
    end
    callers[waitable], ncallers[waitable] = set, 0
  end
  set[co], ncallers[waitable] = true, ncallers[waitable] + 1
  co_yield()
end

--- pump(list, seconds): one round of I/O over the channels in `list`,
-- waiting at most `seconds` (a task yields to the loop meanwhile).
function M.pump(list, seconds)
  if task_wait(list, seconds) then return end
  deliver(core_pump(list, seconds, tokens))
end

local function task_sleep(seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co] = false
  timer_add(co, monotonic() + seconds)
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
  timer_add(co, monotonic() + seconds)
  co_yield()
  sig[co] = nil
  return true
end

--- fire(sig): readies the tasks waiting on `sig`.
function M.fire(sig)
  for co in pairs(sig) do
    sig[co] = nil
    if waiting[co] == false then wake(co) end
  end
end

-- Tasks abort(co) marked, while they run: coroutine -> true; M.naborted
-- counts them (a wait asks no more while it is 0).
local aborted = {}
M.naborted = 0

-- Forgets that task `co` (ended or dropped) was aborted.
local function unabort(co)
  if aborted[co] then
    aborted[co] = nil
    M.naborted = M.naborted - 1
  end
end

--- abort(co): marks task `co` aborted and readies it if it waits (its wait
-- returns early; the waits of protocall check what they wait for again).
-- From then on its waits on a call of a channel of pc.grpc cancel that
-- call (RST_STREAM CANCEL at once: transport/driver.lua's wait), so what
-- it waits on upstream ends CANCELLED. What a listener's call that ended
-- early does to the `protocall gateway` handler forwarding it
-- (rpc/server.lua's watch_call).
function M.abort(co)
  if tasks[co] and not aborted[co] then
    aborted[co] = true
    M.naborted = M.naborted + 1
  end
  wake(co)
end

--- aborted() -> whether the running task was aborted (abort); `naborted`
-- (a number: 0 when no task is) lets a wait skip asking.
function M.aborted()
  return aborted[co_running()] == true
end

--- wake_task(co): readies task `co` if it waits, its wait returning early
-- (the waits of protocall check what they wait for again).
M.wake_task = wake

--- STRAY: what a task did that yielded to the loop without a wait of
-- protocall (a bare coroutine.yield): nothing would ever resume it.
M.STRAY = "yielded outside protocall's waits (a bare coroutine.yield:"
  .. " wait with pc.sleep or a call, or yield in a coroutine of your own)"

local function step(co, ...)
  resumes = resumes + 1
  local ok, err = co_resume(co, ...)
  if co_status(co) == "dead" then
    if tasks[co] then ntasks = ntasks - 1 end
    tasks[co], guards[co] = nil, nil
    if M.naborted > 0 then unabort(co) end
    unwait(co)
    if not ok then error(err, 0) end
  elseif waiting[co] == nil and tasks[co] then
    -- a stray yield: the task ends here, as an error of its own
    tasks[co], ntasks = nil, ntasks - 1
    local g = guards[co]
    guards[co] = nil
    if M.naborted > 0 then unabort(co) end
    co_close(co) -- Lua 5.4: its to-be-closed variables are closed
    if g == nil then error("pc.run: a task " .. M.STRAY, 0) end
    g[1](unpack_args(g, 2, g.n))
  end
end

--- co = pc.spawn(fn, ...): runs `fn(...)` as a task of the next (or the
-- running) `pc.run()`. gRPC calls made inside a task wait without
-- stopping the other tasks, so calls of many tasks interleave on one
-- connection; `pc.sleep` inside a task lets the others run too, and the
-- loop goes on sending and reading the task's calls of pc.grpc meanwhile
-- (a stream's message sent before the sleep reaches the server). Returns
-- the task's coroutine. Raises when `fn` is not a function.
function M.spawn(fn, ...)
  if type(fn) ~= "function" then
    error("bad argument #1 to 'spawn' (function expected, got " .. type(fn) .. ")", 2)
  end
  local args, n = { ... }, select("#", ...)
  local co = co_create(function() return fn(unpack_args(args, 1, n)) end)
  tasks[co] = true
  ntasks = ntasks + 1
  queue[#queue + 1] = co
  return co
end

--- spawn_guarded(on_stray, fn, ...) -> co: pc.spawn(fn, ...) for a task
-- whose stray yield (M.STRAY) is an error of its own work, not of the
-- loop: the task is dropped and `on_stray(...)` (the same arguments) runs
-- instead of pc.run raising (a listener's handler task ends its call).
function M.spawn_guarded(on_stray, fn, ...)
  local co = M.spawn(fn, ...)
  guards[co] = { on_stray, n = select("#", ...) + 1, ... }
  return co
end

local chans, nchans, seen = {}, 0, {} -- waited()'s, used again each time
-- Channels of core to pump while they have calls (track), weak; how many
-- (at least: a collected one leaves without counting down). A unary call
-- is not tracked (its task waits on it at once): its rounds look at
-- ntracked alone.
local tracked = setmetatable({}, { __mode = "k" })
local ntracked = 0

--- track(channel): pumps the core channel `channel` (not one of a host
-- driver) in the loop's rounds until it has no call left (ch:busy()),
-- whether a task waits on it or not: pc.grpc's streams and started calls.
function M.track(channel)
  if not tracked[channel] then
    tracked[channel] = true
    ntracked = ntracked + 1
  end
end

-- The channels and listeners the waiting tasks wait on and the tracked
-- channels with a call (each once; a table the next call reuses) and the
-- end of the first timer (nil: none).
local function waited()
  local n = 0
  for w in pairs(callers) do
    n = n + 1
    chans[n], seen[w] = w, true
  end
  for co in pairs(wide) do
    local ch = waiting[co]
    if type(ch) == "table" then -- a list of channels (transport:wait)
      for i = 1, #ch do
        local c = ch[i]
        if not seen[c] then
          n = n + 1
          chans[n], seen[c] = c, true
        end
      end
    elseif not seen[ch] then
      n = n + 1
      chans[n], seen[ch] = ch, true
    end
  end
  if ntracked > 0 then
    local k = 0
    for ch in pairs(tracked) do
      if not ch:busy() then
        tracked[ch] = nil
      else
        k = k + 1
        if not seen[ch] then
          n = n + 1
          chans[n], seen[ch] = ch, true
        end
      end
    end
    ntracked = k
  end
  for i = n + 1, nchans do chans[i] = nil end
  for i = 1, n do seen[chans[i]] = nil end
  nchans = n
  return chans, soonest()
end

-- New, empty state: every task dropped (or all finished), and the room
-- the tables grew for them given back.
local function fresh()
  tasks, ntasks, queue, spare, waiting, wake_at, guards = {}, 0, {}, {}, {}, {}, {}
  wide, on_call, by_token, callers, ncallers, sets, tokens = {}, {}, {}, {}, {}, {}, {}
  chans, nchans, seen = {}, 0, {}
  heap_at, heap_co, heap_n, ntimed = {}, {}, 0, 0
  aborted, M.naborted = {}, 0
end

-- Runs the ready tasks; those they ready meanwhile wait for the next call.
local function run_ready()
  local ready = queue
  queue, spare = spare, ready
  for i = 1, #ready do step(ready[i]) end
  for i = #ready, 1, -1 do ready[i] = nil end
end

-- One round of the scheduler: runs the ready tasks; then, unless one is
-- ready again, one round of I/O over what the others wait on for at
-- most `max_wait` seconds (less when a timer ends sooner); readies the
-- tasks of the calls it names, those waiting on a waitable as a whole and
-- those whose timer is due. Returns whether any task is left.
local function round(max_wait)
  rounds = rounds + 1
  run_ready()
  if ntasks == 0 then
    fresh() -- what a burst of tasks grew is let go
    return false
  end
  local list, first = waited()
  if #queue == 0 then
    local t = first and first - monotonic() or 1
    if t > max_wait then t = max_wait end
    if #list > 0 then
      deliver(core_pump(list, t, tokens))
    elseif t > 0 then
      core_sleep(t)
    end
  end
  for co in pairs(wide) do wake(co) end
  local now = monotonic()
  while heap_n > 0 and heap_at[1] <= now do
    local at, co = timer_pop()
    if wake_at[co] == at then wake(co) end
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
    fresh()
    epoch = epoch + 1
    error(a, 0)
  end
  return a, b
end

--- pc.run(): runs the spawned tasks (and tasks they spawn) until all have
-- finished. An error in a task stops the loop and is raised here (the
-- other tasks stay suspended and are dropped); so does a task yielding
-- outside protocall's waits (a bare coroutine.yield, which nothing would
-- resume; a handler of pc.listen doing so ends its call INTERNAL
-- instead). Raises when called from inside a task, or with an argument
-- (pc.spawn(fn, ...) starts a task; pc.run takes none).
function M.run(...)
  if select("#", ...) > 0 then
    argerror("run", "no argument expected, got " .. type((...)) .. ": pc.spawn(fn) starts a task, then pc.run()", 2)
  end
  as_loop("pc.run", function()
    while round(huge) do end
  end)
end

--- n = pc.step([seconds]): one step of the pc.run loop, for a host that
-- runs its own event loop: runs the tasks that are ready, then one round
-- of I/O over the channels and listeners the others wait on and the
-- channels of their streams and started calls (sending, accepting,
-- reading, deadlines), waiting at most `seconds` for a socket
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
    if round(seconds) then run_ready() end
    return ntasks
  end))
end

--- fds, timeout = pc.poll_fds(): what the host's loop should wait on
-- before the next pc.step(0): `fds` lists `{fd, events}` (events "r",
-- "w" or "rw", as luv's uv.new_poll takes them) of the sockets of the
-- channels and listeners the tasks wait on and of the channels of their
-- streams and started calls; `timeout` is the seconds
-- until pc.step must run even with no socket ready (0: a task is ready
-- now; a sleep ending, a call's deadline, a connection timer), nil when
-- only a socket can wake the tasks (or there are none). Sends what is
-- queued meanwhile. Raises inside a task or pc.run.
function M.poll_fds()
  if running_loop then error("pc.poll_fds: called inside pc.run or a task", 2) end
  local list, first = waited()
  local timeout = first and first - monotonic() or nil
  if timeout == huge then timeout = nil end -- pc.sleep(math.huge): only a socket wakes it
  if #queue > 0 then timeout = 0 end
  local fds, due = core.grpc_poll_fds(list, timeout or 3600)
  if timeout or due < 3600 then timeout = due end
  if timeout and timeout < 0 then timeout = 0 end
  return fds, timeout
end

--- stats() -> {rounds =, resumes =}: the rounds of the loop (each: the
-- ready tasks run, then one round of I/O) and the task resumptions since
-- the state started, for tests and benchmarks.
function M.stats()
  return { rounds = rounds, resumes = resumes }
end

--- pc.sleep(seconds): inside a task, lets the other tasks run meanwhile;
-- outside, the host's sleep (protocall_settime) or nanosleep, which resumes
-- after a signal until the time has passed. The default sleep of callables
-- (retry backoff). `seconds` <= 0 does not sleep; raises for a
-- `seconds` that is not a number (or NaN).
function M.sleep(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds then
    argerror("sleep", "number expected, got " .. (seconds ~= seconds and "nan" or type(seconds)), 2)
  end
  if seconds > 0 and task_sleep(seconds) then return end
  return core_sleep(seconds)
end

--- seconds = pc.now(): the monotonic clock callables use by default
-- (the host's clock, protocall_settime, else clock_gettime(CLOCK_MONOTONIC));
-- handlers compare it with ctx.deadline.
M.now = monotonic

return M
