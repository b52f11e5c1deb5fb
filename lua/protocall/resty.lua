--- OpenResty / nginx (lua-nginx-module) as the host of pc.grpc: a host I/O
-- driver on ngx.socket.tcp cosockets, ngx.sleep and ngx.now, so gRPC calls
-- made in rewrite_by_lua*, access_by_lua*, content_by_lua* and ngx.timer
-- callbacks yield to nginx instead of blocking the worker
-- (doc/openresty.md; examples/nginx/ is a configuration using it).
--
-- A cosocket belongs to the request (or timer) that created it, while an
-- HTTP/2 connection is shared by every call of the worker. So by default
-- each connection is owned by an ngx.timer: its two light threads, one
-- reading ahead and one writing, move the bytes, and the requests hand
-- them bytes and take what was read through queues and ngx.semaphore
-- (the socket object this driver's `connect` gives pc.grpc is that
-- hand-over, not the cosocket itself).
-- `per_request = true` instead gives a transport whose connection is a
-- cosocket of the calling request (one connection per request: open it,
-- call, close it).
--
-- Usage (init_by_lua* loads the schemas and builds the clients once, in the
-- master before the fork; every worker then has its own copy and opens its
-- own connection at its first call):
--   local pc, resty = require "protocall", require "protocall.resty"
--   pc.load_file("route.proto")
--   client = resty.client(pc, "demo.Router", {
--     transport = resty.grpc(pc, "127.0.0.1:50051"), retry = pc.Retry{}, timeout = 5 })
--   -- content_by_lua_block: ngx.say(client:Measure(route).length)
local ngx = rawget(_G, "ngx")
if type(ngx) ~= "table" or type(ngx.socket) ~= "table" then
  error("protocall.resty: needs nginx with lua-nginx-module (OpenResty): there is no global 'ngx' here", 2)
end
local semaphore = require "ngx.semaphore"
local fifo = require "protocall.transport.fifo"
local pool = require "protocall.resty.pool"

local setmetatable, type, error, pairs, ipairs, tostring, pcall, next = setmetatable, type, error, pairs, ipairs,
  tostring, pcall, next
local floor = math.floor
local newproxy, getmetatable = rawget(_G, "newproxy"), getmetatable
local tcp, ngx_sleep, ngx_now, update_time, get_phase = ngx.socket.tcp, ngx.sleep, ngx.now,
  ngx.update_time, ngx.get_phase
local timer_at, spawn_thread, kill_thread = ngx.timer.at, ngx.thread.spawn, ngx.thread.kill
local worker_exiting = ngx.worker.exiting

local M = {}

-- The phases where cosockets, ngx.sleep and ngx.semaphore waits work.
local CALL_PHASES = {
  rewrite = true, access = true, content = true, timer = true,
  ssl_cert = true, ssl_session_fetch = true, ssl_client_hello = true,
}

local WHERE = "call from rewrite_by_lua*, access_by_lua*, content_by_lua* or an ngx.timer.at callback"
local HINTS = {
  init = "load schemas and build clients there; " .. WHERE,
}

--- `resty.check_phase()`: raises, unless the running nginx phase may make
-- gRPC calls (rewrite, access, content, timer and the ssl_* handlers with
-- cosockets), the error "protocall.resty: gRPC calls cannot run in the
-- log phase (cosockets are disabled there; use ngx.timer.at ...)" as a
-- pc.Error FAILED_PRECONDITION with `local = true` (never retried) when
-- `pc` is given, else as a string. Every call through `resty.grpc`
-- checks this first.
function M.check_phase(pc)
  local phase = get_phase()
  if CALL_PHASES[phase] then return end
  local msg = "protocall.resty: gRPC calls cannot run in the " .. tostring(phase) ..
    " phase (cosockets are disabled there; " .. (HINTS[phase] or ("use ngx.timer.at, or " .. WHERE)) .. ")"
  if pc then error(pc.Error { code = "FAILED_PRECONDITION", message = msg, ["local"] = true }, 0) end
  error(msg, 2)
end

