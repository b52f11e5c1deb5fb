--- Call policies (gRFC A6): retry predicates, pc.Retry,
-- pc.ExponentialTimeout, pc.Throttle and pc.DEFAULT, and the plans a
-- callable resolves from them. The arithmetic (backoff caps, deadlines,
-- attempt timeouts) is in the C core (core/call/policy.h, through
-- bindings/lua/lpc_call.c).
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"

local error, getmetatable, setmetatable, type, tostring, next, select =
  error, getmetatable, setmetatable, type, tostring, next, select
local format, floor, huge = string.format, math.floor, math.huge
local mtype, tointeger = compat.mtype, compat.tointeger
local argerror, is_callable, code_name = internal.argerror, internal.is_callable, internal.code_name
local shown, seconds_problem = internal.show, internal.seconds_problem

local M = {}

--- PLAN: the names of a plan's array slots, as bindings/lua/lpc_call.c
-- numbers them (core.plan_slots): first, needs_start, compression.
local PLAN = core.plan_slots
M.PLAN = PLAN

---------------------------------------------------------------------------
-- Predicates

local TRANSIENT = { UNAVAILABLE = true, RESOURCE_EXHAUSTED = true }

--- pc.if_transient_error(err) -> boolean: the default retry predicate.
-- True for UNAVAILABLE and RESOURCE_EXHAUSTED unless the error carries
-- `local = true` (a failure protocall raised itself that would recur).
-- INTERNAL is not retried (gRPC uses it for failures that recur).
local function if_transient_error(e)
  return TRANSIENT[e.code] == true and not e["local"]
end
M.if_transient_error = if_transient_error

--- pc.if_status(code, ...) -> predicate: true for errors whose code is
-- one of the given names or numbers, `local` errors excepted (they would
-- recur). Raises on an unknown code.
function M.if_status(...)
  local set, n = {}, select("#", ...)
  if n == 0 then error("bad argument #1 to 'if_status' (status code expected)", 2) end
  for i = 1, n do
    local c = select(i, ...)
    local name = code_name(c)
    if type(name) ~= "string" then
      error(format("bad argument #%d to 'if_status' (unknown status code %s)", i, tostring(c)), 2)
    end
    set[name] = true
  end
  return function(e) return set[e.code] == true and not e["local"] end
end

---------------------------------------------------------------------------
-- Immutable policy objects: fields live in a weak side table, so nothing
-- can change a Retry or an ExponentialTimeout a plan cache is keyed by.

local fields = setmetatable({}, { __mode = "k" })

local function immutable_class(name, methods, show, hint)
  local class = { __name = name }
  class.__index = function(self, k)
    local v = fields[self][k]
    if v ~= nil then return v end
    return methods[k]
  end
  class.__newindex = function()
    error(name .. " is immutable" .. hint, 2)
  end
  class.__tostring = function(self) return show(fields[self]) end
  class.__metatable = class -- getmetatable(obj) == pc.Retry; no setmetatable
  return class
end

local function check_fields(fname, t, known, level, arg)
  if t == nil then return {} end
  if type(t) ~= "table" then argerror(fname, "table expected, got " .. type(t), level + 1, arg) end
  for k in next, t do
    if not known[k] then argerror(fname, format("unknown field '%s'", tostring(k)), level + 1, arg) end
  end
  return t
end

local function number_field(fname, t, k, default, level)
  local v = t[k]
  if v == nil then return default end
  if type(v) ~= "number" then
    argerror(fname, format("%s: number expected, got %s", k, type(v)), level + 1)
  end
  return v
end

-- Retry --------------------------------------------------------------------

local retry_methods = {}
local Retry = immutable_class("protocall.Retry", retry_methods, function(f)
  return format("Retry{initial=%s, maximum=%s, multiplier=%s, timeout=%s, max_attempts=%d%s}",
    f.initial, f.maximum, f.multiplier, tostring(f.timeout), f.max_attempts,
    f.min_pushback and ", min_pushback=" .. f.min_pushback or "")
end, " (its with_* methods return changed copies)")

local RETRY_FIELDS = {
  initial = true, maximum = true, multiplier = true, timeout = true, max_attempts = true,
  min_pushback = true, predicate = true, on_error = true,
}

