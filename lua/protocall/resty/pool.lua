--- The connections of one nginx worker to its gRPC upstreams
-- (`resty.pool`, `resty.pool_info`, and `resty.call`'s transports;
-- doc/openresty.md "Connections per worker").
--
-- A pool is a transport (unary, server_stream, stream, start_unary,
-- start_server_stream, wait, close) over up to `max_connections`
-- `resty.grpc` transports to one target, each one multiplexed HTTP/2
-- connection owned by an ngx.timer (lua/protocall/resty.lua), so calls of
-- every request of the worker share them and they outlive the request
-- that opened them. A call goes to the oldest connection carrying fewer
-- than `max_streams` streams; with all of them full a new one opens, and
-- at `max_connections` the call waits for a stream to end (at most its
-- own timeout). A connection without streams for `idle_timeout` seconds
-- is closed by the worker's sweeping ngx.timer (every second), which at
-- worker exit (ngx.worker.exiting: its callback runs premature) closes
-- every connection of the worker. Keepalive PINGs, GOAWAY and
-- reconnection are the engine's (pc.grpc's `keepalive_time`, `reconnect`).
-- This module takes the transport maker from protocall.resty (which
-- requires it), so it requires no other protocall module.
local ngx = rawget(_G, "ngx")
local semaphore = require "ngx.semaphore"

local setmetatable, getmetatable, type, error, pairs, ipairs, tostring, pcall = setmetatable, getmetatable,
  type, error, pairs, ipairs,
  tostring, pcall
local floor = math.floor

local M = {}

local DEFAULTS = { max_streams = 100, max_connections = 4, idle_timeout = 60, queue_timeout = 10 }
local SWEEP = 1   -- seconds between two looks of the sweeping timer
local POLL = 0.05 -- seconds a call waiting for a stream looks again (streams end without telling the pool)

-- The pools of this worker, in creation order (pool_info's order).
local pools = {}
local sweeper -- true once this worker's sweeping timer runs

local function now()
  ngx.update_time()
  return ngx.now()
end

-- nginx's cached clock (the event loop's last wake-up): enough for
-- idle bookkeeping, which the sweeper looks at once a second
local cached_now = ngx.now

-- A stream ended: one waiting call looks (it takes the stream; waking
-- every waiter had all but one look in vain, a burst of resumptions and
-- garbage per call under a full pool). A waiter that cannot take it, and
-- streams that end without telling the pool, are covered by the waiters'
-- look every POLL.
local function wake_one(s)
  if s:count() < 0 then s:post(1) end
end

-- Streams and connections of member `m` now: the engine's count of calls
-- on each of its connections (a stream counts until it ends, however it
-- ends), or, for a member that carried unary calls only (unless `all`)
-- or a transport over several backends, the unary calls this pool
-- counted.
local function usage(m, all)
  local channel = m.t.transport and m.t.transport.channel
  if not channel or m.closed then return m.active, m.closed and 0 or 1 end
  -- only unary calls so far: the pool's own count is exact (no tables made)
  if m.streamed == 0 and not all then return m.active, 1 end
  local live, calls = channel:host_conns()
  local streams, conns = 0, 0
  for id in pairs(live) do
    conns = conns + 1
    streams = streams + (calls[id] or 0)
  end
  return streams > m.active and streams or m.active, conns
end

local function close_member(p, m, why)
  if m.closed then return end
  m.closed = true
  p.closed[why] = (p.closed[why] or 0) + 1
  pcall(m.t.close, m.t)
end

