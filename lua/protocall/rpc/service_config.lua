--- gRPC service config (the JSON document of grpc/service_config.proto, as
-- a Lua table or JSON text): validated as gRFC A6 says, each problem named
-- with its JSON path, and turned into the options pc.client gives each
-- method (rpc/client.lua).
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"
local message = require "protocall.message"
local schema = require "protocall.schema"
local policy = require "protocall.call.policy"

local type, error, pairs, tostring, tonumber, next, setmetatable, getmetatable, pcall =
  type, error, pairs, tostring, tonumber, next, setmetatable, getmetatable, pcall
local format, concat, huge, floor = string.format, table.concat, math.huge, math.floor
local mtype, code_name, which_oneof = compat.mtype, internal.code_name, core.which_oneof
local ipairs, pairs_of = message.ipairs, message.pairs

local M = {}

-- Raises "service_config: <path>: <what>" at pc.client's caller.
local function config_error(path, msg)
  error({ service_config = path .. ": " .. msg }, 0)
end

local function known_keys(t, path, known)
  for k in pairs(t) do
    if not known[k] then
      config_error(path == "" and tostring(k) or path .. "." .. tostring(k), "unknown field")
    end
  end
end

-- A number as a problem shows it: an integral one as an integer (JSON
-- numbers are read as floats: 99, not Lua 5.4's 99.0), NaN as "nan".
local function show(v)
  if type(v) == "number" and v == floor(v) and v > -2 ^ 63 and v < 2 ^ 63 then return format("%d", v) end
  return internal.show(v)
end

-- The metatables from_json gives the lists and objects of JSON text, so
-- that a problem tells `[]` from `{}` (both an empty Lua table).
local JSON_LIST, JSON_OBJECT = {}, {}

-- "list" or "object": what table `v` is, when that is known: what JSON
-- text spelt, else a Lua table's keys (1..n: a list; others: an object;
-- none: either, nil).
local function shape(v)
  local mt = getmetatable(v)
  if mt == JSON_LIST then return "list" elseif mt == JSON_OBJECT then return "object" end
  if next(v) == nil then return nil end
  local n = #v
  for k in pairs(v) do
    if mtype(k) ~= "integer" or k < 1 or k > n then return "object" end
  end
  return "list"
end

local function object_at(v, path)
  if type(v) ~= "table" then config_error(path, "object expected, got " .. type(v)) end
  if shape(v) == "list" then config_error(path, "object expected, got a list") end
  return v
end

local function list_at(v, path)
  if type(v) ~= "table" then config_error(path, "list expected, got " .. type(v)) end
  if shape(v) == "object" then config_error(path, "list expected, got an object") end
  return v
end

-- The largest google.protobuf.Duration, in seconds (duration.proto: about
-- 10,000 years), as outlier detection's check takes it (transport/outlier.lua).
local DURATION_MAX = internal.DURATION_MAX

