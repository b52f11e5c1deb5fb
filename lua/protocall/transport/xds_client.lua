--- The xDS client of gRPC's proxyless design (gRFCs A27, A28): the
-- bootstrap naming the management server, and one Aggregated Discovery
-- Service stream (envoy.service.discovery.v3, state of the world) per
-- management server, shared by every xds: target of the process.
--
-- Resources are subscribed per type (LDS, RDS, CDS, EDS) by name; each
-- response is checked resource by resource and ACKed (its version_info
-- and nonce) or, when a resource is refused, NACKed, per resource as
-- gRFC A46 says: its valid resources are taken all the same, a refused
-- one keeps its last good copy (with none, targets wait for it), and the
-- NACK carries the response's nonce, an error_detail naming each refused
-- resource and why ("; " between them; ten at most, the others counted)
-- and the version last accepted (this response's when it had a valid
-- resource subscribed to, as grpc-core and grpc-js count it). A resource that does not decode (its
-- Any, its message, a type_url not the response's) is refused by its
-- index; a response that does not decode is NACKed whole when its
-- type_url and nonce can be read, else ignored. Besides what the targets
-- cannot use, it refuses what gRPC and Envoy refuse: a name twice in one
-- response, weights summing past 4294967295 (a route's weighted_clusters,
-- an EDS locality's endpoints, a priority's localities), an endpoint
-- address that is not an IPv4 or IPv6 literal or is in one assignment
-- twice (compared by binary address and port), a weighted locality
-- without its locality field or twice in one priority, an endpoint
-- load_balancing_weight of 0, EDS priorities with a
-- gap (a locality of weight 0 or unset is left out unchecked, as gRPC
-- leaves it), an outlier_detection Duration out of
-- range or an interval of 0, a LEAST_REQUEST cluster's choice_count below
-- 2. A resource of a name not subscribed to is ignored (neither checked
-- nor cached), as grpc-js ignores it. A response of a type never asked
-- for is ignored, as gRPC's clients do (NACKing it would ask for every
-- resource of that type); client:trouble() names it. The stream is read without
-- blocking whenever a target picks (client:poll); when it ends it starts
-- again after a backoff (1 s doubling to 30 s, reset by a response),
-- subscribing again to every name with the versions last accepted; the
-- cache stays across reconnections, so calls go on meanwhile.
local core = require "protocall.core"
local internal = require "protocall.internal"
local outlier = require "protocall.transport.outlier"
local sched = require "protocall.sched"
local driver = require "protocall.transport.driver"
local protos = require "protocall.transport.xds_protos"
local least_request = require "protocall.transport.least_request"
local ring_hash = require "protocall.transport.ring_hash"
local xds_route = require "protocall.transport.xds_route"

local setmetatable, pairs, ipairs, pcall, tostring, tonumber, next = setmetatable, pairs, ipairs, pcall, tostring,
  tonumber, next
local min, format, concat, sort, char = math.min, string.format, table.concat, table.sort, string.char
local monotonic = core.monotonic

local M = {}

