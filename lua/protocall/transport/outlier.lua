--- Outlier detection (gRFC A50) for the balancer (transport/balancer.lua):
-- each backend's calls are counted, successes (status OK) and failures
-- (any other status); every `interval` seconds the counts of the interval
-- just ended are judged and backends ejected (they take no calls) by
-- success rate (below mean - stdev * stdev_factor / 1000 over the
-- backends with enough calls) or failure percentage (above `threshold`),
-- at most `max_ejection_percent` of the backends at once, each enforced
-- with its `enforcement_percentage` probability. An ejected backend comes
-- back after base_ejection_time * (its ejections in a row), at most
-- max(base_ejection_time, max_ejection_time); each interval it is not
-- ejected lowers that count by one. The sweep runs when a call picks, so
-- an idle client does no work.
local core = require "protocall.core"
local internal = require "protocall.internal"

local setmetatable, ipairs, pairs, type, tostring, sqrt, random, max, min, floor = setmetatable, ipairs, pairs, type,
  tostring, math.sqrt, math.random, math.max, math.min, math.floor
local format, concat, sort = string.format, table.concat, table.sort
local monotonic = core.monotonic

local M = {}

-- The longest google.protobuf.Duration (seconds: 10,000 years), as the
-- parsers of the configs that reach M.check take it.
local MAX_SECONDS = internal.DURATION_MAX
local MAX_U32 = 4294967295