local function new_retry(fname, t, level)
  local f = {
    initial = number_field(fname, t, "initial", 1, level + 1),
    maximum = number_field(fname, t, "maximum", 60, level + 1),
    multiplier = number_field(fname, t, "multiplier", 2, level + 1),
    timeout = t.timeout,
    max_attempts = t.max_attempts,
    min_pushback = number_field(fname, t, "min_pushback", nil, level + 1),
    predicate = t.predicate,
    on_error = t.on_error,
  }
  if f.timeout == nil then f.timeout = 120 end
  if f.timeout ~= false then
    local problem = seconds_problem("timeout", f.timeout, "false", false, huge)
    if problem then argerror(fname, problem, level + 1) end
  end
  local n = f.max_attempts
  if n ~= nil and (mtype(n) == nil or n < 1 or n ~= floor(n)) then
    argerror(fname, "max_attempts: positive integer expected, got " .. shown(n), level + 1)
  end
  f.max_attempts = n == nil and core.DEFAULT_MAX_ATTEMPTS or tointeger(n)
  if f.predicate == nil then f.predicate = if_transient_error end
  if not is_callable(f.predicate) then
    argerror(fname, "predicate: function expected, got " .. type(f.predicate), level + 1)
  end
  if f.on_error ~= nil and not is_callable(f.on_error) then
    argerror(fname, "on_error: function expected, got " .. type(f.on_error), level + 1)
  end
  local ok, msg = core.check_retry(f.initial, f.maximum, f.multiplier, f.timeout, f.max_attempts,
    f.min_pushback or f.initial)
  if not ok then argerror(fname, msg, level + 1) end
  local r = setmetatable({}, Retry)
  fields[r] = f
  return r
end

local function retry_copy(self, changes)
  local t = {}
  for k, v in next, fields[self] do t[k] = v end
  for k, v in next, changes do t[k] = v end
  return t
end

--- retry:with_timeout(seconds|false) -> a new Retry with that budget.
function retry_methods.with_timeout(self, timeout)
  local r = new_retry("with_timeout", retry_copy(self, { timeout = timeout }), 2)
  return r
end

--- retry:with_delay(initial, maximum, multiplier) -> a new Retry; nil
-- arguments keep the current values.
function retry_methods.with_delay(self, initial, maximum, multiplier)
  local r = new_retry("with_delay", retry_copy(self,
    { initial = initial, maximum = maximum, multiplier = multiplier }), 2)
  return r
end

--- retry:with_predicate(fn) -> a new Retry deciding with fn(err).
function retry_methods.with_predicate(self, predicate)
  if predicate == nil then argerror("with_predicate", "function expected, got nil", 2) end
  local r = new_retry("with_predicate", retry_copy(self, { predicate = predicate }), 2)
  return r
end

--- pc.Retry{initial=1, maximum=60, multiplier=2, timeout=120, max_attempts=5,
-- min_pushback=initial, predicate=pc.if_transient_error, on_error=nil} -> an
-- immutable Retry. Seconds throughout. Sleeps are cap * random() with cap =
-- min(initial, maximum), then cap = min(cap * multiplier, maximum); an
-- error's `retry_delay` (a server's pushback) replaces the drawn sleep but
-- is raised to `min_pushback`, so a server answering "retry in 0 ms" cannot
-- make the client hammer it (min_pushback = 0 opts in to whatever the
-- server sends). Gives up with pc.RetryError when the next sleep would pass
-- `timeout` seconds from the call's start (false: no budget), or after
-- `max_attempts` attempts (a positive integer, 5 by default as gRPC A6
-- "Retry Policy Capabilities" caps it; there is no unlimited setting).
-- Time slept counts toward `timeout` and the call's deadline even when the
-- clock says less passed (a clock stepping back or frozen), so no call
-- outlives its budget by more than its last attempt. `on_error(err)` is
-- called for each error the predicate accepts. Raises on bad fields.
setmetatable(Retry, { __call = function(_, t)
  local r = new_retry("Retry", check_fields("Retry", t, RETRY_FIELDS, 2), 2)
  return r
end })
M.Retry = Retry

