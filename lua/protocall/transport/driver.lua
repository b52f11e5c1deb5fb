--- Host I/O drivers: pc.grpc(target, {driver = D}) (the option's contract
-- is stated at pc.grpc, transport/grpc.lua).
--
-- The channel (core/net/channel.c, host_io) keeps every piece of
-- connection logic and names its connections by ids; this side runs the
-- driver's calls for them. Whoever waits on the channel takes one free
-- role of one connection (connect it, send its bytes, or read from it),
-- runs it (the driver may yield there, as cosockets do) and returns; with
-- every role taken, it waits until a holder is done or the channel's next
-- timer (a deadline, keepalive, a connect timeout). A socket that moves
-- its own bytes (`attach`, below) has no reader or writer role: a waiting
-- call only kicks it when the channel has output for it. So the tasks of
-- pc.spawn share the connection's reads and writes, and a call outside any
-- task drives the connection itself. A call started without a wait kicks
-- the channel (`kick`): its bytes go out at once, and under pc.run a task
-- of its own connects.
local core = require "protocall.core"
local sched = require "protocall.sched"

local setmetatable, type, pairs, pcall, tostring, tonumber = setmetatable, type, pairs, pcall, tostring, tonumber
local co_running = coroutine.running
local task_aborted = sched.aborted

local M = {}

-- Channels whose bytes a host driver moves: core channel -> its driver state.
local driven = setmetatable({}, { __mode = "k" })

local READ_MAX = 65536 -- bytes asked of one receiveany
local READ_CAP = 1     -- seconds a read waits at most before the timers run again
local SEND_TIMEOUT = 60
local SHARED_READ = 0.01 -- seconds a read waits when other connections have calls too

local attach_owned -- defined below, used by do_connect

-- Roles held by pc.run tasks it dropped after an error are free again.
local function holds(role)
  if role == nil or role.epoch ~= sched.epoch() then return false end
  -- the main coroutine (false: LuaJIT's coroutine.running gives nil there) never dies
  return not role.co or coroutine.status(role.co) ~= "dead"
end

-- A driver method: its results, or nil and what it raised.
local function drv(sock, method, ...)
  local ok, a, b = pcall(sock[method], sock, ...)
  if not ok then return nil, a end
  return a, b
end

-- A failed attempt: calls past their deadline end DEADLINE_EXCEEDED
-- first, the others UNAVAILABLE with `why`.
local function connect_failed(ch, id, why)
  ch:host_tick()
  ch:host_connected(id, false, why)
end

-- Wakes the waiters after the channel moved: the driver's wake(tokens,
-- n, all, owned) gets the wake tokens of the calls something happened to
-- (all: every waiter must look); `owned` true when no role was freed (a
-- socket that moves its own bytes), so no other waiter need look.
-- Kicks owned socket `sock` of connection `id` when the channel has output
-- for it (not asked while a kick is pending: sock:kicked()).
local function kick_owned(ch, id, sock)
  if sock.kicked and sock:kicked() then return end
  if ch:host_output(id, true) then sock:kick() end
end

local function woken(dc, ch, owned)
  sched.fire(dc.signal)
  local wake = dc.wake
  if wake then
    local tokens = dc.tokens
    local n, all = ch:host_woken(tokens)
    wake(tokens, n, all, owned)
  end
end

-- A socket with `attach` moves its own bytes (the OpenResty driver's
-- timer-owned connection, lua/protocall/resty.lua): it gets the
-- connection's hooks and from then on feeds what it reads to the channel
-- (hooks:recv(bytes) -> whether the channel has output now), sends what
-- the channel queues (hooks:output() -> bytes or nil, then
-- hooks:wrote(n)), is told to look for output by sock:kick() (optional
-- sock:kicked(): true while a kick is pending, its output still to be
-- looked for, so the channel is not asked whether it has some), and reports
-- its end (hooks:lost(op, why), op "read" or "send"); no call then takes
-- its reader or writer role, so a response reaches its channel without a
-- hand-over through a waiting call.
local Hooks = {}
Hooks.__index = Hooks

-- Weak values: the hooks' reference to the driver's state and channel.
local WEAK_VALUES = { __mode = "v" }

-- The driver's state and channel behind hooks `h`, nil once collected.
local function hooked(h)
  local ref = h.ref
  local d, ch = ref.dc, ref.channel
  if d and ch then return d, ch end
end

function Hooks:recv(data)
  local d, ch = hooked(self)
  if not ch then return false end
  ch:host_recv(self.id, data)
  woken(d, ch, true)
  return ch:host_output(self.id, true) ~= nil -- an answer to send
end

function Hooks:output()
  local _, ch = hooked(self)
  if ch then return ch:host_output(self.id) end
end