-- The fields of a config (M.check): each {name, default, lo, hi,
-- integer?}; `lo` exclusive when `above` is set. The ranges are the
-- widest either spelling gives (the service config's JSON, an xDS
-- cluster's OutlierDetection), the defaults gRFC A50's.
local FIELDS = {
  { "interval", 10, 0, MAX_SECONDS, false, above = true },
  { "base_ejection_time", 30, 0, MAX_SECONDS, false },
  { "max_ejection_time", 300, 0, MAX_SECONDS, false },
  { "max_ejection_percent", 10, 0, 100, true },
}
local SUBFIELDS = {
  success_rate = {
    { "stdev_factor", 1900, 0, MAX_U32, true },
    { "enforcement_percentage", 100, 0, 100, true },
    { "minimum_hosts", 5, 0, MAX_U32, true },
    { "request_volume", 100, 0, MAX_U32, true },
  },
  failure_percentage = {
    { "threshold", 85, 0, 100, true },
    { "enforcement_percentage", 100, 0, 100, true },
    { "minimum_hosts", 5, 0, MAX_U32, true },
    { "request_volume", 50, 0, MAX_U32, true },
  },
}

-- `from`'s fields (FIELDS or a SUBFIELDS list; `also` the names of other
-- fields the caller reads) into `to`, defaults for those absent; nil, or
-- "at.field: what is wrong" (`at` "" at the top).
local function fields_into(to, from, list, at, also)
  for k in pairs(from) do
    local known = also ~= nil and also[k]
    for _, f in ipairs(list) do known = known or f[1] == k end
    if not known then
      local names = {}
      for _, f in ipairs(list) do names[#names + 1] = f[1] end
      for n in pairs(also or {}) do names[#names + 1] = n end
      sort(names)
      return format("%sunknown field '%s' (%s)", at == "" and "" or at .. ": ", tostring(k), concat(names, ", "))
    end
  end
  for _, f in ipairs(list) do
    local name, v, lo, hi, integer = f[1], from[f[1]], f[3], f[4], f[5]
    if v == nil then
      v = f[2]
    elseif type(v) ~= "number" or v ~= v or (integer and v ~= floor(v)) or v < lo or v > hi
      or (f.above and v == lo) then
      local want = integer and format("an integer in %d..%d", lo, hi)
        or format("seconds %s %d and at most %d", f.above and "above" or "at least", lo, hi)
      return format("%s%s: %s expected, got %s", at == "" and "" or at .. ".", name, want,
        type(v) == "number" and tostring(v) or type(v))
    end
    to[name] = v
  end
end

--- config | nil, problem = M.check(config): a detector's config (see
-- M.new) checked, each field absent given gRFC A50's default: interval
-- (seconds above 0; 10), base_ejection_time (30) and max_ejection_time
-- (300) (seconds, at least 0), max_ejection_percent (0..100; 10);
-- success_rate and failure_percentage, each nil (off) or a table whose
-- fields absent default: stdev_factor (thousandths, 1900),
-- enforcement_percentage (0..100; 100), minimum_hosts (5), request_volume
-- (100; failure_percentage's 50), threshold (0..100; 85); counts are
-- integers from 0. A new table, or nil and "field: what is wrong"
-- ("success_rate.minimum_hosts: an integer in 0..4294967295 expected,
-- got -1"); an unknown field is refused.
function M.check(config)
  if type(config) ~= "table" then return nil, "table expected, got " .. type(config) end
  local c = {}
  local problem = fields_into(c, config, FIELDS, "", SUBFIELDS)
  if problem then return nil, problem end
  for _, name in ipairs { "success_rate", "failure_percentage" } do
    local sub = config[name]
    if sub ~= nil then
      if type(sub) ~= "table" then return nil, format("%s: table or nil expected, got %s", name, type(sub)) end
      c[name] = {}
      problem = fields_into(c[name], sub, SUBFIELDS[name], name)
      if problem then return nil, problem end
    end
  end
  return c
end

local Detector = { __name = "protocall.OutlierDetector" }
Detector.__index = Detector

--- detector = M.new(config): `config` as M.check returns it (and
-- service_config.lua's parse makes it from outlier_detection_experimental,
-- xds_client.lua from a cluster's outlier_detection): {interval=,
-- base_ejection_time=, max_ejection_time= (seconds), max_ejection_percent=,
-- success_rate = nil | {stdev_factor=, enforcement_percentage=,
-- minimum_hosts=, request_volume=}, failure_percentage = nil |
-- {threshold=, enforcement_percentage=, minimum_hosts=, request_volume=}}.
function M.new(config)
  return setmetatable({ config = config, next_sweep = monotonic() + config.interval }, Detector)
end

--- detector:count(b, ok): a call on backend `b` (the balancer's) ended,
-- `ok` true for status OK.
function Detector.count(_, b, ok)
  if ok then
    b.od_ok = (b.od_ok or 0) + 1
  else
    b.od_fail = (b.od_fail or 0) + 1
  end
end

local function eject(b, now)
  b.ejected_at = now
  b.ejections = (b.ejections or 0) + 1
end

-- The members with at least `volume` calls in the interval judged, or nil
-- when fewer than `hosts` of them.
local function candidates(members, volume, hosts)
  local list = {}
  for _, b in ipairs(members) do
    if b.od_total >= volume then list[#list + 1] = b end
  end
  if #list < hosts then return nil end
  return list
end

local function room(members, ejected, percent)
  return ejected * 100 / #members < percent
end

--- detector:sweep(members): when an interval has passed, judges the
-- calls of the one that ended and ejects or returns backends (each
-- member's `ejected_at` is set while it is ejected).
function Detector:sweep(members)
  local now = monotonic()
  if now < self.next_sweep then return end
  local c = self.config
  self.next_sweep = now + c.interval
  local ejected = 0
  for _, b in ipairs(members) do
    b.od_total = (b.od_ok or 0) + (b.od_fail or 0)
    b.od_rate = b.od_total > 0 and (b.od_ok or 0) / b.od_total or 1
    b.od_ok, b.od_fail = 0, 0
    if b.ejected_at then ejected = ejected + 1 end
  end
  local sr = c.success_rate
  local list = sr and candidates(members, sr.request_volume, sr.minimum_hosts)
  if list then
    local sum, sq = 0, 0
    for _, b in ipairs(list) do sum = sum + b.od_rate end
    local mean = sum / #list
    for _, b in ipairs(list) do sq = sq + (b.od_rate - mean) ^ 2 end
    local limit = mean - sqrt(sq / #list) * sr.stdev_factor / 1000
    for _, b in ipairs(list) do
      if not b.ejected_at and b.od_rate < limit and room(members, ejected, c.max_ejection_percent)
        and random(100) <= sr.enforcement_percentage then
        eject(b, now)
        ejected = ejected + 1
      end
    end
  end
  local fp = c.failure_percentage
  list = fp and candidates(members, fp.request_volume, fp.minimum_hosts)
  if list then
    for _, b in ipairs(list) do
      if not b.ejected_at and (1 - b.od_rate) * 100 > fp.threshold
        and room(members, ejected, c.max_ejection_percent) and random(100) <= fp.enforcement_percentage then
        eject(b, now)
        ejected = ejected + 1
      end
    end
  end
  for _, b in ipairs(members) do
    if b.ejected_at == nil then
      if (b.ejections or 0) > 0 then b.ejections = b.ejections - 1 end
    elseif b.ejected_at ~= now then
      local back = min(c.base_ejection_time * b.ejections, max(c.base_ejection_time, c.max_ejection_time))
      if now >= b.ejected_at + back then b.ejected_at = nil end
    end
  end
end

return M
