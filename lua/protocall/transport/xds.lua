--- `pc.grpc("xds:///name")`: a target whose routes, clusters and
-- endpoints come from an xDS management server (gRPC's proxyless
-- design, gRFCs A27 and A28; the ADS client is transport/xds_client.lua).
--
-- The listener `name` (LDS) holds an HttpConnectionManager whose route
-- configuration is inline or named (RDS); its virtual host is the one
-- whose domains match `name` best (exact, then the longest "*suffix",
-- then the longest "prefix*", then "*"). Each call takes the first route
-- whose match fits its path (prefix, path or safe_regex), headers and
-- runtime_fraction (transport/xds_route.lua), then the route's cluster,
-- or one of its weighted_clusters drawn by weight for that call; the
-- route's timeout caps the call's deadline and its retry_policy (else
-- the virtual host's, gRFC A44) retries unary calls and server streams
-- that fail before their first message. A cluster (CDS, type EDS,
-- ROUND_ROBIN, LEAST_REQUEST or RING_HASH) reaches its endpoints (EDS, the cluster's
-- eds_cluster_config.service_name or its name): those of the lowest
-- priority that has any, HEALTHY or UNKNOWN, in localities of a
-- load_balancing_weight above 0 (others are left out, as gRPC leaves
-- them), each weighted by its load_balancing_weight (default 1) times its
-- locality's, behind one round_robin
-- balancer (transport/balancer.lua) per cluster, updated in place on
-- every EDS change (calls in flight go on), with the cluster's
-- outlier_detection (gRFC A50, transport/outlier.lua) when it has one.
-- A RING_HASH cluster (gRFC A42) balances by ring_hash instead
-- (transport/ring_hash.lua: its ring_hash_lb_config's sizes, each call's
-- hash from its route's hash_policy; the target's io.grpc.channel_id is
-- random per target); a LEAST_REQUEST cluster's balancer is least_request
-- (gRFC A48, its least_request_lb_config.choice_count), and each
-- cluster's circuit breaker (gRFC A32: max_requests of its first
-- DEFAULT-priority circuit_breakers threshold, default 1024) fails a call
-- UNAVAILABLE at once while that many of its calls are in flight.
-- The first call waits, within
-- its deadline, for the configuration; a call no route matches fails
-- UNAVAILABLE naming its path, and so does a call whose listener or route
-- configuration does not exist (A27's does-not-exist timer, or a listener
-- deleted), was NACKed with no good copy (naming why, as grpc-go's resolver
-- fails calls on a resource error with nothing cached) or has no virtual
-- host for `name`, and a call to a cluster that never
-- had a good resource, naming why (it does not exist, its CDS or EDS
-- resource was NACKed with no good copy, its endpoints do not exist or
-- none is healthy: grpc-core's TRANSIENT_FAILURE picker), unless the
-- target is wait_for_ready: then it waits.
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local balancer = require "protocall.transport.balancer"
local ring_hash = require "protocall.transport.ring_hash"
local xds_client = require "protocall.transport.xds_client"
local xds_route = require "protocall.transport.xds_route"

local setmetatable, getmetatable, pairs, ipairs, error, tostring, type =
  setmetatable, getmetatable, pairs, ipairs, error, tostring, type
local min, random, lower, sort = math.min, math.random, string.lower, table.sort
local monotonic = core.monotonic
local check_args, CHECKED = internal.check_args, internal.CHECKED

local M = {}

local HEALTHY = { [0] = true, [1] = true } -- UNKNOWN, HEALTHY

local Xds = { __name = "protocall.XdsTransport" }
Xds.__index = Xds

-- The virtual host of `vhosts` for `host` (gRPC's domain matching).
local function virtual_host(vhosts, host)
  host = lower(host)
  local best, rank, len -- rank: 1 exact, 2 suffix, 3 prefix, 4 universal
  for _, vh in ipairs(vhosts or {}) do
    for _, d in ipairs(vh.domains or {}) do
      d = lower(d)
      local r, l
      if d == "*" then
        r, l = 4, 0
      elseif d:sub(1, 1) == "*" then
        local s = d:sub(2)
        if #host > #s and host:sub(-#s) == s then r, l = 2, #s end
      elseif d:sub(-1) == "*" then
        local p = d:sub(1, -2)
        if #host > #p and host:sub(1, #p) == p then r, l = 3, #p end
      elseif d == host then
        r, l = 1, #d
      end
      if r and (best == nil or r < rank or (r == rank and l > len)) then best, rank, len = vh, r, l end
    end
  end
  return best
end
M.virtual_host = virtual_host

-- Whether route `r` takes a call of `path` with `metadata`
-- (transport/xds_route.lua: path, safe_regex, runtime_fraction, headers).
local matches = xds_route.matches
M.matches = matches

-- The weight of a locality: 0 (left out, as gRPC does) when unset.
local function locality_weight(loc)
  return loc.load_balancing_weight and loc.load_balancing_weight.value or 0
end

-- The endpoints of ClusterLoadAssignment `cla` as balancer places.
local function places_of(cla)
  local lowest
  for _, loc in ipairs(cla.endpoints or {}) do
    for _, e in ipairs(locality_weight(loc) > 0 and loc.lb_endpoints or {}) do
      if HEALTHY[e.health_status or 0] then
        local p = loc.priority or 0
        if lowest == nil or p < lowest then lowest = p end
      end
    end
  end
  local places = {}
  for _, loc in ipairs(cla.endpoints or {}) do
    local lw = locality_weight(loc)
    if (loc.priority or 0) == lowest and lw > 0 then
      for _, e in ipairs(loc.lb_endpoints or {}) do
        if HEALTHY[e.health_status or 0] then
          local sa = e.endpoint.address.socket_address
          local w = e.load_balancing_weight and e.load_balancing_weight.value or 1
          -- two uint32 weights: their product may pass 2^63 (an integer would
          -- wrap); a float then, exact below 2^53
          local ew = w * 1.0 * lw
          if ew < 2 ^ 53 then ew = w * lw end
          places[#places + 1] = { host = xds_client.endpoint_host(sa.address), port = tostring(sa.port_value),
            tls = false, weight = ew }
        end
      end
    end
  end
  return places
end
M.places_of = places_of

-- The cluster table of `name`: its balancer made on first use.
local function cluster(self, name)
  local cl = self.clusters[name]
  if cl == nil then
    cl = { name = name, balanced = balancer.new({}, self.make, "round_robin", nil, "xds:///" .. self.name,
      self.wait_for_ready) }
    self.clusters[name] = cl
  end
  return cl
end

-- The cluster's lb_policy (ROUND_ROBIN; LEAST_REQUEST with its
-- choice_count: gRFC A48; RING_HASH with cds.ring, its ring_hash_lb_config
-- checked by xds_client.lua: gRFC A42) and circuit breaker (max_requests:
-- gRFC A32) onto its balancer, from when CDS `cds` changes them.
local function balancing(self, cl, cds)
  local r = cds.ring
  local policy = r and "ring_hash" or cds.lb_policy == 1 and "least_request" or "round_robin"
  local key = policy .. " " .. tostring(cds.choice_count)
    .. (r and " " .. tostring(r.min_ring_size) .. " " .. tostring(r.max_ring_size) or "")
  if key ~= cl.lb_key then
    if r then
      cl.balanced:set_ring_hash(r)
    else
      cl.balanced:set_load_balancing(policy, { choice_count = cds.choice_count })
    end
    cl.lb_key = key
  end
  if cds.max_requests ~= cl.max_requests then
    cl.balanced:set_circuit_breaker(cds.max_requests, "xds:///" .. self.name .. ": cluster " .. cl.name)
    cl.max_requests = cds.max_requests
  end
end

-- `settings` with the call's ring hash (gRFC A42): by route action `a`'s
-- hash_policy over the call's metadata, random when no policy has a result.
local function hashed(self, a, settings)
  local s = {}
  for k, v in pairs(settings or {}) do s[k] = v end
  s.ring_hash = ring_hash.request_hash(a.hash_policy, s.metadata, self.channel_id)
  return s
end

-- Marks resource `name` of `kind` as needed by the target (in `want`),
-- subscribing when it was not.
local function need(self, want, kind, name)
  local key = kind .. " " .. name
  want[key] = true
  if not self.watched[key] then
    self.watched[key] = { kind, name }
    self.client:watch(kind, name)
  end
end

-- Brings the target up to date with the client's cache: the routes of
-- its virtual host, and each cluster's balancer; subscribes to what they
-- name. self.why says what is missing while nothing can be routed.
local function update(self, c)
  local want = {}
  need(self, want, "LDS", self.name)
  local l, state, nack = c:get("LDS", self.name)
  self.fatal = nil
  if l == nil then
    self.routes, self.why = nil, "waiting for listener " .. self.name .. " (LDS)"
    if state == "absent" then self.fatal = "listener " .. self.name .. " does not exist (LDS)" end
    if state == "refused" then
      self.fatal = "listener " .. self.name .. ": NACKed LDS with no good copy: " .. nack
    end
    return
  end
  local hcm, rc = l.hcm, l.hcm.route_config
  if not rc then
    local rname = hcm.rds.route_config_name
    need(self, want, "RDS", rname)
    rc, state, nack = c:get("RDS", rname)
    if rc == nil then
      self.routes, self.why = nil, "waiting for route configuration " .. rname .. " (RDS)"
      if state == "absent" then self.fatal = "route configuration " .. rname .. " does not exist (RDS)" end
      if state == "refused" then
        self.fatal = "route configuration " .. rname .. ": NACKed RDS with no good copy: " .. nack
      end
      return
    end
  end
  local vh = virtual_host(rc.virtual_hosts, self.name)
  if vh == nil then
    self.routes, self.why = nil, "waiting for a virtual host matching " .. self.name
    self.fatal = "no virtual host of route configuration " .. tostring(rc.name) .. " matches " .. self.name
    return
  end
  self.routes, self.why = vh.routes or {}, nil
  local named = {}
  for _, r in ipairs(self.routes) do
    local a = r.route
    if a and a.cluster then
      named[a.cluster] = true
    elseif a then
      for _, w in ipairs(a.weighted_clusters.clusters) do named[w.name] = true end
    end
  end
  for name in pairs(named) do
    cluster(self, name)
    need(self, want, "CDS", name)
  end
  for name, cl in pairs(self.clusters) do
    if not named[name] then -- no route names it now: its connections close once their calls end
      cl.balanced:close()
      self.clusters[name] = nil
    end
  end
  for name, cl in pairs(self.clusters) do
    local cds, why, problem = c:get("CDS", name)
    -- a cluster known bad fails its calls (wait_for_ready ones wait: route()), as grpc-core's cds
    -- policy reports TRANSIENT_FAILURE with the XdsDependencyManager's "CDS resource X: ..." status
    cl.fatal = why == "absent" and "cluster " .. name .. " does not exist (CDS)"
      or why == "refused" and "cluster " .. name .. ": NACKed CDS with no good copy: " .. problem or nil
    if cds then
      if cds.outlier_key ~= cl.outlier_key then
        -- outlier detection (gRFC A50) as the cluster says, from when its config changes;
        -- xds_client.lua NACKed a config outlier.check refuses, so this one is taken
        cl.balanced:set_outlier_detection(cds.outlier)
        cl.outlier_key = cds.outlier_key
      end
      balancing(self, cl, cds)
      local svc = cds.eds_cluster_config.service_name
      if svc == nil or svc == "" then svc = name end
      cl.eds = svc
      need(self, want, "EDS", svc)
      local cla, ewhy, eproblem = c:get("EDS", svc)
      if cla and cla ~= cl.cla then
        cl.cla = cla
        cl.places = places_of(cla)
        cl.version = c.version.EDS
        cl.balanced:update(cl.places)
      elseif cla == nil then -- never a good copy (the last good one stays, as grpc-core keeps it)
        cl.fatal = ewhy == "absent" and "cluster " .. name .. ": endpoints " .. svc .. " do not exist (EDS)"
          or ewhy == "refused" and "cluster " .. name .. ": NACKed EDS with no good copy: " .. eproblem or nil
      end
    elseif cl.places then
      -- deleted: its endpoints go with it (their EDS is unsubscribed below), as grpc-core's cds
      -- policy drops its child; should it come back, its calls wait for its endpoints again
      cl.cla, cl.places, cl.eds = nil, nil, nil
      cl.balanced:update({})
    end
    cl.ready = not cl.fatal and cl.places and #cl.places > 0
  end
  -- the routes are known: what they no longer need is unsubscribed (while
  -- waiting for a listener or route configuration, nothing is dropped)
  for key, kn in pairs(self.watched) do
    if not want[key] then
      self.watched[key] = nil
      c:unwatch(kn[1], kn[2])
    end
  end
end

-- As update() when the client's cache changed, its subscriptions asked
-- for once per kind.
local function refresh(self)
  local c = self.client
  if self.generation == c.generation then return end
  self.generation = c.generation
  c:hold()
  update(self, c)
  c:flush()
end

-- Polls the client (waiting at most `seconds`) and takes what changed.
local function poll(self, seconds)
  self.client:poll(seconds)
  refresh(self)
end

local function unavailable(self, path, message)
  local e = errors.status("UNAVAILABLE", "xds:///" .. self.name .. ": " .. message)
  e.method = path
  return e
end

-- Waits (within `deadline`, monotonic seconds or nil) until `ready()`
-- returns non-nil; raises DEADLINE_EXCEEDED naming `what()` else, and
-- the client's trouble unless what() returns a second value, true (it
-- named the reason).
local function await(self, path, deadline, ready, what)
  while true do
    local v = ready()
    if v ~= nil then return v end
    local left = deadline and deadline - monotonic()
    if left and left <= 0 then
      local text, named = what()
      local trouble = not named and self.client:trouble()
      local e = errors.status("DEADLINE_EXCEEDED", "xds:///" .. self.name .. ": deadline exceeded " .. text
        .. (trouble and " (" .. trouble .. ")" or ""))
      e.method = path
      error(e, 0)
    end
    poll(self, left and min(left, 0.05) or 0.05)
  end