-- A google.protobuf.Duration in its JSON form ("0.1s", "1s", "2.000000001s")
-- as seconds, at most DURATION_MAX (the whole value: "315576000000.5s" is
-- past it); `positive` refuses 0.
local function duration_at(v, path, positive)
  if type(v) ~= "string" then
    config_error(path, "duration string such as \"0.1s\" expected, got " .. type(v))
  end
  local int, frac = v:match("^(%d+)%.?(%d*)s$")
  if not int or #frac > 9 or #int > 12 or v:find("%.s$") then
    config_error(path, "duration string such as \"0.1s\" expected, got \"" .. v .. "\"")
  end
  local seconds = tonumber(int) + (frac ~= "" and tonumber(frac) / 10 ^ #frac or 0)
  if seconds > DURATION_MAX then
    config_error(path, "duration of at most " .. DURATION_MAX .. "s expected, got \"" .. v .. "\"")
  end
  if positive and seconds <= 0 then config_error(path, "positive duration expected, got \"" .. v .. "\"") end
  return seconds
end

local function number_at(v, path, what)
  if type(v) ~= "number" or v ~= v or v == huge or v == -huge then
    config_error(path, what .. " expected, got " .. (type(v) == "number" and show(v) or type(v)))
  end
  return v
end

-- A list of status codes (names such as "UNAVAILABLE", or numbers) as names.
local function codes_at(v, path, required)
  list_at(v, path)
  if required and #v == 0 then config_error(path, "at least one status code expected") end
  local names = {}
  for i, c in ipairs(v) do
    local name = code_name(c)
    if type(name) ~= "string" or name == "OK" then
      config_error(format("%s[%d]", path, i - 1), "status code name such as \"UNAVAILABLE\" expected, got "
        .. (type(c) == "string" and "\"" .. c .. "\"" or type(c) == "number" and show(c) or type(c)))
    end
    names[#names + 1] = name
  end
  return names
end

-- maxAttempts of a retry or hedging policy: an integer of at least 2;
-- above 5 it is 5 (gRFC A6 "Maximum Number of Retries").
local function attempts_at(v, path)
  if v == nil then config_error(path, "required") end
  if mtype(v) ~= "integer" and not (type(v) == "number" and v == floor(v) and v ~= huge and v ~= -huge) then
    config_error(path, "integer expected, got " .. show(v))
  end
  if v < 2 then config_error(path, "at least 2 expected, got " .. show(compat.tointeger(v) or v)) end
  return v > 5 and 5 or compat.tointeger(v)
end

local RETRY_POLICY_KEYS = { maxAttempts = true, initialBackoff = true, maxBackoff = true,
  backoffMultiplier = true, retryableStatusCodes = true, perAttemptRecvTimeout = true }

local function retry_policy_at(v, path)
  object_at(v, path)
  known_keys(v, path, RETRY_POLICY_KEYS)
  local function required(k)
    if v[k] == nil then config_error(path .. "." .. k, "required") end
    return v[k]
  end
  local max_attempts = attempts_at(v.maxAttempts, path .. ".maxAttempts")
  local initial = duration_at(required("initialBackoff"), path .. ".initialBackoff", true)
  local maximum = duration_at(required("maxBackoff"), path .. ".maxBackoff", true)
  local multiplier = number_at(required("backoffMultiplier"), path .. ".backoffMultiplier", "number")
  if multiplier <= 0 then
    config_error(path .. ".backoffMultiplier", "positive number expected, got " .. show(multiplier))
  end
  if multiplier < 1 then
    config_error(path .. ".backoffMultiplier", "values below 1 (a shrinking backoff) are not supported, got "
      .. show(multiplier))
  end
  local codes = codes_at(required("retryableStatusCodes"), path .. ".retryableStatusCodes", true)
  local per_attempt
  if v.perAttemptRecvTimeout ~= nil then
    per_attempt = duration_at(v.perAttemptRecvTimeout, path .. ".perAttemptRecvTimeout", true)
  end
  local retry = policy.Retry { initial = initial, maximum = maximum, multiplier = multiplier,
    max_attempts = max_attempts, timeout = false, predicate = policy.if_status(compat.unpack(codes)) }
  return retry, per_attempt
end

local HEDGING_POLICY_KEYS = { maxAttempts = true, hedgingDelay = true, nonFatalStatusCodes = true }

-- {max_attempts=, delay= seconds (0 when unset: every attempt at once),
-- non_fatal = {CODE = true}} for call/hedge.lua.
local function hedging_policy_at(v, path)
  object_at(v, path)
  known_keys(v, path, HEDGING_POLICY_KEYS)
  local hedging = { max_attempts = attempts_at(v.maxAttempts, path .. ".maxAttempts"), delay = 0,
                    non_fatal = {} }
  if v.hedgingDelay ~= nil then hedging.delay = duration_at(v.hedgingDelay, path .. ".hedgingDelay", false) end
  if v.nonFatalStatusCodes ~= nil then
    for _, name in ipairs(codes_at(v.nonFatalStatusCodes, path .. ".nonFatalStatusCodes")) do
      hedging.non_fatal[name] = true
    end
  end
  return hedging
end

local function size_at(v, path)
  if mtype(v) ~= "integer" and not (type(v) == "number" and v == floor(v) and v >= 0 and v < 2 ^ 53) then
    config_error(path, "non-negative integer expected, got " .. show(v))
  end
  if v < 0 then config_error(path, "non-negative integer expected, got " .. show(v)) end
  return compat.tointeger(v)
end

local METHOD_CONFIG_KEYS = { name = true, timeout = true, retryPolicy = true, hedgingPolicy = true,
  waitForReady = true, maxRequestMessageBytes = true, maxResponseMessageBytes = true }
local NAME_KEYS = { service = true, method = true }
local CONFIG_KEYS = { methodConfig = true, retryThrottling = true, loadBalancingConfig = true,
  loadBalancingPolicy = true, healthCheckConfig = true }
local LB_POLICIES = { pick_first = true, round_robin = true }

local MAXINT = 0x7fffffff
local MAXINT32 = 0xffffffff

-- An integer in [lo, hi] at `path`, or `default` when absent.
local function int_in(v, path, lo, hi, default)
  if v == nil then return default end
  if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
    config_error(path, format("integer in %d..%d expected, got %s", lo, hi, type(v) == "number" and show(v)
      or type(v)))
  end
  return compat.tointeger(v)
end

-- A loadBalancingConfig entry `name`: `conf` at `path` checked -> the
-- transport's policy name and its config, or nil when protocall lacks
-- the policy. least_request_experimental (gRFC A48): {choiceCount = n},
-- n an integer of at least 2 (default 2; more than 10 is taken as 10).
local function lb_policy_at(name, conf, path)
  if LB_POLICIES[name] then
    known_keys(object_at(conf, path), path, {})
    return name
  end
  if name ~= "least_request_experimental" then return nil end
  known_keys(object_at(conf, path), path, { choiceCount = true })
  local n = int_in(conf.choiceCount, path .. ".choiceCount", 2, MAXINT32, 2)
  return "least_request", { choice_count = n > 10 and 10 or n }
end

local OD_KEYS = { interval = true, baseEjectionTime = true, maxEjectionTime = true, maxEjectionPercent = true,
  successRateEjection = true, failurePercentageEjection = true, childPolicy = true }
local SR_KEYS = { stdevFactor = true, enforcementPercentage = true, minimumHosts = true, requestVolume = true }
local FP_KEYS = { threshold = true, enforcementPercentage = true, minimumHosts = true, requestVolume = true }

-- outlier_detection_experimental's config (gRFC A50) at `path`: the
-- detector's config (transport/outlier.lua) and the child policy's name.
local function outlier_at(v, path)
  known_keys(v, path, OD_KEYS)
  local function duration(k, default)
    if v[k] == nil then return default end
    return duration_at(v[k], path .. "." .. k, true)
  end
  local c = { interval = duration("interval", 10), base_ejection_time = duration("baseEjectionTime", 30),
    max_ejection_time = duration("maxEjectionTime", 300),
    max_ejection_percent = int_in(v.maxEjectionPercent, path .. ".maxEjectionPercent", 0, 100, 10) }
  local sr = v.successRateEjection
  if sr ~= nil then
    local at = path .. ".successRateEjection"
    object_at(sr, at)
    known_keys(sr, at, SR_KEYS)
    c.success_rate = { stdev_factor = int_in(sr.stdevFactor, at .. ".stdevFactor", 0, MAXINT, 1900),
      enforcement_percentage = int_in(sr.enforcementPercentage, at .. ".enforcementPercentage", 0, 100, 100),
      minimum_hosts = int_in(sr.minimumHosts, at .. ".minimumHosts", 1, MAXINT, 5),
      request_volume = int_in(sr.requestVolume, at .. ".requestVolume", 1, MAXINT, 100) }
  end
  local fp = v.failurePercentageEjection
  if fp ~= nil then
    local at = path .. ".failurePercentageEjection"
    object_at(fp, at)
    known_keys(fp, at, FP_KEYS)
    c.failure_percentage = { threshold = int_in(fp.threshold, at .. ".threshold", 0, 100, 85),
      enforcement_percentage = int_in(fp.enforcementPercentage, at .. ".enforcementPercentage", 0, 100, 100),
      minimum_hosts = int_in(fp.minimumHosts, at .. ".minimumHosts", 1, MAXINT, 5),
      request_volume = int_in(fp.requestVolume, at .. ".requestVolume", 1, MAXINT, 50) }
  end
  local child, child_config
  local list = list_at(v.childPolicy or {}, path .. ".childPolicy")
  for i, entry in ipairs(list) do
    local at = format("%s.childPolicy[%d]", path, i - 1)
    object_at(entry, at)
    local name, conf = next(entry)
    if type(conf) == "table" then child, child_config = lb_policy_at(name, conf, at .. "." .. name) end
    if child then break end
  end
  if not child then
    config_error(path .. ".childPolicy", "no supported policy (pick_first, round_robin, least_request_experimental)")
  end
  return c, child, child_config
end

local RING_KEYS = { minRingSize = true, maxRingSize = true, requestHashHeader = true, min_ring_size = true,
  max_ring_size = true, request_hash_header = true }
local MAX_RING = 8388608

-- ring_hash_experimental's config (gRFCs A42, A76) at `path`: {min_ring_size
-- =, max_ring_size =, request_hash_header =} (transport/ring_hash.lua's;
-- each field in its JSON or its proto spelling); sizes 1..8388608, the
-- minimum not above the maximum; the header lower-cased, not "-bin".
local function ring_hash_at(v, path)
  known_keys(v, path, RING_KEYS)
  local function pick(json, proto)
    if v[json] ~= nil and v[proto] ~= nil then config_error(path .. "." .. proto, "also given as " .. json) end
    if v[json] ~= nil then return v[json], path .. "." .. json end
    return v[proto], path .. "." .. proto
  end
  local lo, lo_path = pick("minRingSize", "min_ring_size")
  local hi, hi_path = pick("maxRingSize", "max_ring_size")
  local c = { min_ring_size = int_in(lo, lo_path, 1, MAX_RING, nil),
    max_ring_size = int_in(hi, hi_path, 1, MAX_RING, nil) }
  if c.min_ring_size == nil and c.max_ring_size and c.max_ring_size < 1024 then
    config_error(hi_path, format("at least the default minimum ring size (1024) expected, got %d", c.max_ring_size))
  elseif (c.min_ring_size or 1024) > (c.max_ring_size or MAX_RING) then
    config_error(lo_path, format("at most %s (%d) expected, got %d", hi_path:match("[^.]+$"), c.max_ring_size,
      c.min_ring_size))
  end
  local h, h_path = pick("requestHashHeader", "request_hash_header")
  if h ~= nil then
    if type(h) ~= "string" or not h:find("^[%w!#$%%&'*+%-.^_`|~]+$") then
      config_error(h_path, "a header name expected, got " .. (type(h) == "string" and format("%q", h) or type(h)))
    end
    h = h:lower()
    if h:sub(-4) == "-bin" then config_error(h_path, "a binary (-bin) header cannot be hashed") end
    c.request_hash_header = h
  end
  return c
end

--- config = parse(t): the methodConfig entries by name
-- ("pkg.Service/Method", "pkg.Service/" for service-wide, "/" for the
-- default), each {timeout=, retry=, hedging=, max_request=, max_response=,
-- wait_for_ready=}, `throttling` {max_tokens=, token_ratio=} or nil, and
-- `balancing` "pick_first" | "round_robin" | "least_request" | "ring_hash" | nil (the first
-- policy of loadBalancingConfig protocall has, as gRPC picks; outlier_detection_experimental's
-- child policy, its own config then `outlier`: transport/outlier.lua's;
-- ring_hash_experimental: `ring_hash`, transport/ring_hash.lua's config),
-- `balancing_config` {choice_count = n} for least_request_experimental
-- (gRFC A48: choiceCount, default 2, at least 2, capped at 10) and `health_check`
-- the healthCheckConfig's serviceName (gRFC A17; "" when the object has
-- none) or nil.
-- Raises {service_config = "path: what"} on the first problem.
function M.parse(t)
  object_at(t, "service_config")
  known_keys(t, "", CONFIG_KEYS)
  local balancing, balancing_config, outlier, ring
  if t.loadBalancingConfig ~= nil then
    local list = list_at(t.loadBalancingConfig, "loadBalancingConfig")
    for i, entry in ipairs(list) do
      local path = format("loadBalancingConfig[%d]", i - 1)
      object_at(entry, path)
      local name, conf = next(entry)
      if name == nil or next(entry, name) ~= nil then config_error(path, "object with one policy name expected") end
      object_at(conf, path .. "." .. tostring(name))
      if name == "outlier_detection_experimental" and not balancing then
        outlier, balancing, balancing_config = outlier_at(conf, path .. "." .. name)
      elseif name == "ring_hash_experimental" and not balancing then
        ring, balancing = ring_hash_at(conf, path .. "." .. name), "ring_hash"
      elseif not balancing then
        balancing, balancing_config = lb_policy_at(name, conf, path .. "." .. name)
      end
    end
    if not balancing then
      config_error("loadBalancingConfig",
        "no supported policy (pick_first, round_robin, least_request_experimental, ring_hash_experimental, "
          .. "outlier_detection_experimental)")
    end
  elseif t.loadBalancingPolicy ~= nil then
    local v = t.loadBalancingPolicy
    if type(v) ~= "string" or not LB_POLICIES[v:lower()] then
      config_error("loadBalancingPolicy", "\"pick_first\" or \"round_robin\" expected, got "
        .. (type(v) == "string" and "\"" .. v .. "\"" or type(v)))
    end
    balancing = v:lower()
  end
  local health_check
  if t.healthCheckConfig ~= nil then
    object_at(t.healthCheckConfig, "healthCheckConfig")
    known_keys(t.healthCheckConfig, "healthCheckConfig", { serviceName = true })
    health_check = t.healthCheckConfig.serviceName
    if health_check == nil then health_check = "" end
    if type(health_check) ~= "string" then
      config_error("healthCheckConfig.serviceName", "string expected, got " .. type(health_check))
    end
  end
  local by_name = {}
  local mcs = t.methodConfig
  if mcs ~= nil then
    list_at(mcs, "methodConfig")
    for i, mc in ipairs(mcs) do
      local path = format("methodConfig[%d]", i - 1)
      object_at(mc, path)
      known_keys(mc, path, METHOD_CONFIG_KEYS)
      local entry = {}
      if mc.timeout ~= nil then entry.timeout = duration_at(mc.timeout, path .. ".timeout", true) end
      if mc.retryPolicy ~= nil and mc.hedgingPolicy ~= nil then
        config_error(path, "retryPolicy and hedgingPolicy are mutually exclusive")
      end
      if mc.retryPolicy ~= nil then
        entry.retry, entry.per_attempt = retry_policy_at(mc.retryPolicy, path .. ".retryPolicy")
      end
      if mc.hedgingPolicy ~= nil then
        entry.hedging = hedging_policy_at(mc.hedgingPolicy, path .. ".hedgingPolicy")
      end
      if mc.waitForReady ~= nil then
        if type(mc.waitForReady) ~= "boolean" then
          config_error(path .. ".waitForReady", "boolean expected, got " .. type(mc.waitForReady))
        end
        entry.wait_for_ready = mc.waitForReady
      end
      if mc.maxRequestMessageBytes ~= nil then
        entry.max_request = size_at(mc.maxRequestMessageBytes, path .. ".maxRequestMessageBytes")
      end
      if mc.maxResponseMessageBytes ~= nil then
        entry.max_response = size_at(mc.maxResponseMessageBytes, path .. ".maxResponseMessageBytes")
      end
      local names = mc.name
      if names == nil then config_error(path .. ".name", "required") end
      list_at(names, path .. ".name")
      if #names == 0 then config_error(path .. ".name", "at least one name expected") end
      for j, n in ipairs(names) do
        local npath = format("%s.name[%d]", path, j - 1)
        object_at(n, npath)
        known_keys(n, npath, NAME_KEYS)
        local service, method = n.service or "", n.method or ""
        if type(service) ~= "string" then
          config_error(npath .. ".service", "string expected, got " .. type(service))
        end
        if type(method) ~= "string" then config_error(npath .. ".method", "string expected, got " .. type(method)) end
        if service == "" and method ~= "" then
          config_error(npath, "a method needs its service (only {} or {service=\"\"} names the default)")
        end
        local key = service .. "/" .. method
        if by_name[key] then
          config_error(npath, format("duplicate name %s (also in %s)", key == "/" and "(the default)" or key,
            by_name[key].path))
        end
        entry.path = entry.path or npath
        by_name[key] = entry
      end
    end
  end
  local throttling
  if t.retryThrottling ~= nil then
    local rt = object_at(t.retryThrottling, "retryThrottling")
    known_keys(rt, "retryThrottling", { maxTokens = true, tokenRatio = true })
    for _, k in ipairs { "maxTokens", "tokenRatio" } do
      if rt[k] == nil then config_error("retryThrottling." .. k, "required") end
      number_at(rt[k], "retryThrottling." .. k, "number")
    end
    local ok, err = core.throttle(rt.maxTokens, rt.tokenRatio) -- "maxTokens: ..." or "tokenRatio: ..."
    if not ok then
      local what, msg = err:match("^(%a+): (.*)$")
      config_error("retryThrottling." .. what, msg)
    end
    throttling = { max_tokens = rt.maxTokens, token_ratio = rt.tokenRatio }
  end
  return { by_name = by_name, throttling = throttling, balancing = balancing, balancing_config = balancing_config,
    health_check = health_check, outlier = outlier, ring_hash = ring }
end

-- A google.protobuf.Value as the Lua value JSON text means: objects and
-- lists as tables, null as nil.
local function plain_value(v)
  local kind = which_oneof(v, "kind")
  if kind == "struct_value" then
    local t = setmetatable({}, JSON_OBJECT)
    for k, f in pairs_of(v.struct_value.fields) do t[k] = plain_value(f) end
    return t
  elseif kind == "list_value" then
    local t = setmetatable({}, JSON_LIST)
    for i, f in ipairs(v.list_value.values) do t[i] = plain_value(f) end
    return t
  elseif kind == "null_value" or kind == nil then
    return nil
  end
  return v[kind]
end

--- t = from_json(text): service config JSON text as the Lua table it
-- spells (read as a google.protobuf.Struct by pc.from_json); raises
-- {service_config = err} with the JSON path and offset of a syntax error.
function M.from_json(text)
  local struct, err = core.from_json(schema.default_pool():type("google.protobuf.Struct"), text)
  if not struct then error({ service_config = "JSON: " .. err }, 0) end
  local t = setmetatable({}, JSON_OBJECT)
  for k, f in pairs_of(struct.fields) do t[k] = plain_value(f) end
  return t
end

--- entry | nil = entry_for(config, service, method): the methodConfig
-- entry of `service`/`method`, as gRPC matches: the exact name, else the
-- service-wide one, else the default.
function M.entry_for(config, service, method)
  local by = config.by_name
  return by[service .. "/" .. method] or by[service .. "/"] or by["/"]
end

-- One bucket per server (a target, as gRPC shares one per server name)
-- and retryThrottling numbers, shared by every client, method and
-- transport of it. Weak keys: a server object goes with its buckets
-- (target strings stay, one small table each).
local shared_buckets = setmetatable({}, { __mode = "k" })

-- The server `transport` calls: pc.grpc's target (a string, or a list of
-- addresses: the balancer's), pc.inproc's server object; any other
-- transport is its own.
local function server_of(transport)
  local target = transport.target
  if type(target) == "string" then return target end
  if type(target) == "table" then
    local parts = {}
    for i = 1, #target do parts[i] = tostring(target[i]) end
    return "{" .. concat(parts, ",") .. "}"
  end
  if transport.server ~= nil then return transport.server end
  return transport
end

--- throttle = throttle_for(transport, throttling): the pc.Throttle of the
-- server `transport` calls for the config's {max_tokens=, token_ratio=}.
function M.throttle_for(transport, throttling)
  local key = server_of(transport)
  local per = shared_buckets[key]
  if not per then
    per = {}
    shared_buckets[key] = per
  end
  local numbers = format("%.17g/%.17g", throttling.max_tokens, throttling.token_ratio)
  local b = per[numbers]
  if not b then
    b = policy.Throttle { max_tokens = throttling.max_tokens, token_ratio = throttling.token_ratio }
    per[numbers] = b
  end
  return b
end

--- config | nil, problem = load(sc): the service config `sc` (a Lua table
-- or JSON text) parsed (see parse), or nil and "<path>: <what is wrong>".
function M.load(sc)
  if type(sc) ~= "table" and type(sc) ~= "string" then
    return nil, "table or JSON text expected, got " .. type(sc)
  end
  local ok, res = pcall(function()
    return M.parse(type(sc) == "string" and M.from_json(sc) or sc)
  end)
  if ok then return res end
  if type(res) == "table" and res.service_config then return nil, res.service_config end
  error(res, 0)
end

return M