--- `resty.now()` -> seconds: nginx's clock (ngx.now after
-- ngx.update_time, so a call sees the time of its own, not of the event
-- loop's last wake-up). The clock of `resty.client`'s callables.
function M.now()
  update_time()
  return ngx_now()
end

-- nginx's timers count whole milliseconds: ngx.sleep and a semaphore's
-- wait truncate, so a wait shorter than 1 ms would not wait (ngx.sleep(0)
-- only yields, warning "ngx.sleep(0) called without delayed events patch"
-- each time; the wait returns at once) and its caller, waiting for a
-- moment that has not come, would spin: a positive wait is at least 1 ms.
local MS = 0.001
local function at_least_ms(seconds)
  if seconds > 0 and seconds < MS then return MS end
  return seconds > 0 and seconds or 0
end

--- `resty.sleep(seconds)`: ngx.sleep, which yields the request to nginx
-- (the worker goes on with other requests); nginx counts whole
-- milliseconds, so a positive `seconds` under 0.001 sleeps 1 ms, and 0
-- (or less) only yields. The sleep of retry backoff in `resty.client`, of
-- the channel between rounds and of a balancer's wait_for_ready call
-- waiting for a backend.
function M.sleep(seconds)
  ngx_sleep(at_least_ms(seconds))
end

local function ms(seconds)
  local v = floor(seconds * 1000 + 0.5)
  return v > 0 and v or 1
end

-- Wakes every light thread waiting on semaphore `s` (none: nothing is
-- kept for later, a waiter always looks at the state before it waits).
local function wake(s)
  local n = s:count()
  if n < 0 then s:post(-n) end
end

---------------------------------------------------------------------------
-- A connection owned by an ngx.timer

local READ_MAX = 65536    -- bytes one receiveany asks for
local IN_CAP = 1048576    -- bytes read ahead before the reader waits for them to be taken
local OUT_CAP = 1048576   -- bytes queued for sending before a sender waits
local POLL = 1            -- seconds the owner's threads wait before looking at the flags again
local SEND_TIMEOUT = 60   -- seconds one send of the owner may take
-- Seconds one read of the owner waits: nginx logs every read timeout, and
-- the reader needs none (the writer, which wakes every POLL, kills it
-- when the connection closes or the worker exits).
local IDLE_READ = 3600

local told_lost -- defined below

