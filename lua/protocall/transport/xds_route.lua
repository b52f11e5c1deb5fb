--- xDS routes (gRFCs A28, A44) for transport/xds.lua and the resource
-- checks of transport/xds_client.lua: which route takes a call, and the
-- route's retry policy.
--
-- Matching (A28): a route's path matcher is `prefix`, `path` (both
-- case_sensitive unless it is false) or `safe_regex` (a full match of
-- the path, case_sensitive ignored, as Envoy says); then its
-- runtime_fraction when it has one (default_value only, the runtime_key
-- ignored as gRPC does: the route takes numerator out of HUNDRED,
-- TEN_THOUSAND or MILLION calls, drawn per call; a numerator above the
-- denominator counts as the denominator); then each header matcher
-- against the call's metadata (several values joined by ","; "-bin" keys
-- never match; "content-type" is application/grpc): exact, prefix,
-- suffix, contains, present, safe_regex_match (full match), range_match
-- (a decimal integer value, within int64, in [start, end), compared
-- exactly on both runtimes) or string_match (the same,
-- ignore_case but for safe_regex), each turned by invert_match.
--
-- Regular expressions are RE2's (core.regex: Debian's libre2 in the C
-- core, the engine CEL and protovalidate use), so a pattern means what it
-- means to Envoy and gRPC (\d, (?i), non-greedy, linear-time matching;
-- no backreferences or lookaround, which RE2 refuses). Each is compiled
-- once when its resource is checked (at most 8,192 bytes, RE2's limit) and
-- matches the whole value (as "^(?:pattern)$" would); one RE2 refuses
-- NACKs the resource naming the field and RE2's reason, and the last good
-- config keeps serving.
--
-- Retries (A44): RouteAction.retry_policy, else the VirtualHost's
-- (the route's replaces the virtual host's whole). retry_on's
-- cancelled, deadline-exceeded, internal, resource-exhausted and
-- unavailable are the retryable codes (other conditions are ignored; none
-- left: no retries); num_retries (default 1, 0 refused) gives
-- num_retries + 1 attempts, at most 5 as gRPC caps them;
-- retry_back_off's base_interval (default 25 ms; above 0) and
-- max_interval (default 10 x base; not below base) are the backoff,
-- multiplier 2, each sleep drawn in [0, cap) as gRFC A6 says. Unary
-- calls, and server streams until their first response message, are
-- attempted again on the route's cluster (each attempt picking its
-- backend afresh, sending grpc-previous-rpc-attempts), on the C core's
-- retry plans (core.policy: the same arithmetic pc.Retry uses), within
-- the call's deadline; the caller sees the last attempt's error.
local core = require "protocall.core"
local internal = require "protocall.internal"
local sched = require "protocall.sched"

local ipairs, pairs, type, tonumber, tostring, error, pcall, setmetatable = ipairs, pairs, type, tonumber,
  tostring, error, pcall, setmetatable
local format, lower, random, min, floor = string.format, string.lower, math.random, math.min, math.floor
local show, CHECKED = internal.show, internal.CHECKED
local monotonic = core.monotonic

local M = {}

-------------------------------------------------------------------------------
-- Checks: each returns nil, or "field: what is wrong" (the field relative
-- to `at`), keeping what matching needs in the resource's tables.