end

-- The cluster balancer, the settings (timeout capped by the route's)
-- and the route's retry policy (xds_route.retry_of's, or false) for a
-- call of `path` with `settings`; raises UNAVAILABLE when no route
-- matches or the cluster has no endpoint.
local function route(self, path, settings)
  poll(self, 0)
  local timeout = settings and settings.timeout
  local deadline = timeout and (self.fatal or self.routes == nil) and monotonic() + timeout
  if self.fatal or self.routes == nil then -- else no closures: the common case costs nothing more
    -- a listener or route configuration that does not exist or was NACKed with no good copy, or
    -- no virtual host, fails the call UNAVAILABLE as grpc-core's resolver error does; a
    -- wait_for_ready call waits instead
    local wait = self.wait_for_ready
    await(self, path, deadline, function()
      if self.fatal and not wait then error(unavailable(self, path, self.fatal), 0) end
      return self.routes
    end, function()
      local fatal = self.fatal
      return "while " .. tostring(self.why) .. (fatal and " (" .. fatal .. ")" or ""), fatal ~= nil
    end)
  end
  local metadata = settings and settings.metadata
  local routes, chosen = self.routes, nil
  for i = 1, #routes do
    local r = routes[i]
    if r.match.every or matches(r, path, metadata) then
      chosen = r
      break
    end
  end
  if chosen == nil then error(unavailable(self, path, "no route matches " .. path), 0) end
  local a = chosen.route
  if a == nil then error(unavailable(self, path, "the route for " .. path .. " has no route action"), 0) end
  local name = a.cluster
  if name == nil then
    local draw = random() * a.total_weight
    for _, w in ipairs(a.weighted_clusters.clusters) do
      local wt = w.weight and w.weight.value or 0
      name = w.name
      if draw < wt then break end
      draw = draw - wt
    end
  end
  local cl = cluster(self, name)
  if not cl.ready then
    -- a cluster known bad (cl.fatal) or without an endpoint fails the call UNAVAILABLE, as
    -- grpc-core's TRANSIENT_FAILURE picker fails it; a wait_for_ready call waits instead
    deadline = deadline or timeout and monotonic() + timeout
    local wait = self.wait_for_ready
    await(self, path, deadline, function()
      if cl.ready then return true end
      local places = cl.places
      if not wait then
        if cl.fatal then error(unavailable(self, path, cl.fatal), 0) end
        if places and #places == 0 then
          error(unavailable(self, path, "cluster " .. name .. " has no healthy endpoint"), 0)
        end
      end
    end, function()
      local places = cl.places
      local why = cl.fatal or places and #places == 0 and "cluster " .. name .. " has no healthy endpoint"
      return "while waiting for cluster " .. name .. (cl.eds and " endpoints (EDS " .. cl.eds .. ")" or " (CDS)")
        .. (why and " (" .. why .. ")" or ""), not not why
    end)
  end
  if cl.balanced.policy == "ring_hash" then settings = hashed(self, a, settings) end
  local cap = a.timeout_s
  if cap and cap > 0 then
    local left = deadline and deadline - monotonic() or timeout
    local s = {}
    for k, v in pairs(settings or {}) do s[k] = v end
    s.timeout = left and min(left, cap) or cap
    settings = s
  end
  return cl.balanced, settings, a.retry