-- hooks[method](hooks, arg) called some 60 stack slots above the caller:
-- how the owner's threads call the channel's hooks. Those threads live as
-- long as the connection and wait (ngx.semaphore's wait, a cosocket read)
-- in frames right above their own; with LuaJIT's JIT on, a slot that a
-- compiled trace leaves unwritten (dead to it) keeps what an earlier call
-- put there, and the collector marks every slot of a suspended thread up
-- to the top of its waiting frame. A hook called there leaves its channel
-- in such a slot (the thread's wait pins the channel of a transport
-- dropped unclosed, whose socket then is never collected and whose owner
-- never ends); called this high, the channel stays above every wait's top.
local function above(method, hooks, arg)
  -- luacheck: push ignore 211
  local _01, _02, _03, _04, _05, _06, _07, _08, _09, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20
  local _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, _33, _34, _35, _36, _37, _38, _39, _40
  local _41, _42, _43, _44, _45, _46, _47, _48, _49, _50, _51, _52, _53, _54, _55, _56, _57, _58, _59, _60
  -- luacheck: pop
  local a, b = hooks[method](hooks, arg) -- not a tail call: that would reuse this frame's base
  return a, b
end

-- The owner's reading thread: reads ahead into c.inq (a protocall.fifo:
-- explicit head and tail, as read-ahead leaves holes at the front) until
-- closing.
local function owner_reader(c)
  local sock = c.sock
  while not c.closing do
    if worker_exiting() then
      c.err = c.err or "nginx worker is exiting"
      break
    end
    local hooks = c.hooks
    if not hooks and c.inq.bytes >= IN_CAP then
      c.drained:wait(POLL)
    else
      local data, err = sock:receiveany(READ_MAX)
      hooks = c.hooks
      if data then
        if hooks then
          local ok, more = pcall(above, "recv", hooks, data)
          if not ok then
            c.err = c.err or more
            break
          end
          -- what the channel answers (WINDOW_UPDATE, PING's ACK, TLS) goes now
          if more and not c.kicked then
            c.kicked = true
            wake(c.writable)
          end
        else
          c.inq:push(data)
          wake(c.readable)
        end
      elseif err ~= "timeout" then
        c.err = c.err or err
        break
      end
    end
  end
  c.closing = true
  wake(c.readable)
  wake(c.writable)
end

-- A connection whose bytes went to the channel's hooks (Shared:attach)
-- tells the channel it ended, once (ignored when the channel closed it).
function told_lost(c)
  local hooks = c.hooks
  if not hooks or c.told then return end
  c.told = true
  pcall(hooks.lost, hooks, c.err_op or "read", c.err or "closed")
end

-- The owner: connects (a plain byte pipe: TLS runs in protocall over it), then writes what the requests queue
-- while its reader thread reads; closes the socket once closing.
local function run_owner(premature, c)
  if premature then
    c.err, c.closing = "nginx worker is exiting", true
    c.ready:post(1)
    return
  end
  local sock = tcp()
  sock:settimeouts(ms(c.timeout), SEND_TIMEOUT * 1000, IDLE_READ * 1000)
  local ok, err = sock:connect(c.host, c.port)
  if not ok or c.closing then
    c.err, c.closing = c.err or err or "given up", true
    sock:close()
    c.ready:post(1)
    return
  end
  c.sock = sock
  c.ready:post(1)
  local reader = spawn_thread(owner_reader, c)
  while not c.closing do
    local hooks = c.hooks
    c.kicked = false
    local data = hooks and above("output", hooks)
    if data then
      -- everything the channel queued, in one send
      local n, serr = sock:send(data)
      if not n then
        c.err, c.err_op = c.err or serr, c.err and c.err_op or "send"
        break
      end
      above("wrote", hooks, #data)
    elseif c.outq.bytes > 0 then
      data = c.outq:take_all()
      wake(c.sent)
      local n, serr = sock:send(data)
      if not n then
        c.err = c.err or serr
        break
      end
    else
      c.writable:wait(POLL)
      if worker_exiting() then c.err = c.err or "nginx worker is exiting" end
      if c.err then break end
    end
  end
  c.closing = true
  kill_thread(reader)
  sock:close()
  wake(c.readable)
  wake(c.sent)
  told_lost(c)
end

-- The owner timer's function: run_owner, and should it raise, the
-- connection ends with that error instead of leaving its calls waiting.
local function owner(premature, c)
  local ok, err = pcall(run_owner, premature, c)
  if ok then return end
  c.err, c.closing = c.err or ("the connection's ngx.timer failed: " .. tostring(err)), true
  if c.sock then c.sock:close() end
  c.ready:post(1)
  wake(c.readable)
  wake(c.sent)
  told_lost(c)
end

-- The socket net.lua drives for a timer-owned connection: it hands bytes
-- to the owner's writer and takes those its reader read.
local Shared = {}
Shared.__index = Shared

-- Seconds (read: per receiveany; send: waiting for room in the queue).
function Shared:settimeouts(_, send, read)
  self.send_timeout, self.read_timeout = send, read
  return true
end

function Shared:send(bytes)
  local c = self.c
  local limit = M.now() + self.send_timeout
  while not c.closing and c.outq.bytes >= OUT_CAP do
    local left = limit - M.now()
    if left <= 0 then return nil, "timeout" end
    c.sent:wait(left < POLL and left or POLL)
  end
  if c.closing then return nil, c.err or "closed" end
  c.outq:push(bytes)
  wake(c.writable)
  return #bytes
end

function Shared:receiveany(max)
  local c = self.c
  local limit = M.now() + self.read_timeout
  while true do
    local full = c.inq.bytes >= IN_CAP
    local data = c.inq:take(max)
    if data then
      if full then wake(c.drained) end
      return data
    end
    if c.closing then return nil, c.err or "closed" end
    local left = limit - M.now()
    if left <= 0 then return nil, "timeout" end
    c.readable:wait(left)
  end
end

-- Hands the connection's bytes to the channel's hooks (driver.lua's
-- attach): the owner's reader feeds them what it reads (and what it read
-- before), its writer sends what they queue when kicked.
function Shared:attach(hooks)
  local c = self.c
  c.hooks = hooks
  while c.inq.bytes > 0 do
    local data = c.inq:take_all()
    wake(c.drained)
    hooks:recv(data)
  end
  self:kick()
end

-- The channel has output for the connection: the owner's writer looks.
function Shared:kick()
  local c = self.c
  if c.kicked then return end
  c.kicked = true
  wake(c.writable)
end

-- Whether a kick is pending: the owner's writer has yet to look for output.
function Shared:kicked()
  return self.c.kicked
end

function Shared:close()
  local c = self.c
  c.closing = true
  wake(c.writable)
  return true
end

-- An object whose collection sets c.closing: a connection whose socket
-- (and so its transport) is garbage ends, its owner timer with it, at the
-- writer's next look (within POLL seconds). LuaJIT runs __gc only for
-- userdata (newproxy); Lua 5.4 for tables too.
local function close_on_gc(c)
  local function closing() c.closing = true end
  if newproxy then
    local guard = newproxy(true)
    getmetatable(guard).__gc = closing
    return guard
  end
  return setmetatable({}, { __gc = closing })
end

-- A connection through a new owner timer: the socket, or nil and why.
local function shared_connect(host, port, o)
  local c = {
    host = host, port = port, timeout = o.timeout, closing = false, inq = fifo.new(), outq = fifo.new(),
    ready = semaphore.new(), readable = semaphore.new(), writable = semaphore.new(),
    sent = semaphore.new(), drained = semaphore.new(),
  }
  local ok, err = timer_at(0, owner, c)
  if not ok then return nil, "cannot start the connection's ngx.timer: " .. tostring(err) end
  local got = c.ready:wait(o.timeout + POLL)
  if not got then
    c.closing = true
    return nil, "timed out after " .. o.timeout .. " s"
  end
  if c.err then return nil, c.err end
  return setmetatable({ c = c, send_timeout = SEND_TIMEOUT, read_timeout = POLL, guard = close_on_gc(c) }, Shared)
end

---------------------------------------------------------------------------
-- A connection that is a cosocket of the calling request

local Own = {}
Own.__index = Own

function Own:settimeouts(connect, send, read)
  return self.sock:settimeouts(ms(connect), ms(send), ms(read))
end

function Own:send(bytes) return self.sock:send(bytes) end

function Own:receiveany(max) return self.sock:receiveany(max) end

function Own:close() return self.sock:close() end

local function own_connect(host, port, o)
  local sock = tcp()
  sock:settimeouts(ms(o.timeout), SEND_TIMEOUT * 1000, POLL * 1000)
  local ok, err = sock:connect(host, port)
  if not ok then
    sock:close()
    return nil, err
  end
  return setmetatable({ sock = sock }, Own)
end

---------------------------------------------------------------------------
-- Drivers and transports

-- Waiting calls of the worker (transport/driver.lua's driver.wait /
-- driver.wake): each waiter on a semaphore of its own (kept for the next
-- wait: made after the fork, at the first waits), found by the wake
-- token of the call it waits for. A wake posts the waiters of the calls
-- something happened to and one other waiter, which takes the role of
-- the connection just freed (reading, writing), so a response wakes its
-- request and one more instead of every request of the worker.
local waiting = {}   -- waiter -> true, while it waits and is not posted
local by_token = {}  -- wake token -> waiter
local spare = {}     -- waiters not waiting

local function post(w)
  waiting[w] = nil
  if w.token and by_token[w.token] == w then by_token[w.token] = nil end
  w.sema:post(1)
end

-- Whether a wake (a post), not the timeout, ended the wait.
local function driver_wait(seconds, token)
  local n = #spare
  local w = spare[n]
  if w then spare[n] = nil else w = { sema = semaphore.new() } end
  w.token = token
  waiting[w] = true
  if token then by_token[token] = w end
  local posted = w.sema:wait(at_least_ms(seconds))
  waiting[w] = nil
  if token and by_token[token] == w then by_token[token] = nil end
  while w.sema:count() > 0 do w.sema:wait(0) end -- a post after the timeout
  w.token = nil
  spare[#spare + 1] = w
  return posted == true
end

-- Requests whose client went away (resty.abort), by their ngx.ctx table
-- (one a request, shared by its light threads): their calls end CANCELLED
-- at their next wait (driver.lua's wait asks driver_aborted).
local aborted = setmetatable({}, { __mode = "k" })

local function driver_aborted()
  return next(aborted) ~= nil and aborted[ngx.ctx] == true
end

local function driver_wake(tokens, n, all, owned)
  if tokens == nil or all then
    for w in pairs(waiting) do post(w) end
    return
  end
  for i = 1, n do
    local w = by_token[tokens[i]]
    if w then post(w) end
  end
  if owned then return end -- no role was freed
  local other = next(waiting)
  if other then post(other) end
end

--- `resty.driver{per_request = false}` -> a host I/O driver for pc.grpc's
-- `driver` option (doc/guide.md "Host I/O drivers"): `connect(host, port, o)`
-- opens the connection through an owner ngx.timer (the default: the
-- connection serves every request of the worker) or, with `per_request =
-- true`, as a cosocket of the calling request (the transport must then
-- not outlive that request). The cosocket is a plain byte pipe: TLS for an
-- https target runs in protocall over its bytes (pc.grpc's `driver`), with
-- ALPN h2, SNI, verification against `ca_file` or the system store (not
-- nginx's `lua_ssl_trusted_certificate`), client certificates and session
-- resumption, so servers insisting on ALPN h2 (grpc-go, grpc-core,
-- Node) accept it; the cosocket's sslhandshake is not used. A unix: target
-- connects the cosocket to "unix:/path". Its `sleep`, `wait` and
-- `wake` let waiting calls yield to nginx. Raises on a bad option.
function M.driver(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "per_request" then error("protocall.resty.driver: unknown option '" .. tostring(k) .. "'", 2) end
  end
  return {
    connect = opts.per_request and own_connect or shared_connect,
    sleep = M.sleep, wait = driver_wait, wake = driver_wake, aborted = driver_aborted,
  }
end

--- `resty.abort()`: ends the gRPC calls of the current request: each
-- call one of its light threads waits for, or waits for later, ends
-- CANCELLED at once (RST_STREAM CANCEL goes to the upstream), its wait
-- raising that error. What
-- `resty.cancel_on_abort`'s callback does; call it from an `ngx.on_abort`
-- callback of your own, then return from the callback rather than
-- `ngx.exit` (which kills the waiting threads before they see the cancel:
-- their calls run on until the upstream answers).
function M.abort()
  aborted[ngx.ctx] = true
  for w in pairs(waiting) do post(w) end -- each waiter looks whether its request is this one
end

--- `resty.aborted()` -> true once `resty.abort` was called for the current
-- request (its client went away), else false.
function M.aborted()
  return driver_aborted()
end

--- `ok, err = resty.cancel_on_abort()`: registers an `ngx.on_abort`
-- callback for the current request that calls `resty.abort`: when the
-- client closes its connection (HTTP/1.1) or resets its stream (HTTP/2),
-- the calls the request waits for end CANCELLED at once and the upstream
-- sees RST_STREAM CANCEL; the handler goes on (the callback does not
-- `ngx.exit`): end it with `ngx.exit(499)` when `resty.aborted()`. nil and
-- ngx.on_abort's error otherwise: "lua_check_client_abort is off" (the
-- directive is needed; nginx watches the client only while no request
-- body is being read: read the body before the handler runs, with
-- `lua_need_request_body on`, doc/gateway.md), "duplicate call" (on_abort
-- takes one callback a request: call `resty.abort` from yours). In
-- rewrite_by_lua*, access_by_lua* and content_by_lua*. In a subrequest
-- (`ngx.location.capture`) nil, "in a subrequest: ...": nginx runs the
-- main request's callback only, and a subrequest's calls are its own (the
-- main request's abort does not cancel them).
function M.cancel_on_abort()
  if ngx.is_subrequest then
    return nil, "in a subrequest: nginx watches the client for the main request only"
  end
  return ngx.on_abort(M.abort)
end

local SHARED = M.driver()
local PER_REQUEST = M.driver { per_request = true }

local GUARDED = { "unary", "server_stream", "stream", "start_unary", "start_server_stream", "wait" }

-- resty.grpc's methods, shared by every transport it makes (g.transport,
-- g.pc): no closure per transport, which a compiled trace through a call
-- could hold as a constant, keeping a dropped transport and its
-- connection's owner timer alive.
local guarded = {}
for _, name in ipairs(GUARDED) do
  guarded[name] = function(g, ...)
    M.check_phase(g.pc)
    local t = g.transport
    return t[name](t, ...)
  end
end
function guarded.set_load_balancing(g, ...) return g.transport:set_load_balancing(...) end
function guarded.set_ring_hash(g, ...) return g.transport:set_ring_hash(...) end
function guarded.backends(g) return g.transport:backends() end
local function guarded_close(g) return g.transport:close() end

--- `resty.grpc(pc, target, opts)` -> a transport as `pc.grpc(target,
-- opts)`'s (same targets and options, `driver` set to this module's;
-- `backends()`, `set_load_balancing` and `set_ring_hash` when it has
-- several backends)
-- whose calls first check the phase (`resty.check_phase`, raising
-- FAILED_PRECONDITION in log_by_lua* and the other phases without
-- cosockets). Made in init_by_lua*, it is copied into every worker, each
-- opening its own connection at its first call. `opts.per_request = true`
-- makes the connection a cosocket of the calling request instead (make
-- the transport in that request and `close()` it before it ends).
-- Without it, make the transport once per worker (init_by_lua*), not per
-- request: each one has a connection and owner timer of its own, which
-- `close()` ends, or the collection of the transport (within 1 s: the
-- timer's threads look for it every second).
-- Host names are resolved by nginx's `resolver` directive (the cosocket
-- connects to the name; configure it, or a call fails "no resolver
-- defined to resolve NAME"); a dns:/// name is first looked up with
-- getaddrinfo (pc.grpc's `driver`); SRV names and a DNS server
-- (dns://IP:PORT/, `dns_server`) are refused.
-- Raises as pc.grpc does, at the caller's line.
function M.grpc(pc, target, opts)
  if type(pc) ~= "table" or type(pc.grpc) ~= "function" then
    error("bad argument #1 to 'grpc' (the protocall module expected)", 2)
  end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  local per_request = o.per_request
  o.per_request = nil
  if o.driver ~= nil then error("protocall.resty.grpc: option 'driver' is this module's own", 2) end
  o.driver = per_request and PER_REQUEST or SHARED
  local ok, t = pcall(pc.grpc, target, o) -- its errors blame our caller, not this line
  if not ok then error(t, 2) end
  local g = { target = t.target, transport = t, pc = pc, close = guarded_close }
  for _, name in ipairs(GUARDED) do
    if t[name] then g[name] = guarded[name] end
  end
  if t.set_load_balancing then g.set_load_balancing = guarded.set_load_balancing end
  if t.set_ring_hash then g.set_ring_hash = guarded.set_ring_hash end -- pc.client's ring_hash_experimental
  if t.backends then g.backends = guarded.backends end
  return g
end

--- `resty.pool(pc, target, opts)` -> a transport over up to
-- `max_connections` shared connections (each a `resty.grpc` transport's
-- timer-owned HTTP/2 connection) to `target`, for `resty.client`'s
-- `transport` or `resty.call`'s `pool`: a call takes the oldest
-- connection with fewer than `max_streams` streams (integer, default 100),
-- opening another when all are full, and at `max_connections` (integer,
-- default 4) waits for a stream to end, at most its timeout (then
-- DEADLINE_EXCEEDED) or `queue_timeout` seconds (default 10; then
-- RESOURCE_EXHAUSTED), both local, or until its request's client went
-- away (`resty.abort`; then CANCELLED, within 0.05 s); a connection without streams for
-- `idle_timeout` seconds (default 60) is closed by the worker's sweeping
-- ngx.timer (every second), which closes all of them when the worker
-- exits; `name`, a label in `pool_info`. The other options are pc.grpc's (`keepalive_time` for PINGs,
-- `reconnect`, TLS ...), checked now. Make it once per worker
-- (init_by_lua*, or a module-level variable), not per request; `pool:close()`
-- closes its connections, `pool:info()` is its `pool_info` row, and over
-- several backends `pool:backends()` lists them as `resty.grpc`'s do.
-- Raises on a bad option, as pc.grpc does.
function M.pool(pc, target, opts)
  if type(pc) ~= "table" or type(pc.grpc) ~= "function" then
    error("bad argument #1 to 'pool' (the protocall module expected)", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #3 to 'pool' (table or nil expected, got " .. type(opts) .. ")", 2)
  end
  local ok, p = pcall(pool.new, pc, target, opts, function(t, o) return M.grpc(pc, t, o) end, driver_aborted)
  if ok then
    local primed, why = pcall(p.prime, p)
    if not primed then
      p:close()
      ok, p = false, why
    end
  end
  if not ok then error(p, 2) end
  return p
end

--- `resty.pool_info()` -> this worker's pools: {worker = ngx.worker.id(),
-- pid = ngx.worker.pid(), pools = {{target =, name =, max_streams =,
-- max_connections =, idle_timeout =, transports = open transports,
-- connections = their HTTP/2 connections (connecting ones too), streams =
-- calls in flight, waiting = calls waiting for a stream, calls = calls
-- made, opened = transports opened, closed = {idle = n, exit = n, closed =
-- n} (why transports were closed), rejected = calls that waited in
-- vain, peak = the most streams one transport carried}, ...}} (resty.pool's,
-- resty.call's included), in creation order.
function M.pool_info()
  return { worker = ngx.worker.id(), pid = ngx.worker.pid(), pools = pool.info() }
end

-- resty.call's pools and clients of this worker: target -> pool name (""
-- unnamed) -> {pool =, clients = {schema pool -> {service -> client}}}, or
-- a resty.pool -> the same
local by_target = {}
local paths, npaths = {}, 0 -- method path -> {service, method}; emptied past 1000 paths
local NO_SCHEMA = {}

--- `response, err = resty.call(pc, target, path, request, opts)`: one
-- unary call in the resty.http style, for plugin authors who do not keep
-- clients: `target` as pc.grpc takes it, `path` "/pkg.Service/Method"
-- (its schema loaded, e.g. in init_by_lua*), `request` a table or a
-- message of the method's input type (nil: an empty message). Returns the response (a message; with `with_metadata`
-- the metadata third) or nil and the failure (a pc.Error: `err.code`,
-- "CODE: message" as a string; a call that waited for a stream in vain
-- is DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED, `err["local"]` true).
-- `opts`: the call's settings (`timeout` (seconds), `metadata`, ...: as
-- a stub method takes them); `schema` = the schema pool holding the
-- method (pc.pool(); default the default pool); `pool` = a
-- `resty.pool`, or the options of the worker's pool for `target`
-- (`max_streams`, `max_connections`, `idle_timeout`, `queue_timeout`,
-- `name`: pools of one target with different names are separate) used
-- when the worker first calls it; `transport` = pc.grpc options (TLS:
-- `ca_file`, `cert_file`, `key_file`, `server_name`, with an https://
-- target; `keepalive_time`, `reconnect`, ...) for that pool. `pool` and
-- `transport` are read at the worker's first call of a (target, pool
-- name): a later call's other options are not (give each its own `name`).
-- The pools are kept per worker and listed by `resty.pool_info()`.
-- Raises only on misuse (a bad argument or option, a path that names no
-- loaded method, the log phase as resty.check_phase says).
function M.call(pc, target, path, request, opts)
  if type(pc) ~= "table" or type(pc.client) ~= "function" then
    error("bad argument #1 to 'call' (the protocall module expected)", 2)
  end
  if type(target) ~= "string" then
    error("bad argument #2 to 'call' (string expected, got " .. type(target) .. ")", 2)
  end
  local parts = type(path) == "string" and paths[path]
  if not parts then
    local service, method
    if type(path) == "string" then service, method = path:match("^/([%w_%.]+)/([%w_]+)$") end
    if not service then error("bad argument #3 to 'call' (a method path \"/pkg.Service/Method\" expected)", 2) end
    parts = { service, method }
    if npaths >= 1000 then paths, npaths = {}, 0 end
    paths[path], npaths = parts, npaths + 1
  end
  local service, method = parts[1], parts[2]
  if request ~= nil and type(request) ~= "table" and not pc.type_of(request) then
    error("bad argument #4 to 'call' (table, message or nil expected, got " .. type(request) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #5 to 'call' (table or nil expected, got " .. type(opts) .. ")", 2)
  end
  M.check_phase(pc)
  local settings, transport_opts, pool_opts, schema = {}, nil, nil, nil
  for k, v in pairs(opts or {}) do
    if k == "transport" then
      transport_opts = v
    elseif k == "pool" then
      pool_opts = v
    elseif k == "schema" then
      schema = v
    else
      settings[k] = v
    end
  end
  if pool_opts ~= nil and type(pool_opts) ~= "table" then
    error("protocall.resty.call: option 'pool' must be a resty.pool or a table of its options", 2)
  end
  local entry
  if pool.is_pool(pool_opts) then
    entry = by_target[pool_opts]
    if not entry then
      entry = { pool = pool_opts, clients = {} }
      by_target[pool_opts] = entry
    end
  else
    local name = pool_opts and pool_opts.name or ""
    local named = by_target[target]
    if not named then
      named = {}
      by_target[target] = named
    end
    entry = named[name]
    if not entry then
      local o = {}
      for k, v in pairs(transport_opts or {}) do o[k] = v end
      for k, v in pairs(pool_opts or {}) do o[k] = v end
      local ok, p = pcall(M.pool, pc, target, o)
      if not ok then error(p, 2) end
      entry = { pool = p, clients = {} }
      named[name] = entry
    end
  end
  local per_schema = entry.clients[schema or NO_SCHEMA]
  if not per_schema then
    per_schema = {}
    entry.clients[schema or NO_SCHEMA] = per_schema
  end
  local client = per_schema[service]
  if not client then
    local ok, c = pcall(M.client, pc, service, { transport = entry.pool, pool = schema })
    if not ok then error(c, 2) end
    client = c
    per_schema[service] = client
  end
  local fn = client[method]
  if fn == nil then error("protocall.resty.call: " .. service .. " has no method '" .. method .. "'", 2) end
  local ok, response, meta = pcall(fn, client, request or {}, settings)
  if not ok then
    -- a failed call is an error object; a string is misuse (a bad field
    -- of the request, an unknown or bad option): raised, naming call's
    -- own argument
    if type(response) == "string" then
      local n, why = response:match("^bad argument #(%d) to '[^']*' %((.*)%)$")
      if n then error("bad argument #" .. (n == "1" and 4 or 5) .. " to 'call' (" .. why .. ")", 2) end
      error(response, 2)
    end
    return nil, response
  end
  return response, nil, meta
end

--- `resty.client(pc, service, opts)` -> `pc.client(service, opts)` with
-- `sleep = resty.sleep` and `clock = resty.now` unless given, so retry
-- backoff yields to nginx. `opts.transport` should be a `resty.grpc`
-- transport (or any transport whose waits yield). Raises as pc.client.
function M.client(pc, service, opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  if o.sleep == nil then o.sleep = M.sleep end
  if o.clock == nil then o.clock = M.now end
  return pc.client(service, o)
end

return M