function Hooks:wrote(n)
  local _, ch = hooked(self)
  if ch then ch:host_wrote(self.id, n) end
end

function Hooks:lost(op, why)
  local d, ch = hooked(self)
  if not ch then return end
  ch:host_lost(self.id, (op == "send" and "send to " or "read from ") .. d.where .. ": "
    .. (why == "closed" and op ~= "send" and "connection closed by the peer" or tostring(why)))
  woken(d, ch, true)
end

function attach_owned(dc, st)
  st.owned = true
  local ref = setmetatable({ dc = dc, channel = dc.channel }, WEAK_VALUES)
  st.sock:attach(setmetatable({ ref = ref, id = st.id }, Hooks))
end

local function do_connect(dc, st, seconds)
  local ch = dc.channel
  local o = dc.connect_opts
  o.timeout = seconds < dc.connect_timeout and seconds or dc.connect_timeout
  local ok, sock, err = pcall(dc.driver.connect, dc.host, dc.port, o)
  if not ok then sock, err = nil, sock end
  if type(sock) ~= "table" and type(sock) ~= "userdata" then
    return connect_failed(ch, st.id,
      "connect to " .. dc.where .. ": " .. tostring(err or "the driver returned no socket"))
  end
  st.sock = sock
  if sock.settimeouts then drv(sock, "settimeouts", o.timeout, SEND_TIMEOUT, READ_CAP) end
  -- TLS, when the target has it, now runs in the channel over this socket's bytes
  ch:host_connected(st.id, true)
  if type(sock.attach) == "function" then attach_owned(dc, st) end
end

local function do_write(dc, st)
  local ch = dc.channel
  while true do
    local out = ch:host_output(st.id)
    if not out then return end
    local n, err = drv(st.sock, "send", out)
    if not n then return ch:host_lost(st.id, "send to " .. dc.where .. ": " .. tostring(err)) end
    n = type(n) == "number" and n or #out
    ch:host_wrote(st.id, n)
    if n == 0 then return end -- the driver took nothing now: the next round tries again
  end
end

local function do_read(dc, st, seconds)
  local ch, sock = dc.channel, st.sock
  if sock.settimeouts then drv(sock, "settimeouts", dc.connect_timeout, SEND_TIMEOUT, seconds) end
  local data, err = drv(sock, "receiveany", READ_MAX)
  if type(data) == "string" then
    if #data > 0 then ch:host_recv(st.id, data) end
  elseif err ~= "timeout" then
    ch:host_lost(st.id, "read from " .. dc.where .. ": " ..
      (err == "closed" and "connection closed by the peer" or tostring(err)))
  end
end

-- Runs `fn` as the current coroutine's `role` on `st`, then wakes the
-- waiters: the driver's wake(tokens, n, all) gets the wake tokens of the
-- calls something happened to (all: every waiter must look), so a driver
-- that keeps its waiters by token wakes those and one other waiter (to
-- take the role now free) instead of all of them; a driver whose wake
-- takes no arguments wakes all.
local function with_role(dc, st, role, fn, ...)
  st[role] = { co = co_running() or false, epoch = sched.epoch() }
  fn(dc, st, ...)
  st[role] = nil
  woken(dc, dc.channel, false)
end

-- New connections get a state; gone ones their socket closed. Sets
-- dc.quiet when every connection is ready and moves its own bytes (owned)
-- and none is left to close: until the channel's host_version changes,
-- a round then has nothing to connect, read or close (see drive).
local function sync(dc)
  local ch = dc.channel
  local version = ch:host_version()
  local live, calls = ch:host_conns()
  local quiet = true
  for id, ready in pairs(live) do
    if not dc.conns[id] then dc.conns[id] = { id = id } end
    if not ready or not dc.conns[id].owned then quiet = false end
  end
  for id, st in pairs(dc.conns) do
    if live[id] == nil then
      if not holds(st.connector) and not holds(st.reader) and not holds(st.writer) then
        if st.sock then drv(st.sock, "close") end
        dc.conns[id] = nil
      else
        quiet = false
      end
    end
  end
  dc.quiet, dc.version = quiet, version
  return live, calls
end