-- ExponentialTimeout -------------------------------------------------------

local ExponentialTimeout = immutable_class("protocall.ExponentialTimeout", {}, function(f)
  return format("ExponentialTimeout{initial=%s, maximum=%s, multiplier=%s, deadline=%s}",
    f.initial, f.maximum, f.multiplier, tostring(f.deadline))
end, "")
local XT_FIELDS = { initial = true, maximum = true, multiplier = true, deadline = true }
--- pc.ExponentialTimeout{initial=5, maximum=30, multiplier=2, deadline=120}:
-- attempt timeouts initial, initial*multiplier, ... up to maximum, each
-- capped by the time left to `deadline` seconds after the call's start
-- (false: none). Every call starts its own sequence. Raises on bad fields.
setmetatable(ExponentialTimeout, { __call = function(_, t)
  t = check_fields("ExponentialTimeout", t, XT_FIELDS, 2)
  local f = {
    initial = t.initial == nil and 5 or t.initial,
    maximum = t.maximum == nil and 30 or t.maximum,
    multiplier = number_field("ExponentialTimeout", t, "multiplier", 2, 2),
    deadline = t.deadline,
  }
  if f.deadline == nil then f.deadline = 120 end
  local problem = seconds_problem("initial", f.initial) or seconds_problem("maximum", f.maximum)
    or f.deadline ~= false and seconds_problem("deadline", f.deadline, "false", false, huge)
  if problem then argerror("ExponentialTimeout", problem, 2) end
  local ok, msg = core.check_timeout(2, f.initial, f.maximum, f.multiplier, f.deadline)
  if not ok then argerror("ExponentialTimeout", msg, 2) end
  local x = setmetatable({}, ExponentialTimeout)
  fields[x] = f
  return x
end })
M.ExponentialTimeout = ExponentialTimeout

-- Throttle ---------------------------------------------------------------

local buckets = setmetatable({}, { __mode = "k" }) -- Throttle -> its C token bucket
local Throttle = { __name = "protocall.Throttle" }
Throttle.__index = Throttle
Throttle.__metatable = Throttle
Throttle.__newindex = function() error("protocall.Throttle is read-only", 2) end
Throttle.__tostring = function(self)
  local tokens, max_tokens, ratio = buckets[self]:info()
  return format("Throttle{max_tokens=%s, token_ratio=%s} (%s tokens)", max_tokens, ratio, tokens)
end
local THROTTLE_FIELDS = { max_tokens = true, token_ratio = true }

--- throttle:info() -> {tokens=, max_tokens=, token_ratio=, retries_allowed=}:
-- the bucket now, `tokens` and `max_tokens` in tokens (floats such as
-- 8.1: the bucket counts thousandths of a token, so three decimals).
function Throttle.info(self)
  local tokens, max_tokens, ratio, allowed = buckets[self]:info()
  return { tokens = tokens, max_tokens = max_tokens, token_ratio = ratio, retries_allowed = allowed }
end

--- pc.Throttle{max_tokens=, token_ratio=} -> a retry token bucket (gRPC's
-- retryThrottling, gRFC A6), given to pc.wrap_method or pc.client as
-- `throttle`; every callable given the same one shares it. It starts full
-- (max_tokens, in (0, 1000]); an attempt failing with an error the retry's
-- predicate accepts takes one token, a call that succeeds gives back
-- token_ratio (> 0, three decimals kept); while tokens <= max_tokens / 2 a
-- failed attempt is not retried (pc.RetryError "retries are throttled").
-- Raises on bad fields.
setmetatable(Throttle, { __call = function(_, t)
  t = check_fields("Throttle", t, THROTTLE_FIELDS, 2)
  local mx, ratio = t.max_tokens, t.token_ratio
  if type(mx) ~= "number" then argerror("Throttle", "max_tokens: number expected, got " .. type(mx), 2) end
  if type(ratio) ~= "number" then
    argerror("Throttle", "token_ratio: number expected, got " .. type(ratio), 2)
  end
  local bucket, msg = core.throttle(mx, ratio)
  if not bucket then
    msg = msg:gsub("^maxTokens", "max_tokens"):gsub("^tokenRatio", "token_ratio")
    argerror("Throttle", msg, 2)
  end
  local obj = setmetatable({}, Throttle)
  buckets[obj] = bucket
  return obj
end })
M.Throttle = Throttle
--- bucket_of(throttle) -> the C token bucket of a pc.Throttle (callables
-- and hedging count their attempts in it): bucket:failure() -> retries
-- still allowed, bucket:success(), bucket:info() -> tokens, max_tokens,
-- token_ratio, allowed.
function M.bucket_of(throttle) return buckets[throttle] end
--- pc.DEFAULT: as a per-call option, "the callable's default".
local DEFAULT = setmetatable({}, {
  __name = "protocall.DEFAULT",
  __tostring = function() return "protocall.DEFAULT" end,
  __newindex = function() error("protocall.DEFAULT is read-only", 2) end,
  __metatable = false,
})
M.DEFAULT = DEFAULT


