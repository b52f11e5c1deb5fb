--- The calls in flight of a balancer (transport/balancer.lua), counted per
-- backend and for the balancer as a whole, and what reads them: the
-- `least_request` pick (gRFC A48) and circuit breaking (gRFC A32).
--
-- A call counts from when its backend is picked until it ends: a unary
-- call until it returns or raises, a server stream until its iterator
-- ends or raises, a started call until its result is known (a started
-- server stream then until its iterator ends) or it is cancelled, a
-- client or bidirectional stream until a method of its call sees it ended
-- (the last recv, close_and_recv, trailers, cancel, close). A call that
-- moves to another backend (its first could not be connected to) counts
-- on the one it is on. Calls abandoned without an end (a stream never
-- read to its end nor closed) are found when the counts are taken again
-- (M.recount: a call whose stream ended or was closed, or that was
-- garbage collected, no longer counts): before a circuit breaker drops a
-- call, and at most once a second on least_request picks.
--
-- least_request: `choice_count` backends drawn at random (with
-- replacement, as Envoy and gRPC draw) among those that may take the
-- call, the one with the fewest calls in flight taking it (the first
-- drawn on a tie). Circuit breaking: while a balancer's calls in flight
-- reach its `max_requests`, a new call fails UNAVAILABLE at once, not
-- retried (the error is `local`), without reaching a backend, and is
-- counted as a drop.
local core = require "protocall.core"
local compat = require "protocall.compat"
local errors = require "protocall.errors"

local setmetatable, pairs, pcall, type, tostring, error, rawget = setmetatable, pairs, pcall, type,
  tostring, error, rawget
local format = string.format
local pack, unpack = compat.pack, compat.unpack
local random = math.random
local monotonic = core.monotonic

local M = {}

-- The most choice_count may be (gRPC caps it there), its default and least.
M.MAX_CHOICE, M.DEFAULT_CHOICE, M.MIN_CHOICE = 10, 2, 2
-- gRPC's max_requests when a cluster names none (gRFC A32).
M.DEFAULT_MAX_REQUESTS = 1024

local RECOUNT_EVERY = 1 -- seconds between least_request's recounts

local WEAK = { __mode = "k" }


-- The live-call registry of balancer `bal`, made on first use.
local function registry(bal)
  local live = bal.live
  if live == nil then
    live = setmetatable({}, WEAK)
    bal.live, bal.outstanding, bal.dropped = live, 0, bal.dropped or 0
  end
  return live
end

--- token = M.start(bal, b): a call of balancer `bal` now on its backend
-- `b` (a member table; its `outstanding` counts the call).
function M.start(bal, b)
  local tok = { bal = bal, b = b }
  registry(bal)[tok] = true
  b.outstanding = (b.outstanding or 0) + 1
  bal.outstanding = bal.outstanding + 1
  return tok
end

--- M.finish(token): the call ended (idempotent).
function M.finish(tok)
  if tok.done then return end
  tok.done = true
  local bal, b = tok.bal, tok.b
  bal.live[tok] = nil
  b.outstanding = b.outstanding - 1
  bal.outstanding = bal.outstanding - 1
end