end

--- transport | nil, problem = M.new(name, make, connect, bootstrap,
-- wait_for_ready): the transport of target "xds:///name": `make(place)`
-- -> a one-backend pc.grpc transport (its options), `connect(uri)` -> the
-- transport to the management server, `bootstrap` as
-- xds_client.bootstrap returns it, `wait_for_ready` true: each cluster's
-- balancer waits as pc.grpc's wait_for_ready says (balancer.new). It has
-- pc.grpc's methods and backends(). nil and the problem of a server uri
-- pc.grpc refuses.
function M.new(name, make, connect, bootstrap, wait_for_ready)
  local client, problem = xds_client.client(bootstrap, connect)
  if not client then return nil, problem end
  client:retain()
  local self = setmetatable({ name = name, make = make, client = client, clusters = {}, generation = -1,
    watched = {}, wait_for_ready = wait_for_ready,
    channel_id = tostring(random(0, 0x7fffffff)) .. tostring(random(0, 0x7fffffff)) }, Xds)
  refresh(self) -- subscribes to the listener
  return self
end

--- As pc.grpc's transport:unary, on the cluster the call's route picks,
-- attempted again per the route's retry policy (gRFC A44) when it has
-- one.
function Xds:unary(path, request, settings)
  check_args("unary", path, request, settings, 2, 3)
  local b, s, retry = route(self, path, settings)
  if retry then return xds_route.unary(b, path, request, s, retry) end
  return b:unary(path, request, s, CHECKED)
