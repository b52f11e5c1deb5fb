--- Call policies and the cached callable (doc/guide.md "Calls";
-- the design in core/call/README.md).
--
-- Adds pc.Error, pc.RetryError, pc.DEFAULT, pc.if_status,
-- pc.if_transient_error, pc.Retry, pc.ExponentialTimeout and
-- pc.wrap_method. The arithmetic (backoff caps, deadlines, attempt
-- timeouts) and the plan cache are in the C core (core/call/policy.h); the retry
-- loop is here so that a `sleep` or a target may yield the coroutine. The
-- fast path (no per-call options) is C (bindings/lua/lpc_call.c).
local P = {}

local error, getmetatable, setmetatable, type, tostring, pcall, next, ipairs, rawlen =
  error, getmetatable, setmetatable, type, tostring, pcall, next, ipairs, rawlen
local select = select
local format = string.format
local compat = require "protocall.compat"
local mtype, floor, tointeger, math_random = compat.mtype, math.floor, compat.tointeger, math.random
local huge = math.huge

function P.install(M, core)
  local codes = M.codes

  local function is_callable(v)
    if type(v) == "function" then return true end
    local mt = getmetatable(v)
    return type(mt) == "table" and mt.__call ~= nil
  end

  -- Error text naming the function, as luaL_argerror would.
  local function argerror(fname, msg, level, arg)
    error(format("bad argument #%d to '%s' (%s)", arg or 1, fname, msg), level + 1)
  end

  ---------------------------------------------------------------------------
  -- Errors

  --- pc.Error{code=, message=, details=, metadata=, retry_delay=, ["local"]=, value=}:
  -- a call's failure. `code` is a canonical gRPC name or number (stored as
  -- the name, "UNAVAILABLE"); `message` a string; `details` anything (the
  -- status details); `metadata` the trailers as {key, value} pairs;
  -- `retry_delay` the server's pushback in seconds (replaces the next
  -- backoff sleep; negative means "do not retry"); `local` true for
  -- failures protocall raises itself that would recur (never retried by
  -- pc.if_transient_error); `value` the original Lua value when a target
  -- raised something that was not a pc.Error (code "UNKNOWN"). Other
  -- fields are kept as given (a transport's own, such as `method`).
  -- tostring(err) is "UNAVAILABLE: connection refused". Raises on a bad
  -- field. `getmetatable(err) == pc.Error` tells an error apart.
  local Error = { __name = "protocall.Error" }
  Error.__index = Error
  Error.__tostring = function(e)
    local m = e.message
    if m == nil or m == "" then return tostring(e.code) end
    return tostring(e.code) .. ": " .. tostring(m)
  end
  setmetatable(Error, {
    __call = function(_, t)
      if type(t) ~= "table" then argerror("Error", "table expected, got " .. type(t), 2) end
      local code = codes[t.code]
      if type(code) == "number" then code = t.code end
      if code == "OK" then
        argerror("Error", "code: OK is not an error status (a failure needs another code)", 2)
      end
      if type(code) ~= "string" then
        argerror("Error", "code: gRPC status name or number expected, got " .. tostring(t.code), 2)
      end
      if t.message ~= nil and type(t.message) ~= "string" then
        argerror("Error", "message: string expected, got " .. type(t.message), 2)
      end
      local d = t.retry_delay
      if d ~= nil and (type(d) ~= "number" or d ~= d) then
        argerror("Error", "retry_delay: number of seconds expected, got " .. tostring(d), 2)
      end
      if t["local"] ~= nil and type(t["local"]) ~= "boolean" then
        argerror("Error", "local: boolean expected, got " .. type(t["local"]), 2)
      end
      local e = {}
      for k, v in next, t do e[k] = v end -- other fields (a transport's own) are kept
      e.code = code
      return setmetatable(e, Error)
    end,
  })
  M.Error = Error

  --- pc.RetryError{cause=, attempts=, message=}: a retried call gave up.
  -- `cause` is the last attempt's error (a pc.Error), `attempts` how many
  -- attempts were sent, `message` why it gave up; tostring(err) is the
  -- message, which ends with the cause. `getmetatable(e) == pc.RetryError`.
  local RetryError = { __name = "protocall.RetryError" }
  RetryError.__index = RetryError
  RetryError.__tostring = function(e) return tostring(e.message) end
  setmetatable(RetryError, {
    __call = function(_, t)
      if type(t) ~= "table" then argerror("RetryError", "table expected, got " .. type(t), 2) end
      return setmetatable({ cause = t.cause, attempts = t.attempts, message = t.message }, RetryError)
    end,
  })
  M.RetryError = RetryError

  -- What a target raised, as an error object: pc.Error and pc.RetryError
  -- as they are, anything else UNKNOWN carrying the value.
  local function normalize(v)
    local mt = getmetatable(v)
    if mt == Error or mt == RetryError then return v end
    local message = v
    if type(v) ~= "string" then
      local ok, s = pcall(tostring, v)
      message = ok and type(s) == "string" and s or type(v)
    end
    return setmetatable({ code = "UNKNOWN", message = message, value = v }, Error)
  end

  local REASONS = {
    max_attempts = "max_attempts reached",
    deadline = "the next sleep would pass the retry deadline",
    pushback = "the server asked not to retry",
    no_time = "no time left before the call's deadline",
    throttled = "retries are throttled: the client's retry tokens are at or below half",
  }

  local function give_up(cause, attempts, why)
    return setmetatable({
      cause = cause, attempts = attempts,
      message = format("RetryError: gave up after %d attempt%s (%s); last error: %s",
        attempts, attempts == 1 and "" or "s", REASONS[why], tostring(cause)),
    }, RetryError)
  end

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
      local name = codes[c]
      if type(name) == "number" then name = c end
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
    if f.timeout ~= false and type(f.timeout) ~= "number" then
      argerror(fname, "timeout: number or false expected, got " .. type(f.timeout), level + 1)
    end
    local n = f.max_attempts
    if n ~= nil and (mtype(n) == nil or n < 1 or n ~= floor(n)) then
      argerror(fname, "max_attempts: positive integer expected, got " .. tostring(n), level + 1)
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
      initial = number_field("ExponentialTimeout", t, "initial", 5, 2),
      maximum = number_field("ExponentialTimeout", t, "maximum", 30, 2),
      multiplier = number_field("ExponentialTimeout", t, "multiplier", 2, 2),
      deadline = t.deadline,
    }
    if f.deadline == nil then f.deadline = 120 end
    if f.deadline ~= false and type(f.deadline) ~= "number" then
      argerror("ExponentialTimeout", "deadline: number or false expected, got " .. type(f.deadline), 2)
    end
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
  -- the bucket now (tokens in thousandths, as counted).
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
  --- pc._throttle_bucket(throttle) -> the C token bucket of a pc.Throttle
  -- (internal: hedging, lua/protocall/hedge.lua, counts its attempts in it):
  -- bucket:failure() -> retries still allowed, bucket:success(),
  -- bucket:info() -> tokens, max_tokens, token_ratio, allowed.
  function M._throttle_bucket(throttle) return buckets[throttle] end
  --- pc.DEFAULT: as a per-call option, "the callable's default".
  local DEFAULT = setmetatable({}, {
    __name = "protocall.DEFAULT",
    __tostring = function() return "protocall.DEFAULT" end,
    __newindex = function() error("protocall.DEFAULT is read-only", 2) end,
    __metatable = false,
  })
  M.DEFAULT = DEFAULT

  ---------------------------------------------------------------------------
  -- Metadata

  local function read_only() error("protocall: metadata handed to a call is read-only (copy it to change it)", 2) end

  -- A read-only view of list `t`, made once: writes raise, reads, #, ipairs
  -- and pairs see `t`. LuaJIT's # and ipairs ignore __len and __index, so
  -- there it is a copy (writes to it change nothing of `t`).
  local function freeze(t)
    if compat.luajit then return { compat.unpack(t, 1, #t) } end
    return setmetatable({}, {
      __index = t, __newindex = read_only, __len = function() return rawlen(t) end,
      __pairs = function() return next, t, nil end, __metatable = false,
    })
  end

  -- What is wrong with metadata `md`, or nil when it is a list of
  -- {key, value} string pairs whose keys are gRPC header names (lowercase
  -- letters, digits, '_', '-', '.'; not grpc-*, content-type, te or
  -- user-agent) and whose values are printable ASCII unless the key ends in
  -- "-bin" (bindings/lua/lpc_net.c, core/net/grpc.c pc_GrpcPair_Check).
  -- The one wording every place metadata enters uses.
  local metadata_problem = core.metadata_problem
  --- pc._metadata_problem(md) -> message | nil: the shared metadata check
  -- (internal: net.lua and service.lua raise with it at their callers).
  M._metadata_problem = metadata_problem

  ---------------------------------------------------------------------------
  -- Plans: the resolved, immutable, call-independent part of a call.

  local function make_plan(retry, timeout, compression, level)
    local tk, ti, tm, tx, td = 0, nil, nil, nil, nil
    if timeout == nil or timeout == false then
      tk = 0
    elseif type(timeout) == "number" then
      tk, ti = 1, timeout
    elseif getmetatable(timeout) == ExponentialTimeout then
      local f = fields[timeout]
      tk, ti, tm, tx, td = 2, f.initial, f.maximum, f.multiplier, f.deadline
    else
      error("timeout: number, pc.ExponentialTimeout or false expected, got " .. type(timeout), level + 1)
    end
    local rf
    if retry == nil or retry == false then
      retry = false
    elseif getmetatable(retry) == Retry then
      rf = fields[retry]
    else
      error("retry: pc.Retry or false expected, got " .. type(retry), level + 1)
    end
    if compression == false then compression = nil end
    if compression ~= nil and type(compression) ~= "string" then
      error("compression: string or false expected, got " .. type(compression), level + 1)
    end
    local policy, first
    if rf then
      policy, first = core.policy(tk, ti, tm, tx, td, rf.initial, rf.maximum, rf.multiplier,
        rf.timeout, rf.max_attempts, rf.min_pushback or rf.initial)
    else
      policy, first = core.policy(tk, ti, tm, tx, td)
    end
    if not policy then error(first, level + 1) end
    if tk == 1 then first = timeout end -- as given: 10 stays an integer
    -- [1], [2], [3] are what the C call reads (lpc_call.c, PLAN_*).
    return {
      first, rf ~= nil, compression,
      retry = retry, timeout = timeout, compression = compression, -- keep the key alive
      policy = policy, first = first, needs_start = rf ~= nil,
      predicate = rf and rf.predicate, on_error = rf and rf.on_error,
    }
  end

  ---------------------------------------------------------------------------
  -- The callable

  local CALLABLE_DEFAULTS = {
    retry = true, timeout = true, compression = true, metadata = true, cache_size = true,
    clock = true, sleep = true, random = true, throttle = true,
  }

  --- pc.wrap_method(fn, {retry=, timeout=, compression=, metadata=, cache_size=4,
  -- clock=, sleep=, random=, throttle=}) -> callable.
  -- `callable(request [, {retry=, timeout=, metadata=, compression=}])`
  -- calls `fn(request, timeout, metadata, compression, attempt)` once per
  -- attempt (timeout: seconds left for the attempt, or nil; metadata: the
  -- caller's {key, value} pairs then the defaults'; compression: a name or
  -- nil; attempt: nil for the first, then 2, 3, ...) and
  -- returns its first result. Without `retry` one attempt is made; without
  -- `timeout` none is set; per call, pc.DEFAULT (or leaving the option out)
  -- means the callable's default and false turns it off. The metadata list
  -- is a read-only view made once when the call has no per-call metadata
  -- (writes raise), else a fresh copy for each attempt. Failures raise a pc.Error (a
  -- target's non-pc.Error value becomes UNKNOWN with `value`) or a
  -- pc.RetryError. `clock()` returns seconds (default: monotonic),
  -- `sleep(s)` may yield the running coroutine (default: nanosleep),
  -- `random()` returns [0, 1] (default: math.random). Plans for distinct
  -- per-call (retry, timeout, compression) are cached in a bounded LRU of
  -- `cache_size` entries (0..4096); callable:cache_info() returns
  -- {hits=, misses=, size=, capacity=} of that cache (the defaults' plan is
  -- resolved once when wrapping, outside it). `throttle` (a pc.Throttle)
  -- counts this callable's outcomes in that shared bucket and stops
  -- retries while it is at or below half. Raises on bad arguments.
  function M.wrap_method(fn, defaults)
    if not is_callable(fn) then argerror("wrap_method", "function expected, got " .. type(fn), 2) end
    local d = check_fields("wrap_method", defaults, CALLABLE_DEFAULTS, 2, 2)
    local function bad(msg) error("bad argument #2 to 'wrap_method' (" .. msg .. ")", 3) end
    for _, k in ipairs { "clock", "sleep", "random" } do
      if d[k] ~= nil and not is_callable(d[k]) then bad(k .. ": function expected, got " .. type(d[k])) end
    end
    local clock, sleep, random = d.clock or core.monotonic, d.sleep or core.sleep, d.random or math_random
    local bucket = false
    if d.throttle ~= nil then
      if getmetatable(d.throttle) ~= Throttle then
        bad("throttle: pc.Throttle expected, got " .. type(d.throttle))
      end
      bucket = buckets[d.throttle]
    end
    local ok, default_plan = pcall(make_plan, d.retry, d.timeout, d.compression, 1)
    if not ok then bad(default_plan) end
    local default_pairs = {}
    if d.metadata ~= nil then
      local problem = metadata_problem(d.metadata)
      if problem then bad(problem) end
      for i, p in ipairs(d.metadata) do default_pairs[i] = { p[1], p[2] } end
    end
    local frozen = {}
    for i, p in ipairs(default_pairs) do frozen[i] = freeze(p) end
    local default_md = freeze(frozen)
    local size = d.cache_size
    if size == nil then size = 4 end
    if mtype(size) ~= "integer" or size < 0 or size > 4096 then
      bad("cache_size: integer in 0..4096 expected, got " .. tostring(size))
    end
    local cache, plans = core.plan_cache(size), {}

    -- The metadata of a call with per-call pairs `m`: a fresh list of fresh
    -- pairs, the caller's then the defaults'.
    local function merge(m)
      local problem = metadata_problem(m)
      if problem then error("bad argument #2 to 'callable' (" .. problem .. ")", 4) end
      local list, n = {}, #m
      for i = 1, n do
        local p = m[i]
        list[i] = { p[1], p[2] }
      end
      for i = 1, #default_pairs do
        local p = default_pairs[i]
        list[n + i] = { p[1], p[2] }
      end
      return list
    end

    -- What an injected clock or random source returned, checked: a finite
    -- number (NaN would make every deadline test false and retry forever),
    -- for random one in [0, 1].
    local function checked(what, v)
      if type(v) ~= "number" then error(what .. ": number expected, got " .. type(v), 0) end
      if v ~= v or v == huge or v == -huge then error(what .. ": finite number expected, got " .. tostring(v), 0) end
      if what == "random" and (v < 0 or v > 1) then
        error("random: number in [0, 1] expected, got " .. tostring(v), 0)
      end
      return v
    end

    -- The retries of one call after its first attempt failed: `m` is the
    -- call's own metadata (each attempt gets a fresh merge), or nil.
    -- session:failed(err) raises what the caller sees, or sleeps the backoff
    -- and returns the next attempt's timeout; session.attempts counts them.
    local Session = {}
    Session.__index = Session

    function Session.failed(s, err)
      local e = normalize(err)
      local plan = s.plan
      if not plan.needs_start then error(e, 0) end
      if not plan.predicate(e) then error(e, 0) end
      if plan.on_error then plan.on_error(e) end
      if bucket and not bucket:failure() then error(give_up(e, s.attempts, "throttled"), 0) end
      local state = s.state
      if not state then
        state = plan.policy:start(s.start)
        s.state = state
      end
      local pushback, r = e.retry_delay, 0
      if pushback == nil then r = checked("random", random()) end
      local delay, why = state:on_error(s:now(), r, pushback)
      if not delay then error(give_up(e, s.attempts, why), 0) end
      sleep(delay)
      s.slept = delay
      local timeout = state:next_attempt(s:now())
      if timeout == false then error(give_up(e, s.attempts, "no_time"), 0) end
      s.attempts = s.attempts + 1
      return timeout
    end

    -- The clock as the loop sees it: the reading plus `skew`, the time
    -- slept that the clock did not show. When the clock advanced less than
    -- the last sleep (it stepped back, stood still, or a sleep returned
    -- early by its own account) the sleep counts instead, so a clock that
    -- goes backwards or freezes cannot hold the deadline off.
    function Session.now(s)
      local t = checked("clock", clock())
      local advanced = t - s.reading
      if advanced < s.slept then s.skew = s.skew + (s.slept - advanced) end
      s.reading, s.slept = t, 0
      return t + s.skew
    end

    function Session.metadata(s)
      local m = s.m
      return m and merge(m) or default_md
    end

    function Session.succeeded()
      if bucket then bucket:success() end
    end

    local function session(plan, m, start)
      return setmetatable({ plan = plan, m = m, start = start, reading = start, skew = 0, slept = 0,
        attempts = 1 }, Session)
    end

    local function retry_loop(plan, request, m, start, err)
      local s = session(plan, m, start)
      local compression = plan.compression
      while true do
        local timeout = s:failed(err)
        local okc, res = pcall(fn, request, timeout, s:metadata(), compression, s.attempts)
        if okc then
          if bucket then bucket:success() end
          return res
        end
        err = res
      end
    end

    local function on_fail(request, start, err, plan)
      return retry_loop(plan or default_plan, request, nil, start, err)
    end

    -- The plan and per-call metadata of options `opts` (`missed`: the C
    -- side already counted the cache miss); misuse raises at `level`.
    local function resolve(opts, missed, level)
      if type(opts) ~= "table" then
        error("bad argument #2 to 'callable' (table of options expected, got " .. type(opts) .. ")", level)
      end
      local r, t, c, m = DEFAULT, DEFAULT, DEFAULT, nil
      for k, v in next, opts do
        if k == "retry" then r = v
        elseif k == "timeout" then t = v
        elseif k == "compression" then c = v
        elseif k == "metadata" then m = v
        else error(format("bad argument #2 to 'callable' (unknown option '%s')", tostring(k)), level)
        end
      end
      local plan = default_plan
      if r ~= DEFAULT or t ~= DEFAULT or c ~= DEFAULT then
        -- Cache keys: nil stands for DEFAULT, as in the C call.
        local kr, kt, kc = r, t, c
        if kr == DEFAULT then kr = nil end
        if kt == DEFAULT then kt = nil end
        if kc == DEFAULT then kc = nil end
        local slot = not missed and cache:find(kr, kt, kc)
        if slot then
          plan = plans[slot]
        else
          local rr, tt, cc = r, t, c
          if rr == DEFAULT then rr = d.retry end
          if tt == DEFAULT then tt = d.timeout end
          if cc == DEFAULT then cc = d.compression end
          local okp, p = pcall(make_plan, rr, tt, cc, 1)
          if not okp then error("bad argument #2 to 'callable' (" .. p .. ")", level) end
          plan = p
          slot = cache:insert(kr, kt, kc)
          if slot then plans[slot] = plan end
        end
      end
      return plan, m
    end

    -- The per-call path in Lua: metadata, misuse, and plans the cache
    -- lacks (`missed`: the C side already counted the miss).
    local function on_opts(request, opts, missed)
      local plan, m = resolve(opts, missed, 4)
      local md = default_md
      if m ~= nil then md = merge(m) end
      local start
      if plan.needs_start then start = checked("clock", clock()) end
      local okc, res = pcall(fn, request, plan.first, md, plan.compression)
      if okc then
        if bucket then bucket:success() end
        return res
      end
      return retry_loop(plan, request, m, start, res)
    end

    -- The call: in C (core.callable, bindings/lua/lpc_call.c) under Lua
    -- 5.4, whose continuations let the target yield through it; in Lua
    -- under LuaJIT, which cannot yield across a C function but can across
    -- pcall.
    local call
    if compat.luajit then
      local first, compression, needs_start = default_plan.first, default_plan.compression,
        default_plan.needs_start
      call = function(_, request, opts)
        if opts ~= nil then
          local res = on_opts(request, opts, false) -- not a tail call: errors name the caller
          return res
        end
        local start
        if needs_start then start = checked("clock", clock()) end
        local okc, res = pcall(fn, request, first, default_md, compression)
        if okc then
          if bucket then bucket:success() end
          return res
        end
        return on_fail(request, start, res, nil)
      end
    else
      call = core.callable(fn, default_plan.first, default_md, default_plan.compression,
        d.clock or false, default_plan.needs_start, on_fail, on_opts, cache, plans, DEFAULT, bucket)
    end
    local methods = {}
    local callable = setmetatable({}, {
      __name = "protocall.Callable",
      __call = call,
      __index = methods,
      __newindex = function() error("protocall.Callable is read-only", 2) end,
      __metatable = false,
    })

    --- callable:cache_info() -> {hits=, misses=, size=, capacity=} of the
    -- per-call plan cache.
    function methods.cache_info()
      local hits, misses, n, capacity = cache:info()
      return { hits = hits, misses = misses, size = n, capacity = capacity }
    end

    --- callable:_attempts([opts]) -> session (internal: service.lua's
    -- resumable streams run their attempts themselves). session.first,
    -- session.compression and session:metadata() are the first attempt's
    -- timeout, compression and metadata; session:failed(err) raises what
    -- the caller sees or sleeps and returns the next attempt's timeout
    -- (session.attempts counts them); session:succeeded() counts the
    -- success in the throttle. Misuse of `opts` raises as a call would.
    function methods._attempts(_, opts)
      local plan, m = default_plan, nil
      if opts ~= nil then
        plan, m = resolve(opts, false, 3)
        if m ~= nil then
          local problem = metadata_problem(m)
          if problem then error("bad argument #2 to 'callable' (" .. problem .. ")", 3) end
        end
      end
      local start = checked("clock", clock())
      local s = session(plan, m, start)
      s.first, s.compression = plan.first, plan.compression
      return s
    end

    return callable
  end

  --- seconds = pc.now(): the monotonic clock callables use by default
  -- (clock_gettime(CLOCK_MONOTONIC)); handlers compare it with ctx.deadline.
  M.now = core.monotonic
  --- pc.sleep(seconds): the default sleep of callables (nanosleep; resumes
  -- after a signal until the time has passed).
  M.sleep = core.sleep
end

return P