-- The connection to read: one with calls whose reader role is free, the
-- next after the last one read (so a task alone serves every connection);
-- and how many connections have calls. Idle connections are not read.
local function reader_pick(dc, live, calls)
  local ids, busy = nil, 0
  for id in pairs(dc.conns) do
    if live[id] and calls[id] > 0 and not dc.conns[id].owned then
      busy = busy + 1
      if not holds(dc.conns[id].reader) then
        ids = ids or {}
        ids[#ids + 1] = id
      end
    end
  end
  if not ids then return nil, busy end
  table.sort(ids)
  for i = 1, #ids do
    if ids[i] > (dc.last_read or 0) then return ids[i], busy end
  end
  return ids[1], busy
end

-- Whether the tick that began a round gave the call of `token` news (any
-- call, with no token), for a driver with `wake`: a call the tick ended
-- (its deadline came, its connection failed) has news its waiter has not
-- heard, as no I/O woke anyone. Those waiters are woken now (the channel's
-- wake list emptied), and the round's caller looks at its call instead of
-- waiting in the driver's `wait`, which else lasted the whole round
-- (READ_CAP: a second late) when the tick left no nearer timer and no byte
-- came after it. (A driver without `wake` sleeps 5 ms at most a round.)
local function tick_news(dc, ch, token)
  local tokens = dc.tokens
  local n, all = ch:host_woken(tokens)
  if n == 0 and not all then return false end
  sched.fire(dc.signal)
  dc.wake(tokens, n, all, true)
  if all or not token then return true end
  for i = 1, n do
    if tokens[i] == token then return true end
  end
  return false
end

-- A round's wait: until a driver method returned (driver.wake) or `t`
-- seconds, then the channel's timers; not when the driver's wait for the
-- call of `token` says a wake ended it (the caller looks at its call
-- first; the next round starts with the timers).
local function wait_round(dc, ch, t, token)
  if not sched.wait_signal(dc.signal, t) then
    if dc.wait then
      if dc.wait(t, token) == true and token then return end
    else
      dc.sleep(t < 0.005 and t or 0.005)
    end
  end
  ch:host_tick()
end

-- One round of a wait on a driven channel, waiting at most `limit`
-- seconds when given (and the driver keeps to its timeouts); `token`: the
-- wake token of the call waited for (nil: any).
local function drive(dc, limit, token)
  local ch = dc.channel
  local timer, version = ch:host_tick()
  if dc.wake and tick_news(dc, ch, token) then return M.flush(ch) end -- what the tick queued (RST_STREAM) goes out
  timer = timer or math.huge
  if timer < 0.001 then timer = 0.001 end
  local next_timer = limit and limit < timer and limit or timer -- a connect gets the whole timer
  if next_timer < 0.001 then next_timer = 0.001 end
  local t = next_timer < READ_CAP and next_timer or READ_CAP
  if dc.quiet and version == dc.version then
    -- every connection ready and owned, none opened or closed since: kick those with output, wait
    for id, st in pairs(dc.conns) do
      kick_owned(ch, id, st.sock)
    end
    return wait_round(dc, ch, t, token)
  end
  local live, calls = sync(dc)
  for id, st in pairs(dc.conns) do
    if live[id] == false and not st.sock and not holds(st.connector) then
      return with_role(dc, st, "connector", do_connect, timer)
    end
    if st.owned then
      if live[id] then kick_owned(ch, id, st.sock) end
    elseif live[id] and not holds(st.writer) and ch:host_output(id, true) then
      return with_role(dc, st, "writer", do_write)
    end
  end
  local id, busy = reader_pick(dc, live, calls)
  if id then
    dc.last_read = id
    -- with calls on several connections, short reads take turns on them
    return with_role(dc, dc.conns[id], "reader", do_read, busy > 1 and (t < SHARED_READ and t or SHARED_READ) or t)
  end
  return wait_round(dc, ch, t, token)
end

--- flush(channel): sends what the calls of a driven channel queued, when
-- no one else is sending (no wait for the next round: another task may be
-- the one reading the answer); nothing for another channel.
function M.flush(channel)
  local dc = driven[channel]
  if not dc then return end
  for id, st in pairs(dc.conns) do
    if st.owned then
      kick_owned(channel, id, st.sock)
    elseif st.sock and not holds(st.writer) and channel:host_output(id, true) then
      with_role(dc, st, "writer", do_write)
    end
  end
end

-- Whether a connection of the channel waits for its connect (ready false
-- in host_conns).
local function connect_pending(live)
  for _, ready in pairs(live) do
    if not ready then return true end
  end
  return false
end

-- A task of pc.run (or pc.step) that makes the connections a started call
-- needs: rounds of the channel's I/O until none waits for its connect (a
-- waiting call may take the connector role meanwhile: the rounds share
-- it), then what the calls queued goes out. Ends with the channel.
local function connecting(ref)
  while true do
    local dc = ref.dc
    local ch = dc and dc.channel
    if not ch then return end
    if not connect_pending((sync(dc))) then
      dc.connecting = nil -- done: the next kick may start another
      return M.flush(ch)
    end
    drive(dc, nil)
  end
end

