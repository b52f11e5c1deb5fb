--- gRPC over HTTP/2: `pc.grpc(target, opts)`, the network transport
-- (core/net/README.md).
-- A transport moves bytes: the caller encodes requests and decodes
-- responses. The C side (core/net: the engine on nghttp2, the built-in
-- socket and TLS driver, channels) does framing, gzip, grpc-timeout,
-- metadata, flow control and status without ever blocking but in
-- core.grpc_pump; this file waits for calls (alone, or interleaved under
-- the pc.spawn / pc.run scheduler), shapes options and raises error
-- objects.
local setmetatable, type, error, pairs, tostring, tonumber = setmetatable, type, error, pairs,
  tostring, tonumber
local floor, io_open = math.floor, io.open
local co_running, co_yield = coroutine.running, coroutine.yield
local unpack_args = require("protocall.compat").unpack
local mtype = require("protocall.compat").mtype -- math.type, also under LuaJIT

local M = {}

-- Failures raise pc.Error (lua/protocall/call.lua, installed first) with
-- the transport's fields: code, message, details (grpc-status-details-bin
-- decoded: lua/protocall/status.lua), metadata (trailers as {key, value} pairs), headers (response
-- headers, same shape), retry_delay (grpc-retry-pushback-ms in seconds; -1
-- with no_retry = true for a negative or malformed value), local (true for
-- a failure protocall found that would recur), method (the call's path).
local new_error
-- pc._metadata_problem (call.lua): the shared metadata check.
local metadata_problem
local core_pump

-- How a call waits for its transport: `wait_hook(channel)` is set by the
-- scheduler (below) for coroutines it runs; outside it, the call runs the
-- loop itself until it can go on.
local wait_hook
-- pc.sleep (set by install): Transport:wait sleeps with it.
local sleep_hook

-- Channels whose bytes a host driver moves (pc.grpc's `driver`, below):
-- core channel -> its driver state; `drive(state)` is their wait.
local driven = setmetatable({}, { __mode = "k" })
local drive, flush

local function wait(channel)
  local dc = driven[channel]
  if dc then return drive(dc) end
  if wait_hook and wait_hook(channel) then return end
  core_pump({ channel }, 1)
end

local Transport = {}
Transport.__index = Transport

local TRANSPORT_OPTIONS = {
  ca_file = "string", cert_file = "string", key_file = "string", server_name = "string",
  max_receive_size = "number", max_header_list_size = "number", stream_window = "number",
  connection_window = "number", compression = "string", metadata = "table",
  user_agent = "string", keepalive_time = "number", keepalive_timeout = "number",
  reconnect = "table", insecure = "boolean", connect_timeout = "number", load_balancing = "string",
  driver = "table", wait_for_ready = "boolean",
}

-- pc.grpc's `reconnect` table: its keys and gRPC's numbers
-- (doc/connection-backoff.md) for those left out.
local RECONNECT = { initial = 1, multiplier = 1.6, jitter = 0.2, maximum = 120, min_connect_timeout = 20 }

-- The reconnection backoff of `opts.reconnect`, every field filled in;
-- raises on an unknown key or a value out of range.
local function reconnect_option(r)
  if r == nil then return nil end
  local b = {}
  for k, v in pairs(r) do
    if RECONNECT[k] == nil then error("pc.grpc: reconnect: unknown field '" .. tostring(k) .. "'", 3) end
    if type(v) ~= "number" or v ~= v or v < 0 or v > 1e9 then
      error("pc.grpc: reconnect." .. k .. ": a number of seconds >= 0 expected, got " .. tostring(v), 3)
    end
    b[k] = v
  end
  for k, v in pairs(RECONNECT) do
    if b[k] == nil then b[k] = v end
  end
  if b.multiplier < 1 then error("pc.grpc: reconnect.multiplier: at least 1 expected, got " .. b.multiplier, 3) end
  if b.jitter > 1 then error("pc.grpc: reconnect.jitter: at most 1 expected, got " .. b.jitter, 3) end
  if b.maximum < b.initial then
    error("pc.grpc: reconnect.maximum: at least reconnect.initial (" .. b.initial .. ") expected, got " .. b.maximum, 3)
  end
  return b
end

local function check_compression(c, level)
  if c ~= nil and c ~= "gzip" and c ~= "identity" then
    error("compression '" .. tostring(c) .. "': expected \"gzip\" or \"identity\"", level + 1)
  end
  return c == "gzip"
end

-- The transport's default metadata with the call's: a call's entry
-- replaces the transport's entries of the same key.
local function merged_metadata(base, extra)
  if base == nil then return extra end
  if extra == nil or #extra == 0 then return base end
  local own, all = {}, {}
  for i = 1, #extra do own[extra[i][1]] = true end
  for i = 1, #base do
    if not own[base[i][1]] then all[#all + 1] = base[i] end
  end
  for i = 1, #extra do all[#all + 1] = extra[i] end
  return all
end

-- Settings of one call: {timeout = seconds or nil, metadata = {{k, v}, ...},
-- compression = "gzip" | "identity" | nil, with_metadata = boolean,
-- previous_attempts = n (sent as grpc-previous-rpc-attempts when positive:
-- a retry or hedge of gRFC A6) or nil}.
local function settings_of(self, name, path, settings, level)
  if type(path) ~= "string" then
    error("bad argument #1 to '" .. name .. "' (string expected, got " .. type(path) .. ")", level + 1)
  end
  if settings ~= nil and type(settings) ~= "table" then
    error("bad argument #3 to '" .. name .. "' (table expected, got " .. type(settings) .. ")",
          level + 1)
  end
  settings = settings or {}
  local compression = settings.compression
  if compression == nil then compression = self.compression end
  local gzip = check_compression(compression, level + 1)
  local timeout = settings.timeout
  if timeout ~= nil and type(timeout) ~= "number" then
    error("timeout: seconds (a number) or nil expected, got " .. type(timeout), level + 1)
  end
  if settings.metadata ~= nil then
    local problem = metadata_problem(settings.metadata)
    if problem then error(problem, level + 1) end
  end
  local previous = settings.previous_attempts
  if previous ~= nil and (mtype(previous) ~= "integer" or previous < 0 or previous > 100) then
    error("previous_attempts: integer in 0..100 expected, got " .. tostring(previous), level + 1)
  end
  return timeout, merged_metadata(self.metadata, settings.metadata), gzip, settings.with_metadata, previous
end

local function check_request(name, request, level)
  if type(request) ~= "string" then
    error("bad argument #2 to '" .. name .. "' (string expected, got " .. type(request) .. ")",
          level + 1)
  end
end

local function raise(call, path)
  local st = call:status()
  call:close()
  st.method = path
  error(new_error(st), 0)
end

-- The next response message of `call`, waiting as needed; nil at the end.
local function next_message(channel, call)
  while true do
    local m = call:next()
    if m ~= false then return m end
    wait(channel)
  end
end

-- The iterator of a server stream's messages: each message, then nil
-- after a status OK; any other status raises the error object.
local function stream_iterator(channel, call, path)
  local finished = false
  return function()
    if finished then return nil end
    local msg = next_message(channel, call)
    if msg ~= nil then return msg end
    finished = true
    local st = call:status()
    if st.code ~= "OK" then raise(call, path) end
    return nil
  end
end

--- Unary call: `transport:unary(path, request_bytes, settings)` ->
-- `response_bytes` (and `{headers = pairs, trailers = pairs}` when
-- `settings.with_metadata`). `path` is "/pkg.Service/Method"; settings as
-- `settings_of` above; `timeout` in seconds is sent as grpc-timeout and
-- enforced here too (a timeout <= 0 fails at once). Zero or two response
-- messages are INTERNAL. Raises the transport's error object with the
-- canonical `code` on any failure; raises a string at the caller's line on
-- misuse (bad metadata, bad path, closed transport). Under pc.run, waits
-- without stopping other coroutines.
function Transport:unary(path, request, settings)
  local timeout, md, gzip, want_md, previous = settings_of(self, "unary", path, settings, 2)
  check_request("unary", request, 2)
  local channel = self.channel
  local call = channel:start(path, timeout, md, gzip, previous)
  call:send(request)
  call:close_send()
  local first = next_message(channel, call)
  local extra = 0
  if first ~= nil then
    while next_message(channel, call) ~= nil do extra = extra + 1 end
  end
  local st = call:status()
  if st.code == "OK" then
    if first == nil or extra > 0 then
      st.code = "INTERNAL"
      st.message = first == nil and "unary call received no response message"
        or ("unary call received " .. (extra + 1) .. " response messages")
    else
      local meta = want_md and call:metadata() or nil
      call:close()
      return first, meta
    end
  end
  call:close()
  st.method = path
  error(new_error(st), 0)
end

--- Server-streaming call: `for bytes in transport:server_stream(path,
-- request_bytes, settings) do ... end`. The iterator returns each response
-- message, then nil after a status OK; any other status raises the error
-- object. `timeout` covers the whole stream. The fourth value is the call:
-- `call:metadata()` -> {headers = pairs, trailers = pairs} received so far,
-- `call:close()` cancels it (RST_STREAM) if still running; a generic `for`
-- closes it when the loop ends or is left early; `call:buffered()` is the
-- bytes it holds for received, unread data. Flow control bounds that: a
-- stream read slowly holds at most its window (`stream_window`) while the
-- other calls on the connection go on.
function Transport:server_stream(path, request, settings)
  local timeout, md, gzip, _, previous = settings_of(self, "server_stream", path, settings, 2)
  check_request("server_stream", request, 2)
  local channel = self.channel
  local call = channel:start(path, timeout, md, gzip, previous)
  call:send(request)
  call:close_send()
  return stream_iterator(channel, call, path), nil, nil, call
end

-- Calls started without waiting (hedging: several attempts of one call in
-- flight at once). A handle's `result()` is nil while its call runs.
local Started = { __name = "protocall.GrpcStarted" }
Started.__index = Started

--- `handle:cancel()`: ends the started call CANCELLED (RST_STREAM CANCEL,
-- sent at once: the server sees the cancellation) and releases it unless
-- a result handed it on (a committed stream). Idempotent.
function Started:cancel()
  if self.done then return end
  self.done = true
  self.call:cancel()
  self.call:close()
end

local function started(self, name, path, request, settings, result)
  local timeout, md, gzip, want_md, previous = settings_of(self, name, path, settings, 3)
  check_request(name, request, 3)
  local call = self.channel:start(path, timeout, md, gzip, previous)
  call:send(request)
  call:close_send()
  return setmetatable({ channel = self.channel, call = call, path = path, result = result,
    done = false, count = 0, want_md = want_md }, Started)
end

-- A started unary call's result: nil while it runs, else true and the
-- response bytes (and with settings.with_metadata {headers=, trailers=}),
-- or false and the error object (as Transport:unary).
local function unary_result(h)
  if h.done then return false, new_error { code = "CANCELLED", message = "cancelled", method = h.path } end
  local call = h.call
  while true do
    local m = call:next()
    if m == false then return nil end
    if m == nil then break end
    h.count = h.count + 1
    if h.count == 1 then h.first = m end
  end
  h.done = true
  local st = call:status()
  local meta = h.want_md and call:metadata() or nil
  call:close()
  if st.code == "OK" then
    if h.count == 1 then return true, h.first, meta end
    st.code = "INTERNAL"
    st.message = h.count == 0 and "unary call received no response message"
      or ("unary call received " .. h.count .. " response messages")
  end
  st.method = h.path
  return false, new_error(st)
end

-- A started server stream's result: nil until its first response message
-- or its end, then true and an iterator of the stream (the first message
-- included) and the call, or false and the error object.
local function stream_result(h)
  if h.done then return false, new_error { code = "CANCELLED", message = "cancelled", method = h.path } end
  local call = h.call
  local m = call:next()
  if m == false then return nil end
  h.done = true
  if m == nil then
    local st = call:status()
    if st.code ~= "OK" then
      call:close()
      st.method = h.path
      return false, new_error(st)
    end
  end
  local rest, first = stream_iterator(h.channel, call, h.path), m
  return true, function()
    if first ~= nil then
      local r = first
      first = nil
      return r
    end
    return rest()
  end, call
end

--- `handle = transport:start_unary(path, request_bytes, settings)`: a
-- unary call started without waiting for it (arguments and misuse as
-- `unary`); `handle:result()` -> nil while it runs, else true and the
-- response bytes (and the metadata, as `unary` with `with_metadata`), or
-- false and the error object; `handle:cancel()`.
-- Several started calls share the connection, in flight together;
-- `transport:wait` waits for them.
function Transport:start_unary(path, request, settings)
  return started(self, "start_unary", path, request, settings, unary_result)
end

--- `handle = transport:start_server_stream(path, request_bytes,
-- settings)`: a server stream started without waiting; `handle:result()`
-- -> nil until its first response message (or its end), then true and an
-- iterator of the whole stream (as `server_stream`'s) and the call, or
-- false and the error object; `handle:cancel()`.
function Transport:start_server_stream(path, request, settings)
  return started(self, "start_server_stream", path, request, settings, stream_result)
end

--- `transport:wait(handles, seconds)`: waits until one of the started
-- calls in the list `handles` may have moved on, at most `seconds` (sleeps
-- when the list is empty). Under pc.run the other tasks run meanwhile.
function Transport:wait(handles, seconds)
  local chans, seen = {}, {}
  for i = 1, #handles do
    local ch = handles[i].channel
    if ch and not seen[ch] then
      seen[ch] = true
      chans[#chans + 1] = ch
    end
  end
  if seconds < 0 then seconds = 0 end
  if #chans == 0 then
    if seconds > 0 then sleep_hook(seconds) end
    return
  end
  for i = 1, #chans do
    local dc = driven[chans[i]]
    if dc then return drive(dc, seconds) end -- a host driver's transport: one round of its I/O
  end
  if wait_hook and wait_hook(chans, seconds) then return end
  core_pump(chans, seconds)
end

-- Request bytes a sender may have queued beyond what HTTP/2 took: past
-- this, call:send waits for the peer's window (flow control).
local SEND_QUEUE = 64 * 1024

local Call = { __name = "protocall.GrpcCall" }
Call.__index = Call

-- Waits until `done()` or the call ended.
local function wait_until(self, done)
  local channel, call = self.channel, self.call
  while not done() and not call:status() do wait(channel) end
end

local function raise_if_failed(self)
  local st = self.call:status()
  if st and st.code ~= "OK" then
    st.method = self.path
    error(new_error(st), 0)
  end
end

--- `call:send(bytes)`: queues one request message, waiting while the
-- peer's flow-control window is closed (more than 64 KiB queued), so a
-- peer that stops reading holds the sender, not memory; the deadline still
-- applies. Raises the call's error once it has ended other than OK, a
-- string after `close_send`.
function Call:send(bytes)
  if type(bytes) ~= "string" then
    error("bad argument #1 to 'send' (string expected, got " .. type(bytes) .. ")", 2)
  end
  if self.send_closed then error("send: the sending side is closed (close_send)", 2) end
  local call = self.call
  if not call:send(bytes) then
    raise_if_failed(self)
    return
  end
  flush(self.channel)
  wait_until(self, function() return call:unsent() <= SEND_QUEUE end)
  raise_if_failed(self)
end

--- `call:close_send()`: no more request messages (END_STREAM). Idempotent.
function Call:close_send()
  if self.send_closed then return end
  self.send_closed = true
  self.call:close_send()
  flush(self.channel)
end

--- `call:recv()` -> the next response message (bytes), or nil after the
-- last one once the call ended OK; raises the call's error otherwise.
-- Under pc.run, one task may read while another sends.
function Call:recv()
  local call = self.call
  while true do
    local m = call:next()
    if m then return m end
    if m == nil then
      raise_if_failed(self)
      return nil
    end
    wait(self.channel)
  end
end

--- `call:close_and_recv()` -> the one response message of a
-- client-streaming call: closes the sending side and waits for the end;
-- zero or two messages are INTERNAL.
function Call:close_and_recv()
  self:close_send()
  local first = self:recv()
  local extra = 0
  if first ~= nil then
    while self:recv() ~= nil do extra = extra + 1 end
  end
  if first == nil or extra > 0 then
    error(new_error {
      code = "INTERNAL", method = self.path,
      message = first == nil and "call received no response message"
        or ("call received " .. (extra + 1) .. " response messages"),
    }, 0)
  end
  return first
end

--- `call:headers()` -> the response headers ({key, value} pairs), waiting
-- for them (an empty list when the call ended without any).
function Call:headers()
  local call = self.call
  wait_until(self, function() return call:headers_done() end)
  return call:metadata().headers
end

--- `call:trailers()` -> the trailers ({key, value} pairs), waiting for the
-- end of the call (read the responses first: unread ones hold it).
function Call:trailers()
  local call = self.call
  wait_until(self, function() return false end)
  return call:metadata().trailers
end

--- `call:cancel()`: ends the call CANCELLED (RST_STREAM CANCEL: the server
-- sees CANCELLED); later `recv` and `send` raise CANCELLED.
function Call:cancel()
  self.call:cancel()
  flush(self.channel)
end

--- `call:close()`: cancels the call if still running and releases it.
function Call:close()
  self.call:close()
end
Call.__close = Call.close

--- Streaming call of any shape: `local call = transport:stream(path,
-- settings)` (settings as `unary`) -> a call object with `send`,
-- `close_send`, `recv`, `close_and_recv`, `headers`, `trailers`, `cancel`
-- and `close`. The deadline (`timeout`) covers the whole call.
function Transport:stream(path, settings)
  local timeout, md, gzip = settings_of(self, "stream", path, settings, 2)
  local call = self.channel:start(path, timeout, md, gzip)
  return setmetatable({ channel = self.channel, call = call, path = path }, Call)
end

--- `transport:close()`: closes the connection (calls still being read keep
-- it until they end).
function Transport:close()
  local dc = driven[self.channel]
  self.channel:close()
  if dc then dc.close_all() end
end

local MAX_INT31 = 2 ^ 31 - 1

-- {host=, port=, tls=} for `target`, or nil and what is wrong. Accepted:
-- "http://host:port" and "host:port" and "dns:///host:port" (HTTP/2
-- without TLS, prior knowledge), "https://host[:port]" (TLS; port 443 by
-- default). A host is a name, an IPv4 address or "[IPv6]". A control
-- character (a NUL above all: C would cut the string there and reach
-- another host) or a space is refused.
local function parse_target(target)
  if target:find("[%c ]") then return nil, "control characters and spaces are not allowed" end
  local scheme, rest = target:match("^(https?)://(.*)$")
  if not scheme then
    rest = target:match("^dns:///(.*)$")
    if rest == nil then
      if target:find("://", 1, true) then
        return nil, "expected http://host:port, https://host:port, dns:///host:port or host:port"
      end
      rest = target
    end
    scheme = "http"
  end
  local host, port = rest:match("^%[([%x:.]+)%]:?(%d*)/?$")
  if not host then host, port = rest:match("^([^:/%[%]]+):?(%d*)/?$") end
  if not host or host == "" then return nil, "no host" end
  if port == "" then
    if scheme == "http" then return nil, "h2c needs a port (http://host:port)" end
    port = "443"
  else
    local n = tonumber(port)
    if n < 1 or n > 65535 then return nil, "port must be in 1..65535" end
  end
  return { host = host, port = port, tls = scheme == "https" }
end

local function size_option(opts, key, low)
  local v = opts[key]
  if v ~= nil and (v ~= floor(v) or v < low or v > MAX_INT31) then
    error("pc.grpc: option '" .. key .. "' must be an integer in " .. low .. "..2^31-1", 3)
  end
  return v
end

---------------------------------------------------------------------------
-- The scheduler: pc.spawn(fn) / pc.run()

local tasks = {}      -- coroutine -> true while pc.run runs it
local queue = {}      -- coroutines to start or resume, in order
local waiting = {}    -- coroutine -> channel it waits on, or false (sleeping)
local wake_at = {}    -- coroutine -> monotonic time its sleep ends
local running_loop = false
local monotonic

-- A task waits for its channel (or a list of channels, at most `seconds`):
-- yield to the loop, which pumps every channel a task waits on and resumes
-- them all.
local function task_wait(channel, seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co] = channel
  if seconds then wake_at[co] = monotonic() + seconds end
  co_yield()
  return true
end

--- Whether the running coroutine is a task of pc.run (so a wait can yield
-- to the others); other modules ask this instead of coroutine.running,
-- which tells the main coroutine apart only on Lua 5.4.
function M.in_task()
  return tasks[co_running()] == true
end

local function task_sleep(seconds)
  local co = co_running()
  if not tasks[co] then return false end
  waiting[co] = false
  wake_at[co] = monotonic() + seconds
  co_yield()
  return true
end

-- A task waits until `fire(sig)` or `seconds` passed (a host driver's
-- connection, below); false outside a task.
local function task_wait_signal(sig, seconds)
  local co = co_running()
  if not tasks[co] then return false end
  sig[co] = true
  waiting[co] = false
  wake_at[co] = monotonic() + seconds
  co_yield()
  sig[co] = nil
  return true
end

local function fire(sig)
  for co in pairs(sig) do
    sig[co] = nil
    if waiting[co] == false then
      waiting[co], wake_at[co] = nil, nil
      queue[#queue + 1] = co
    end
  end
end

local function step(co, ...)
  local ok, err = coroutine.resume(co, ...)
  if coroutine.status(co) == "dead" then
    tasks[co], waiting[co], wake_at[co] = nil, nil, nil
    if not ok then error(err, 0) end
  end
end

---------------------------------------------------------------------------
-- Host I/O drivers: pc.grpc(target, {driver = D})
--
-- The channel (core/net/channel.c, host_io) keeps every piece of
-- connection logic and names its connections by ids; this side runs the
-- driver's calls for them. Whoever waits on the channel takes one free
-- role of one connection (connect it, send its bytes, or read from it),
-- runs it (the driver may yield there, as cosockets do) and returns; with
-- every role taken, it waits until a holder is done or the channel's next
-- timer (a deadline, keepalive, a connect timeout). So the tasks of
-- pc.spawn share the connection's reads and writes, and a call outside any
-- task drives the connection itself.

local READ_MAX = 65536 -- bytes asked of one receiveany
local READ_CAP = 1     -- seconds a read waits at most before the timers run again
local SEND_TIMEOUT = 60
local SHARED_READ = 0.01 -- seconds a read waits when other connections have calls too

-- Roles held by pc.run tasks it dropped after an error are free again.
local role_epoch = 0

local function holds(role)
  if role == nil or role.epoch ~= role_epoch then return false end
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

local function do_connect(dc, st, seconds)
  local ch = dc.channel
  local o = dc.connect_opts
  o.timeout = seconds < dc.connect_timeout and seconds or dc.connect_timeout
  local ok, sock, err = pcall(dc.driver.connect, dc.host, dc.port, o)
  if not ok then sock, err = nil, sock end
  if type(sock) ~= "table" and type(sock) ~= "userdata" then
    return connect_failed(ch, st.id, "connect to " .. dc.where .. ": " .. tostring(err or "the driver returned no socket"))
  end
  st.sock = sock
  if sock.settimeouts then drv(sock, "settimeouts", o.timeout, SEND_TIMEOUT, READ_CAP) end
  if dc.connect_opts.tls and sock.sslhandshake then
    local done, why = drv(sock, "sslhandshake", dc.connect_opts.server_name, not dc.connect_opts.insecure)
    if not done then
      return connect_failed(ch, st.id, "TLS handshake with " .. dc.where .. ": " .. tostring(why))
    end
  end
  ch:host_connected(st.id, true)
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

-- Runs `fn` as the current coroutine's `role` on `st`, then wakes the waiters.
local function with_role(dc, st, role, fn, ...)
  st[role] = { co = co_running() or false, epoch = role_epoch }
  fn(dc, st, ...)
  st[role] = nil
  fire(dc.signal)
  if dc.wake then dc.wake() end
end

-- New connections get a state; gone ones their socket closed.
local function sync(dc)
  local live, calls = dc.channel:host_conns()
  for id in pairs(live) do
    if not dc.conns[id] then dc.conns[id] = { id = id } end
  end
  for id, st in pairs(dc.conns) do
    if live[id] == nil and not holds(st.connector) and not holds(st.reader) and not holds(st.writer) then
      if st.sock then drv(st.sock, "close") end
      dc.conns[id] = nil
    end
  end
  return live, calls
end

-- The connection to read: one with calls whose reader role is free, the
-- next after the last one read (so a task alone serves every connection);
-- and how many connections have calls. Idle connections are not read.
local function reader_pick(dc, live, calls)
  local ids, busy = {}, 0
  for id in pairs(dc.conns) do
    if live[id] and calls[id] > 0 then
      busy = busy + 1
      if not holds(dc.conns[id].reader) then ids[#ids + 1] = id end
    end
  end
  if #ids == 0 then return nil, busy end
  table.sort(ids)
  for i = 1, #ids do
    if ids[i] > (dc.last_read or 0) then return ids[i], busy end
  end
  return ids[1], busy
end

-- One round of a wait on a driven channel, waiting at most `limit`
-- seconds when given (and the driver keeps to its timeouts).
function drive(dc, limit)
  local ch = dc.channel
  local timer = ch:host_tick() or math.huge
  if timer < 0.001 then timer = 0.001 end
  local next_timer = limit and limit < timer and limit or timer -- a connect gets the whole timer
  if next_timer < 0.001 then next_timer = 0.001 end
  local t = next_timer < READ_CAP and next_timer or READ_CAP
  local live, calls = sync(dc)
  for id, st in pairs(dc.conns) do
    if live[id] == false and not st.sock and not holds(st.connector) then
      return with_role(dc, st, "connector", do_connect, timer)
    end
    if live[id] and not holds(st.writer) and ch:host_output(id) then
      return with_role(dc, st, "writer", do_write)
    end
  end
  local id, busy = reader_pick(dc, live, calls)
  if id then
    dc.last_read = id
    -- with calls on several connections, short reads take turns on them
    return with_role(dc, dc.conns[id], "reader", do_read, busy > 1 and (t < SHARED_READ and t or SHARED_READ) or t)
  end
  if not task_wait_signal(dc.signal, t) then
    if dc.wait then dc.wait(t) else dc.sleep(t < 0.005 and t or 0.005) end
  end
  ch:host_tick()
end

-- Sends what calls queued, when no one else is sending (no wait for the
-- next round: another task may be the one reading the answer).
function flush(channel)
  local dc = driven[channel]
  if not dc then return end
  for id, st in pairs(dc.conns) do
    if st.sock and not holds(st.writer) and channel:host_output(id) then
      with_role(dc, st, "writer", do_write)
    end
  end
end

-- The driver state of a new driven channel.
local function driven_channel(channel, driver, where, opts, sleep)
  -- dc.channel through a weak table: `driven` holds dc by its channel, and
  -- LuaJIT's weak keys (no ephemerons) never let a channel go whose value
  -- refers to it (its transport, connections and sockets would stay forever)
  local ref = setmetatable({ channel = channel }, { __mode = "v" })
  local dc = setmetatable({
    driver = driver, host = where.host, port = tonumber(where.port),
    where = (where.host:find(":", 1, true) and "[" .. where.host .. "]" or where.host) .. ":" .. where.port,
    connect_opts = {
      tls = where.tls, server_name = opts.server_name or where.host, insecure = opts.insecure == true,
      ca_file = opts.ca_file, cert_file = opts.cert_file, key_file = opts.key_file,
      alpn = { "h2" },
    },
    connect_timeout = opts.connect_timeout or 20,
    conns = {}, signal = {}, sleep = driver.sleep or sleep, wait = driver.wait, wake = driver.wake,
  }, { __index = ref })
  function dc.close_all()
    for id, st in pairs(dc.conns) do
      if st.sock then drv(st.sock, "close") end
      dc.conns[id] = nil
    end
  end
  driven[channel] = dc
  return dc
end

function M.install(pc, core)
  new_error = pc._status_error
  metadata_problem = pc._metadata_problem
  core_pump = core.grpc_pump
  monotonic = core.monotonic
  wait_hook = task_wait
  -- How a task waits for a channel or a listener (lua/protocall/listen.lua).
  pc._wait = wait

  --- `pc.spawn(fn, ...)`: runs `fn(...)` as a task of the next (or the
  -- running) `pc.run()`. gRPC calls made inside a task wait without
  -- stopping the other tasks, so calls of many tasks interleave on one
  -- connection; `pc.sleep` inside a task lets the others run too. Returns
  -- the task's coroutine. Raises when `fn` is not a function.
  function pc.spawn(fn, ...)
    if type(fn) ~= "function" then
      error("bad argument #1 to 'spawn' (function expected, got " .. type(fn) .. ")", 2)
    end
    local args, n = { ... }, select("#", ...)
    local co = coroutine.create(function() return fn(unpack_args(args, 1, n)) end)
    tasks[co] = true
    queue[#queue + 1] = co
    return co
  end

  -- The channels and listeners the waiting tasks wait on (each once) and
  -- the end of the first sleep (nil: none).
  local function waited()
    local chans, seen, soonest = {}, {}, nil
    for co, ch in pairs(waiting) do
      if type(ch) == "table" then -- a list of channels (Transport:wait)
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
        core.sleep(t)
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
      role_epoch = role_epoch + 1 -- driver roles of the dropped tasks are free
      error(a, 0)
    end
    return a, b
  end

  local function count_tasks()
    local n = 0
    for _ in pairs(tasks) do n = n + 1 end
    return n
  end

  --- `pc.run()`: runs the spawned tasks (and tasks they spawn) until all
  -- have finished. An error in a task stops the loop and is raised here
  -- (the other tasks stay suspended and are dropped). Raises when called
  -- from inside a task.
  function pc.run()
    as_loop("pc.run", function()
      while round(math.huge) do end
    end)
  end

  --- `n = pc.step([seconds])`: one step of the pc.run loop, for a host
  -- that runs its own event loop (doc/guide.md "Serving"): runs the tasks that
  -- are ready, then one round of I/O over the channels and listeners the
  -- others wait on (sending, accepting, reading, deadlines), waiting at
  -- most `seconds` for a socket (default 0: not at all; less when a
  -- task's sleep ends sooner), then runs the tasks that can go on. Returns
  -- the number of tasks left (0: all have finished). A task's error is
  -- raised here, the other tasks dropped, as pc.run does. Raises inside a
  -- task or pc.run, or for `seconds` not a number >= 0.
  function pc.step(seconds)
    if seconds == nil then seconds = 0 end
    if type(seconds) ~= "number" or not (seconds >= 0) then
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

  --- `fds, timeout = pc.poll_fds()`: what the host's loop should wait on
  -- before the next pc.step(0): `fds` lists `{fd, events}` (events "r",
  -- "w" or "rw", as luv's uv.new_poll takes them) of the sockets of the
  -- channels and listeners the tasks wait on; `timeout` is the seconds
  -- until pc.step must run even with no socket ready (0: a task is ready
  -- now; a sleep ending, a call's deadline, a connection timer), nil when
  -- only a socket can wake the tasks (or there are none). Sends what is
  -- queued meanwhile. Raises inside a task or pc.run.
  function pc.poll_fds()
    if running_loop then error("pc.poll_fds: called inside pc.run or a task", 2) end
    local chans, soonest = waited()
    local timeout = soonest and soonest - monotonic() or nil
    if timeout == math.huge then timeout = nil end -- pc.sleep(math.huge): only a socket wakes it
    if #queue > 0 then timeout = 0 end
    local fds, due = core.grpc_poll_fds(chans, timeout or 3600)
    if timeout or due < 3600 then timeout = due end
    if timeout and timeout < 0 then timeout = 0 end
    return fds, timeout
  end

  -- pc.sleep, and the default sleep of callables made from now on (retry
  -- backoff): inside a task it lets the other tasks run.
  local base_sleep = core.sleep
  local function sleep(seconds)
    if type(seconds) == "number" and seconds > 0 and task_sleep(seconds) then return end
    return base_sleep(seconds)
  end
  core.sleep = sleep
  pc.sleep = sleep
  sleep_hook = sleep

  -- The backends of `target` as {host=, port=, tls=} places, and for a
  -- dns:/// target the name it resolves again (doc/guide.md "Load balancing").
  local function places_of(target)
    local show = type(target) == "string" and target:gsub("%c", "?") or "{...}"
    local function bad(problem) error("pc.grpc: target '" .. show .. "': " .. problem, 3) end
    local list
    if type(target) == "table" then
      list = {}
      local n = #target
      if n == 0 then bad("list of at least one address expected") end
      for k in pairs(target) do
        if mtype(k) ~= "integer" or k < 1 or k > n then bad("list of addresses expected (keys 1..n)") end
      end
      for i = 1, n do
        if type(target[i]) ~= "string" then bad("address " .. i .. ": string expected, got " .. type(target[i])) end
        list[i] = target[i]
      end
    elseif type(target) == "string" then
      local kind, rest = target:match("^(ipv[46]):(.*)$")
      if kind then
        list = {}
        for a in (rest .. ","):gmatch("([^,]*),") do list[#list + 1] = a end
      end
    end
    if list then
      local places = {}
      for i, a in ipairs(list) do
        local where, problem = parse_target(a)
        if not where then bad("address " .. i .. " '" .. a:gsub("%c", "?") .. "': " .. problem) end
        if i > 1 and where.tls ~= places[1].tls then
          bad("every address must use the same scheme (TLS or not)")
        end
        places[i] = where
      end
      return places
    end
    local where, problem = parse_target(target)
    if not where then bad(problem) end
    if target:find("^dns:///") then
      local addresses = core.resolve(where.host, where.port)
      if addresses and #addresses > 1 then
        local places = {}
        for i, a in ipairs(addresses) do places[i] = { host = a, port = where.port, tls = where.tls } end
        return places, where
      end
    end
    return { where }
  end

  local LB_POLICIES = { pick_first = true, round_robin = true }

  --- `pc.grpc(target, opts)` -> transport. `target` is "http://host:port",
  -- "host:port" or "dns:///host:port" (HTTP/2 without TLS, prior
  -- knowledge) or "https://host[:port]" (TLS, verification on, ALPN h2);
  -- several backends are a list of such addresses ({"127.0.0.1:5001",
  -- "127.0.0.1:5002"}), "ipv4:127.0.0.1:5001,127.0.0.1:5002" (or ipv6:
  -- with "[::1]:5001"), or a dns:/// name resolving to several addresses
  -- (one connection each, the name as :authority; resolved again when every
  -- backend has failed); `load_balancing` picks among them (doc/guide.md
  -- "Load balancing", lua/protocall/balancer.lua).
  -- opts: `ca_file` (PEM bundle; default the system store), `cert_file` and
  -- `key_file` (PEM client certificate and key, mutual TLS),
  -- `server_name` (the name TLS verifies and sends, and :authority;
  -- default the host), `max_receive_size` (bytes, default 4 MiB; a larger
  -- response message fails with RESOURCE_EXHAUSTED, local = true),
  -- `max_header_list_size` (bytes of one response header block, default
  -- 64 KiB; more is RESOURCE_EXHAUSTED for that call only),
  -- `stream_window` / `connection_window` (HTTP/2 receive windows in
  -- bytes, default 1 MiB / 16 MiB: what an unread stream / the connection
  -- may hold), `compression` ("gzip" for every call), `metadata` (list of
  -- {key, value} sent with every call; keys ending in "-bin" carry bytes;
  -- a call's own entry of the same key replaces it), `user_agent`,
  -- `keepalive_time` / `keepalive_timeout` (seconds: a connection with
  -- calls that received nothing for keepalive_time sends an HTTP/2 PING;
  -- no ACK within keepalive_timeout, default 20, closes it and its calls
  -- fail UNAVAILABLE; default no pings), `reconnect` = {initial = 1,
  -- multiplier = 1.6, jitter = 0.2, maximum = 120, min_connect_timeout =
  -- 20} (seconds; gRPC's connection backoff: after a failed connection
  -- attempt the next waits initial s, growing by multiplier per failure up
  -- to maximum, +-jitter of it; an attempt not connected within
  -- max(min_connect_timeout, the backoff) has failed; a call needing a
  -- connection meanwhile fails UNAVAILABLE at once, as gRPC fails a call
  -- that is not wait-for-ready, so a retry policy's own backoff paces the
  -- attempts), `wait_for_ready` (true: such a call waits for the next
  -- connection attempt instead, failing at once only when that is past
  -- its deadline; gRPC's wait-for-ready),
  -- `insecure` (true: TLS WITHOUT verifying the server, no CA and no host
  -- name check, so anyone on the path can read and change the calls; for
  -- a test server with a self-signed certificate only), `connect_timeout`
  -- (seconds a new connection may take to connect and finish TLS; past
  -- it the calls waiting on it fail UNAVAILABLE "connect to HOST:PORT:
  -- timed out after S s"; default none but the calls' deadlines),
  -- `driver` (a host I/O driver, close to an OpenResty cosocket, instead
  -- of the built-in sockets and TLS: `driver.connect(host, port, o)` ->
  -- a socket object, or nil and why, with `o` = {tls = boolean,
  -- server_name =, insecure = boolean, ca_file =, cert_file =, key_file =,
  -- alpn = {"h2"}, timeout = seconds the attempt may take};
  -- `sock:send(bytes)` -> bytes sent (all of them, or a count to retry
  -- the rest later) or nil, err; `sock:receiveany(max)` -> at most `max`
  -- bytes, or nil, "timeout" (nothing within the read timeout: not an
  -- error), nil, "closed" or nil, err; `sock:settimeouts(connect, send,
  -- read)` (optional; SECONDS, not milliseconds as in nginx: a read waits
  -- at most until the channel's next timer, 1 s at most);
  -- `sock:sslhandshake(server_name, verify)` (optional; called for https
  -- targets, true or nil, err; the handshake must negotiate ALPN h2;
  -- without it the driver gives TLS itself when `o.tls`, or plaintext);
  -- `sock:close()`; optional `driver.sleep(seconds)` (how a call outside
  -- any pc.spawn task pauses between rounds; default the host's sleep) and
  -- `driver.wait(seconds)` with `driver.wake()` (a call with nothing to
  -- do waits until some call's driver method returned, at most `seconds`:
  -- ngx.semaphore in lua/protocall/resty.lua).
  -- The methods may yield the running coroutine (pc.sleep
  -- inside a pc.spawn task, a cosocket's own yield in its host), so tasks
  -- interleave; one call at a time reads and one writes a socket. A driver
  -- that fails, raises, or reports an error or "closed" ends the calls on
  -- that connection UNAVAILABLE ("connect to HOST:PORT: why", "send to
  -- ...", "read from ...", "TLS handshake with ..."); everything else (one
  -- connection shared, GOAWAY, refused streams, deadlines, reconnection
  -- backoff, keepalive, connect_timeout) is the same as with the built-in
  -- driver. A driver must honour its timeouts: deadlines are checked
  -- between its calls), `load_balancing` ("pick_first", the default, or
  -- "round_robin"). Raises
  -- on a bad target or option, bad metadata, or a `ca_file` that cannot be
  -- read. All calls to one backend share one connection (a second one opens
  -- when the server takes no more streams on it or sends GOAWAY).
  function pc.grpc(target, opts)
    if type(target) ~= "string" and type(target) ~= "table" then
      error("bad argument #1 to 'grpc' (string or list of addresses expected, got " .. type(target) .. ")", 2)
    end
    local places, dns = places_of(target)
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #2 to 'grpc' (table expected, got " .. type(opts) .. ")", 2)
    end
    opts = opts or {}
    for k, v in pairs(opts) do
      local want = TRANSPORT_OPTIONS[k]
      if want == nil then error("pc.grpc: unknown option '" .. tostring(k) .. "'", 2) end
      if type(v) ~= want then
        error("pc.grpc: option '" .. k .. "' must be a " .. want .. ", got " .. type(v), 2)
      end
    end
    check_compression(opts.compression, 2)
    if opts.load_balancing ~= nil and not LB_POLICIES[opts.load_balancing] then
      error("pc.grpc: option 'load_balancing' must be \"pick_first\" or \"round_robin\", got \""
        .. opts.load_balancing:gsub("%c", "?") .. "\"", 2)
    end
    if opts.metadata ~= nil then
      local bad = metadata_problem(opts.metadata)
      if bad then error("pc.grpc: " .. bad, 2) end
    end
    for _, key in pairs { "ca_file", "cert_file", "key_file" } do
      if opts[key] ~= nil then
        local f, why = io_open(opts[key], "rb")
        if not f then error("pc.grpc: option '" .. key .. "': cannot read " .. why, 2) end
        f:close()
      end
    end
    for _, key in pairs { "keepalive_time", "keepalive_timeout" } do
      local v = opts[key]
      if v ~= nil and not (v > 0 and v <= 1e9) then
        error("pc.grpc: option '" .. key .. "' must be a positive number of seconds, got " .. tostring(v), 2)
      end
    end
    local driver = opts.driver
    if driver ~= nil and type(driver.connect) ~= "function" then
      error("pc.grpc: option 'driver': a table with a function 'connect' expected", 2)
    end
    local backoff = reconnect_option(opts.reconnect)
    local ct = opts.connect_timeout
    if ct ~= nil and not (ct > 0 and ct < math.huge) then
      error("pc.grpc: option 'connect_timeout' must be a positive number of seconds, got " .. tostring(ct), 2)
    end
    for _, key in pairs { "user_agent", "server_name" } do
      if opts[key] ~= nil and opts[key]:find("%c") then
        error("pc.grpc: option '" .. key .. "' must not hold control characters", 2)
      end
    end
    local sizes = {
      max_receive = size_option(opts, "max_receive_size", 1),
      max_header_list = size_option(opts, "max_header_list_size", 1),
      stream_window = size_option(opts, "stream_window", 65535),
      connection_window = size_option(opts, "connection_window", 65535),
    }
    -- One backend: its channel and transport.
    local function make(where)
      local channel = core.grpc_channel {
        host = where.host, port = where.port, tls = where.tls,
        ca_file = opts.ca_file, cert_file = opts.cert_file, key_file = opts.key_file,
        server_name = opts.server_name or (dns and dns.host), user_agent = opts.user_agent,
        insecure = opts.insecure, connect_timeout = opts.connect_timeout,
        max_receive = sizes.max_receive, max_header_list = sizes.max_header_list,
        stream_window = sizes.stream_window, connection_window = sizes.connection_window,
        keepalive_time = opts.keepalive_time, keepalive_timeout = opts.keepalive_timeout,
        backoff = backoff, host_io = driver ~= nil, wait_for_ready = opts.wait_for_ready,
      }
      if driver then driven_channel(channel, driver, where, opts, base_sleep) end
      return setmetatable({
        channel = channel, target = where.host .. ":" .. where.port, compression = opts.compression,
        metadata = opts.metadata,
      }, Transport)
    end
    if #places == 1 then
      local t = make(places[1])
      if type(target) == "string" then t.target = target end
      return t
    end
    local resolve
    if dns then
      resolve = function()
        local again = places_of(target)
        return again
      end
    end
    return pc._balanced(places, make, opts.load_balancing or "pick_first", resolve, target)
  end
end

return M