local FIRST_BACKOFF, MAX_BACKOFF = 1, 30
--- M.RESOURCE_TIMEOUT: seconds a subscribed resource may go unsent once
-- the stream is up before it is taken not to exist (gRFC A27's and
-- Envoy's 15 s; specs shorten it).
M.RESOURCE_TIMEOUT = 15
local KINDS = { "LDS", "RDS", "CDS", "EDS" }
local KIND_OF = {}
for k, url in pairs(protos.TYPE_URL) do KIND_OF[url] = k end
local MESSAGE = {
  LDS = "envoy.config.listener.v3.Listener", RDS = "envoy.config.route.v3.RouteConfiguration",
  CDS = "envoy.config.cluster.v3.Cluster", EDS = "envoy.config.endpoint.v3.ClusterLoadAssignment",
}
-- Cached resources absent from a state-of-the-world response are deleted for these.
local WHOLE = { LDS = true, CDS = true }

local function read_file(path)
  local f, why = io.open(path, "rb")
  if not f then return nil, why end
  local s, rwhy = f:read("*a")
  f:close()
  if not s then return nil, path .. ": " .. tostring(rwhy) end -- a directory opens, then fails to read
  return s
end

--- bootstrap | nil, problem = M.bootstrap(text): the bootstrap (gRFC
-- A27) from JSON text `text`, else from the file named by env
-- GRPC_XDS_BOOTSTRAP, else from env GRPC_XDS_BOOTSTRAP_CONFIG:
-- {server_uri = "host:port" of xds_servers[0], node = a table of
-- envoy.config.core.v3.Node (id, cluster, metadata, locality)}. The
-- server's channel_creds must include {"type": "insecure"} (the only
-- kind this client speaks). Problems name where: "xds bootstrap
-- (GRPC_XDS_BOOTSTRAP file b.json): $.xds_servers[0].server_uri: ...".
function M.bootstrap(text)
  local where = "the xds_bootstrap option"
  if text == nil then
    local path = os.getenv("GRPC_XDS_BOOTSTRAP")
    if path and path ~= "" then
      local why
      text, why = read_file(path)
      where = "GRPC_XDS_BOOTSTRAP file " .. path
      if not text then return nil, "xds bootstrap: cannot read " .. why end
    else
      text = os.getenv("GRPC_XDS_BOOTSTRAP_CONFIG")
      where = "GRPC_XDS_BOOTSTRAP_CONFIG"
      if text == nil or text == "" then
        return nil, "xds bootstrap: none given (set GRPC_XDS_BOOTSTRAP to a file, GRPC_XDS_BOOTSTRAP_CONFIG to "
          .. "its JSON text, or pc.grpc's option xds_bootstrap)"
      end
    end
  end
  local prefix = "xds bootstrap (" .. where .. "): "
  local b, err = core.from_json(protos.type("protocall.xds.Bootstrap"), text, { ignore_unknown = true })
  if not b then return nil, prefix .. err end
  b = core.to_table(b)
  local servers = b.xds_servers
  if servers == nil or #servers == 0 then return nil, prefix .. "$.xds_servers: at least one server expected" end
  local s = servers[1]
  if s.server_uri == nil or s.server_uri == "" then
    return nil, prefix .. "$.xds_servers[0].server_uri: a target (host:port) expected"
  end
  if s.server_uri:lower():find("^xds:") then -- its own bootstrap would name it again, without end
    return nil, prefix .. "$.xds_servers[0].server_uri: an xds: target cannot be the management server, got '"
      .. s.server_uri .. "'"
  end
  local insecure, kinds = false, {}
  for _, c in ipairs(s.channel_creds or {}) do
    kinds[#kinds + 1] = tostring(c.type)
    if c.type == "insecure" then insecure = true end
  end
  if not insecure then
    return nil, prefix .. "$.xds_servers[0].channel_creds: {\"type\": \"insecure\"} expected (the only kind "
      .. "supported), got " .. (#kinds > 0 and concat(kinds, ", ") or "none")
  end
  return { server_uri = s.server_uri, node = b.node or {} }
end

-- Resource checks: each returns nil, or "field: what is wrong". They
-- keep what the targets need, decoded, in the resource table.

-- A google.protobuf.Duration table in seconds (a Lua number: LuaJIT
-- decodes int64 seconds as cdata).
local function duration(d)
  if d == nil then return nil end
  return (tonumber(d.seconds) or 0) + (d.nanos or 0) / 1e9
end

-- The most a sum of weights may be (gRPC and Envoy refuse more).
local UINT32_MAX = 4294967295

-- Route `r` (its match present) at `rat`, with its virtual host's retry
-- policy `vh_retry`: nil, or "field: what is wrong".
local function check_route(r, rat, vh_retry)
  local bad = xds_route.check_match(r.match, rat .. ".match")
  if bad then return bad end
  local a = r.route
  if a == nil then return nil end
  if a.cluster == nil and a.weighted_clusters == nil then
    return rat .. ".route: cluster or weighted_clusters expected"
  end
  if a.cluster == "" then return rat .. ".route.cluster: empty" end
  if a.weighted_clusters then
    local total = 0
    for k, c in ipairs(a.weighted_clusters.clusters or {}) do
      local w = c.weight and c.weight.value or 0
      if c.name == nil or c.name == "" then
        return format("%s.route.weighted_clusters.clusters[%d].name: empty", rat, k - 1)
      end
      total = total + w
    end
    if total == 0 then return rat .. ".route.weighted_clusters: the weights sum to 0" end
    if total > UINT32_MAX then
      return format("%s.route.weighted_clusters: the weights sum to %.0f, more than %d", rat, total, UINT32_MAX)
    end
    a.total_weight = total
  end
  a.timeout_s = duration(a.timeout)
  -- the route's retry_policy, else the virtual host's (gRFC A44)
  if a.retry_policy then
    a.retry, bad = xds_route.retry_of(a.retry_policy, rat .. ".route.retry_policy")
  else
    a.retry, bad = vh_retry, nil
  end
  return bad
end

local function check_route_config(rc)
  for i, vh in ipairs(rc.virtual_hosts or {}) do
    local at = format("virtual_hosts[%d]", i - 1)
    if vh.domains == nil or #vh.domains == 0 then return at .. ".domains: at least one domain expected" end
    local vh_retry, vh_bad = xds_route.retry_of(vh.retry_policy, at .. ".retry_policy")
    if vh_bad then return vh_bad end
    local kept = {}
    for j, r in ipairs(vh.routes or {}) do
      local rat = format("%s.routes[%d]", at, j - 1)
      if r.match == nil then return rat .. ".match: missing" end
      -- a route with query_parameters never matches a gRPC call (gRFC A28:
      -- gRPC has no query string): left out unchecked, as grpc-go leaves it
      local qp = r.match.query_parameters
      if qp == nil or #qp == 0 then
        local bad = check_route(r, rat, vh_retry)
        if bad then return bad end
        kept[#kept + 1] = r
      end
    end
    vh.routes = kept
  end
end

-- Cluster.outlier_detection as transport/outlier.lua's config, mapped
-- as gRFC A50 says (gRPC's defaults; success rate ejection unless
-- enforcing_success_rate is 0, failure percentage ejection only when
-- enforcing_failure_percentage is above 0), as outlier.check takes it;
-- or nil and "field: problem".
-- The longest google.protobuf.Duration (seconds: 10,000 years), the limit
-- outlier.check has.
local MAX_DURATION_S = internal.DURATION_MAX

local function outlier_config(od)
  local function u32(f, default, most)
    local v = od[f] and od[f].value
    if v == nil then return default end
    if most and v > most then return nil, format("outlier_detection.%s: at most %d expected, got %d", f, most, v) end
    return v
  end
  local c = {}
  for _, k in ipairs { { "interval", 10 }, { "base_ejection_time", 30 }, { "max_ejection_time", 300 } } do
    local f, d = k[1], od[k[1]]
    local s = k[2]
    if d then
      local secs, nanos = tonumber(d.seconds) or 0, d.nanos or 0
      local at = "outlier_detection." .. f
      if nanos < 0 or nanos > 999999999 then
        return nil, format("%s.nanos: 0..999999999 expected, got %d", at, nanos)
      end
      if secs < 0 then return nil, format("%s: a duration of at least 0 expected, got %.0f s", at, secs) end
      s = duration(d)
      if s > MAX_DURATION_S then -- seconds and nanos together
        return nil, format("%s: at most %.0f s expected (Duration's range), got %.0f%s s", at, MAX_DURATION_S, secs,
          nanos > 0 and format(".%09d", nanos) or "")
      end
      if f == "interval" and s == 0 then return nil, at .. ": a duration above 0 expected (Envoy's rule), got 0" end
    end
    c[f] = s
  end
  local why
  c.max_ejection_percent, why = u32("max_ejection_percent", 10, 100)
  if why then return nil, why end
  local esr, efp
  esr, why = u32("enforcing_success_rate", 100, 100)
  if why then return nil, why end
  efp, why = u32("enforcing_failure_percentage", 0, 100)
  if why then return nil, why end
  if esr > 0 then
    c.success_rate = { stdev_factor = u32("success_rate_stdev_factor", 1900), enforcement_percentage = esr,
      minimum_hosts = u32("success_rate_minimum_hosts", 5), request_volume = u32("success_rate_request_volume", 100) }
  end
  if efp > 0 then
    local threshold
    threshold, why = u32("failure_percentage_threshold", 85, 100)
    if why then return nil, why end
    c.failure_percentage = { threshold = threshold, enforcement_percentage = efp,
      minimum_hosts = u32("failure_percentage_minimum_hosts", 5),
      request_volume = u32("failure_percentage_request_volume", 50) }
  end
  -- what the detector refuses is the cluster's NACK, never a raise when a
  -- target sets it (transport/xds.lua)
  local checked, problem = outlier.check(c)
  if not checked then return nil, "outlier_detection: " .. problem end
  return checked
end

local CHECK = {}

--- problem = M.check(kind, resource): nil when `resource` (a plain table
-- of the message of `kind`, "LDS", "RDS", "CDS" or "EDS") is taken, else
-- "field: what is wrong", as its NACK says it. Keeps what the targets
-- need in the table (the decoded HttpConnectionManager, outlier config).
function M.check(kind, resource) return CHECK[kind](resource) end

function CHECK.LDS(l)
  local any = l.api_listener and l.api_listener.api_listener
  if any == nil then return "api_listener: missing (not a gRPC client listener)" end
  if any.type_url ~= protos.HCM then
    return "api_listener.api_listener: " .. protos.HCM .. " expected, got " .. tostring(any.type_url)
  end
  local ok, hcm = pcall(core.decode, protos.type(protos.HCM:match("/(.*)$")), any.value or "", { table = true })
  if not ok or hcm == nil then return "api_listener.api_listener: HttpConnectionManager does not decode" end
  l.hcm = hcm
  if hcm.rds then
    local cs = hcm.rds.config_source
    if cs == nil or (cs.ads == nil and cs.self == nil) then
      return "api_listener.api_listener.rds.config_source: ads or self expected"
    end
    if hcm.rds.route_config_name == nil or hcm.rds.route_config_name == "" then
      return "api_listener.api_listener.rds.route_config_name: empty"
    end
  elseif hcm.route_config then
    local why = check_route_config(hcm.route_config)
    if why then return "api_listener.api_listener.route_config." .. why end
  else
    return "api_listener.api_listener: rds or route_config expected"
  end
end

function CHECK.RDS(rc) return check_route_config(rc) end

-- envoy.config.cluster.v3.Cluster's DiscoveryType and LbPolicy names, for
-- the NACK of a value protocall does not take.
local CLUSTER_TYPE = { [0] = "STATIC", "STRICT_DNS", "LOGICAL_DNS", "EDS", "ORIGINAL_DST" }
local LB_POLICY = { [0] = "ROUND_ROBIN", "LEAST_REQUEST", "RING_HASH", "RANDOM", [5] = "MAGLEV",
  [6] = "CLUSTER_PROVIDED", [7] = "LOAD_BALANCING_POLICY_CONFIG" }

-- Cluster.ring_hash_lb_config (may be nil) as transport/ring_hash.lua's
-- config (gRFC A42: hash_function XX_HASH; sizes 1..8388608, the minimum
-- not above the maximum), or nil and "field: problem".
local function ring_hash_config(rh)
  if rh == nil then return {} end
  local f = rh.hash_function or 0
  if f ~= 0 then
    return nil, "ring_hash_lb_config.hash_function: XX_HASH expected, got "
      .. (f == 1 and "MURMUR_HASH_2" or tostring(f))
  end
  -- a wrapper present with no value is 0 (decoded as a table, proto3 zeros are left out)
  local lo = rh.minimum_ring_size and tonumber(rh.minimum_ring_size.value or 0)
  local hi = rh.maximum_ring_size and tonumber(rh.maximum_ring_size.value or 0)
  local why = ring_hash.check_sizes(lo, hi, "ring_hash_lb_config.minimum_ring_size",
    "ring_hash_lb_config.maximum_ring_size")
  if why then return nil, why end
  return { min_ring_size = lo, max_ring_size = hi }
end

-- Cluster c's least_request config (gRFC A48) and circuit breaker (gRFC
-- A32), kept as c.choice_count (LEAST_REQUEST only: least_request_lb_config
-- .choice_count, default 2, at least 2, capped at 10 as gRPC caps it) and
-- c.max_requests (the first circuit_breakers.thresholds of priority
-- DEFAULT's max_requests, default 1024); or "field: problem".
local function least_request_and_breaker(c)
  if (c.lb_policy or 0) == 1 then
    local cfg = c.least_request_lb_config
    local n = cfg and cfg.choice_count and (cfg.choice_count.value or 0) or least_request.DEFAULT_CHOICE
    if n < least_request.MIN_CHOICE then
      return format("least_request_lb_config.choice_count: at least %d expected, got %d", least_request.MIN_CHOICE, n)
    end
    c.choice_count = min(n, least_request.MAX_CHOICE)
  end
  c.max_requests = least_request.DEFAULT_MAX_REQUESTS
  for _, t in ipairs(c.circuit_breakers and c.circuit_breakers.thresholds or {}) do
    if (t.priority or 0) == 0 then
      if t.max_requests then c.max_requests = t.max_requests.value or 0 end
      break
    end
  end
end

function CHECK.CDS(c)
  local custom = c.cluster_type
  if custom then -- the other member of type's oneof
    if custom.name == "envoy.clusters.aggregate" then
      return "cluster_type: aggregate clusters (envoy.clusters.aggregate) are not supported"
    end
    return "cluster_type: EDS clusters expected (custom cluster types are not supported), got " .. tostring(custom.name)
  end
  local t = c.type or 0
  if t ~= 3 then
    return "type: EDS expected (only EDS clusters are supported), got " .. (CLUSTER_TYPE[t] or tostring(t))
  end
  local eds = c.eds_cluster_config
  local cs = eds and eds.eds_config
  if cs == nil or (cs.ads == nil and cs.self == nil) then
    return "eds_cluster_config.eds_config: ads or self expected"
  end
  local lb = c.lb_policy or 0
  if lb == 2 then
    local why
    c.ring, why = ring_hash_config(c.ring_hash_lb_config)
    if why then return why end
  elseif lb ~= 0 and lb ~= 1 then
    return "lb_policy: ROUND_ROBIN, LEAST_REQUEST or RING_HASH expected, got " .. (LB_POLICY[lb] or tostring(lb))
  end
  local bad = least_request_and_breaker(c)
  if bad then return bad end
  if c.outlier_detection then
    local why
    c.outlier, why = outlier_config(c.outlier_detection)
    if why then return why end
    c.outlier_key = core.encode(protos.type("envoy.config.cluster.v3.OutlierDetection"), c.outlier_detection)
  end
end

-- Whether `s` is an IPv4 address in dotted decimal: four parts of 0..255,
-- no leading zero (inet_aton would read "010" as octal).
local function ipv4(s)
  local parts = { s:match("^(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)$") }
  if #parts ~= 4 then return false end
  for _, p in ipairs(parts) do
    if tonumber(p) > 255 or (#p > 1 and p:sub(1, 1) == "0") then return false end
  end
  return true
end

-- Whether `s` is an IPv6 address as RFC 4291 writes it (hex groups, at
-- most one "::", an IPv4 tail), without brackets, port or zone (CHECK.EDS
-- takes a zone apart: zone_index).
local function ipv6(s)
  if not s:find(":", 1, true) or s:find("[^%x:.]") then return false end
  local head = s
  local v4 = s:match(":(%d+%.[%d.]+)$")
  if v4 then
    if not ipv4(v4) then return false end
    head = s:sub(1, #s - #v4)
    if head:sub(-2) ~= "::" then head = head:sub(1, -2) end
  elseif s:find(".", 1, true) then
    return false
  end
  local groups, double = 0, false
  local i = 1
  if head:sub(1, 2) == "::" then
    double, i = true, 3
  elseif head:sub(1, 1) == ":" then
    return false
  end
  while i <= #head do
    local g = head:match("^%x%x?%x?%x?", i)
    if g == nil then return false end
    groups, i = groups + 1, i + #g
    if i <= #head then
      if head:sub(i, i + 1) == "::" then
        if double then return false end
        double, i = true, i + 2
      elseif head:sub(i, i) == ":" and i < #head then
        i = i + 1
      else
        return false
      end
    end
  end
  local tail = v4 and 2 or 0
  if double then return groups + tail <= 7 end
  return groups + tail == 8
end
M.ip_literal = function(s) return ipv4(s) or ipv6(s) end

-- The 16 bytes of IPv6 address `s` (one ipv6() takes), as inet_pton
-- gives them: "::1", "0::1" and "0:0:0:0:0:0:0:1" are one address. No
-- table or closure per address: an assignment may have many thousands.
local function group_bytes(g)
  local n = tonumber(g, 16)
  return char((n - n % 256) / 256, n % 256)
end
local function ipv6_bytes(s)
  local head, tail = s, ""
  local v4 = s:match(":(%d+%.[%d.]+)$")
  if v4 then
    local a, b, c, d = v4:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    tail = char(tonumber(a), tonumber(b), tonumber(c), tonumber(d))
    head = s:sub(1, #s - #v4)
    if head:sub(-2) ~= "::" then head = head:sub(1, -2) end
  end
  -- each group (and the ":" before it) becomes its two bytes
  local double = head:find("::", 1, true)
  if double == nil then return (head:gsub(":?(%x+)", group_bytes)) .. tail end
  local left = head:sub(1, double - 1):gsub(":?(%x+)", group_bytes)
  local right = head:sub(double + 2):gsub(":?(%x+)", group_bytes) .. tail
  return left .. ("\0"):rep(16 - #left - #right) .. right
end

-- The scope index of the zone of an IPv6 address ("fe80::1%eth0"), as
-- grpc-core's grpc_parse_ipv6_hostport reads it: a decimal number, else
-- the name of a network interface of this host (if_nametoindex); nil when
-- it is neither. (grpc-go takes any: Go's dialer reads the zone.)
local function zone_index(zone)
  if zone:find("^%d+$") then
    local n = tonumber(zone)
    return n <= UINT32_MAX and n or nil
  end
  local index = core.if_index(zone)
  return index > 0 and index or nil
end

--- host = xds_client.endpoint_host(address): an EDS endpoint's address
-- (one CHECK.EDS took) as the connection is made to it: the zone of an
-- IPv6 address as its scope index ("fe80::1%eth0" -> "fe80::1%2"), which
-- getaddrinfo takes for any address (glibc takes a name for a link-local
-- one alone). An interface gone since CHECK.EDS took its name keeps the
-- address as written: connecting to it then fails naming that zone, as
-- grpc-core's sockaddr, whose scope index was read at parse time, fails to
-- connect once its interface is gone; the endpoint stays one of the
-- cluster's (not dropped from its weights and ring), and works again
-- should the interface come back.
function M.endpoint_host(address)
  local head, zone = address:match("^([^%%]*)%%(.*)$")
  if head == nil then return address end
  local index = zone_index(zone)
  return index and head .. "%" .. index or address
end

-- The key an endpoint address is compared by, as grpc-core's
-- ResolvedAddressSet compares the sockaddr: the family, the binary
-- address, the scope index of an IPv6 zone (`scope`; 0 is none) and the
-- port ("::ffff:1.2.3.4" and "::ffff:102:304" are one address; "1.2.3.4"
-- is another, an IPv4 sockaddr; "fe80::1%1" and "fe80::1%lo" one).
local function address_key(address, v6, port, scope)
  if v6 then
    return "6" .. ipv6_bytes(address) .. ((scope or 0) ~= 0 and "%" .. scope or "") .. ":" .. port
  end
  local a, b, c, d = address:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  return "4" .. char(tonumber(a), tonumber(b), tonumber(c), tonumber(d)) .. ":" .. port
end
M.address_key = address_key

-- A ClusterLoadAssignment is checked as grpc-core's
-- src/core/xds/grpc/xds_endpoint_parser.cc (LocalityParse,
-- EndpointAddressesParse, EdsResourceParse) and grpc-js-xds's
-- endpoint-resource-type.ts (validateResource) check it: a locality whose
-- load_balancing_weight is 0 or unset takes no load and is left out
-- unchecked ("If LB weight is not specified or 0, it means this locality
-- is assigned no load"); the others have a `locality` field, and no
-- two of one priority the same region, zone and sub_zone; an endpoint's
-- load_balancing_weight, when set, is above 0; an address:port is in the
-- assignment once, compared as grpc-core compares it (the family, the
-- binary address and the port: "::1" and "0::1" are one address); the
-- priorities of the localities kept run from 0 without a gap (grpc-core:
-- "priority 1 empty"); the weights of each priority's localities, and of
-- each locality's endpoints, sum to at most uint32 max.
local function ep_at(i, j) return format("endpoints[%d].lb_endpoints[%d]", i - 1, j - 1) end
local function spelled(sa, v6) return format(v6 and "[%s]:%d" or "%s:%d", sa.address, sa.port_value) end
function CHECK.EDS(cla)
  local sums, count, top = {}, 0, -1
  local where, at_j, sas = {}, {}, {} -- by address key: the endpoint that has it (i, j) and its socket_address
  local localities = {} -- by priority, by region, zone and sub_zone: the index that has it
  for i, loc in ipairs(cla.endpoints or {}) do
    local lw = loc.load_balancing_weight and loc.load_balancing_weight.value or 0
    local name = loc.locality
    if lw > 0 and name == nil then return format("endpoints[%d].locality: missing", i - 1) end
    local sum = 0
    for j, e in ipairs(lw > 0 and loc.lb_endpoints or {}) do
      local sa = e.endpoint and e.endpoint.address and e.endpoint.address.socket_address
      local address, port = sa and sa.address, sa and sa.port_value
      local v6 = address and ipv6(address)
      local ip, scope, ok = address, nil, v6 or address and ipv4(address)
      if not ok and address then -- an IPv6 address may carry a zone ("fe80::1%eth0")
        local head, zone = address:match("^([^%%]*)%%(.*)$")
        if head and ipv6(head) then
          ip, v6, scope = head, true, zone_index(zone)
          ok = scope ~= nil
        end
      end
      local key = ok and port and port >= 1 and port <= 65535 and address_key(ip, v6, port, scope)
      -- the common case, a new address, costs no text
      if key and where[key] == nil then
        where[key], at_j[key], sas[key] = i, j, sa
      else
        local ep = ep_at(i, j)
        local at = ep .. ".endpoint.address.socket_address"
        if sa == nil then return at .. ": missing" end
        if address == nil or address == "" then return at .. ".address: empty" end
        if v6 and ip ~= address and not scope then
          return format("%s.address: the zone of %q is no number and names no network interface of this host", at,
            address)
        end
        if not ok then return format("%s.address: an IP address expected, got %q", at, address) end
        if port == nil or port < 1 or port > 65535 then
          return at .. ".port_value: a port in 1..65535 expected"
        end
        local written, before = spelled(sa, v6), spelled(sas[key], v6)
        return format("%s: duplicate endpoint address %s (%s has it%s)", at, written, ep_at(where[key], at_j[key]),
          before ~= written and " as " .. before or "")
      end
      -- a wrapper present with no value is 0 (decoded as a table, proto3 zeros are left out)
      local w = e.load_balancing_weight and (e.load_balancing_weight.value or 0) or 1
      if w == 0 then return ep_at(i, j) .. ".load_balancing_weight: above 0 expected, got 0" end
      sum = sum + w
    end
    if sum > UINT32_MAX then
      return format("endpoints[%d].lb_endpoints: the load_balancing_weights sum to %.0f, more than %d", i - 1, sum,
        UINT32_MAX)
    end
    if lw > 0 then
      local p = loc.priority or 0
      local region, zone, sub_zone = name.region or "", name.zone or "", name.sub_zone or ""
      local key = #region .. ":" .. region .. #zone .. ":" .. zone .. sub_zone
      local seen = localities[p] or {}
      localities[p] = seen
      if seen[key] then
        return format("endpoints[%d].locality: duplicate locality {region=%q, zone=%q, sub_zone=%q} in priority %d "
          .. "(endpoints[%d] has it)", i - 1, region, zone, sub_zone, p, seen[key] - 1)
      end
      seen[key] = i
      if sums[p] == nil then count = count + 1 end
      sums[p] = (sums[p] or 0) + lw
      if p > top then top = p end
    end
  end
  for p = 0, count - 1 do -- count steps at most: a priority may be up to 2^32 - 1
    local sum = sums[p]
    if sum == nil then
      return format("endpoints: priority %d has no locality of a load_balancing_weight above 0 (the priorities "
        .. "must run from 0 without a gap; the highest is %d)", p, top)
    end
    if sum > UINT32_MAX then
      return format("endpoints: the load_balancing_weights of priority %d's localities sum to %.0f, more than %d", p,
        sum, UINT32_MAX)
    end
  end
end

local Client = { __name = "protocall.XdsClient" }
Client.__index = Client

local clients = {} -- by server_uri

--- client | nil, problem = M.client(bootstrap, connect): the client of
-- the management server `bootstrap.server_uri`, one per server in the
-- process (made on first use); connect(uri) -> a pc.grpc transport to it
-- (made now; it connects at the first request), raising on a bad uri:
-- then nil and "$.xds_servers[0].server_uri: ...".
function M.client(bootstrap, connect)
  local c = clients[bootstrap.server_uri]
  if c and not c.closed then return c end
  local ok, transport = pcall(connect, bootstrap.server_uri)
  if not ok then
    return nil, "xds bootstrap: $.xds_servers[0].server_uri: " .. tostring(transport):gsub("^pc%.grpc: ", "")
  end
  c = setmetatable({ uri = bootstrap.server_uri, node = bootstrap.node, transport = transport, subs = {}, cache = {},
    version = {}, nonce = {}, generation = 0, retry_at = 0, users = 0, nacks = {}, standing = {}, refused = {},
    asked = {}, due = {}, missing = {} }, Client)
  for _, k in ipairs(KINDS) do
    c.subs[k], c.cache[k], c.refused[k], c.version[k] = {}, {}, {}, nil
    c.asked[k], c.due[k], c.missing[k] = {}, {}, {}
  end
  clients[bootstrap.server_uri] = c
  return c
end

local function names_of(set)
  local list = {}
  for n in pairs(set) do list[#list + 1] = n end
  sort(list)
  return list
end

-- Sends one DiscoveryRequest for `kind` on the stream (when up):
-- `err` (a string) makes it a NACK. Nothing is sent when it does not
-- encode (a nonce read from a response that does not decode may be no
-- UTF-8).
local function request(self, kind, err)
  local call = self.call
  if call == nil then return end
  local r = { type_url = protos.TYPE_URL[kind], resource_names = names_of(self.subs[kind]),
    version_info = self.version[kind], response_nonce = self.nonce[kind] }
  if not self.sent_node then r.node = self.node end
  if err then r.error_detail = { code = 3, message = err } end -- INVALID_ARGUMENT
  local encoded, bytes = pcall(core.encode, protos.type("envoy.service.discovery.v3.DiscoveryRequest"), r)
  if not encoded then return end
  local ok = pcall(call.send, call, bytes)
  if ok then
    self.sent_node = true
    local asked = self.asked[kind] -- sent on this stream: their does-not-exist timers may start (timers())
    for name in pairs(self.subs[kind]) do asked[name] = true end
  end
end

-- The resource-does-not-exist timers (gRFC A27, A57): a resource asked
-- for on the stream, neither cached nor refused, that has not come
-- M.RESOURCE_TIMEOUT seconds after the request naming it went out on a
-- connection that works (A57: sent, and the channel READY) is missing,
-- get() says "absent", until it comes. A response read on the stream
-- proves the connection, and so do the stream's request bytes all sent
-- on a connection whose server sent its HTTP/2 SETTINGS (the channel
-- READY, as grpc-core and grpc-go count it; call:peer_settings()): a call
-- waiting for a connection keeps them queued (call:unsent()), a peer
-- that took the connection and never speaks HTTP/2 sends no SETTINGS,
-- and a server owes no response while nothing asked for exists (A57's
-- "Rationale"). The timers stop with the stream; a new one starts them
-- again.
local function timers(self)
  local call = self.call
  if call == nil then return end
  local raw = call.call
  if not (self.up or raw:peer_settings() and raw:unsent() == 0) then return end
  local now = monotonic()
  for _, k in ipairs(KINDS) do
    local asked, due, missing, cache, refused = self.asked[k], self.due[k], self.missing[k], self.cache[k],
      self.refused[k]
    for name in pairs(asked) do
      if cache[name] ~= nil or refused[name] ~= nil or missing[name] then
        asked[name], due[name] = nil, nil
      elseif due[name] == nil then
        due[name] = now + M.RESOURCE_TIMEOUT
      elseif now >= due[name] then
        asked[name], due[name], missing[name] = nil, nil, true
        self.generation = self.generation + 1
      end
    end
  end
end

-- The stream ended or failed (`why`): start again after the backoff.
local function ended(self, why)
  self.stream_trouble = "ADS stream to " .. self.uri .. ": " .. why
  if self.call then pcall(self.call.close, self.call) end
  self.call, self.sent_node, self.up = nil, false, false
  -- a nonce names a response of its stream: the next one asks without (grpc-core keeps nonces
  -- per ADS call, the versions per channel); some servers take a request with one as an ACK
  for _, k in ipairs(KINDS) do self.asked[k], self.due[k], self.nonce[k] = {}, {}, nil end
  self.backoff = self.backoff and min(self.backoff * 2, MAX_BACKOFF) or FIRST_BACKOFF
  self.retry_at = monotonic() + self.backoff
end

local function start(self)
  local ok, call = pcall(self.transport.stream, self.transport, protos.ADS_PATH, {})
  if not ok then return ended(self, type(call) == "table" and tostring(call.message) or tostring(call)) end
  self.call, self.pumped = call, { call.channel } -- what poll pumps, made once per stream
  for _, k in ipairs(KINDS) do
    if next(self.subs[k]) ~= nil then request(self, k) end
  end
end

-- The version_info, type_url and nonce of DiscoveryResponse bytes that do
-- not decode, read field by field up to the damage (each nil when not
-- reached): enough to NACK the response when its type is one asked for.
local function salvage(bytes)
  local i, n, got = 1, #bytes, {}
  local function varint()
    local v, mul = 0, 1
    for _ = 1, 10 do
      if i > n then return nil end
      local b = bytes:byte(i)
      i, v, mul = i + 1, v + b % 128 * mul, mul * 128
      if b < 128 then return v end
    end
  end
  local FIELD = { [1] = "version_info", [4] = "type_url", [5] = "nonce" }
  while i <= n do
    local tag = varint()
    if tag == nil then break end
    local wire = tag % 8
    if wire == 0 then
      if varint() == nil then break end
    elseif wire == 1 or wire == 5 then
      i = i + (wire == 1 and 8 or 4)
    elseif wire == 2 then
      local len = varint()
      if len == nil or i + len - 1 > n then break end
      local f = FIELD[(tag - wire) / 8]
      if f then got[f] = bytes:sub(i, i + len - 1) end
      i = i + len
    else
      break
    end
  end
  return got.version_info, got.type_url, got.nonce
end

-- A NACK names at most NACK_NAMED of a response's problems and counts the
-- others, in at most NACK_MAX bytes (cut at a character's start, "..."
-- marking it): a response of many bad resources, a few bytes each, would
-- else make a NACK (and the texts of the calls waiting) ~45 times its size,
-- past what a control plane takes (4 MB in grpc-go), and a stream failing
-- on it gets the same response again. One resource's problem is cut so
-- too (bounded()): a call to a cluster refused with no good copy fails
-- with it, and the control plane chooses its length.
local NACK_NAMED, NACK_MAX = 10, 4096
local function bounded(text)
  if #text <= NACK_MAX then return text end
  local cut = NACK_MAX
  while (text:byte(cut + 1) or 0) >= 0x80 and text:byte(cut + 1) < 0xc0 do cut = cut - 1 end
  return text:sub(1, cut) .. "..."
end
local function nack_text(problems)
  local n = #problems
  local text = bounded(concat(problems, "; ", 1, min(n, NACK_NAMED)))
  if n > NACK_NAMED then text = format("%s; and %d more", text, n - NACK_NAMED) end
  return text
end

-- Takes one DiscoveryResponse (bytes): ACK or NACK. Per gRFC A46, as
-- grpc-core's and grpc-js's clients do it: every valid resource of the
-- response is taken, the bad ones keep their last good copy (or, with
-- none, get() says "refused"), and the response is NACKed naming each bad
-- one; the response's version_info becomes the one requests carry when a
-- resource subscribed to was taken or nothing was wrong
-- (xds_client.cc's "If we had valid resources or the update was empty,
-- update the version").
local function take(self, bytes)
  local r, bad_response = core.decode(protos.type("protocall.xds.DiscoveryResponseEnvelope"), bytes, { table = true })
  local version, url, nonce
  if r then
    version, url, nonce = r.version_info, r.type_url, r.nonce
  else -- named as the message it stands for
    version, url, nonce = salvage(bytes)
    bad_response = tostring(bad_response):gsub("^protocall%.xds%.DiscoveryResponseEnvelope",
      "envoy.service.discovery.v3.DiscoveryResponse", 1)
  end
  local kind = KIND_OF[url]
  self.backoff, self.stream_trouble, self.up = nil, nil, true
  if kind == nil or (r == nil and nonce == nil) then
    -- a type never asked for: ignored, as gRPC's clients do (a NACK would be a
    -- request for that type with no names, a wildcard subscription); the nonces
    -- of the other types stay as they are. So is one whose type or nonce cannot
    -- be read (grpc-core ignores a response it cannot parse; a NACK without the
    -- nonce would read as a new request, which a server may answer with the same
    -- response at once).
    self.ignored = r and "a response of type " .. tostring(url) .. ", never asked for"
      or "a DiscoveryResponse that does not decode (" .. bad_response .. ")"
        .. (kind and " with no nonce to NACK" or " of no type asked for")
    return
  end
  self.nonce[kind] = nonce
  if r == nil then -- its type and nonce read: NACKed, nothing of it taken (nor any LDS/CDS absence)
    local problem = "DiscoveryResponse does not decode: " .. bad_response
    self.nacks[kind] = { version = version, nonce = nonce, problem = problem }
    self.standing[kind] = problem
    return request(self, kind, problem)
  end
  local RT, A = protos.type(MESSAGE[kind]), protos.type("google.protobuf.Any")
  local subs = self.subs[kind]
  local got, seen, refused, problems = {}, {}, {}, {}
  for i, raw in ipairs(r.resources or {}) do
    local at = format("resources[%d]", i - 1)
    local problem
    local any, awhy = core.decode(A, raw, { table = true })
    if any == nil then
      problem = format("%s: google.protobuf.Any does not decode: %s", at, tostring(awhy))
    elseif any.type_url ~= url then
      problem = format("%s: type %s expected, got %s", at, url, tostring(any.type_url))
    else
      local res, why = core.decode(RT, any.value or "", { table = true })
      local name = res and (res.name or res.cluster_name)
      if res == nil then
        problem = format("%s: %s does not decode: %s", at, MESSAGE[kind], tostring(why))
      elseif name == nil or name == "" then
        problem = at .. ": no name"
      elseif seen[name] then -- neither copy is taken
        problem = bounded(format("%s: %s %s named twice in one response", at, MESSAGE[kind], name))
        if subs[name] ~= nil then got[name], refused[name] = nil, problem end
      else
        seen[name] = true
        -- one not subscribed to is neither checked nor kept, as grpc-js ignores it:
        -- a state-of-the-world server may send every resource of a kind
        if subs[name] ~= nil then
          local bad = CHECK[kind](res)
          if bad then
            -- bounded as a NACK is: it becomes the text of every call the resource fails
            problem = bounded(format("%s %s: %s", MESSAGE[kind], name, bad))
            refused[name] = problem
          else
            got[name] = res
          end
        end
      end
    end
    problems[#problems + 1] = problem
  end
  local cache, refusal, missing = self.cache[kind], self.refused[kind], self.missing[kind]
  if WHOLE[kind] then
    -- a cached one absent from the response is deleted: it does not exist (a refused one was
    -- there). One never cached is left to its does-not-exist timer, as grpc-core and grpc-go
    -- leave it: the response may answer a request sent before it was asked for.
    for name in pairs(cache) do
      if not seen[name] then cache[name], refusal[name], missing[name] = nil, nil, true end
    end
  end
  for name, res in pairs(got) do cache[name], refusal[name], missing[name] = res, nil, nil end
  for name, problem in pairs(refused) do -- its last good copy stays in the cache
    refusal[name], missing[name] = problem, nil
  end
  if next(got) ~= nil or #problems == 0 then self.version[kind] = version end
  self.generation = self.generation + 1
  if #problems > 0 then
    local problem = nack_text(problems)
    self.nacks[kind] = { version = version, nonce = nonce, problem = problem }
    self.standing[kind] = problem
    return request(self, kind, problem)
  end
  self.standing[kind], self.ignored = nil, nil
  request(self, kind)
end

-- A poll of 0 seconds reads the stream at most this often (seconds): a
-- busy target's calls do not each pay for a look at its socket.
local QUICK_POLL = 0.005

--- client:poll(seconds): starts the stream when due, pumps its channel
-- for at most `seconds` (0: only what is there, and nothing when the last
-- look was less than 5 ms ago) and takes every response that arrived (a
-- task yields meanwhile under pc.run).
function Client:poll(seconds)
  if self.closed then return end
  local now = monotonic()
  if seconds <= 0 and self.polled and now - self.polled < QUICK_POLL then return end
  self.polled = now
  if self.call == nil then
    if monotonic() < self.retry_at then
      if seconds > 0 then sched.sleep(min(seconds, self.retry_at - monotonic())) end
      return
    end
    start(self)
    if self.call == nil then return end
  end
  local call = self.call
  driver.pump(self.pumped, seconds)
  local raw = call.call
  while self.call == call do
    local m = raw:next()
    if m == false then break end
    if m == nil then
      local st = raw:status()
      return ended(self, st.code .. ": " .. tostring(st.message))
    end
    take(self, m)
  end
  timers(self)
end

--- client:watch(kind, name): subscribes to resource `name` of `kind`
-- ("LDS", "RDS", "CDS", "EDS"): asked at once when the stream is up
-- (at client:flush() while client:hold() holds the requests).
-- Counted: each watch needs its unwatch.
function Client:watch(kind, name)
  local set = self.subs[kind]
  local n = set[name]
  set[name] = (n or 0) + 1
  if n == nil then
    local held = self.held
    if held then held[kind] = true else request(self, kind) end
  end
end

--- client:hold(): watch and unwatch ask nothing until client:flush(),
-- which asks once for each kind they changed: each request names every
-- resource of its kind, so a route configuration naming thousands of
-- clusters, asked once per cluster, would cost time and bytes quadratic
-- in their number (4,000 clusters: 5 s and 336 MB; grpc-core coalesces
-- the requests made while one is being sent).
function Client:hold() self.held = self.held or {} end

--- client:flush(): ends client:hold(), asking once for each kind that
-- watch or unwatch changed meanwhile.
function Client:flush()
  local held = self.held
  self.held = nil
  for _, k in ipairs(KINDS) do
    if held and held[k] then request(self, k) end
  end
end

--- client:unwatch(kind, name): one watch of `name` less; with the last,
-- the server is asked for the others only (at client:flush() while
-- held) and the cached copy dropped.
function Client:unwatch(kind, name)
  local set = self.subs[kind]
  local n = set[name]
  if n == nil then return end
  if n > 1 then
    set[name] = n - 1
    return
  end
  set[name] = nil
  self.cache[kind][name], self.refused[kind][name] = nil, nil
  self.asked[kind][name], self.due[kind][name], self.missing[kind][name] = nil, nil, nil
  local held = self.held
  if held then held[kind] = true else request(self, kind) end
end

--- res, why, problem = client:get(kind, name): the cached resource (a
-- plain table of its message: the last good copy, also when a later one
-- was refused), or nil and "unknown" (not answered yet), "refused" and
-- the problem (its only copies were NACKed) or "absent" (a listener or
-- cluster once cached that the server's last answer of its kind lacks, or
-- one of any kind that did not come within M.RESOURCE_TIMEOUT of being
-- asked for on a stream that was up: the does-not-exist timer).
function Client:get(kind, name)
  local r = self.cache[kind][name]
  if r then return r end
  local problem = self.refused[kind][name]
  if problem then return nil, "refused", problem end
  if self.missing[kind][name] then return nil, "absent" end
  return nil, "unknown"
end

--- client:versions() -> {LDS = version_info, RDS =, CDS =, EDS =} last
-- accepted, and the last NACK of each kind {version, nonce, problem}.
function Client:versions()
  local v, n = {}, {}
  for _, k in ipairs(KINDS) do
    v[k] = self.version[k]
    n[k] = self.nacks[k]
  end
  return v, n
end

--- client:trouble() -> what keeps the configuration from arriving, or
-- nil: the ADS stream's last failure ("ADS stream to HOST:PORT: UNAVAILABLE:
-- connect to ...: Connection refused") until a response comes, else the
-- last NACK still standing ("NACKed CDS: envoy.config.cluster.v3.Cluster
-- c1: lb_policy: ..."), else the refusal of a resource that has no good
-- copy, else the last response ignored ("ignored a response of type ...,
-- never asked for").
function Client:trouble()
  if self.stream_trouble then return self.stream_trouble end
  for _, k in ipairs(KINDS) do
    local problem = self.standing[k]
    if problem then return "NACKed " .. k .. ": " .. problem end
  end
  for _, k in ipairs(KINDS) do
    local refused = self.refused[k]
    for _, name in ipairs(names_of(refused)) do
      if self.cache[k][name] == nil then return "NACKed " .. k .. ": " .. refused[name] end
    end
  end
  if self.ignored then return "ignored " .. self.ignored end
  return nil
end

--- client:release(): a target stopped using the client; the last one
-- closes the stream and connection (client:retain() counts a user).
function Client:release()
  self.users = self.users - 1
  if self.users > 0 then return end
  self.closed = true
  if clients[self.uri] == self then clients[self.uri] = nil end
  if self.call then pcall(self.call.cancel, self.call) end
  if self.transport then self.transport:close() end
end

function Client:retain() self.users = self.users + 1 end

M.KINDS = KINDS

return M