-- The compiled full-match RE2 of RegexMatcher `rm` at `at`, or nil and
-- the problem.
local function regex_at(rm, at)
  local pattern = rm.regex
  if pattern == nil or pattern == "" then return nil, at .. ".regex: empty" end
  -- matched whole with re:full (not wrapped in "^(?:...)$": RE2's length
  -- limit is the pattern's own, and its reason quotes it as written)
  local re, why = core.regex(pattern)
  if not re then return nil, format("%s.regex: %q is not an RE2 pattern: %s", at, pattern, why) end
  return re
end

-- range_match compares 64-bit integers exactly: Lua 5.4's integers would,
-- but LuaJIT's numbers are doubles (2^53 + 1 reads as 2^53) and its int64
-- cdata cannot be read from a header value by tonumber, so values and
-- bounds are canonical decimal strings ("-12", "0", "34": no "+", no
-- leading zeros) compared by sign, length, then digits.

-- The canonical decimal of string `s` ([+-]?digits), or nil.
local function decimal_of(s)
  local sign, digits = s:match("^([+-]?)(%d+)$")
  if not digits then return nil end
  digits = digits:gsub("^0+", "")
  if digits == "" then return "0" end
  return sign == "-" and "-" .. digits or digits
end

-- -1, 0 or 1 as canonical decimal `a` is below, equal to or above `b`.
local function compare_decimal(a, b)
  local na, nb = a:sub(1, 1) == "-", b:sub(1, 1) == "-"
  if na ~= nb then return na and -1 or 1 end
  local c = 0
  if #a ~= #b then c = #a < #b and -1 or 1 elseif a ~= b then c = a < b and -1 or 1 end
  return na and -c or c
end

local INT64_MIN, INT64_MAX = "-9223372036854775808", "9223372036854775807"

-- The canonical decimal of an int64 field's value: a Lua 5.4 integer, a
-- LuaJIT number or int64 cdata ("-5LL"), a whole float, a decimal
-- string; nil for anything else (a fraction, a value past int64, "abc").
local function bound_of(v)
  if v == nil then return "0" end
  local t, d = type(v), nil
  if t == "number" then
    -- a float's %d: whole and within int64 only (Lua 5.4 raises, LuaJIT truncates)
    if v ~= floor(v) or v < -2 ^ 63 or v >= 2 ^ 63 then return nil end
    d = decimal_of(format("%d", v))
  elseif t == "string" or t == "cdata" then
    d = decimal_of((tostring(v):gsub("U?LL$", "")))
  end
  if d == nil or compare_decimal(d, INT64_MIN) < 0 or compare_decimal(d, INT64_MAX) > 0 then return nil end
  return d
end

local DENOMINATOR = { [0] = 100, [1] = 10000, [2] = 1000000,
  HUNDRED = 100, TEN_THOUSAND = 10000, MILLION = 1000000 }

--- problem = M.check_match(match, at): nil when RouteMatch `match` (a
-- decoded table) is one protocall takes, else "at.field: problem". Keeps
-- the compiled regexes (match.regex_of, header.regex_of), the runtime
-- fraction (match.fraction = {numerator, denominator}) and whether it
-- takes every call (match.every: prefix "" alone) in the tables.
function M.check_match(m, at)
  if m.safe_regex then
    local re, why = regex_at(m.safe_regex, at .. ".safe_regex")
    if not re then return why end
    m.regex_of = re
  elseif m.prefix == nil and m.path == nil then
    return at .. ": prefix, path or safe_regex expected (others are not supported)"
  end
  local rf = m.runtime_fraction
  if rf then
    local dv = rf.default_value or {}
    local d = DENOMINATOR[dv.denominator or 0]
    if d == nil then
      return format("%s.runtime_fraction.default_value.denominator: HUNDRED, TEN_THOUSAND or MILLION expected, got %s",
        at, tostring(dv.denominator))
    end
    m.fraction = { min(dv.numerator or 0, d), d }
  end
  for k, h in ipairs(m.headers or {}) do
    local hat = format("%s.headers[%d]", at, k - 1)
    if h.safe_regex_match then
      local re, why = regex_at(h.safe_regex_match, hat .. ".safe_regex_match")
      if not re then return why end
      h.regex_of = re
    elseif h.range_match then
      -- int64 fields: LuaJIT decodes them as cdata
      local rm = h.range_match
      local start, stop = bound_of(rm.start), bound_of(rm["end"])
      local bad = not start and "start" or not stop and "end"
      if bad then
        local v = rm[bad]
        return format("%s.range_match.%s: an int64 expected, got %s", hat, bad,
          type(v) == "string" and format("%q", v:sub(1, 40)) or type(v) == "number" and show(v) or type(v))
      end
      h.range_of = { start, stop }
    elseif h.exact_match == nil and h.prefix_match == nil and h.suffix_match == nil and h.contains_match == nil
      and h.present_match == nil and h.string_match == nil then
      return hat .. ": exact, prefix, suffix, contains, present, safe_regex, range or string_match expected"
    end
    local sm = h.string_match
    if sm then
      if sm.safe_regex then
        local re, why = regex_at(sm.safe_regex, hat .. ".string_match.safe_regex")
        if not re then return why end
        h.regex_of = re
      elseif sm.exact == nil and sm.prefix == nil and sm.suffix == nil and sm.contains == nil then
        return hat .. ".string_match: exact, prefix, suffix, contains or safe_regex expected"
      end
    end
  end
  m.every = m.prefix == "" and not m.regex_of and not m.fraction and (m.headers == nil or #m.headers == 0) or nil
  return nil
end

-- A google.protobuf.Duration table in seconds (LuaJIT decodes int64
-- seconds as cdata), and what is wrong with it.
local function seconds_of(d, at)
  local s, n = tonumber(d.seconds) or 0, d.nanos or 0
  if n < 0 or n > 999999999 then return nil, format("%s.nanos: 0..999999999 expected, got %d", at, n) end
  return s + n / 1e9
end

-- retry_on's conditions gRPC takes (A44), as status code names.
local RETRY_ON = { cancelled = "CANCELLED", ["deadline-exceeded"] = "DEADLINE_EXCEEDED", internal = "INTERNAL",
  ["resource-exhausted"] = "RESOURCE_EXHAUSTED", unavailable = "UNAVAILABLE" }

-- The most attempts gRPC makes (gRFC A6's cap).
local MAX_ATTEMPTS = 5

--- retry | nil, problem = M.retry_of(policy, at): RetryPolicy `policy`
-- (decoded; nil: none) as {codes = {CODE = true}, max_attempts =,
-- initial =, maximum = (seconds)}, or false when it retries nothing (no
-- condition gRPC takes); nil and "at.field: problem" for what A44
-- refuses.
function M.retry_of(rp, at)
  if rp == nil then return false end
  local codes, any = {}, false
  for cond in (rp.retry_on or ""):gmatch("[^,]+") do
    local code = RETRY_ON[cond:match("^%s*(.-)%s*$")]
    if code then codes[code], any = true, true end
  end
  local attempts = 2
  if rp.num_retries then
    local n = rp.num_retries.value or 0
    if n < 1 then return nil, at .. ".num_retries: at least 1 expected, got " .. n end
    attempts = n + 1
  end
  local initial, maximum = 0.025, nil
  local bo = rp.retry_back_off
  if bo then
    if bo.base_interval == nil then return nil, at .. ".retry_back_off.base_interval: required" end
    local why
    initial, why = seconds_of(bo.base_interval, at .. ".retry_back_off.base_interval")
    if not initial then return nil, why end
    if initial <= 0 then
      return nil, format("%s.retry_back_off.base_interval: above 0 expected, got %.9g s", at, initial)
    end
    if bo.max_interval then
      maximum, why = seconds_of(bo.max_interval, at .. ".retry_back_off.max_interval")
      if not maximum then return nil, why end
      if maximum < initial then
        return nil, format("%s.retry_back_off.max_interval: at least base_interval (%.9g s) expected, got %.9g s",
          at, initial, maximum)
      end
    end
  end
  if not any then return false end
  return { codes = codes, max_attempts = attempts > MAX_ATTEMPTS and MAX_ATTEMPTS or attempts, initial = initial,
    maximum = maximum or 10 * initial }
end

-------------------------------------------------------------------------------
-- Matching

-- The value of header `name` in the call's metadata ({key, value} pairs;
-- several joined by ","), nil when absent.
local function header(metadata, name)
  if name == "content-type" then return "application/grpc" end
  local v
  for _, kv in ipairs(metadata or {}) do
    if kv[1] == name then v = v and v .. "," .. kv[2] or kv[2] end
  end
  return v
end

local function string_match(v, exact, prefix, suffix, contains, ignore_case)
  if ignore_case then
    v = lower(v)
    exact, prefix, suffix, contains = exact and lower(exact), prefix and lower(prefix), suffix and lower(suffix),
      contains and lower(contains)
  end
  if exact then return v == exact end
  if prefix then return v:sub(1, #prefix) == prefix end
  if suffix then return #v >= #suffix and v:sub(#v - #suffix + 1) == suffix end
  return v:find(contains, 1, true) ~= nil
end

local function header_matches(h, metadata)
  local name = lower(h.name or "")
  local v
  if name:sub(-4) ~= "-bin" then v = header(metadata, name) end
  local m
  if h.present_match ~= nil then
    m = (v ~= nil) == h.present_match
  elseif v == nil then
    return false
  elseif h.regex_of then
    m = h.regex_of:full(v)
  elseif h.range_of then
    local n = decimal_of(v)
    m = n ~= nil and compare_decimal(n, INT64_MIN) >= 0 and compare_decimal(n, INT64_MAX) <= 0
      and compare_decimal(n, h.range_of[1]) >= 0 and compare_decimal(n, h.range_of[2]) < 0
  else
    local sm = h.string_match
    if sm then
      m = string_match(v, sm.exact, sm.prefix, sm.suffix, sm.contains, sm.ignore_case)
    else
      m = string_match(v, h.exact_match, h.prefix_match, h.suffix_match, h.contains_match, false)
    end
  end
  if h.invert_match then m = not m end
  return m
end

--- ok = M.matches(route, path, metadata [, draw]): whether `route`
-- (checked by M.check_match) takes a call of `path` with `metadata`
-- ({key, value} pairs). `draw(n)` -> an integer in 1..n for the runtime
-- fraction (default math.random): the route matches when it is at most
-- the numerator.
function M.matches(r, path, metadata, draw)
  local m = r.match
  if m.regex_of then
    if not m.regex_of:full(path) then return false end
  else
    local sensitive = m.case_sensitive == nil or m.case_sensitive.value ~= false
    local p, want = path, m.prefix or m.path
    if not sensitive then p, want = lower(p), lower(want) end
    if m.prefix then
      if want ~= "" and p:sub(1, #want) ~= want then return false end
    elseif p ~= want then
      return false
    end
  end
  local hs = m.headers
  if hs then
    for _, h in ipairs(hs) do
      if not header_matches(h, metadata) then return false end
    end
  end
  local f = m.fraction
  if f and (draw or random)(f[2]) > f[1] then return false end
  return true
end

-------------------------------------------------------------------------------
-- Retries

-- The retries of one call per `rp` (M.retry_of's) from its `settings`:
-- the C core's plan (core.policy, as pc.Retry's) with the call's timeout
-- as its deadline.
local function session(settings, rp)
  local timeout = settings and settings.timeout
  local plan, problem = core.policy(timeout and 1 or 0, timeout, nil, nil, false, rp.initial, rp.maximum, 2, false,
    rp.max_attempts, rp.initial)
  if not plan then error("xds retry policy: " .. problem, 3) end
  return { plan = plan, start = monotonic(), settings = settings, rp = rp, n = 1,
    previous = settings and settings.previous_attempts or 0 }
end

-- After attempt failure `err`: raises it when the policy does not retry
-- it (a code not in rp.codes, protocall's own `local` errors that would
-- recur, no attempt or time left), else sleeps the backoff and returns
-- the next attempt's settings (its timeout what is left of the call's,
-- previous_attempts counting the ones before).
local function again(ss, err)
  if type(err) ~= "table" or not ss.rp.codes[err.code] or err["local"] then error(err, 0) end
  local state = ss.state
  if not state then
    state = ss.plan:start(ss.start)
    ss.state = state
  end
  local delay = state:on_error(monotonic(), random(), err.retry_delay)
  if not delay then error(err, 0) end
  sched.sleep(delay)
  local left = state:next_attempt(monotonic())
  if left == false then error(err, 0) end
  ss.n = ss.n + 1
  local s = {}
  for k, v in pairs(ss.settings or {}) do s[k] = v end
  -- at most 100, the transports' bound (the balancer takes these settings
  -- as checked, internal.CHECKED: past it pc.grpc would send no count)
  s.timeout, s.previous_attempts = left, min(ss.previous + ss.n - 1, 100)
  return s
end

--- response, meta = M.unary(balanced, path, request, settings, retry):
-- balanced:unary(path, request, settings) attempted again per `retry`
-- (M.retry_of's) while it fails with a code of retry.codes and the plan
-- allows. Raises the last attempt's error.
function M.unary(b, path, request, settings, rp)
  -- no time left: the call fails as it would without a policy (DEADLINE_EXCEEDED)
  if settings and settings.timeout and settings.timeout <= 0 then return b:unary(path, request, settings, CHECKED) end
  local ss, s = session(settings, rp), settings
  while true do
    local ok, res, meta = pcall(b.unary, b, path, request, s, CHECKED)
    if ok then return res, meta end
    s = again(ss, res)
  end
end

-- The call of a retried server stream: the current attempt's (`inner`).
local Current = internal.forwarding("protocall.XdsRetriedCall")

--- iter, nil, nil, call = M.server_stream(balanced, path, request,
-- settings, retry): balanced:server_stream attempted again, as M.unary,
-- while it fails before its first response message (after one, the call
-- is the caller's). The first message is read here, before returning.
function M.server_stream(b, path, request, settings, rp)
  if settings and settings.timeout and settings.timeout <= 0 then
    return b:server_stream(path, request, settings, CHECKED)
  end
  local ss, s = session(settings, rp), settings
  local current = setmetatable({}, Current)
  while true do
    local ok, iter, state, ctl, call = pcall(b.server_stream, b, path, request, s, CHECKED)
    local first
    if ok then
      current.inner = call
      ok, first = pcall(iter, state, ctl)
    else
      first = iter
    end
    if ok then
      local done = first == nil
      return function()
        if first ~= nil then
          local r = first
          first = nil
          return r
        end
        if done then return nil end
        local r = iter(state, ctl)
        if r == nil then done = true end
        return r
      end, nil, nil, current
    end
    s = again(ss, first)
  end
end

return M