--- M.move(token, b): the call goes on on backend `b` instead. A token a
-- recount already let go (its first attempt's call had ended) counts again.
function M.move(tok, b)
  if tok.done then
    local bal = tok.bal
    tok.done, tok.b, tok.handle = nil, b, nil
    registry(bal)[tok] = true
    b.outstanding = (b.outstanding or 0) + 1
    bal.outstanding = bal.outstanding + 1
    return
  end
  tok.b.outstanding = tok.b.outstanding - 1
  tok.b = b
  b.outstanding = (b.outstanding or 0) + 1
end

-- Whether the C call behind a pc.grpc Call or Started handle has ended
-- (its status is known, or it was closed: status() then raises).
local function ended(h)
  if h == nil then return false end
  if h.closed or h.done then return true end
  local call = h.call
  if call == nil then return true end
  local ok, st = pcall(call.status, call)
  return not ok or st ~= nil
end

--- M.watch(token, handle): the call's pc.grpc Call (or started handle):
-- once it has ended, M.recount stops counting it.
function M.watch(tok, h)
  tok.handle = h
end

--- M.recount(bal): takes the counts again from the calls still in
-- flight: those whose stream ended unseen, or that were garbage
-- collected, no longer count. `members` of `bal` get their `outstanding`.
function M.recount(bal)
  local live = registry(bal)
  for _, b in pairs(bal.members) do b.outstanding = 0 end
  for tok in pairs(live) do tok.b.outstanding = 0 end
  local total = 0
  for tok in pairs(live) do
    if tok.handle and ended(tok.handle) then
      tok.done = true
      live[tok] = nil
    else
      tok.b.outstanding = (tok.b.outstanding or 0) + 1
      total = total + 1
    end
  end
  bal.outstanding = total
  bal.recounted = monotonic()
end

--- b | nil = M.pick(bal, usable, tried, now): the least_request pick
-- among `bal.members` for which usable(b, now) holds and not in `tried`
-- (a set, may be nil), else among those usable; `bal.choice_count`
-- (default 2) drawn with replacement, the fewest calls in flight winning.
function M.pick(bal, usable, tried, now)
  registry(bal)
  if (bal.recounted or 0) + RECOUNT_EVERY <= now then M.recount(bal) end
  local fresh, any = {}, {}
  for _, b in pairs(bal.members) do
    if usable(b, now) then
      any[#any + 1] = b
      if not (tried and tried[b]) then fresh[#fresh + 1] = b end
    end
  end
  local list = #fresh > 0 and fresh or any
  local n = #list
  if n == 0 then return nil end
  local best
  for _ = 1, bal.choice_count or M.DEFAULT_CHOICE do
    local b = list[random(n)]
    if best == nil or (b.outstanding or 0) < (best.outstanding or 0) then best = b end
  end
  return best
end

--- err | nil = M.admit(bal, path): nil when balancer `bal` may start one
-- more call; else (its calls in flight reach bal.max_requests, taken
-- again first) the UNAVAILABLE error of the drop, counted in
-- bal.dropped, naming bal.breaker_name and the limit.
function M.admit(bal, path)
  local most = bal.max_requests
  if most == nil then return nil end
  registry(bal)
  if bal.outstanding < most then return nil end
  M.recount(bal)
  if bal.outstanding < most then return nil end
  bal.dropped = bal.dropped + 1
  local e = errors.status("UNAVAILABLE", format("%s: circuit breaker drop: %d calls in flight, max_requests %d",
    bal.breaker_name or "circuit breaker", bal.outstanding, most))
  e["local"], e.method, e.dropped = true, path, true -- local: not retried (gRFC A32), nor hedged again
  return e
end

-- A client or bidirectional stream's call (pc.grpc's Call) whose methods
-- end its count once they see it ended.
local Counted = { __name = "protocall.CountedCall" }
function Counted.__index(self, k)
  local inner = rawget(self, "inner")
  local v = inner[k]
  if type(v) ~= "function" then return v end
  local tok = rawget(self, "tok")
  return function(p, ...)
    if p == self then p = inner end
    local res = pack(pcall(v, p, ...))
    if ended(inner) then M.finish(tok) end
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end
end
Counted.__close = function(self) self.inner:close(); M.finish(self.tok) end

--- call = M.counted(token, call): pc.grpc's stream call `call`, its
-- count ended when a method sees it ended (also watched for M.recount).
function M.counted(tok, call)
  tok.handle = call
  return setmetatable({ inner = call, tok = tok }, Counted)
end

--- M.set_choice_count(bal, n, level): least_request's number of
-- choices for balancer `bal` (an integer, at least 2, nil for 2; more
-- than 10 is taken as 10, as gRPC caps it). Raises naming the value
-- otherwise, at `level` above the caller.
function M.set_choice_count(bal, n, level)
  n = n == nil and M.DEFAULT_CHOICE or n
  if type(n) ~= "number" or n ~= n or n % 1 ~= 0 or n < M.MIN_CHOICE then
    error("choice_count: an integer of at least 2 expected, got " .. tostring(n), (level or 1) + 1)
  end
  bal.choice_count = n > M.MAX_CHOICE and M.MAX_CHOICE or n
end

--- M.set_max_requests(bal, n, name): circuit breaking for balancer `bal`:
-- at most `n` calls in flight (an integer >= 0; nil: no limit), drops
-- named `name` ("xds:///svc: cluster A").
function M.set_max_requests(bal, n, name, level)
  if n ~= nil and (type(n) ~= "number" or n ~= n or n % 1 ~= 0 or n < 0) then
    error("max_requests: a non-negative integer or nil expected, got " .. tostring(n), (level or 1) + 1)
  end
  registry(bal)
  bal.max_requests, bal.breaker_name = n, name
end

--- {outstanding =, max_requests =, dropped =} of balancer `bal` (its
-- counts taken again).
function M.stats(bal)
  M.recount(bal)
  return { outstanding = bal.outstanding, max_requests = bal.max_requests, dropped = bal.dropped }
end

return M