end

--- As pc.grpc's transport:server_stream, on the route's cluster,
-- attempted again per the route's retry policy (gRFC A44) while it fails
-- before its first response message.
function Xds:server_stream(path, request, settings)
  check_args("server_stream", path, request, settings, 2, 3)
  local b, s, retry = route(self, path, settings)
  if retry then return xds_route.server_stream(b, path, request, s, retry) end
  return b:server_stream(path, request, s, CHECKED)
end

--- As pc.grpc's transport:stream, on the route's cluster.
function Xds:stream(path, settings)
  check_args("stream", path, nil, settings, 2, 2)
  local b, s = route(self, path, settings)
  return b:stream(path, s, CHECKED)
end

-- A started call that failed before it had a backend.
local Failed = { __name = "protocall.XdsFailed" }
Failed.__index = Failed
function Failed:result() return false, self.err end
function Failed.cancel() end

local function started(self, name, path, request, settings)
  check_args(name, path, request, settings, 3, 3)
  local ok, b, s = pcall(route, self, path, settings)
  if not ok then
    if type(b) ~= "table" then error(b, 0) end
    return setmetatable({ err = b }, Failed)
  end
  return b[name](b, path, request, s, CHECKED)
end

--- As pc.grpc's transport:start_unary, on the route's cluster.
function Xds:start_unary(path, request, settings)
  local h = started(self, "start_unary", path, request, settings)
  return h
