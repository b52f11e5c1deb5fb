--- The `ring_hash` load balancing policy (gRFC A42, with gRFC A76's
-- request_hash_header): consistent hashing of calls onto backends, so
-- calls carrying the same key reach the same backend while the backends
-- stay, and a backend joining or leaving moves only the keys of its arc.
--
-- The ring is Envoy's and gRPC's: each backend's weight normalized (over
-- the sum), `scale` = min(ceil(min_normalized * min_ring_size) /
-- min_normalized, max_ring_size) with both sizes first capped at 4096
-- (gRPC's ring size cap), and backend after backend, in the list's order,
-- entries XXH64("<address>_<n>", seed 0) for n = 0, 1, ... while the
-- entries so far are fewer than scale times the normalized weights so far
-- (ceil(scale) in all); then sorted by hash. A call's hash (64 bits)
-- picks the first entry whose hash is at least it (the first entry past
-- the last). The address is "host:port" ("[v6]:port"), as grpc-js-xds
-- writes it, so both rings place every key alike.
--
-- A call's hash: under xDS, the route's hash_policy (A42): each `header`
-- policy hashes the call's metadata values of its header_name joined by
-- "," (none: no result; a "-bin" header never; "content-type" is
-- "application/grpc"), a `filter_state` policy of key io.grpc.channel_id
-- hashes the target's id (one per xds: target, the same for all its
-- calls); the results combine as gRPC combines them (the previous hash
-- rotated left by 1, XOR the new one), a `terminal` policy with a result
-- ends the list; other policies give no result (A42), and no result at
-- all takes a random hash. Outside xDS (service config
-- `ring_hash_experimental`), `request_hash_header` names the metadata
-- header whose value is hashed (A76; absent from the call: a random
-- hash); without it each call's hash is random. A header policy's
-- regex_rewrite is not applied (the value is hashed as sent).
--
-- Backends that cannot take a call (failed and within their backoff,
-- ejected by outlier detection): the pick walks the ring on from the
-- call's entry to the first backend that can (A42's fallback, so keys of
-- a failed backend spread over the next ones and come back with it); a
-- failed backend whose backoff has passed is picked again, which makes
-- its connection attempt (A42's IDLE: the call waits for the connection),
-- and a call that could not connect goes on to the next backend on the
-- ring (transport/balancer.lua's next try).
local core = require "protocall.core"
local compat = require "protocall.compat"

local ipairs, type, tostring, floor, ceil, min, random = ipairs, type, tostring, math.floor, math.ceil,
  math.min, math.random
local lower, format, sort = string.lower, string.format, table.sort
local xxhash64, bxor = core.xxhash64, compat.bxor

local M = {}

--- The ring sizes: A42's defaults (1024, 8M), the most a config may say
-- (8M, Envoy's limit) and the cap gRPC puts on both (4096).
M.DEFAULT_MIN_RING_SIZE, M.DEFAULT_MAX_RING_SIZE, M.MAX_RING_SIZE, M.RING_SIZE_CAP = 1024, 8388608, 8388608, 4096

local TWO32 = 4294967296.0

-- A 64-bit hash as its two 32-bit halves, and its place on the ring: a
-- double (every half exact; the sum rounds to 53 bits, which keeps the
-- order of any two hashes that differ above their last 11 bits).
local function place(hi, lo) return hi * TWO32 + lo end

--- hi, lo = M.hash(s): XXH64 of string `s` with seed 0 (A42's hash), as
-- its high and low 32 bits.
M.hash = xxhash64

--- problem = M.check_sizes(min_size, max_size, min_name, max_name): nil
-- when the sizes (integers or nil: the defaults) are 1 .. 8388608 and the
-- minimum is not above the maximum; else "NAME: what is wrong", NAME the
-- field's own (as the config that said it spells it).
function M.check_sizes(lo, hi, lo_name, hi_name)
  for _, f in ipairs { { lo, lo_name }, { hi, hi_name } } do
    local v = f[1]
    if v ~= nil and (type(v) ~= "number" or v ~= floor(v) or v < 1 or v > M.MAX_RING_SIZE) then
      return format("%s: an integer in 1..%d expected, got %s", f[2], M.MAX_RING_SIZE, tostring(v))
    end
  end
  lo, hi = lo or M.DEFAULT_MIN_RING_SIZE, hi or M.DEFAULT_MAX_RING_SIZE
  if lo > hi then return format("%s: at most %s (%d) expected, got %d", lo_name, hi_name, hi, lo) end
end

--- ring = M.build(members, config): the ring of `members` (tables with
-- `address` "host:port" and `weight` > 0) for config {min_ring_size =,
-- max_ring_size =} (nil: the defaults): an array of {key = place on the
-- ring (a double), member = the member}, sorted by key, with
-- ring.members = `members`, ring.entries[member] and ring.share[member]
-- (the fraction of the hash space whose calls the member takes when
-- every backend is up).
function M.build(members, config)
  local ring = { members = members, entries = {}, share = {} }
  local n = #members
  if n == 0 then return ring end
  local total = 0
  for _, b in ipairs(members) do total = total + b.weight end
  local min_norm = 1
  for _, b in ipairs(members) do min_norm = min(min_norm, b.weight / total) end
  local lo = min((config and config.min_ring_size) or M.DEFAULT_MIN_RING_SIZE, M.RING_SIZE_CAP)
  local hi = min((config and config.max_ring_size) or M.DEFAULT_MAX_RING_SIZE, M.RING_SIZE_CAP)
  local scale = min(ceil(min_norm * lo) / min_norm, hi)
  local current, target = 0, 0
  for _, b in ipairs(members) do
    target = target + scale * (b.weight / total)
    local count = 0
    while current < target do
      ring[#ring + 1] = { key = place(xxhash64(b.address .. "_" .. count)), member = b }
      count, current = count + 1, current + 1
    end
    ring.entries[b] = count
  end
  sort(ring, function(x, y) return x.key < y.key end)
  -- each entry takes the arc from the entry before it (the last wraps round)
  local prev = ring[#ring].key - 2 ^ 64
  for _, e in ipairs(ring) do
    ring.share[e.member] = (ring.share[e.member] or 0) + (e.key - prev) / 2 ^ 64
    prev = e.key
  end
  return ring
end

--- i = M.find(ring, key): the index of the first entry whose key is at
-- least `key` (a place on the ring), 1 past the last (binary search).
function M.find(ring, key)
  local lo, hi = 1, #ring
  if hi == 0 or ring[hi].key < key then return 1 end
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if ring[mid].key < key then lo = mid + 1 else hi = mid end
  end
  return lo
end

--- member = M.pick(ring, key, usable, tried): from the entry of `key`
-- on along the ring, the first member for which usable(member) is true
-- and that is not in `tried` (a set or nil); else the first usable one
-- (tried or not); else nil.
function M.pick(ring, key, usable, tried)
  local n = #ring
  if n == 0 then return nil end
  local first = M.find(ring, key)
  local fallback
  local seen = {}
  for k = 0, n - 1 do
    local b = ring[(first - 1 + k) % n + 1].member
    if not seen[b] then
      seen[b] = true
      if usable(b) then
        if not (tried and tried[b]) then return b end
        fallback = fallback or b
      end
    end
  end
  return fallback
end

-- The value of header `name` (lower case) in `metadata` ({key, value}
-- pairs), several joined by ","; nil when absent or a "-bin" header.
local function header(metadata, name)
  if name:sub(-4) == "-bin" then return nil end
  if name == "content-type" then return "application/grpc" end
  local v
  for _, kv in ipairs(metadata or {}) do
    if lower(kv[1]) == name then v = v and v .. "," .. kv[2] or kv[2] end
  end
  return v
end

--- key = M.random(): a random place on the ring (a call with no hash).
function M.random()
  return place(floor(random() * TWO32), floor(random() * TWO32))
end

--- key = M.header_hash(metadata, name): the place of the hash of header
-- `name`'s value in the call's `metadata` (A76's request_hash_header), a
-- random one when the call lacks it.
function M.header_hash(metadata, name)
  local v = header(metadata, name)
  if v == nil then return M.random() end
  return place(xxhash64(v))
end

--- key = M.request_hash(policies, metadata, channel_id): the place of a
-- call's hash by an xDS route's hash_policy list (RouteAction.hash_policy
-- tables: header.header_name, filter_state.key, terminal) over its
-- `metadata`, `channel_id` the target's id (a string); random when no
-- policy gives a result.
function M.request_hash(policies, metadata, channel_id)
  local hi, lo
  for _, p in ipairs(policies or {}) do
    local nh, nl
    if p.header and p.header.header_name and p.header.header_name ~= "" then
      local v = header(metadata, lower(p.header.header_name))
      if v then nh, nl = xxhash64(v) end
    elseif p.filter_state and p.filter_state.key == "io.grpc.channel_id" then
      nh, nl = xxhash64(channel_id)
    end
    if hi == nil then
      hi, lo = nh, nl
    elseif nh then -- rotate left by 1, then XOR
      local rh = (hi * 2) % TWO32 + floor(lo / 2 ^ 31)
      local rl = (lo * 2) % TWO32 + floor(hi / 2 ^ 31)
      hi, lo = bxor(rh, nh), bxor(rl, nl)
    end
    if p.terminal and hi ~= nil then break end
  end
  if hi == nil then return M.random() end
  return place(hi, lo)
end

return M
