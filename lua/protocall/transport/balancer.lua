--- Several backends behind one pc.grpc target: one transport per backend
-- (transport/grpc.lua, one connection each) and a policy choosing one per
-- call.
--
-- `pick_first` sends every call to the first backend in the list that is
-- not marked failed; `round_robin` takes the next one each call, skipping
-- failed ones; `least_request` (gRFC A48, transport/least_request.lua)
-- draws `choice_count` of those at random and takes the one with the
-- fewest calls in flight. Circuit breaking (gRFC A32, set_circuit_breaker)
-- fails a call UNAVAILABLE at once while max_requests calls are in
-- flight. A backend is marked failed when a call on it ends
-- UNAVAILABLE because its own connection could not be made or was lost
-- under it (the error's `unsent` or `lost`, whatever other calls' new
-- connection attempts do meanwhile; an UNAVAILABLE the server sent on a
-- live connection marks nothing), and skipped until its backoff passes:
-- 1 s, doubling on each failure to 30 s, reset by a call that succeeds
-- and by a SERVING answer of its health check (set_health_check). A dns: target's
-- backends are what its resolver (transport/dns.lua) last found: each call
-- takes its news without waiting (new addresses join, gone ones leave,
-- their calls going on), a call before the first answer waits for it
-- (failing UNAVAILABLE with the resolver's reason when the name does not
-- resolve), and a failed backend asks for a resolution (bounded by the
-- resolver's minimum interval). When every backend is failed, the call
-- goes to the backend whose backoff ends first. A call whose backend
-- could not be connected to (refused, timed out, TLS handshake failed:
-- the call never left this client) goes on to the next backend the policy
-- picks that it has not tried, within its deadline, as gRPC's pick_first
-- tries each address in turn and round_robin picks only backends that
-- connect; it fails UNAVAILABLE only when every backend failed so, unless
-- the transport has wait_for_ready (gRPC's wait-for-ready: a call does not
-- fail while the backends are in TRANSIENT_FAILURE): then it waits for the
-- soonest attempt a backend's reconnection backoff allows and tries again,
-- until it is sent or its deadline passes (await_ready), and a dns: name
-- that does not resolve is asked again until the deadline. With SRV weights,
-- `round_robin` is weighted (nginx's smooth weighted round robin: each
-- backend's share of the calls is its weight over the sum; weight 0
-- counts as 1). The
-- attempts of one hedged call go to backends none of its earlier attempts
-- used while there are such, so a retry after UNAVAILABLE (the failed
-- backend now skipped) and a hedge both land on another backend; an
-- attempt that waited (wait_for_ready, a health check's first answer)
-- keeps that record, and when every backend is failed each attempt takes
-- the soonest back of those the others did not use.
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local health_check = require "protocall.transport.health_check"
local least_request = require "protocall.transport.least_request"
local outlier = require "protocall.transport.outlier"
local ring_hash = require "protocall.transport.ring_hash"

local setmetatable, getmetatable, pcall, error, pairs, ipairs, type, tostring =
  setmetatable, getmetatable, pcall, error, pairs, ipairs, type, tostring
local min = math.min
local monotonic = core.monotonic
local check_args, CHECKED = internal.check_args, internal.CHECKED

local M = {}

local FIRST_BACKOFF, MAX_BACKOFF = 1, 30

local rewatch -- (self): starts or stops the health watches (below)


local Balanced = { __name = "protocall.BalancedTransport" }
Balanced.__index = Balanced

-- Whether backend `b` may take a call at `now`: not failed, its health
-- check (if any) says SERVING, not ejected by outlier detection.
local function usable(b, now)
  return (b.down_until == nil or b.down_until <= now) and (b.watch == nil or b.watch:up()) and b.ejected_at == nil
end

-- The smooth weighted round robin pick among the backends up at `now` and
-- not in `tried`, or nil.
local function weighted(self, tried, now)
  local best, total = nil, 0
  for _, b in ipairs(self.members) do
    if usable(b, now) and not (tried and tried[b]) then
      b.current = b.current + b.weight
      total = total + b.weight
      if best == nil or b.current > best.current then best = b end
    end
  end
  if best then best.current = best.current - total end
  return best
end

-- ring_hash (transport/ring_hash.lua): the backend for a call with
-- `settings` (its ring_hash: the place xds.lua's route gave it; else its
-- request_hash_header's value hashed; else random) from its place on the
-- ring (built again when the members changed), walking on past those
-- not usable at `now` or in `tried`.
local function ringed(self, tried, now, settings)
  local ring = self.ring
  if ring == nil or ring.members ~= self.members then
    ring = ring_hash.build(self.members, self.ring_config)
    self.ring = ring
  end
  local key = settings and settings.ring_hash
  if key == nil then
    local header = self.ring_config and self.ring_config.request_hash_header
    key = header and ring_hash.header_hash(settings and settings.metadata, header) or ring_hash.random()
  end
  return ring_hash.pick(ring, key, function(b) return usable(b, now) end, tried)
end

-- The backend for the next call with `settings` (may be nil): healthy and
-- not in `tried` (a hedged call's backends so far) when one is, else
-- healthy, else nil. round_robin moves on past the one it returns, a
-- tried one too (a hedge with more attempts than backends spreads them).
local function healthy(self, tried, settings)
  local bs = self.members
  local n = #bs
  local now = monotonic()
  if self.policy == "ring_hash" then return ringed(self, tried, now, settings) end
  if self.policy == "least_request" then return least_request.pick(self, usable, tried, now) end
  if self.weighted and self.policy == "round_robin" then
    local b = weighted(self, tried, now)
    if b then return b end
  end
  local first = self.policy == "round_robin" and self.next or 1
  local fallback, at
  for k = 0, n - 1 do
    local i = (first - 1 + k) % n + 1
    local b = bs[i]
    if usable(b, now) then
      if not (tried and tried[b]) then
        if self.policy == "round_robin" then self.next = i % n + 1 end
        return b
      end
      if fallback == nil then fallback, at = b, i end
    end
  end
  if fallback and self.policy == "round_robin" then self.next = at % n + 1 end
  return fallback
end

-- Takes the resolver's news: new addresses join, gone ones leave.
local function resolved(self)
  local places = self.dns:news()
  if places then self:update(places) end
end

-- Pauses a call for `seconds` (> 0): a pc.spawn task lets the others run
-- and wakes early when the transport closes (close fires self.signal);
-- outside any task, the host driver's sleep (a cosocket host yields) or
-- pc.sleep's.
local function pause(self, seconds)
  if seconds <= 0 or sched.wait_signal(self.signal, seconds) then return end
  local sleep = self.sleep or sched.sleep
  sleep(seconds)
end

-- Takes the news of backend `b`'s health watch: a SERVING answer that
-- arrived since the last look (its connection is up and its server
-- answers: gRPC's READY, not in backoff) ends the backend's failure
-- backoff.
local function health_news(b)
  local w = b.watch
  w:poll()
  if w.serving ~= (w.taken or 0) then -- `taken`: the count at the last look, on the watch (a new one starts at 0)
    w.taken = w.serving
    b.down_until, b.backoff = nil, nil
  end
end

-- Pumps the connections of the members' health watches for at most
-- `seconds` (pauses when no watch has one) and takes what arrived; true
-- when a watch is still waiting for its server's first answer.
local function poll_health(self, seconds)
  local list, seen, waiting = {}, {}, false
  for _, b in ipairs(self.members) do
    local w = b.watch
    health_news(b)
    local ch = w:channel()
    if ch and not seen[ch] then
      seen[ch] = true
      list[#list + 1] = { channel = ch }
    end
  end
  if #list > 0 then
    self.members[1].transport:wait(list, seconds)
  elseif seconds > 0 then
    pause(self, seconds)
  end
  for _, b in ipairs(self.members) do
    health_news(b)
    waiting = waiting or b.watch.state == "connecting"
  end
  return waiting
end

-- With health checking: the backend for the next call among those whose
-- server says SERVING, waiting (at most `timeout` seconds) while some
-- server has not answered yet, and with wait_for_ready while none says
-- SERVING (gRPC's wait-for-ready: such backends are in TRANSIENT_FAILURE);
-- nil and UNAVAILABLE when none is up and none waits (or the transport
-- was closed meanwhile), or nil and DEADLINE_EXCEEDED. With `nowait` (a
-- started call, whose result() must not block) nil without an error
-- where it would wait: the call asks again (Moving:result).
local function checked(self, tried, timeout, settings, nowait)
  local deadline = timeout and monotonic() + timeout
  local why = "no backend is SERVING (health check of service \"" .. self.health .. "\")"
  while true do
    if self.closed then return nil, errors.status("UNAVAILABLE", why .. ": the channel is closed") end
    if self.outlier then self.outlier:sweep(self.members) end -- an ejected backend returns meanwhile
    local waiting = poll_health(self, 0)
    local b = healthy(self, tried, settings)
    if b then return b end
    if not waiting and not self.wait_for_ready then return nil, errors.status("UNAVAILABLE", why) end
    local left = deadline and deadline - monotonic()
    if left and left <= 0 then
      return nil, errors.status("DEADLINE_EXCEEDED", "deadline exceeded while waiting for a backend's health check"
        .. (waiting and "" or " (" .. why .. ")"))
    end
    if nowait then return nil end
    poll_health(self, left and min(left, 0.05) or 0.05)
  end
end

-- The backend for the next call (healthy, else the one whose backoff ends
-- first; not in `tried` while there is such), or nil and the error of a
-- name that does not resolve or of a call whose `timeout` (seconds, nil:
-- none) passed while it resolved; `settings` the call's (ring_hash's
-- key). With wait_for_ready it waits while every backend is ejected by
-- outlier detection; with `nowait` (a started call) it returns nil
-- without an error rather than wait then, for a name whose resolution
-- failed (wait_for_ready: asked again), or for a health check's answer
-- (checked).
local function pick(self, tried, timeout, settings, nowait)
  local dns = self.dns
  local deadline = timeout and monotonic() + timeout
  if dns then
    resolved(self)
    while #self.members == 0 do
      if self.closed then
        return nil, errors.status("UNAVAILABLE", "resolve " .. dns.name .. ": the channel is closed")
      end
      if dns.why and not self.wait_for_ready then return nil, errors.status("UNAVAILABLE", dns.why) end
      local left = deadline and deadline - monotonic()
      if left and left <= 0 then
        return nil, errors.status("DEADLINE_EXCEEDED", "deadline exceeded while resolving " .. dns.name
          .. (dns.why and " (the last resolution: " .. dns.why .. ")" or ""))
      end
      if dns.why then dns:refresh() end -- wait_for_ready: asks again, once the minimum interval allows
      if nowait and dns.why then return nil end
      dns:wait(left)
      resolved(self)
    end
  end
  if self.outlier then self.outlier:sweep(self.members) end
  if self.checking then
    local b, err = checked(self, tried, timeout, settings, nowait)
    if b or err or nowait then return b, err end
  end
  local b = healthy(self, tried, settings)
  if b then return b end
  if dns then
    dns:all_failed()
    resolved(self)
    b = healthy(self, tried, settings)
    if b then return b end
  end
  local why = "every backend is ejected by outlier detection"
  while true do
    local best, fresh -- the soonest back of all, and of those not in `tried`
    for _, m in ipairs(self.members) do
      if m.down_until and m.ejected_at == nil then
        if best == nil or m.down_until < best.down_until then best = m end
        if not (tried and tried[m]) and (fresh == nil or m.down_until < fresh.down_until) then fresh = m end
      end
    end
    if best then return fresh or best end
    -- wait_for_ready: ejected backends are in TRANSIENT_FAILURE, where such
    -- a call waits for one to return (a sweep, after its ejection time)
    if not self.wait_for_ready then return nil, errors.status("UNAVAILABLE", why) end
    if self.closed then return nil, errors.status("UNAVAILABLE", why .. ": the channel is closed") end
    local left = deadline and deadline - monotonic()
    if left and left <= 0 then return nil, errors.status("DEADLINE_EXCEEDED", "deadline exceeded while " .. why) end
    if nowait then return nil end
    pause(self, left and min(left, 0.05) or 0.05)
    if self.outlier then self.outlier:sweep(self.members) end
    b = healthy(self, tried, settings)
    if b then return b end
  end
end

-- Marks backend `b` of `self` failed (its backoff doubled) when `err`, a
-- call's failure on it, says its connection could not be made (`unsent`)
-- or was lost under the call (`lost`); report's part, also taken by a
-- started server stream failing after its result() (its outcome reported
-- then).
local function mark_failed(self, b, err)
  if b.gone then return end
  if type(err) == "table" and err.code == "UNAVAILABLE" and (err.unsent or err.lost) then
    b.backoff = b.backoff and min(b.backoff * 2, MAX_BACKOFF) or FIRST_BACKOFF
    b.down_until = monotonic() + b.backoff
    if self.dns then self.dns:refresh() end
  end
end

-- A call on backend `b` of `self` ended: `err` nil for success. The
-- backend is marked failed by what this call's own failure says: its
-- connection could not be made or the backoff refused one (`unsent`), or
-- it was lost under the call (`lost`, pc_GrpcStatus.lost), not by whether
-- the channel has a connection now (another call's new attempt would
-- hide the failure). A backend that lost or could not make its
-- connection, or received a GOAWAY, asks the resolver for a new answer.
local function report(self, b, err)
  if b.gone then return end -- its address left the resolver's answer
  if self.outlier then self.outlier:count(b, err == nil) end
  local goaways = b.transport.channel:goaways()
  if goaways ~= b.goaways then
    b.goaways = goaways
    if self.dns then self.dns:refresh() end
  end
  if err == nil then
    b.down_until, b.backoff = nil, nil
  else
    mark_failed(self, b, err)
  end
end

-- Whether `err` ended a call that never reached its backend: its
-- connection could not be made (channel.c's "connect to HOST:PORT: why",
-- socket.c's "TLS handshake with HOST:PORT: why"), as the transport marks
-- it (`unsent`, pc_GrpcStatus.unsent: a server's own UNAVAILABLE saying
-- the same, a handler passing on its upstream's failure, reached it and
-- is not sent again; nor does another call's connection attempt on the
-- backend meanwhile make this one's failure look sent).
local function unsent(err)
  if type(err) ~= "table" or err.code ~= "UNAVAILABLE" then return false end
  local m = err.message or ""
  if m:sub(1, 11) ~= "connect to " and m:sub(1, 19) ~= "TLS handshake with " then return false end
  return err.unsent == true
end

-- The next backend for a call that failed unsent on the backends in
-- `tried` (a set): healthy and untried, or nil. `settings` (the call's,
-- may be nil) -> a copy with the time `since` (monotonic) took off its
-- timeout, or nil when none is left.
local function next_try(self, tried, settings, since)
  local b = healthy(self, tried, settings)
  if b == nil or tried[b] then return nil end
  if settings == nil or settings.timeout == nil then return b, settings end
  local left = settings.timeout - (monotonic() - since)
  if left <= 0 then return nil end
  local s = {}
  for k, v in pairs(settings) do s[k] = v end
  s.timeout = left
  return b, s
end

-- The backend a waiting call tries next (`timeout` seconds left, nil:
-- no deadline): the policy's pick (not in `tried`, a hedged call's other
-- attempts' backends, while there are such) when its connection may be
-- attempted now (no reconnection backoff holds it back), else another
-- such backend not ejected (not in `tried` first), else nil (also for a
-- name not resolved yet, `nowait`); or nil and the error of pick (a name
-- that did not resolve in time, every backend ejected).
local function ready(self, timeout, settings, nowait, tried)
  local b, err = pick(self, tried, timeout, settings, nowait)
  if b == nil then return nil, err end
  if b.transport:next_attempt() == nil then return b end
  local fallback
  for _, m in ipairs(self.members) do
    if m.ejected_at == nil and m.transport:next_attempt() == nil then
      if not (tried and tried[m]) then return m end
      fallback = fallback or m
    end
  end
  return fallback
end

--- Waits for a wait_for_ready call (gRPC's wait-for-ready: it does not
-- fail while its backends are in TRANSIENT_FAILURE) whose attempts all
-- failed before leaving this client: `err` the last failure, on backend
-- `b`; `settings` the call's, its timeout counted from `since`
-- (monotonic). Sleeps until the earliest reconnection backoff of a
-- backend allows an attempt (transport:next_attempt), then returns the
-- backend to try and the settings with the time taken off the timeout;
-- or nil and the error to fail with: DEADLINE_EXCEEDED "deadline exceeded
-- waiting for a connection (the last attempt: connect to HOST:PORT: why)"
-- at the deadline, UNAVAILABLE "connect to HOST:PORT: the channel is
-- closed" once the transport is closed. With `nowait` (a started call,
-- whose result() must not block) it does not sleep: nil, nil and the
-- seconds to wait before asking again. `b` nil: a started call that has
-- had no backend (its dns: name did not resolve): the errors are pick's
-- ("deadline exceeded while resolving NAME ...", "resolve NAME: the
-- channel is closed"). `tried` (a set or nil): backends to take only
-- when no other is ready (a hedged call's other attempts').
local function await_ready(self, settings, since, err, b, nowait, tried)
  local timeout = settings and settings.timeout
  local last = err.message or ""
  local cut = last:find(" (reconnection backoff: ", 1, true) -- a backoff's refusal: the attempt before it
  if cut then last = last:sub(1, cut - 1) end
  local method = type(err) == "table" and err.method or nil
  while true do
    if self.closed then
      local what = b and "connect to " .. b.address
        or (self.dns and #self.members == 0 and "resolve " .. self.dns.name)
        or (self.checking and "no backend is SERVING (health check of service \"" .. self.health .. "\")")
        or "every backend is ejected by outlier detection"
      return nil, errors.status("UNAVAILABLE", what .. ": the channel is closed", { method = method })
    end
    local left = timeout and timeout - (monotonic() - since)
    if left and left <= 0 and b then
      return nil, errors.status("DEADLINE_EXCEEDED", "deadline exceeded waiting for a connection (the last attempt: "
        .. last .. ")", { method = method })
    end
    local nb, problem = ready(self, left, settings, nowait, tried)
    if problem then
      problem.method = problem.method or method
      return nil, problem
    end
    if nb then
      if left == nil then return nb, settings end
      local s = {}
      for k, v in pairs(settings) do s[k] = v end
      s.timeout = left
      return nb, s
    end
    local wait = self:next_attempt() or 0.05 -- none held back but those ejected: look again soon
    wait = left and min(left, wait) or wait
    if nowait then return nil, nil, wait end
    pause(self, wait)
  end
end

local function address(where)
  local host = where.host:find(":", 1, true) and "[" .. where.host .. "]" or where.host
  return host .. ":" .. where.port
end

local function backend(make, where)
  return { transport = make(where), address = address(where), weight = 1, current = 0, goaways = 0 }
end

--- transport = new(places, make, policy, dns, target, wait_for_ready,
-- sleep): pc.grpc's several backends. `places` lists {host=, port=,
-- tls=} (none for a dns: target before its resolver answers);
-- make(place) -> a one-backend transport; policy "pick_first" or
-- "round_robin"; `dns` a resolver of transport/dns.lua or nil;
-- `wait_for_ready` true: gRPC's wait-for-ready for every call (a call
-- whose backends all failed to connect waits for the next attempt, a
-- name that does not resolve for the next resolution, until its
-- deadline; await_ready); `sleep` the host driver's sleep(seconds) (nil:
-- pc.sleep's) for such a call outside any task.
-- The transport has pc.grpc's methods and also
-- transport:set_load_balancing(policy), transport:set_health_check(service)
-- transport:set_outlier_detection(config) and transport:backends() ->
-- {{address=, failed=boolean, weight=, health=, ejected=boolean}, ...}.
function M.new(places, make, policy, dns, target, wait_for_ready, sleep)
  local self = setmetatable({ members = {}, make = make, policy = policy, next = 1, dns = dns,
    target = target, wait_for_ready = wait_for_ready or nil, sleep = sleep, signal = {} }, Balanced)
  self:update(places)
  return self
end

-- transport:update(places): the backends become `places` ({host=,
-- port=, tls=, weight=}); those whose address is gone are closed (their
-- calls go on), new ones added, the others kept with their state.
function Balanced:update(places)
  local by, bs = {}, {}
  local uneven = false
  for _, b in ipairs(self.members) do by[b.address] = b end
  for _, where in ipairs(places) do
    local key = address(where)
    local b = by[key] or backend(self.make, where)
    bs[#bs + 1], by[key] = b, nil
    b.weight = where.weight and where.weight > 0 and where.weight or 1
    uneven = uneven or b.weight ~= bs[1].weight
  end
  for _, gone in pairs(by) do
    gone.gone = true
    if gone.watch then gone.watch:close() end
    gone.transport:close()
  end
  self.members, self.weighted = bs, uneven
  if self.next > #bs then self.next = 1 end
  rewatch(self)
end

-- Starts or stops the members' health watches: on while a health check
-- service is set and the policy is not pick_first (A17: pick_first does
-- not health-check).
rewatch = function(self)
  local on = self.health ~= nil and self.policy ~= "pick_first"
  for _, b in ipairs(self.members) do
    if on and b.watch and b.watch.service ~= self.health then
      b.watch:close()
      b.watch = nil
    end
    if on and not b.watch then
      b.watch = health_check.watch(b.transport, self.health)
    elseif not on and b.watch then
      b.watch:close()
      b.watch = nil
    end
  end
  self.checking = on
end

--- transport:set_load_balancing("pick_first" | "round_robin" |
-- "least_request", config): the policy of calls from now on (pc.client
-- sets its service config's loadBalancingConfig this way); `config` (a
-- table or nil) of least_request: {choice_count = n} (default 2, at least
-- 2, more than 10 taken as 10; gRFC A48: n backends drawn at random, the
-- one with the fewest calls in flight taking the call). Raises on another
-- name or a bad choice_count.
function Balanced:set_load_balancing(name, config)
  if name ~= "pick_first" and name ~= "round_robin" and name ~= "least_request" then
    error("set_load_balancing: \"pick_first\", \"round_robin\" or \"least_request\" expected, got "
      .. tostring(name), 2)
  end
  if config ~= nil and type(config) ~= "table" then
    error("set_load_balancing: config: table or nil expected, got " .. type(config), 2)
  end
  if name == "least_request" then least_request.set_choice_count(self, config and config.choice_count, 2) end
  self.policy = name
  rewatch(self)
end

--- transport:set_circuit_breaker(max_requests, name): circuit breaking
-- (gRFC A32; transport/xds.lua sets it from a cluster's
-- circuit_breakers): while `max_requests` (an integer >= 0) calls are in
-- flight on the transport's backends, a new call fails UNAVAILABLE at
-- once ("NAME: circuit breaker drop: N calls in flight, max_requests M",
-- not retried), counted in backends().calls.dropped. nil turns it off.
-- Raises on a bad number.
function Balanced:set_circuit_breaker(max_requests, name)
  least_request.set_max_requests(self, max_requests, name or tostring(self.target), 2)
end

--- transport:set_outlier_detection(config): outlier detection (gRFC
-- A50; pc.client sets it from its service config's
-- outlier_detection_experimental policy, whose child policy becomes the
-- transport's; xds.lua from a cluster's outlier_detection) for the
-- transport's backends, or nil to turn it off (ejected backends return).
-- `config` is the transport's spelling of A50's fields (doc/fleet.md,
-- "Outlier detection"): {interval =, base_ejection_time =,
-- max_ejection_time = (seconds, numbers: 10, 30, 300 when absent; the
-- interval above 0), max_ejection_percent = (0..100; 10), success_rate =
-- nil (off) | {stdev_factor = (thousandths; 1900), enforcement_percentage
-- = (0..100; 100), minimum_hosts = (5), request_volume = (100)},
-- failure_percentage = nil (off) | {threshold = (0..100; 85),
-- enforcement_percentage = (100), minimum_hosts = (5), request_volume =
-- (50)}} (counts: integers of at least 0). Raises naming the field that
-- is wrong ("set_outlier_detection: failure_percentage.threshold: an
-- integer in 0..100 expected, got 150") or unknown.
function Balanced:set_outlier_detection(config)
  if config ~= nil and type(config) ~= "table" then
    error("set_outlier_detection: table or nil expected, got " .. type(config), 2)
  end
  if config ~= nil then
    local problem
    config, problem = outlier.check(config)
    if not config then error("set_outlier_detection: " .. problem, 2) end
  end
  self.outlier = config and outlier.new(config) or nil
  for _, b in ipairs(self.members) do
    b.ejected_at, b.ejections, b.od_ok, b.od_fail = nil, nil, nil, nil
  end
end

--- transport:set_ring_hash(config): the `ring_hash` policy (gRFC A42;
-- transport/ring_hash.lua) for calls from now on (pc.client sets it from
-- its service config's ring_hash_experimental, xds.lua from a RING_HASH
-- cluster): `config` {min_ring_size =, max_ring_size = (integers
-- 1..8388608, min not above max; nil: 1024 and 8388608; both capped at
-- 4096), request_hash_header = a header name (lower case, not -bin; nil: each
-- call's hash is settings.ring_hash, else random)} or nil for the
-- defaults. Raises naming the field that is wrong.
function Balanced:set_ring_hash(config)
  if config ~= nil and type(config) ~= "table" then
    error("set_ring_hash: table or nil expected, got " .. type(config), 2)
  end
  config = config or {}
  for k in pairs(config) do
    if k ~= "min_ring_size" and k ~= "max_ring_size" and k ~= "request_hash_header" then
      error("set_ring_hash: unknown field '" .. tostring(k) .. "' (min_ring_size, max_ring_size, "
        .. "request_hash_header)", 2)
    end
  end
  local problem = ring_hash.check_sizes(config.min_ring_size, config.max_ring_size, "min_ring_size", "max_ring_size")
  if problem then error("set_ring_hash: " .. problem, 2) end
  local h = config.request_hash_header
  if h ~= nil and (type(h) ~= "string" or not h:find("^[%w!#$%%&'*+%-.^_`|~]+$") or h ~= h:lower()
    or h:sub(-4) == "-bin") then
    error("set_ring_hash: request_hash_header: a lower-case header name (not -bin) expected, got "
      .. internal.show(h), 2)
  end
  self.policy, self.ring_config, self.ring = "ring_hash", config, nil
  rewatch(self)
end

--- transport:set_health_check(service): client-side health checking
-- (gRFC A17; pc.client sets it from its service config's
-- healthCheckConfig.serviceName): with any policy but `pick_first`, each backend's
-- server is asked grpc.health.v1.Health/Watch for `service` (a string,
-- "" the server as a whole) and only backends whose server says SERVING
-- take calls; a server without the Health service (UNIMPLEMENTED) is not
-- checked; a call waits, within its deadline, while no backend is SERVING
-- and some server has not answered yet, else fails UNAVAILABLE "no
-- backend is SERVING (health check of service \"NAME\")"; with
-- wait_for_ready it waits while none is SERVING (gRPC's wait-for-ready),
-- failing DEADLINE_EXCEEDED at its deadline. A started call
-- (start_unary, start_server_stream: hedging) does not wait in its start:
-- its handle's result() is nil meanwhile, and it goes out once a backend
-- is SERVING or fails so at its deadline. A SERVING answer received
-- ends its backend's failure backoff (gRPC's READY is not in backoff).
-- nil turns it off. Raises "bad argument #1 to 'set_health_check' (string
-- or nil expected, got number)" when `service` is neither.
function Balanced:set_health_check(service)
  if service ~= nil and type(service) ~= "string" then
    internal.argerror("set_health_check", "string or nil expected, got " .. type(service), 2)
  end
  self.health = service
  rewatch(self)
end

--- transport:backends() -> {{address = "host:port", failed = boolean,
-- weight = n, health = state or nil, ejected = boolean, outstanding = n}, ...}
-- in the list's order (`outstanding` its calls in flight), the list's
-- field `calls` being {outstanding = calls in flight on them all,
-- max_requests = the circuit breaker's limit or nil, dropped = calls it
-- failed} (`ejected` by outlier detection; for a
-- dns: target, what its resolver last found, taken now); `health` while
-- health checking is on (set_health_check): "connecting" (no answer yet),
-- "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", "UNKNOWN", "UNIMPLEMENTED"
-- (the server has no Health service: not checked) or "failed" (the
-- Watch stream failed; started again after a backoff). Under ring_hash
-- each also has `ring_entries` (its entries on the ring) and `ring_share`
-- (the fraction of the hash space whose calls it takes while all are up).
function Balanced:backends()
  if self.dns then resolved(self) end
  local out, now = {}, monotonic()
  for i, b in ipairs(self.members) do
    out[i] = { address = b.address, failed = b.down_until ~= nil and b.down_until > now, weight = b.weight,
      health = b.watch and b.watch.state or nil, ejected = b.ejected_at ~= nil }
  end
  if self.policy == "ring_hash" then
    local ring = self.ring
    if ring == nil or ring.members ~= self.members then
      ring = ring_hash.build(self.members, self.ring_config)
      self.ring = ring
    end
    for i, b in ipairs(self.members) do
      out[i].ring_entries, out[i].ring_share = ring.entries[b], ring.share[b]
    end
  end
  out.calls = least_request.stats(self) -- also takes each member's count
  for i, b in ipairs(self.members) do out[i].outstanding = b.outstanding or 0 end
  return out
end

--- As pc.grpc's transport:next_attempt() -> seconds until the soonest
-- connection attempt the reconnection backoff of any backend allows, or
-- nil when some backend may connect now (or the list is empty). Raises
-- on a closed transport, and when called with a dot (bad self).
function Balanced:next_attempt()
  if getmetatable(self) ~= Balanced then
    error("calling 'next_attempt' on bad self (protocall.BalancedTransport expected, got " .. type(self) .. ")", 2)
  end
  if self.closed then error("calling 'next_attempt' on bad self (transport is closed)", 2) end
  local soonest
  for _, b in ipairs(self.members) do
    local s = b.transport:next_attempt()
    if s == nil then return nil end
    if soonest == nil or s < soonest then soonest = s end
  end
  return soonest
end

local function rethrow(self, b, err)
  report(self, b, err)
  error(err, 0)
end

-- Raises as pc.grpc's transport does for a call on a closed transport.
local function check_open(self, name, level)
  if self.closed then error("calling '" .. name .. "' on bad self (transport is closed)", level + 1) end
end

-- The backend for a call of `path` with `settings`; raises the error of a
-- name that does not resolve (or did not in time).
local function chosen(self, path, settings)
  local drop = least_request.admit(self, path)
  if drop then error(drop, 0) end
  local b, err = pick(self, settings and settings.tried, settings and settings.timeout, settings)
  if b then return b end
  err.method = path
  error(err, 0)
end

-- A server stream's call (pc.grpc's Call) that moves to another backend
-- when its first backend could not be connected to: its methods act on
-- the call of the backend it is on now (`inner`).
local Moved = internal.forwarding("protocall.BalancedCall")

--- As pc.grpc's transport:unary, on the backend the policy picks.
function Balanced:unary(path, request, settings, trusted)
  check_open(self, "unary", 2)
  if trusted ~= CHECKED then check_args("unary", path, request, settings, 2, 3) end
  local since = monotonic()
  local b = chosen(self, path, settings)
  local tried, s = {}, settings
  local tok = least_request.start(self, b)
  while true do
    local ok, res, meta = pcall(b.transport.unary, b.transport, path, request, s, CHECKED)
    if ok then
      least_request.finish(tok)
      report(self, b, nil)
      return res, meta
    end
    if not unsent(res) then
      least_request.finish(tok)
      rethrow(self, b, res)
    end
    report(self, b, res)
    tried[b] = true
    local nb, ns = next_try(self, tried, settings, since)
    if nb == nil and self.wait_for_ready then
      nb, ns = await_ready(self, settings, since, res, b)
      if nb then tried = {} else res = ns end
    end
    if nb == nil then
      least_request.finish(tok)
      error(res, 0)
    end
    b, s = nb, ns
    least_request.move(tok, b)
  end
end

--- As pc.grpc's transport:server_stream, on the backend the policy picks.
function Balanced:server_stream(path, request, settings, trusted)
  check_open(self, "server_stream", 2)
  if trusted ~= CHECKED then check_args("server_stream", path, request, settings, 2, 3) end
  local since = monotonic()
  local b = chosen(self, path, settings)
  local ok, iter, state, ctl, call = pcall(b.transport.server_stream, b.transport, path, request, settings, CHECKED)
  if not ok then rethrow(self, b, iter) end
  local tok = least_request.start(self, b)
  least_request.watch(tok, call)
  local moved = setmetatable({ inner = call }, Moved)
  local tried, got = nil, false
  return function()
    while true do
      local okn, msg = pcall(iter, state, ctl)
      if okn then
        got = true
        if msg == nil then
          least_request.finish(tok)
          report(self, b, nil)
        end
        return msg
      end
      least_request.finish(tok)
      if got or not unsent(msg) then rethrow(self, b, msg) end
      report(self, b, msg)
      tried = tried or {}
      tried[b] = true
      local nb, ns = next_try(self, tried, settings, since)
      if nb == nil and self.wait_for_ready then
        nb, ns = await_ready(self, settings, since, msg, b)
        if nb then tried = {} else msg = ns end
      end
      if nb == nil then error(msg, 0) end
      local ok2, iter2, state2, ctl2, call2 = pcall(nb.transport.server_stream, nb.transport, path, request, ns,
        CHECKED)
      if not ok2 then rethrow(self, nb, iter2) end
      b, iter, state, ctl, moved.inner = nb, iter2, state2, ctl2, call2
      tok = least_request.start(self, b)
      least_request.watch(tok, call2)
    end
  end, nil, nil, moved
end

-- Request bytes a wait_for_ready stream keeps to send again on another
-- backend (as a lone backend's waiting call keeps, core/net/channel.h):
-- past them it stays on its backend.
local REPLAY = 4 * 1024 * 1024

-- A client or bidirectional stream of a wait_for_ready balancer: the
-- request messages sent are kept (`kept`, at most REPLAY bytes) until the
-- call is seen to have reached its server (all sent out on a connection,
-- a response, its headers), so
-- a stream whose backend could not be connected to starts again on the
-- next backend, or on the first one to connect after waiting
-- (await_ready), with them sent again; `inner` the backend's call.
local Replayed = { __name = "protocall.BalancedStream" }

-- Moves stream `self` on after its call failed with `err`, or raises
-- `err` (the call reached its server, or too much was sent to keep) or
-- the error of the wait (DEADLINE_EXCEEDED, UNAVAILABLE once closed).
local function replay(self, err)
  local bal = self.balanced
  while true do
    if self.ended then error(self.ended, 0) end -- cancelled or closed: never started again
    if self.kept == nil or not unsent(err) then error(err, 0) end
    report(bal, self.b, err)
    self.tried[self.b] = true
    local nb, ns = next_try(bal, self.tried, self.settings, self.since)
    if nb == nil then
      nb, ns = await_ready(bal, self.settings, self.since, err, self.b)
      if nb == nil then
        ns.method = self.path
        error(ns, 0)
      end
      self.tried = {}
    end
    local call = nb.transport:stream(self.path, ns, CHECKED)
    self.b, self.inner = nb, least_request.counted(least_request.start(bal, nb), call)
    local ok, e = pcall(function()
      for i = 1, #self.kept do call:send(self.kept[i]) end
      if self.send_closed then call:close_send() end
    end)
    if ok then return end
    err = e
  end
end

-- Runs method `name` of the current call, moving the stream on (replay)
-- when it failed unsent; `commit`: what it returned (a message, headers
-- that are not empty) shows the call reached its server (nothing is kept
-- any more).
local function replayed(self, name, commit, ...)
  while true do
    local inner = self.inner
    local ok, a = pcall(inner[name], inner, ...)
    if ok then
      if commit and a ~= nil and (type(a) ~= "table" or #a > 0) then self.kept = nil end
      return a
    end
    replay(self, a)
  end
end

function Replayed:send(bytes)
  local kept = self.kept
  if kept and type(bytes) == "string" then
    self.size = self.size + #bytes
    if self.size > REPLAY then self.kept = nil else kept[#kept + 1] = bytes end
  end
  local inner = self.inner
  local ok, err = pcall(inner.send, inner, bytes)
  if not ok then return replay(self, err) end -- sends the kept ones, this one with them
  -- pc.grpc's C call, unless its end released it (it ended OK: nothing to send again)
  local c = self.kept and not inner.closed and inner.call
  -- all of it went out on a connection: it can no longer fail unsent, so
  -- nothing is kept (a waiting call's bytes stay queued, core/net/channel.h)
  if c and c:status() == nil and c:unsent() == 0 then self.kept = nil end
end

function Replayed:close_send()
  self.send_closed = true
  return self.inner:close_send()
end

function Replayed:recv() return replayed(self, "recv", true) end

function Replayed:close_and_recv()
  self.send_closed = true
  return replayed(self, "close_and_recv", true)
end

function Replayed:headers() return replayed(self, "headers", true) end
function Replayed:trailers() return replayed(self, "trailers", true) end
-- A cancelled or closed stream is not moved on any more (its call may
-- have failed unsent already, the failure not seen yet): it raises
-- CANCELLED.
local function stop(self)
  self.kept = nil
  self.ended = self.ended or errors.status("CANCELLED", "cancelled", { method = self.path })
end

function Replayed:cancel()
  stop(self)
  return self.inner:cancel()
end

function Replayed:close()
  stop(self)
  return self.inner:close()
end
function Replayed:metadata() return self.inner:metadata() end
function Replayed:buffered() return self.inner:buffered() end
Replayed.__close = Replayed.close
function Replayed.__index(self, k)
  local m = Replayed[k]
  if m ~= nil then return m end
  return rawget(self, "inner")[k]
end

--- As pc.grpc's transport:stream (client streaming and bidirectional),
-- on the backend the policy picks; with wait_for_ready a stream whose
-- backend could not be connected to moves on as a unary call does, its
-- request messages sent again (Replayed).
function Balanced:stream(path, settings, trusted)
  check_open(self, "stream", 2)
  if trusted ~= CHECKED then check_args("stream", path, nil, settings, 2, 2) end
  local since = monotonic()
  local b = chosen(self, path, settings)
  local call = least_request.counted(least_request.start(self, b), b.transport:stream(path, settings, CHECKED))
  if not self.wait_for_ready then return call end
  return setmetatable({ inner = call, balanced = self, b = b, path = path, settings = settings, since = since,
    tried = {}, kept = {}, size = 0 }, Replayed)
end

-- A started call that failed before it had a backend (a name that does
-- not resolve).
local Failed = { __name = "protocall.BalancedFailed" }
Failed.__index = Failed
function Failed:result() return false, self.err end
function Failed.cancel() end

-- A started call on a backend, reporting its outcome: `b` the backend it
-- is on, `inner` its handle there; a call its backend could not be
-- connected to starts again on the next untried one (`unary` above).
-- `tried`: the backends its hedged call's attempts went to (settings.tried,
-- shared with them; its own otherwise), kept across a wait; `failed`: those
-- this attempt could not connect to since its last wait.
local Moving = { __name = "protocall.BalancedStarted" }
Moving.__index = Moving

-- Its result is kept (self.kept): a later result() gives it again,
-- reported and counted once.
local function kept(self, ok, v, call)
  self.kept = { ok, v, call }
  return ok, v, call
end

-- Moves started call `self` to backend `nb` (settings `ns`): pending.
local function move(self, nb, ns)
  self.tried[nb] = true
  self.b, self.inner = nb, nb.transport[self.name](nb.transport, self.path, self.request, ns, CHECKED)
  self.channel = self.inner.channel
  if self.tok then
    least_request.move(self.tok, nb)
  else -- its first backend
    self.tok = least_request.start(self.balanced, nb)
  end
  least_request.watch(self.tok, self.inner)
  return nil
end

-- Started call `self` ended on its backend: reports it; a stream that
-- goes on is counted until its iterator ends.
local function finished(self, ok, v, call)
  report(self.balanced, self.b, ok and nil or v)
  local tok = self.tok
  if ok and self.name == "start_server_stream" then
    least_request.watch(tok, call)
    local iter, bal, b = v, self.balanced, self.b
    v = function()
      local okn, msg = pcall(iter)
      if not okn or msg == nil then least_request.finish(tok) end
      if not okn then
        mark_failed(bal, b, msg) -- its connection lost mid-stream
        error(msg, 0)
      end
      return msg
    end
  else
    least_request.finish(tok)
  end
  return kept(self, ok, v, call)
end

function Moving:result()
  local k = self.kept
  if k then return k[1], k[2], k[3] end
  if self.cancelled then return false, self.cancelled end
  local bal, b = self.balanced, self.b
  local v
  if self.wait_at then -- wait_for_ready: every backend failed, the next attempt not due yet
    if monotonic() < self.wait_at and not bal.closed then return nil end
    v, self.wait_at = self.last, nil
  else
    local ok, res, call = self.inner:result()
    if ok == nil then return nil end
    if ok or not unsent(res) then return finished(self, ok, res, call) end
    v = res
    report(bal, b, v)
    self.tried[b], self.failed[b] = true, true
    local nb, ns = next_try(bal, self.tried, self.settings, self.since)
    if nb then return move(self, nb, ns) end
    if not bal.wait_for_ready then
      least_request.finish(self.tok)
      return kept(self, false, v)
    end
    -- a new round over the backends: those this attempt failed on may take
    -- it again; the other attempts' stay in `tried` (taken last)
    for f in pairs(self.failed) do self.tried[f] = nil end
    self.failed = {}
  end
  local nb, ns, wait = await_ready(bal, self.settings, self.since, v, b, true, self.tried)
  if nb then return move(self, nb, ns) end
  if wait then
    self.wait_at, self.last = monotonic() + wait, v
    return nil
  end
  if self.tok then least_request.finish(self.tok) end
  return kept(self, false, ns)
end

function Moving:cancel()
  if self.tok then least_request.finish(self.tok) end
  if self.inner then self.inner:cancel() end
  if self.wait_at then -- between attempts: nothing of it is in flight
    self.wait_at, self.cancelled = nil, errors.status("CANCELLED", "cancelled")
    self.cancelled.method = self.path
  end
end

-- A started call (`name` start_unary or start_server_stream) on the
-- backend the policy picks; settings.tried records it.
local function started(self, name, path, request, settings, trusted)
  check_open(self, name, 3)
  if trusted ~= CHECKED then check_args(name, path, request, settings, 3, 3) end
  local since = monotonic()
  local tried = settings and settings.tried
  local b, err
  err = least_request.admit(self, path)
  if not err then b, err = pick(self, tried, settings and settings.timeout, settings, true) end
  if not b and not err then -- no backend yet (a name not resolved, no health answer): its result() asks again
    return setmetatable({ balanced = self, name = name, path = path, request = request, settings = settings,
      since = since, tried = tried or {}, failed = {}, wait_at = monotonic(), last = { method = path } }, Moving)
  end
  if not b then
    err.method = path
    return setmetatable({ err = err }, Failed)
  end
  if tried then tried[b] = true end
  local h = b.transport[name](b.transport, path, request, settings, CHECKED)
  local tok = least_request.start(self, b)
  least_request.watch(tok, h)
  return setmetatable({ balanced = self, b = b, inner = h, channel = h.channel, name = name, path = path,
    request = request, settings = settings, since = since, tried = tried or { [b] = true }, failed = {}, tok = tok },
    Moving)
end

--- As pc.grpc's transport:start_unary; settings.tried (a table) keeps
-- the backends a hedged call used, so its next attempt goes elsewhere.
function Balanced:start_unary(path, request, settings, trusted)
  local h = started(self, "start_unary", path, request, settings, trusted)
  return h -- not a tail call: misuse raises at the caller's line
end

--- As pc.grpc's transport:start_server_stream (settings.tried as start_unary).
function Balanced:start_server_stream(path, request, settings, trusted)
  local h = started(self, "start_server_stream", path, request, settings, trusted)
  return h
end

--- As pc.grpc's transport:wait, over calls on any of the backends (a
-- started call waiting for a backend wakes when it may have one: its
-- next attempt due, a health check's answer come).
function Balanced:wait(handles, seconds)
  local now, waiting = nil, false
  for i = 1, type(handles) == "table" and #handles or 0 do
    local at = type(handles[i]) == "table" and rawget(handles[i], "wait_at")
    if at and type(seconds) == "number" then -- a call waiting for its next attempt: look at it then
      now, waiting = now or monotonic(), true
      if at - now < seconds then seconds = at - now > 0 and at - now or 0 end
    end
  end
  if waiting and self.checking then -- pumps the health watches' connections too
    local list, seen = {}, {}
    for i = 1, #handles do list[i] = handles[i] end
    for _, m in ipairs(self.members) do
      local ch = m.watch:channel()
      if ch and not seen[ch] then
        seen[ch] = true
        list[#list + 1] = { channel = ch }
      end
    end
    handles = list
  end
  local b = self.members[1]
  if b == nil then -- no backend: no call started; a wait_for_ready one waits for the name's answer
    if self.dns and not self.closed and type(seconds) == "number" then return self.dns:wait(seconds) end
    return sched.sleep(seconds)
  end
  return b.transport:wait(handles, seconds)
end

--- Closes every backend's connection (and the resolver).
function Balanced:close()
  self.closed = true
  sched.fire(self.signal) -- wait_for_ready calls waiting for an attempt end now
  for _, b in ipairs(self.members) do
    if b.watch then b.watch:close() end
    b.transport:close()
  end
  if self.dns then self.dns:close() end
end

return M