-- Closes members idle for idle_timeout (all of them when `all`) and
-- drops the closed ones from the list.
local function sweep(p, t, all)
  local keep = {}
  for _, m in ipairs(p.members) do
    local streams = usage(m, true)
    if streams > 0 then m.last = t end
    if all then
      close_member(p, m, "exit")
    elseif streams == 0 and t - m.last >= p.idle_timeout then
      close_member(p, m, "idle")
    end
    if m.closed then p.calls_before = p.calls_before + m.calls else keep[#keep + 1] = m end
  end
  p.members = keep
end

local function on_sweep(premature)
  local t = now()
  local exiting = premature or ngx.worker.exiting()
  for _, p in ipairs(pools) do
    if not p.done then sweep(p, t, exiting) end
  end
end

local function start_sweeper()
  if sweeper then return end
  if ngx.get_phase() == "init" then return end -- no timers in the master
  local ok = ngx.timer.every(SWEEP, on_sweep)
  if ok then sweeper = true end
end

local Pool = {}
Pool.__index = Pool

local function local_error(p, code, message)
  error(p.pc.Error { code = code, message = message, ["local"] = true }, 0)
end

-- The member for the next call (opening one when all are full and there
-- is room), and the call's settings with its timeout less the wait;
-- raises DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED when no stream frees in
-- time, or the misuse of a closed pool.
local function acquire(p, settings)
  if p.done then error("protocall.resty.pool: the pool for " .. p.target .. " is closed", 3) end
  start_sweeper()
  local budget = settings and settings.timeout or p.queue_timeout
  local t0, waited = nil, false
  while true do
    for _, m in ipairs(p.members) do
      local used = not m.closed and usage(m)
      if used and used < p.max_streams then
        if used + 1 > p.peak then p.peak = used + 1 end
        if waited and settings and settings.timeout then
          local s = {}
          for k, v in pairs(settings) do s[k] = v end
          s.timeout = settings.timeout - (now() - t0)
          if s.timeout <= 0 then break end
          return m, s
        end
        return m, settings
      end
    end
    if #p.members < p.max_connections then
      local m = { t = p.make(p.target, p.opts), active = 0, calls = 0, streamed = 0, last = now(), opened = now() }
      p.members[#p.members + 1] = m
      p.connections_opened = p.connections_opened + 1
      if p.peak < 1 then p.peak = 1 end
      return m, settings
    end
    t0 = t0 or now()
    local left = budget - (now() - t0)
    if left <= 0 then
      local why = "protocall.resty.pool: all " .. p.max_connections .. " connections to " .. p.target
        .. " carry max_streams (" .. p.max_streams .. ") streams"
      p.rejected = p.rejected + 1
      if settings and settings.timeout then
        local_error(p, "DEADLINE_EXCEEDED", why .. " for the call's whole timeout of " .. settings.timeout .. " s")
      end
      local_error(p, "RESOURCE_EXHAUSTED", why .. " for queue_timeout (" .. p.queue_timeout .. " s)")
    end
    if p.aborted and p.aborted() then
      local_error(p, "CANCELLED", "protocall.resty.pool: the client went away while the call waited for a stream")
    end
    waited = true
    p.waiting = p.waiting + 1
    p.sem:wait(left < POLL and left or POLL)
    p.waiting = p.waiting - 1
  end
end

--- `pool:unary(path, request_bytes, settings)`: as a pc.grpc transport's,
-- on a connection of the pool (see the module's comment).
function Pool:unary(path, request, settings)
  local m, s = acquire(self, settings)
  m.active, m.calls = m.active + 1, m.calls + 1
  local ok, r, meta = pcall(m.t.unary, m.t, path, request, s)
  m.active, m.last = m.active - 1, cached_now()
  wake_one(self.sem)
  if not ok then error(r, 0) end
  return r, meta
end

--- `pool:server_stream`, `pool:start_unary`, `pool:start_server_stream`
-- (path, request_bytes, settings) and `pool:stream(path, settings)`: as
-- a pc.grpc transport's, on a connection of the pool.
for _, name in ipairs { "server_stream", "start_unary", "start_server_stream", "stream" } do
  local with_request = name ~= "stream"
  Pool[name] = function(self, path, a, b)
    local m, s = acquire(self, with_request and b or a)
    m.calls, m.streamed, m.last = m.calls + 1, m.streamed + 1, cached_now()
    if with_request then return m.t[name](m.t, path, a, s) end
    return m.t[name](m.t, path, s)
  end
end

--- `pool:wait(handles, seconds)`: as a transport's (the handles of
-- start_unary / start_server_stream of any of its connections).
function Pool:wait(handles, seconds)
  local m = self.members[1]
  if not m then return ngx.sleep(seconds) end
  return m.t:wait(handles, seconds)
end

--- `pool:close()`: closes every connection of the pool (calls in flight
-- keep theirs until they end) and takes it out of `pool_info`; later
-- calls raise.
function Pool:close()
  for _, m in ipairs(self.members) do
    close_member(self, m, "closed")
    self.calls_before = self.calls_before + m.calls
  end
  self.members, self.done = {}, true
  for i, p in ipairs(pools) do
    if p == self then
      table.remove(pools, i)
      break
    end
  end
end

--- `pool:info()` -> this pool's row of `resty.pool_info()`.
function Pool:info()
  local conns, streams, calls = 0, 0, 0
  for _, m in ipairs(self.members) do
    local s, c = usage(m, true)
    conns, streams, calls = conns + c, streams + s, calls + m.calls
  end
  local closed = {}
  for k, v in pairs(self.closed) do closed[k] = v end
  return {
    target = self.target, name = self.name, max_streams = self.max_streams,
    max_connections = self.max_connections, idle_timeout = self.idle_timeout,
    transports = #self.members, connections = conns, streams = streams, waiting = self.waiting,
    calls = calls + self.calls_before, opened = self.connections_opened, closed = closed,
    rejected = self.rejected, peak = self.peak,
  }
end

local function positive(o, key, integer)
  local v = o[key]
  if v == nil then return DEFAULTS[key] end
  if type(v) ~= "number" or not (v > 0 and v < math.huge) or (integer and v ~= floor(v)) then
    error("protocall.resty.pool: option '" .. key .. "' must be a positive " .. (integer and "integer" or "number")
      .. ", got " .. tostring(v), 4)
  end
  return v
end

--- `pool.new(pc, target, opts, make)` -> a pool (resty.pool's
-- contract): `make(target, grpc_opts)` opens one transport; `opts` holds
-- the pool's own options (max_streams, max_connections, idle_timeout,
-- queue_timeout, name: a label for pool_info) and pc.grpc's (the rest,
-- checked by the first `make`: `p:prime()`, which the caller runs to
-- raise at once); `aborted()` (optional) true: the calling request's
-- client went away (resty.aborted): a call waiting for a stream ends
-- CANCELLED instead of waiting on.
function M.new(pc, target, opts, make, aborted)
  local o, grpc_opts, name = {}, {}, nil
  for k, v in pairs(opts or {}) do
    if DEFAULTS[k] ~= nil then
      o[k] = v
    elseif k == "name" then
      name = v
    else
      grpc_opts[k] = v
    end
  end
  local p = setmetatable({
    pc = pc, target = type(target) == "string" and target or "{...}", name = name, make = make, aborted = aborted,
    opts = grpc_opts, members = {}, sem = semaphore.new(), waiting = 0, rejected = 0,
    connections_opened = 0, calls_before = 0, peak = 0, closed = {},
    max_streams = positive(o, "max_streams", true), max_connections = positive(o, "max_connections", true),
    idle_timeout = positive(o, "idle_timeout"), queue_timeout = positive(o, "queue_timeout"),
  }, Pool)
  p.make = function(_, g) return make(target, g) end
  pools[#pools + 1] = p
  return p
end

-- Adds calls figures `from` (a backends() list's `calls`: {outstanding
-- =, max_requests =, dropped =}, or an xds target's per cluster) to `into`.
local function add_calls(into, from)
  if type(from.outstanding) == "number" then
    into.outstanding = (into.outstanding or 0) + from.outstanding
    into.dropped = (into.dropped or 0) + (from.dropped or 0)
    if into.max_requests == nil then into.max_requests = from.max_requests end
    return
  end
  for name, c in pairs(from) do
    if type(c) == "table" then
      into[name] = into[name] or {}
      add_calls(into[name], c)
    end
  end
end

--- `pool:backends()` -> as a `resty.grpc` transport's `backends()`
-- (pc.grpc's transport:backends(): {{address =, failed =, weight =,
-- health =, ejected =, outstanding =, ...}, ..., calls = {outstanding =,
-- max_requests =, dropped =}}; an xds:/// target's rows also name their
-- `cluster`, its `calls` per cluster), over every connection of the pool:
-- a row per backend in the order the pool's oldest connection lists them
-- (a dns: name's backends one of them alone found follow), `outstanding`
-- and `calls`' `outstanding` and `dropped` summed over them, `failed` and
-- `ejected` true when so on any of them (calls there skip it), the rest
-- (`health`, `weight`, `ring_share`, `versions` ...) the oldest one's.
-- Present only when the target has several backends (as the transport's
-- method: check `pool.backends` first), else nil. Raises on a closed
-- pool.
local function backends(self)
  if self.done then error("protocall.resty.pool: the pool for " .. self.target .. " is closed", 2) end
  self:prime() -- every transport was closed idle: the list of a new one (no connection yet)
  local out, at = { calls = {} }, {}
  for _, m in ipairs(self.members) do
    if not m.closed then
      local list = m.t:backends()
      for _, b in ipairs(list) do
        local key = (b.cluster or "") .. "\0" .. b.address
        local row = at[key]
        if row == nil then
          row = {}
          for k, v in pairs(b) do row[k] = v end
          out[#out + 1], at[key] = row, row
        else
          row.outstanding = (row.outstanding or 0) + (b.outstanding or 0)
          row.failed = row.failed or b.failed
          row.ejected = row.ejected or b.ejected
        end
      end
      if list.calls then add_calls(out.calls, list.calls) end
      if out.versions == nil then out.versions, out.nacked = list.versions, list.nacked end
    end
  end
  return out
end

--- `p:prime()`: opens the pool's first transport now (no connection
-- yet: it connects at the first call), so a bad option raises here; a
-- transport over several backends gives the pool `backends()`.
function Pool:prime()
  if #self.members == 0 then
    local t = self.make(self.target, self.opts)
    self.members[1] = { t = t, active = 0, calls = 0, streamed = 0, last = now(), opened = now() }
    self.connections_opened = self.connections_opened + 1
    if t.backends then self.backends = backends end
  end
end

--- `pool.is_pool(x)` -> whether x is a pool of this module.
function M.is_pool(x) return getmetatable(x) == Pool end

--- `pool.info()` -> list of every pool's `pool:info()` in this worker.
function M.info()
  local out = {}
  for i, p in ipairs(pools) do out[i] = p:info() end
  return out
end

return M