--- kick(channel): a call just started on a driven channel (a stream, a
-- started unary call or server stream: no wait on it follows at once):
-- what the calls queued goes out now (M.flush); a connection it needs is
-- connected by a task of its own when the caller is a task of pc.run or
-- pc.step, which the caller does not wait for, so the connect and the
-- request overlap the caller's other work. Outside any task (a script
-- without pc.run, an OpenResty request) there is no loop to connect in
-- the background: the connection is made at the first wait on a call.
-- Nothing for another channel.
function M.kick(channel)
  local dc = driven[channel]
  if not dc then return end
  local live = sync(dc)
  M.flush(channel)
  -- one such task at a time (a loop that dropped its tasks dropped it too: holds)
  if holds(dc.connecting) or not connect_pending(live) or not sched.in_task() then return end
  for id, st in pairs(dc.conns) do
    if live[id] == false and not st.sock and not holds(st.connector) then
      local co = sched.spawn(connecting, setmetatable({ dc = dc }, WEAK_VALUES))
      dc.connecting = { co = co, epoch = sched.epoch() }
      return
    end
  end
end

--- attach(channel, driver, where, opts): makes core channel `channel`
-- (made with host_io) driven by `driver` (pc.grpc's `driver` option) for
-- the backend `where` = {host=, port=, tls=}, with pc.grpc's `opts`.
function M.attach(channel, driver, where, opts)
  -- dc.channel through a weak table: `driven` holds dc by its channel, and
  -- LuaJIT's weak keys (no ephemerons) never let a channel go whose value
  -- refers to it (its transport, connections and sockets would stay forever)
  local ref = setmetatable({ channel = channel }, { __mode = "v" })
  -- a Unix-domain socket goes to the driver as host "unix:/path" (as a
  -- cosocket's connect takes it) and no port
  local unix = where.unix and (where.abstract and "unix-abstract:" or "unix:") .. where.unix
  local dc = setmetatable({
    driver = driver, host = unix or where.host, port = not unix and tonumber(where.port) or nil,
    where = unix or (where.host:find(":", 1, true) and "[" .. where.host .. "]" or where.host) .. ":" .. where.port,
    -- a plain byte pipe: TLS is the channel's (core/net/socket.h, hosted TLS),
    -- so the driver is never asked for it
    connect_opts = { tls = false },
    connect_timeout = opts.connect_timeout or 20,
    conns = {}, signal = {}, sleep = driver.sleep or core.sleep, wait = driver.wait, wake = driver.wake,
    aborted = driver.aborted,
    tokens = {},
  }, { __index = ref })
  driven[channel] = dc
end

--- wait(channel, call): until `call` (a core call of `channel`) may have
-- moved on: for a driven channel one round of its driver's I/O, else
-- sched.wait_call.
-- A driver's `aborted()` true (the caller's client went away, under
-- nginx), or the running task aborted (sched.abort: the client of the
-- listener's call it forwards went away), cancels the call instead: its
-- RST_STREAM goes out at once. Callers wait in a loop that checks the
-- call first (an abort wakes the task: its next wait cancels).
function M.wait(channel, call)
  local dc = driven[channel]
  if not dc then
    -- (the abort woke the task from its wait: its caller's loop asks again)
    if sched.naborted == 0 or not task_aborted() then return sched.wait_call(channel, call) end
    if not call:status() then call:cancel() end
    return
  end
  local aborted = dc.aborted
  if not (aborted and aborted()) then
    drive(dc, nil, dc.wake and call:wake_token() or nil)
    if not (aborted and aborted()) then return end
  end
  if not call:status() then
    call:cancel()
    M.flush(channel)
  end
end

--- aborted(channel) -> true when `channel` is driven by a driver whose
-- `aborted()` says the caller's client went away (under nginx,
-- resty.abort), else false.
function M.aborted(channel)
  local dc = driven[channel]
  return dc ~= nil and dc.aborted ~= nil and dc.aborted() == true
end

--- pump(channels, seconds): one round of I/O over the channels of the
-- started calls a transport waits for, at most `seconds`: a driven one's
-- driver, else sched.pump.
function M.pump(channels, seconds)
  for i = 1, #channels do
    local dc = driven[channels[i]]
    if dc then return drive(dc, seconds) end -- a host driver's transport: one round of its I/O
  end
  return sched.pump(channels, seconds)
end

--- notify(channel): wakes the waiters of a driven channel's calls after
-- one ended without I/O (a cancel from another task of a call waiting
-- for a connection); nothing for another channel.
function M.notify(channel)
  local dc = driven[channel]
  if dc then woken(dc, channel, false) end
end

--- close(channel): after channel:close(), closes the sockets of a driven
-- channel's connections without a call (nothing for another channel); a
-- connection with calls in flight keeps its socket, and the waits of those
-- calls go on driving it, until they end. The waiters are woken: the
-- close ended the calls that waited for a connection.
function M.close(channel)
  local dc = driven[channel]
  if dc then
    sync(dc)
    woken(dc, channel, false)
  end
end

return M
