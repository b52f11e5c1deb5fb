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

local setmetatable, ipairs, sqrt, random, max, min = setmetatable, ipairs, math.sqrt, math.random, math.max,
  math.min
local monotonic = core.monotonic

local M = {}

local Detector = { __name = "protocall.OutlierDetector" }
Detector.__index = Detector

--- detector = M.new(config): `config` as service_config.lua's parse
-- makes it from outlier_detection_experimental: {interval=,
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