end

--- As pc.grpc's transport:start_server_stream, on the route's cluster.
function Xds:start_server_stream(path, request, settings)
  local h = started(self, "start_server_stream", path, request, settings)
  return h
end

--- As pc.grpc's transport:wait, over calls on any cluster.
function Xds:wait(handles, seconds)
  local c = self.client
  if c.transport then return c.transport:wait(handles, seconds) end
  return sched.sleep(seconds)
end

--- transport:backends() -> the endpoints of every cluster the target's
-- calls used, each {cluster =, address =, weight =, failed =, health =,
-- ejected =, outstanding = calls in flight, version = the EDS
-- version_info it came from}, `calls`: per cluster name {outstanding =,
-- max_requests =, dropped = calls its circuit breaker failed}, and
-- `versions`: {LDS =, RDS =, CDS =, EDS =} last accepted, `nacked`: the
-- last refused response of each kind {version =, nonce =, problem =}.
function Xds:backends()
  poll(self, 0)
  local out = {}
  local names = {}
  for name in pairs(self.clusters) do names[#names + 1] = name end
  sort(names)
  local calls = {}
  for _, name in ipairs(names) do
    local cl = self.clusters[name]
    local list = cl.balanced:backends()
    calls[name] = list.calls
    for _, b in ipairs(list) do
      b.cluster, b.version = name, cl.version
      out[#out + 1] = b
    end
  end
  out.calls = calls
  out.versions, out.nacked = self.client:versions()
  return out
end

--- As pc.grpc's transport:next_attempt(), over the backends of every
-- cluster the target's calls used: the soonest, nil when one may connect
-- now (or no call chose a cluster yet). Raises on a closed transport, and
-- when called with a dot (bad self).
function Xds:next_attempt()
  if getmetatable(self) ~= Xds then
    error("calling 'next_attempt' on bad self (protocall.XdsTransport expected, got " .. type(self) .. ")", 2)
  end
  if self.closed then error("calling 'next_attempt' on bad self (transport is closed)", 2) end
  local soonest
  for _, cl in pairs(self.clusters) do
    local s = cl.balanced:next_attempt()
    if s == nil then return nil end
    if soonest == nil or s < soonest then soonest = s end
  end
  return soonest
end

--- Closes every cluster's connections; the ADS stream closes with the
-- last xds: target using its management server.
function Xds:close()
  if self.closed then return end
  self.closed = true
  for _, cl in pairs(self.clusters) do cl.balanced:close() end
  self.client:hold()
  for _, kn in pairs(self.watched) do self.client:unwatch(kn[1], kn[2]) end
  self.client:flush()
  self.watched = {}
  self.client:release()
end

return M
