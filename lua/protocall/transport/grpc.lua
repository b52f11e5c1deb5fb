--- gRPC over HTTP/2: `pc.grpc(target, opts)`, the network transport.
-- A transport moves bytes: the caller encodes requests and decodes
-- responses. The C side (core/net: the engine on nghttp2, the built-in
-- socket and TLS driver, channels) does framing, gzip, grpc-timeout,
-- metadata, flow control and status without ever blocking but in
-- core.grpc_pump; this file waits for calls (alone, or interleaved under
-- the scheduler, sched.lua), checks each call's settings once and raises
-- error objects.
--
-- Failures raise pc.Error with the transport's fields: code, message,
-- details (grpc-status-details-bin decoded: lua/protocall/status.lua),
-- metadata (trailers as {key, value} pairs), headers (response headers,
-- same shape), retry_delay (grpc-retry-pushback-ms in seconds; -1 with
-- no_retry = true for a negative or malformed value), local (true for a
-- failure protocall found that would recur), method (the call's path).
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local error_of = require("protocall.status").error_of
local driver = require "protocall.transport.driver"
local balancer = require "protocall.transport.balancer"
local targets = require "protocall.transport.target"
local dns_resolver = require "protocall.transport.dns"
local xds = require "protocall.transport.xds"
local xds_client = require "protocall.transport.xds_client"
local target_places = targets.places

local setmetatable, getmetatable, type, error, pairs, tostring = setmetatable, getmetatable, type, error, pairs,
  tostring
local format = string.format
local floor, io_open = math.floor, io.open
local count_problem, metadata_problem = errors.count_problem, core.metadata_problem
local argerror, show, seconds_problem = internal.argerror, internal.show, internal.seconds_problem
local compression_problem, check_call, check_request = internal.compression_problem, internal.check_call,
  internal.check_request
local CHECKED = internal.CHECKED

local M = {}

local Transport = { __name = "protocall.GrpcTransport" }
Transport.__index = Transport

local TRANSPORT_OPTIONS = {
  ca_file = "string", cert_file = "string", key_file = "string", server_name = "string",
  max_receive_size = "number", max_header_list_size = "number", stream_window = "number",
  connection_window = "number", compression = "string", metadata = "table",
  user_agent = "string", keepalive_time = "number", keepalive_timeout = "number",
  reconnect = "table", insecure = "boolean", connect_timeout = "number", load_balancing = "string",
  driver = "table", wait_for_ready = "boolean", dns_server = "string", dns_min_interval = "number",
  protocol = "string", codec = "string", get = "boolean", xds_bootstrap = "string",
  http_version = "string",
}

-- pc.grpc's `protocol`: the name each shape of call is sent as
-- (bindings/lua/lpc_net.c): Connect's unary calls have a form of their own.
local PROTOCOLS = {
  grpc = { unary = "grpc", stream = "grpc" },
  ["grpc-web"] = { unary = "grpc-web", stream = "grpc-web" },
  ["grpc-web-text"] = { unary = "grpc-web-text", stream = "grpc-web-text" },
  connect = { unary = "connect", stream = "connect-stream" },
}

-- The shape of each method of Transport that starts a call.
local UNARY_CALLS = { unary = true, start_unary = true }

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
      error("pc.grpc: reconnect." .. k .. ": a number of seconds >= 0 expected, got " .. show(v), 3)
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

-- The settings of one call, checked once (internal.check_call, the
-- checks pc.inproc makes too), as the C channel takes them (ch:start,
-- bindings/lua/lpc_net.c): timeout, metadata (the transport's and the
-- call's), gzip (boolean), previous_attempts, protocol, json, get. Misuse
-- raises "bad argument #`sarg` to `name`" (a closed transport: "calling
-- `name` on bad self") at `level`. Settings a client's attempt made
-- (internal.CHECKED) are taken as they are, and so are those of a call
-- whose `trusted` argument is CHECKED: a several-backend transport's call
-- of its backend, which checked them itself (internal.check_args).
local NONE = {}
local function settings_of(self, name, path, settings, level, sarg, trusted)
  level = level + 1
  if self.closed then error(format("calling '%s' on bad self (transport is closed)", name), level) end
  if trusted == CHECKED then
    settings = settings or NONE
  elseif getmetatable(settings) ~= CHECKED then
    settings = check_call(name, path, settings, level, sarg, self.compression)
  end
  local compression = settings.compression
  if compression == nil then compression = self.compression end
  local proto = self.protocol
  return settings.timeout, merged_metadata(self.metadata, settings.metadata), compression == "gzip",
    settings.previous_attempts, proto and proto[UNARY_CALLS[name] and "unary" or "stream"], self.json,
    -- Connect GET: a unary call of a method marked NO_SIDE_EFFECTS
    self.get and UNARY_CALLS[name] and settings.no_side_effects or nil
end

-- The most bytes a Connect GET's message may take in its URL's query:
-- past it the call goes as a POST (connect-go's fallback), so servers and
-- proxies with an 8 KiB request line still take it.
local GET_QUERY_MAX = 6144

-- Whether a Connect GET of `request` (bytes) stays within GET_QUERY_MAX:
-- base64url for protobuf, at worst percent-encoded (3 bytes each) for JSON.
local function get_fits(self, request)
  return (self.json and #request * 3 or math.ceil(#request / 3) * 4) <= GET_QUERY_MAX
end

local function raise(call, path)
  local st = call:status()
  call:close()
  st.method = path
  error(error_of(st), 0)
end

-- The next response message of `call`, waiting as needed; nil at the end.
-- Second: true when the call has ended OK and no message follows, and
-- then third, with `with_metadata`, its metadata (call:next); with
-- `close_at_end` the call is closed then.
local function next_message(channel, call, with_metadata, close_at_end)
  while true do
    local m, last, md = call:next(with_metadata, close_at_end)
    if m ~= false then return m, last, md end
    driver.wait(channel, call)
  end
end

local Call = { __name = "protocall.GrpcCall" }
Call.__index = Call

-- Releases stream `c` (a Call below) that ended OK and was read to its
-- end, as its failure does (raise): its connection is free for
-- transport:close() at once, not once a generic for or `<close>` closes c
-- (LuaJIT has neither) or the collector frees it. Its metadata stays for
-- c:metadata(), c:headers() and c:trailers(); c:recv() gives nil again,
-- c:send() drops its message as an ended call's send does.
local function release(c)
  local call = c.call
  c.final = call:metadata()
  c.closed = true
  call:close()
end

-- The iterator of server stream `c`'s messages (a Call below): each
-- message, then nil after a status OK (c released then); any other status
-- raises the error object, CANCELLED at once after c:cancel() (as grpcio's
-- iterator raises after call.cancel()); nil once c is closed.
local function stream_iterator(c)
  local channel, call, path = c.channel, c.call, c.path
  local finished = false
  return function()
    if finished then return nil end
    if c.closed then
      finished = true
      return nil
    end
    if not c.cancelled then
      local msg = next_message(channel, call)
      if msg ~= nil and not c.cancelled then return msg end
      if c.closed then
        finished = true
        return nil
      end
    end
    finished = true
    if call:status().code ~= "OK" then
      c.closed = true
      raise(call, path)
    end
    release(c)
    return nil
  end
end

--- Unary call: `transport:unary(path, request_bytes, settings)` ->
-- `response_bytes` (and `{headers = pairs, trailers = pairs}` when
-- `settings.with_metadata`; with `with_metadata = "present"`, nil instead
-- when the answer carried no header or trailer but gRPC's own). Neither
-- side lists content-type and the grpc-* fields; over Connect neither lists
-- connect-*, and over Connect and gRPC-Web the headers do not list the
-- HTTP fields either (content-length, content-encoding, accept-encoding,
-- transfer-encoding, date, server, vary: as connect-go, they are the
-- protocol's, not metadata; a trailer so named, trailer-date or one of
-- gRPC-Web's trailers message, is listed). `path` is "/pkg.Service/Method"; `settings`
-- (nil or a table) holds `timeout` (seconds, sent as grpc-timeout and
-- enforced here too; a finite timeout <= 0 fails at once, NaN and
-- infinities are refused), `metadata` ({key, value} pairs, after the transport's),
-- `compression` ("gzip", "identity", false for none; nil: the
-- transport's), `with_metadata` (boolean, or "present" as above), `previous_attempts` (an
-- integer in 0..100, sent as grpc-previous-rpc-attempts), `tried` (the
-- table a balancer keeps for a hedged call) and `ring_hash` (the call's
-- place on a ring_hash ring, transport/ring_hash.lua: xds.lua's route
-- sets it; one backend ignores it); another key is refused. Zero
-- or two response messages are INTERNAL. Raises the
-- transport's error object with the canonical `code` on any failure;
-- raises at the caller's line on misuse ("bad argument #3 to 'unary'
-- (timeout: finite number of seconds expected, got nan)"; a bad path is argument #1; a closed transport
-- "calling 'unary' on bad self (transport is closed)"). Under pc.run,
-- waits without stopping other coroutines.
function Transport:unary(path, request, settings, trusted)
  local timeout, md, gzip, previous, proto, json, get = settings_of(self, "unary", path, settings, 2, 3, trusted)
  check_request("unary", request, 2)
  if get and not get_fits(self, request) then get = nil end
  local channel = self.channel
  local call = channel:start(path, timeout, md, gzip, previous, proto, json, get, request) -- sent, send side closed
  local first, last, md_last = next_message(channel, call, settings and settings.with_metadata, true)
  if last then return first, md_last end -- the usual end, seen with the message (closed): no status table
  local n = first and 1 or 0
  if first ~= nil then
    while next_message(channel, call) ~= nil do n = n + 1 end
  end
  local want = settings and settings.with_metadata
  if n == 1 and call:ok() then -- the usual end: no status table
    local meta = want and call:metadata(want == "present") or nil
    call:close()
    return first, meta
  end
  local st = call:status()
  if st.code == "OK" then
    local problem = count_problem(n, "unary call")
    if problem then
      st.code, st.message, st.peer = "INTERNAL", problem, nil
    else
      local meta = want and call:metadata(want == "present") or nil
      call:close()
      return first, meta
    end
  end
  call:close()
  st.method = path
  error(error_of(st), 0)
end

-- A call its task may not wait on at once (a stream, a started call): the
-- scheduler pumps its channel meanwhile (sched.track) so its messages go
-- out, its connection is made and its responses are read while the task
-- does other things; a host driver's channel is kicked (driver.kick: its
-- bytes sent now, its connection made by a task of its own under pc.run)
-- and otherwise moves when its calls wait.
local function track(self)
  if self.background then
    sched.track(self.channel)
  else
    driver.kick(self.channel)
  end
end

--- Server-streaming call: `for bytes in transport:server_stream(path,
-- request_bytes, settings) do ... end`. The iterator returns each response
-- message, then nil after a status OK; any other status raises the error
-- object. `timeout` covers the whole stream. The fourth value is the call
-- (the call object of `stream` below): `call:metadata()` -> {headers =
-- pairs, trailers = pairs} received so far, `call:cancel()` ends it
-- CANCELLED (RST_STREAM CANCEL; the iterator then raises CANCELLED),
-- `call:close()` cancels it if still running and releases it (the
-- iterator then returns nil); the stream's end (status OK, every message
-- read) releases it, its metadata kept (0 bytes buffered), and Lua 5.4's
-- generic `for` closes it when the loop is left early (LuaJIT's does not:
-- close it); `call:buffered()` is the bytes it holds for received,
-- unread data. Flow control bounds that: a stream read slowly holds at
-- most its window (`stream_window`) while the other calls on the
-- connection go on.
function Transport:server_stream(path, request, settings, trusted)
  local timeout, md, gzip, previous, proto, json, get = settings_of(self, "server_stream", path, settings, 2, 3,
    trusted)
  check_request("server_stream", request, 2)
  local channel = self.channel
  local call = channel:start(path, timeout, md, gzip, previous, proto, json, get, request)
  track(self)
  local c = setmetatable({ channel = channel, call = call, path = path }, Call)
  return stream_iterator(c), nil, nil, c
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

local function started(self, name, path, request, settings, result, trusted)
  local timeout, md, gzip, previous, proto, json, get = settings_of(self, name, path, settings, 3, 3, trusted)
  check_request(name, request, 3)
  if get and not get_fits(self, request) then get = nil end
  local call = self.channel:start(path, timeout, md, gzip, previous, proto, json, get, request)
  track(self)
  return setmetatable({ channel = self.channel, call = call, path = path, result = result,
    done = false, count = 0, want_md = settings and settings.with_metadata }, Started)
end

-- A started call's result, kept (h.kept) so that later result() calls
-- give it again.
local function keep(h, ok, v, extra)
  h.kept = { ok, v, extra }
  return ok, v, extra
end

-- The result of a started call that handle:cancel() ended first.
local function cancelled(h)
  return keep(h, false, error_of { code = "CANCELLED", message = "cancelled", method = h.path })
end

-- A started unary call's result: nil while it runs, else true and the
-- response bytes (and with settings.with_metadata {headers=, trailers=}),
-- or false and the error object (as Transport:unary); the same again on
-- every later call.
local function unary_result(h)
  local kept = h.kept
  if kept then return kept[1], kept[2], kept[3] end
  if h.done then return cancelled(h) end
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
  local want = h.want_md
  local meta = want and call:metadata(want == "present") or nil
  call:close()
  if st.code == "OK" then
    local problem = count_problem(h.count, "unary call")
    if not problem then return keep(h, true, h.first, meta) end
    st.code, st.message, st.peer = "INTERNAL", problem, nil
  end
  st.method = h.path
  return keep(h, false, error_of(st))
end

-- A started server stream's result: nil until its first response message
-- or its end, then true and an iterator of the stream (the first message
-- included) and the call, or false and the error object; the same again
-- on every later call.
local function stream_result(h)
  local kept = h.kept
  if kept then return kept[1], kept[2], kept[3] end
  if h.done then return cancelled(h) end
  local call = h.call
  local m = call:next()
  if m == false then return nil end
  h.done = true
  if m == nil then
    local st = call:status()
    if st.code ~= "OK" then
      call:close()
      st.method = h.path
      return keep(h, false, error_of(st))
    end
  end
  local c = setmetatable({ channel = h.channel, call = call, path = h.path }, Call)
  local rest, first = stream_iterator(c), m
  return keep(h, true, function()
    if first ~= nil and not c.cancelled and not c.closed then
      local r = first
      first = nil
      return r
    end
    return rest()
  end, c)
end

--- `handle = transport:start_unary(path, request_bytes, settings)`: a
-- unary call started without waiting for it (arguments and misuse as
-- `unary`); `handle:result()` -> nil while it runs, else true and the
-- response bytes (and the metadata, as `unary` with `with_metadata`), or
-- false and the error object, the same again on every later call;
-- `handle:cancel()` (a call it ends before its result gives CANCELLED).
-- Several started calls share the connection, in flight together;
-- `transport:wait` waits for them.
function Transport:start_unary(path, request, settings, trusted)
  local h = started(self, "start_unary", path, request, settings, unary_result, trusted)
  return h -- not a tail call: misuse raises at the caller's line
end

--- `handle = transport:start_server_stream(path, request_bytes,
-- settings)`: a server stream started without waiting; `handle:result()`
-- -> nil until its first response message (or its end), then true and an
-- iterator of the whole stream (as `server_stream`'s) and the call, or
-- false and the error object, the same again on every later call;
-- `handle:cancel()`.
function Transport:start_server_stream(path, request, settings, trusted)
  local h = started(self, "start_server_stream", path, request, settings, stream_result, trusted)
  return h
end

--- `transport:wait(handles, seconds)`: waits until one of the started
-- calls in the list `handles` may have moved on, at most `seconds` (sleeps
-- when the list is empty). Under pc.run the other tasks run meanwhile.
-- Under nginx, once the request's client went away (`resty.abort`), the
-- handles' calls end CANCELLED instead (RST_STREAM CANCEL at once).
-- Raises for a `handles` that is not a list of handles or `seconds` not a
-- number.
function Transport.wait(_, handles, seconds)
  if type(handles) ~= "table" then argerror("wait", "table expected, got " .. type(handles), 2) end
  if type(seconds) ~= "number" or seconds ~= seconds then
    argerror("wait", "number expected, got " .. (seconds ~= seconds and "nan" or type(seconds)), 2, 2)
  end
  local chans, seen = {}, {}
  for i = 1, #handles do
    local h = handles[i]
    if type(h) ~= "table" then
      argerror("wait", format("handles[%d]: a started call expected, got %s", i, type(h)), 2)
    end
    local ch = h.channel
    if ch and not seen[ch] then
      seen[ch] = true
      chans[#chans + 1] = ch
    end
  end
  if seconds < 0 then seconds = 0 end
  -- the caller's client went away (resty.abort; sched.abort: the client
  -- of a forwarded call): its started calls (hedges) end CANCELLED at
  -- once, as driver.wait cancels a waited call
  if #chans > 0 and (driver.aborted(chans[1]) or (sched.naborted > 0 and sched.aborted())) then
    local any = false
    for i = 1, #handles do
      local call = not handles[i].done and handles[i].call
      if call and not call:status() then
        call:cancel()
        any = true
      end
    end
    if any then
      for i = 1, #chans do driver.flush(chans[i]) end
      return
    end
  end
  if #chans == 0 then
    if seconds > 0 then sched.sleep(seconds) end
    return
  end
  driver.pump(chans, seconds)
end

-- Request bytes a sender may have queued beyond what HTTP/2 took: past
-- this, call:send waits for the peer's window (flow control).
local SEND_QUEUE = 64 * 1024

-- Waits until `done()` or the call ended (or another task's recv saw its
-- end and released it: self.final).
local function wait_until(self, done)
  local channel, call = self.channel, self.call
  while not self.final and not done() and not call:status() do driver.wait(channel, call) end
end

local function raise_if_failed(self)
  if self.final then return end
  local st = self.call:status()
  if st and st.code ~= "OK" then
    st.method = self.path
    error(error_of(st), 0)
  end
end

-- Over HTTP/1.1 a stream's response is read once its request ended (the
-- sending side closed): reading before that would wait forever (connect-go's rule:
-- bidirectional streams need HTTP/2). Cancels the call and raises.
local function half_duplex(self)
  self.call:cancel()
  error(error_of { code = "UNIMPLEMENTED", method = self.path, ["local"] = true,
    message = "bidi streams require HTTP/2 (over HTTP/1.1 the response comes after close_send: "
      .. "read the responses after it)" }, 0)
end

--- `call:send(bytes)`: queues one request message, waiting while the
-- peer's flow-control window is closed (more than 64 KiB queued), so a
-- peer that stops reading holds the sender, not memory; the deadline still
-- applies. Raises the call's error once it has ended other than OK, a
-- string after `close_send`; once the call ended OK the message is
-- dropped (the call is over: `recv` gives its end).
function Call:send(bytes)
  if type(bytes) ~= "string" then
    error("bad argument #1 to 'send' (string expected, got " .. type(bytes) .. ")", 2)
  end
  if self.send_closed then error("send: the sending side is closed (close_send)", 2) end
  if self.final then return end
  local call = self.call
  if not call:send(bytes) then
    raise_if_failed(self)
    return
  end
  driver.flush(self.channel)
  wait_until(self, function() return call:unsent() <= SEND_QUEUE end)
  raise_if_failed(self)
end

--- `call:close_send()`: no more request messages (END_STREAM). Idempotent.
function Call:close_send()
  if self.send_closed then return end
  self.send_closed = true
  if self.final then return end
  self.call:close_send()
  driver.flush(self.channel)
end

--- `call:recv()` -> the next response message (bytes), or nil after the
-- last one once the call ended OK (the call is released then, as by
-- `close`, its metadata kept: see `stream`); raises the call's error
-- otherwise. Under pc.run, one task may read while another sends.
function Call:recv()
  if self.final then return nil end
  if self.http1 and not self.send_closed then half_duplex(self) end
  local call = self.call
  while true do
    local m = call:next()
    if m then return m end
    if m == nil then
      raise_if_failed(self)
      release(self)
      return nil
    end
    driver.wait(self.channel, call)
    if self.final then return nil end -- another task's recv saw the end
  end
end

--- `call:close_and_recv()` -> the one response message of a
-- client-streaming call: closes the sending side and waits for the end;
-- zero or two messages are INTERNAL.
function Call:close_and_recv()
  self:close_send()
  local first = self:recv()
  local n = first and 1 or 0
  if first ~= nil then
    while self:recv() ~= nil do n = n + 1 end
  end
  local problem = count_problem(n, "call")
  if problem then error(error_of { code = "INTERNAL", method = self.path, message = problem }, 0) end
  return first
end

--- `call:headers()` -> the response headers ({key, value} pairs), waiting
-- for them (an empty list when the call ended without any).
function Call:headers()
  local final = self.final
  if final then return final.headers end
  if self.http1 and not self.send_closed then half_duplex(self) end
  local call = self.call
  wait_until(self, function() return call:headers_done() end)
  return self:metadata().headers
end

--- `call:trailers()` -> the trailers ({key, value} pairs), waiting for the
-- end of the call (read the responses first: unread ones hold it).
function Call:trailers()
  local final = self.final
  if final then return final.trailers end
  wait_until(self, function() return false end)
  return self:metadata().trailers
end

--- `call:cancel()`: ends the call CANCELLED (RST_STREAM CANCEL: the server
-- sees CANCELLED); later `recv` and `send` raise CANCELLED. Nothing once
-- the call has ended or is closed.
function Call:cancel()
  if self.closed then return end
  local call = self.call
  if not call:status() then self.cancelled = true end
  call:cancel()
  driver.flush(self.channel)
  driver.notify(self.channel) -- a task waiting on it sees the end now
end

--- `call:close()`: cancels the call if still running and releases it.
function Call:close()
  self.closed = true
  self.call:close()
end
Call.__close = Call.close

--- `call:metadata()` -> {headers = pairs, trailers = pairs} received so
-- far; `call:buffered()` -> bytes held for received, unread responses.
function Call:metadata() return self.final or self.call:metadata() end
function Call:buffered() return self.final and 0 or self.call:buffered() end

--- Streaming call of any shape: `local call = transport:stream(path,
-- settings)` (settings as `unary`) -> a call object with `send`,
-- `close_send`, `recv`, `close_and_recv`, `headers`, `trailers`, `cancel`
-- and `close`. The deadline (`timeout`) covers the whole call. Close it
-- when done with it before its end (`close`, or `<close>` under Lua 5.4):
-- one dropped unclosed keeps its HTTP/2 stream, a server stream slot,
-- until its deadline or the garbage collector's finalizer cancels it.
-- Its end (status OK: `recv` returned nil, `close_and_recv` returned)
-- releases it: `transport:close()` then closes its connection at once on
-- both runtimes; `headers`, `trailers` and `metadata` answer from what
-- it received, `buffered` is 0, `recv` gives nil again, `send` drops its
-- message (a string error after `close_send`, as before the end), and
-- `close_send`, `cancel` and `close` do nothing.
function Transport:stream(path, settings, trusted)
  local call = self.channel:start(path, settings_of(self, "stream", path, settings, 2, 2, trusted))
  track(self)
  return setmetatable({ channel = self.channel, call = call, path = path, http1 = self.http1 }, Call)
end

--- `transport:next_attempt()` -> seconds (a number > 0) until the
-- reconnection backoff (`reconnect`) lets the transport make its next
-- connection attempt, or nil when a call may connect now (no attempt
-- failed since the last connection was made, or the backoff is over). The
-- figure of the "(reconnection backoff: the next attempt in S s; ...)"
-- hint of a call failed meanwhile, for a caller that schedules its next
-- try by it. Raises "calling 'next_attempt' on bad self (transport is
-- closed)" on a closed transport, and "calling 'next_attempt' on bad self
-- (protocall.GrpcTransport expected, got nil)" when called with a dot.
function Transport:next_attempt()
  if getmetatable(self) ~= Transport then
    error(format("calling 'next_attempt' on bad self (protocall.GrpcTransport expected, got %s)", type(self)), 2)
  end
  if self.closed then error("calling 'next_attempt' on bad self (transport is closed)", 2) end
  return self.channel:next_attempt()
end

--- `transport:close()`: closes the connection (calls still being read keep
-- it until they end).
function Transport:close()
  self.closed = true
  self.channel:close()
  driver.close(self.channel)
end

local MAX_INT31 = 2 ^ 31 - 1

local function size_option(opts, key, low)
  local v = opts[key]
  if v ~= nil and (v ~= floor(v) or v < low or v > MAX_INT31) then
    error("pc.grpc: option '" .. key .. "' must be an integer in " .. low .. "..2^31-1", 3)
  end
  return v
end

local LB_POLICIES = { pick_first = true, round_robin = true, least_request = true }

--- `pc.grpc(target, opts)` -> transport. `target` is "http://host:port",
-- "host:port" or "dns:///host:port" (HTTP/2 without TLS, prior
-- knowledge) or "https://host[:port]" (TLS, verification on, ALPN h2);
-- several backends are a list of such addresses ({"127.0.0.1:5001",
-- "127.0.0.1:5002"}), "ipv4:127.0.0.1:5001,127.0.0.1:5002" (or ipv6:
-- with "[::1]:5001"), or a dns:/// name: every address it resolves to
-- is a backend (one connection each, the name as :authority), resolved
-- without blocking (c-ares; transport/dns.lua) and again when its
-- records' TTL passed or a backend's connection failed or it sent GOAWAY,
-- at most once per `dns_min_interval` (seconds, default 30; a call's
-- timeout bounds its wait for the first answer); "dns:///_grpc._tcp.name"
-- (a name beginning with "_", no port) resolves its SRV records, whose
-- weights `round_robin` (its default policy) honours;
-- "dns://IP:PORT/name:port" or the option `dns_server` = "IP:PORT" asks
-- that DNS server instead of the system's. With a `driver` a dns:/// name
-- is resolved by getaddrinfo, which blocks, when pc.grpc is called: its
-- addresses are the backends when there are several, else the name goes
-- to `driver.connect` as it is (under OpenResty, nginx's `resolver`
-- resolves it); SRV names and a DNS server (dns://IP:PORT/, `dns_server`)
-- are refused.
-- `load_balancing` picks among them (doc/fleet.md "Load balancing",
-- transport/balancer.lua).
-- "xds:///name" takes routes, clusters and endpoints from the xDS
-- management server of the bootstrap (gRFCs A27, A28; doc/fleet.md "xDS",
-- transport/xds.lua): the option `xds_bootstrap` (its JSON text), else the
-- file env GRPC_XDS_BOOTSTRAP names, else env GRPC_XDS_BOOTSTRAP_CONFIG;
-- every call then goes by its route to a cluster's round_robin balancer,
-- and transport:backends() also gives each endpoint's `cluster` and EDS
-- `version` and the list's `versions` (LDS, RDS, CDS, EDS) and `nacked`.
-- A bad bootstrap raises naming its JSON path; `driver` is refused.
-- A Unix-domain socket (h2c,
-- :authority "localhost" or `server_name`) is "unix:/path" (also
-- "unix:relative" and "unix:///absolute/path") or "unix-abstract:name"
-- (Linux's abstract namespace); a path longer than sun_path holds (107
-- bytes) is refused.
-- opts: `ca_file` (PEM bundle; default the system store), `cert_file` and
-- `key_file` (PEM client certificate and key, mutual TLS; one needs the other;
-- a file that is no PEM fails the connection attempt UNAVAILABLE with why,
-- and the attempt after the reconnection backoff reads the files again;
-- protocall_tls.so missing beside protocall.so fails every call INTERNAL
-- with why, "TLS is not available: PATH: ...", at once and without a
-- connection attempt: no retry or reconnection mends it),
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
-- max(min_connect_timeout, the backoff) has failed, and so has one whose
-- server sent no HTTP/2 SETTINGS frame within it (see "Ready is
-- connected" below); a call on a failed
-- attempt fails UNAVAILABLE ("connect to HOST:PORT: why") and a call
-- needing a connection meanwhile fails UNAVAILABLE at once, as gRPC fails
-- a call that is not wait-for-ready, so a retry policy's own backoff
-- paces the attempts; such an error has `unsent` = true: nothing of the
-- call reached a server; a call whose connection failed or was lost under
-- it, not a status a server sent, has `lost` = true; a status the server
-- sent, grpc-status or Connect's error, has `peer` = true), `wait_for_ready` (true: gRPC's wait-for-ready,
-- for every call of the transport: a call waits through failed
-- connection attempts and their backoff until a connection is ready,
-- however far its deadline, failing only DEADLINE_EXCEEDED at it,
-- "deadline exceeded waiting for a connection (the last attempt: connect
-- to HOST:PORT: why)", or with an attempt under way "deadline exceeded
-- waiting for a connection (connecting to HOST:PORT; the last attempt:
-- why)" (any call whose deadline comes while its connection is being made
-- says so; one connected without the server's SETTINGS yet says "deadline
-- exceeded (connected to HOST:PORT, no HTTP/2 SETTINGS from the server
-- yet)"), so a call without a timeout waits for as long as
-- no connection is made (give such calls a deadline); `transport:close()`
-- ends the waiting calls UNAVAILABLE "connect to HOST:PORT: the channel is
-- closed". A waiting stream's `send` waits while more than 64 KiB wait
-- with it; a request message over 4 MiB fails the waiting call UNAVAILABLE
-- (more than it keeps to send). Ready is connected (and TLS done): a call
-- that lost a connection it was sent on, one the peer closed before
-- answering included, still fails UNAVAILABLE. Calls are written to a
-- ready connection at once, before the server's first SETTINGS frame;
-- a server that sends none within the attempt's bound (connect_timeout,
-- else max(min_connect_timeout, the backoff): a peer that never speaks
-- HTTP/2) fails the attempt (backoff, a balancer's backend marked failed)
-- and its calls UNAVAILABLE "connect to HOST:PORT: no HTTP/2 SETTINGS
-- from the server within S s" with `lost` = true and not `unsent`: they
-- were written and may have run, so none is sent again, a wait_for_ready
-- call included (one whose headers, past 8 KiB, waited for the SETTINGS
-- was not written: `unsent` too; a connection then carrying no call
-- closes without counting).
-- With a balancer (several
-- backends, any dns:/// name without a driver, even one resolving to a
-- single address, an xds:/// name's clusters) a call whose attempt failed
-- to connect goes on to the next backend as without wait_for_ready; once
-- every backend it tried failed so (the call never left this client) it
-- sleeps until the soonest reconnection backoff of a backend allows an
-- attempt (transport:next_attempt()), tries again, and so on until it is
-- sent or its deadline passes: the same DEADLINE_EXCEEDED "deadline
-- exceeded waiting for a connection (the last attempt: connect to
-- HOST:PORT: why)", and UNAVAILABLE "connect to HOST:PORT: the channel is
-- closed" after transport:close(); a dns:/// name that does not resolve
-- (or to no address) is asked again, no sooner than dns_min_interval
-- after the last answer, until the deadline ("deadline exceeded while
-- resolving NAME (the last resolution: resolve NAME: why)"), where a call
-- without wait_for_ready fails UNAVAILABLE with the resolver's reason at
-- once. Streams and started calls (hedging) wait alike; a client or
-- bidirectional stream keeps its request messages (4 MiB at most, past
-- which it stays on its backend) to send them again on the next backend.
-- An xds:/// target's waits for its resources are unchanged (a call waits
-- within its deadline for the first configuration; a cluster with no
-- endpoint fails UNAVAILABLE at once)),
-- `insecure` (true: TLS WITHOUT verifying the server, no CA and no host
-- name check, so anyone on the path can read and change the calls; for
-- a test server with a self-signed certificate only), `connect_timeout`
-- (seconds a new connection may take to connect and finish TLS; past
-- it the calls waiting on it fail UNAVAILABLE "connect to HOST:PORT:
-- timed out after S s", or with wait_for_ready wait for the next
-- attempt; connected by then, its server's first HTTP/2 SETTINGS must
-- come within the same S s of the attempt's start, else its calls fail
-- UNAVAILABLE lost "connect to HOST:PORT: no HTTP/2 SETTINGS from the
-- server within S s", sent and not sent again; default none but
-- max(min_connect_timeout, the backoff) and the calls' deadlines),
-- `driver` (a host I/O driver, close to an OpenResty cosocket, instead
-- of the built-in sockets: a plain byte pipe; TLS for an https target
-- still runs in protocall, over the driver's bytes, with the same options,
-- verification, ALPN h2, client certificate and session resumption as
-- without a driver, so the driver carries ciphertext only:
-- `driver.connect(host, port, o)` (for a unix: target host "unix:/path"
-- and port nil, as a cosocket's connect) -> a socket object, or nil and
-- why, with `o` = {tls = false, timeout = seconds the attempt may take};
-- `sock:send(bytes)` -> bytes sent (all of them, or a count to retry
-- the rest later) or nil, err; `sock:receiveany(max)` -> at most `max`
-- bytes, or nil, "timeout" (nothing within the read timeout: not an
-- error), nil, "closed" or nil, err; `sock:settimeouts(connect, send,
-- read)` (optional; SECONDS, not milliseconds as in nginx: a read waits
-- at most until the channel's next timer, 1 s at most);
-- `sock:close()` (a socket's `sslhandshake`, if any, is not called);
-- optional `driver.sleep(seconds)` (how a call outside any pc.spawn
-- task pauses between rounds; default the host's sleep) and
-- `driver.wait(seconds, token)` with `driver.wake(tokens, n, all)` (a
-- call with nothing to do waits until some call's driver method
-- returned, at most `seconds`; `token` is the wake token of the call it
-- waits for (nil: any), and wake gets in tokens[1..n] those of the calls
-- something happened to, `all` true when every waiter must look, so a
-- driver may wake those waiters and one other, to take the connection's
-- role just freed, instead of all of them: ngx.semaphore in
-- lua/protocall/resty.lua; a driver ignoring the arguments wakes all;
-- wait may return true when a wake, not the time, ended it: the waiter
-- then looks at its call before the channel's timers, which it runs at
-- its next wait).
-- The methods may yield the running coroutine (pc.sleep
-- inside a pc.spawn task, a cosocket's own yield in its host), so tasks
-- interleave; one call at a time reads and one writes a socket. A driver
-- that fails, raises, or reports an error or "closed" ends the calls on
-- that connection UNAVAILABLE ("connect to HOST:PORT: why", "send to
-- ...", "read from ...", "TLS handshake with ..."); everything else (one
-- connection shared, GOAWAY, refused streams, deadlines, reconnection
-- backoff, keepalive, connect_timeout) is the same as with the built-in
-- driver. A driver must honour its timeouts: deadlines are checked
-- between its calls), `load_balancing` ("pick_first", the default,
-- "round_robin" or "least_request": two backends drawn at random, the one
-- with fewer calls in flight taking the call, gRFC A48), `protocol` ("grpc", the default; "grpc-web": gRPC-Web,
-- its status from the trailers message; "grpc-web-text": the same in
-- base64 both ways; "connect": the Connect protocol, unary calls as a bare
-- POST body with Connect-Timeout-Ms and the error JSON, streams in
-- Connect's envelopes; every call policy, metadata, gzip and error details
-- work the same), `http_version` ("2", the default, or "1.1": gRPC-Web and
-- Connect over HTTP/1.1, TLS with ALPN http/1.1; one call per connection
-- at a time, so concurrent calls open more connections, each kept alive
-- for the next call; unary and server streaming, a client stream sent as
-- it goes (a chunked request body, its head written when the call starts,
-- each send a chunk once the connection takes it, a send waiting while the connection's write buffer is full,
-- the response read after close_send); a bidirectional stream
-- raises UNIMPLEMENTED "bidi streams require HTTP/2" when read before
-- close_send, as connect-go refuses them; responses not read are held
-- in memory, at most 16 MiB a connection, HTTP/1.1 having no flow
-- control; a cancelled or timed-out call closes its connection), `codec` ("proto", the default, or "json"
-- with gRPC-Web and Connect: the requests given and responses returned
-- are then JSON text; pc.client stubs over it send pc.to_json's text and
-- read responses with pc.from_json, members naming no field skipped),
-- `get` (true, with protocol "connect": unary calls of methods marked
-- `option idempotency_level = NO_SIDE_EFFECTS` go as Connect's GET, the
-- request in the URL's query, which caches and CDNs may keep; other calls
-- as before). Raises
-- on a bad target or option, bad metadata, a `ca_file` that cannot be
-- read, or a TLS option (`ca_file`, `cert_file`, `key_file`, `insecure`)
-- given with a target that has no TLS backend (host:port, http://, dns:,
-- ipv4:/ipv6:, unix:: all h2c; give https://host:port). All calls to one
-- backend share one connection (a second one opens when the server takes
-- no more streams on it or sends GOAWAY).
function M.grpc(target, opts)
  if type(target) ~= "string" and type(target) ~= "table" then
    error("bad argument #1 to 'grpc' (string or list of addresses expected, got " .. type(target) .. ")", 2)
  end
  local xds_name = type(target) == "string" and target:match("^xds:(.*)$")
  local places, dns
  if xds_name then
    local name = xds_name:match("^///([^/?#%c ]+)$")
    if name == nil then
      error("pc.grpc: target '" .. target:gsub("%c", "?") .. "': xds:///name expected (no authority)", 2)
    end
    xds_name, places = name, {}
  else
    places, dns = target_places(target)
  end
  if not places then
    error("pc.grpc: target '" .. (type(target) == "string" and target:gsub("%c", "?") or "{...}") .. "': "
      .. dns, 2)
  end
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
  if (opts.cert_file == nil) ~= (opts.key_file == nil) then
    error("pc.grpc: cert_file and key_file go together", 2) -- as pc.listen's
  end
  if not xds_name then
    -- TLS options for a target with no TLS backend would be ignored: the
    -- calls would go in the clear to a server expecting TLS (or to one
    -- the caller meant to verify)
    local tls = false
    for _, p in ipairs(places) do tls = tls or p.tls end
    for _, key in ipairs { "ca_file", "cert_file", "key_file", "insecure" } do
      if opts[key] and not tls then
        error("pc.grpc: option '" .. key .. "' is for TLS, and target '"
          .. (type(target) == "string" and target:gsub("%c", "?") or "{...}")
          .. "' has no TLS backend (h2c): give https://host:port", 2)
      end
    end
  end
  if opts.protocol ~= nil and not PROTOCOLS[opts.protocol] then
    error("pc.grpc: option 'protocol' must be \"grpc\", \"grpc-web\", \"grpc-web-text\" or \"connect\", got \""
      .. opts.protocol:gsub("%c", "?") .. "\"", 2)
  end
  if opts.codec ~= nil and opts.codec ~= "proto" and opts.codec ~= "json" then
    error("pc.grpc: option 'codec' must be \"proto\" or \"json\", got \"" .. opts.codec:gsub("%c", "?")
      .. "\"", 2)
  end
  if opts.codec == "json" and (opts.protocol or "grpc") == "grpc" then
    error("pc.grpc: option 'codec' \"json\" needs protocol \"grpc-web\", \"grpc-web-text\" or \"connect\"", 2)
  end
  local http1 = opts.http_version == "1.1" or nil
  if opts.http_version ~= nil and not http1 and opts.http_version ~= "2" then
    error("pc.grpc: option 'http_version' must be \"2\" or \"1.1\", got \""
      .. opts.http_version:gsub("%c", "?") .. "\"", 2)
  end
  if http1 and (opts.protocol or "grpc") == "grpc" then
    error("pc.grpc: option 'http_version' \"1.1\" needs protocol \"grpc-web\", \"grpc-web-text\" or \"connect\" "
      .. "(gRPC needs HTTP/2)", 2)
  end
  if opts.get and opts.protocol ~= "connect" then
    error("pc.grpc: option 'get' needs protocol \"connect\" (Connect's GET)", 2)
  end
  local bad_compression = compression_problem(opts.compression)
  if bad_compression then error(bad_compression, 2) end
  if opts.load_balancing ~= nil and not LB_POLICIES[opts.load_balancing] then
    error("pc.grpc: option 'load_balancing' must be \"pick_first\", \"round_robin\" or \"least_request\", got \""
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
  for _, key in pairs { "keepalive_time", "keepalive_timeout", "dns_min_interval" } do
    local bad = opts[key] ~= nil and seconds_problem("option '" .. key .. "'", opts[key], nil, false, 1e9)
    if bad then error("pc.grpc: " .. bad, 2) end
  end
  local host_driver = opts.driver
  if host_driver ~= nil and type(host_driver.connect) ~= "function" then
    error("pc.grpc: option 'driver': a table with a function 'connect' expected", 2)
  end
  local backoff = reconnect_option(opts.reconnect)
  local bad_ct = opts.connect_timeout ~= nil and seconds_problem("option 'connect_timeout'", opts.connect_timeout)
  if bad_ct then error("pc.grpc: " .. bad_ct, 2) end
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
  -- One backend: its channel and transport; `alone`: the target's only
  -- one. wait_for_ready: a lone backend's calls wait through failed
  -- connection attempts until their deadline (gRPC's wait-for-ready); a
  -- balancer's backend's wait out its reconnection backoff only, and fail
  -- with the attempt, so the balancer takes them on to another backend
  -- (and waits itself once every backend failed, balancer.lua).
  local function make(where, alone)
    local channel = core.grpc_channel {
      host = where.host, port = where.port, tls = where.tls,
      unix_path = where.unix, unix_abstract = where.abstract,
      ca_file = opts.ca_file, cert_file = opts.cert_file, key_file = opts.key_file,
      server_name = opts.server_name or (dns and dns.name), user_agent = opts.user_agent,
      insecure = opts.insecure, connect_timeout = opts.connect_timeout,
      max_receive = sizes.max_receive, max_header_list = sizes.max_header_list,
      stream_window = sizes.stream_window, connection_window = sizes.connection_window,
      keepalive_time = opts.keepalive_time, keepalive_timeout = opts.keepalive_timeout,
      backoff = backoff, host_io = host_driver ~= nil, wait_for_ready = opts.wait_for_ready and (alone or "backoff"),
      http1 = http1,
    }
    if host_driver then driver.attach(channel, host_driver, where, opts) end
    local name = where.unix and ((where.abstract and "unix-abstract:" or "unix:") .. where.unix)
      or where.host .. ":" .. where.port
    return setmetatable({
      channel = channel, target = name, compression = opts.compression,
      metadata = opts.metadata, protocol = opts.protocol and PROTOCOLS[opts.protocol],
      json = opts.codec == "json" or nil, get = opts.get or nil, http1 = http1,
      background = not host_driver, -- see track
    }, Transport)
  end
  if xds_name then
    if host_driver then error("pc.grpc: target '" .. target .. "': xds: needs the built-in driver", 2) end
    local bootstrap, why = xds_client.bootstrap(opts.xds_bootstrap)
    if not bootstrap then error("pc.grpc: target '" .. target .. "': " .. why, 2) end
    local t
    t, why = xds.new(xds_name, make, M.grpc, bootstrap, opts.wait_for_ready)
    if not t then error("pc.grpc: target '" .. target .. "': " .. why, 2) end
    return t
  end
  local resolver
  if dns and not host_driver then
    local why
    resolver, why = dns_resolver.new(dns, opts.dns_server, opts.dns_min_interval)
    if not resolver then error("pc.grpc: target '" .. target .. "': " .. why, 2) end
    places = {}
  elseif dns then -- a host driver owns the sockets: getaddrinfo
    if opts.dns_server ~= nil or dns.dns_server ~= nil then
      error("pc.grpc: target '" .. target .. "': a DNS server (dns://IP:PORT/ or dns_server) needs the "
        .. "built-in driver (a host driver's names are resolved by getaddrinfo or by the host)", 2)
    end
    local found = targets.resolve_now(dns)
    if found == nil or #found < 2 then
      if dns.port == nil then error("pc.grpc: target '" .. target .. "': SRV needs the built-in driver", 2) end
    else
      places, resolver = found, dns_resolver.blocking(dns, found)
    end
  end
  if #places == 1 and not resolver then
    local t = make(places[1], true)
    if type(target) == "string" then t.target = target end
    return t
  end
  local policy = opts.load_balancing or (dns and dns.port == nil and "round_robin" or "pick_first")
  local b = balancer.new(resolver and {} or places, make, policy, resolver, target, opts.wait_for_ready,
    host_driver and host_driver.sleep)
  b.json = opts.codec == "json" or nil -- what pc.client's stubs read (rpc/client.lua)
  return b
end

return M