---------------------------------------------------------------------------
-- Plans: the resolved, immutable, call-independent part of a call.

local CALL_OPTIONS = { retry = true, timeout = true, compression = true, metadata = true }

--- problem | nil = option_problem(key, value): what is wrong with per-call
-- option `key` = `value` of a callable (retry: a pc.Retry or false;
-- timeout: seconds, a pc.ExponentialTimeout or false; compression: a name
-- or false; metadata: {key, value} pairs; nil and pc.DEFAULT: the
-- callable's default), in the words every caller raises it with.
local function option_problem(k, v)
  if not CALL_OPTIONS[k] then return format("unknown option '%s'", tostring(k)) end
  if v == nil or v == DEFAULT or v == false and k ~= "metadata" then return nil end
  if k == "retry" then
    if getmetatable(v) == Retry then return nil end
    return "retry: pc.Retry or false expected, got " .. type(v)
  elseif k == "timeout" then
    if getmetatable(v) == ExponentialTimeout then return nil end
    return seconds_problem("timeout", v, "pc.ExponentialTimeout or false")
  elseif k == "compression" then
    if type(v) == "string" then return nil end
    return "compression: string or false expected, got " .. type(v)
  end
  return core.metadata_problem(v)
end
M.option_problem = option_problem

--- plan(retry, timeout, compression) -> plan | nil, problem: the resolved,
-- immutable, call-independent part of a call with these options (as
-- option_problem takes them, pc.DEFAULT excepted). A plan is a table whose
-- array slots (PLAN.first, PLAN.needs_start, PLAN.compression: the
-- numbers bindings/lua/lpc_call.c reads) are the first attempt's timeout,
-- whether the call retries (so needs its start time) and the compression;
-- its fields name the same and the policy (core.policy), predicate and
-- on_error. `problem` words what is wrong with an option.
function M.plan(retry, timeout, compression)
  local problem = option_problem("timeout", timeout) or option_problem("retry", retry)
    or option_problem("compression", compression)
  if problem then return nil, problem end
  local tk, ti, tm, tx, td = 0, nil, nil, nil, nil
  if type(timeout) == "number" then
    tk, ti = 1, timeout
  elseif timeout then
    local f = fields[timeout]
    tk, ti, tm, tx, td = 2, f.initial, f.maximum, f.multiplier, f.deadline
  end
  local rf
  if retry then rf = fields[retry] else retry = false end
  if compression == false then compression = nil end
  local policy, first
  if rf then
    policy, first = core.policy(tk, ti, tm, tx, td, rf.initial, rf.maximum, rf.multiplier,
      rf.timeout, rf.max_attempts, rf.min_pushback or rf.initial)
  else
    policy, first = core.policy(tk, ti, tm, tx, td)
  end
  if not policy then return nil, first end
  if tk == 1 then first = timeout end -- as given: 10 stays an integer
  return {
    [PLAN.first] = first, [PLAN.needs_start] = rf ~= nil, [PLAN.compression] = compression,
    retry = retry, timeout = timeout, compression = compression, -- keep the key alive
    policy = policy, first = first, needs_start = rf ~= nil,
    predicate = rf and rf.predicate, on_error = rf and rf.on_error,
  }
end

return M
