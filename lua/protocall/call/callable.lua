--- The cached callable: pc.wrap_method. A callable resolves the plan of
-- each distinct (retry, timeout, compression) once (call/policy.lua, kept
-- in a bounded C cache) and starts every call's own deadline, attempts,
-- backoff and metadata. The first attempt of a call without per-call
-- options runs in C under Lua 5.4 (core.callable, bindings/lua/lpc_call.c:
-- nothing allocated, continuations so a target may yield); the retry loop,
-- per-call options and LuaJIT's calls run in Lua here (LuaJIT cannot yield
-- across a C function, but can across pcall).
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"
local errors = require "protocall.errors"
local policy = require "protocall.call.policy"
local sched = require "protocall.sched"

local error, getmetatable, setmetatable, type, tostring, pcall, next, ipairs, rawlen =
  error, getmetatable, setmetatable, type, tostring, pcall, next, ipairs, rawlen
local format, huge, math_random = string.format, math.huge, math.random
local mtype = compat.mtype
local argerror, is_callable, show = internal.argerror, internal.is_callable, internal.show
local RetryError, normalize = errors.RetryError, errors.normalize
local DEFAULT, Throttle, make_plan, option_problem = policy.DEFAULT, policy.Throttle, policy.plan,
  policy.option_problem
local metadata_problem = core.metadata_problem

local M = {}

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

-- What an injected clock or random source returned, checked: a finite
-- number (NaN would make every deadline test false and retry forever),
-- for random one in [0, 1]. A bad one raises at `level` as error's, counted
-- from checked's caller (the callable's caller; nil: no position).
local function checked(what, v, level)
  level = level and level + 1 or 0
  if type(v) ~= "number" then error(what .. ": number expected, got " .. type(v), level) end
  if v ~= v or v == huge or v == -huge then error(what .. ": finite number expected, got " .. show(v), level) end
  if what == "random" and (v < 0 or v > 1) then
    error("random: number in [0, 1] expected, got " .. show(v), level)
  end
  return v
end

local CALLABLE_DEFAULTS = {
  retry = true, timeout = true, compression = true, metadata = true, cache_size = true,
  clock = true, sleep = true, random = true, throttle = true,
}

-- The sessions of each callable's calls (internal: resumable streams run
-- their attempts themselves, see M.attempts).
local attempts_of = setmetatable({}, { __mode = "k" })

--- callable | nil, problem, arg = new(fn, defaults [, path]): pc.wrap_method
-- without raising: `problem` words what is wrong with argument #arg.
-- `path` "lua" makes the first attempt run in Lua under Lua 5.4 too (the
-- specs run the same cases through both paths).
local function new(fn, defaults, path)
  if not is_callable(fn) then return nil, "function expected, got " .. type(fn), 1 end
  if defaults ~= nil and type(defaults) ~= "table" then return nil, "table expected, got " .. type(defaults), 2 end
  local d = defaults or {}
  for k in next, d do
    if not CALLABLE_DEFAULTS[k] then return nil, format("unknown field '%s'", tostring(k)), 2 end
  end
  for _, k in ipairs { "clock", "sleep", "random" } do
    if d[k] ~= nil and not is_callable(d[k]) then return nil, k .. ": function expected, got " .. type(d[k]), 2 end
  end
  local clock, sleep, random = d.clock or core.monotonic, d.sleep or sched.sleep, d.random or math_random
  local bucket = false
  if d.throttle ~= nil then
    if getmetatable(d.throttle) ~= Throttle then
      return nil, "throttle: pc.Throttle expected, got " .. type(d.throttle), 2
    end
    bucket = policy.bucket_of(d.throttle)
  end
  local default_plan, problem = make_plan(d.retry, d.timeout, d.compression)
  if not default_plan then return nil, problem, 2 end
  local default_pairs = {}
  if d.metadata ~= nil then
    problem = metadata_problem(d.metadata)
    if problem then return nil, problem, 2 end
    for i, p in ipairs(d.metadata) do default_pairs[i] = { p[1], p[2] } end
  end
  local frozen = {}
  for i, p in ipairs(default_pairs) do frozen[i] = freeze(p) end
  local default_md = freeze(frozen)
  local size = d.cache_size
  if size == nil then size = 4 end
  if mtype(size) ~= "integer" or size < 0 or size > 4096 then
    return nil, "cache_size: integer in 0..4096 expected, got " .. show(size), 2
  end
  local cache, plans = core.plan_cache(size), {}

  -- The metadata of a call with per-call pairs `m`: a fresh list of fresh
  -- pairs, the caller's then the defaults'.
  local function merge(m)
    local p = metadata_problem(m)
    if p then error("bad argument #2 to 'callable' (" .. p .. ")", 4) end
    local list, n = {}, #m
    for i = 1, n do
      local pair = m[i]
      list[i] = { pair[1], pair[2] }
    end
    for i = 1, #default_pairs do
      local pair = default_pairs[i]
      list[n + i] = { pair[1], pair[2] }
    end
    return list
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
    if pushback == nil then r = checked("random", random(), s.level and s.level + 1) end
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
  function Session.now(s) -- called by Session.failed
    local t = checked("clock", clock(), s.level and s.level + 2)
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

  -- `level`: where the callable's caller is, as error's level counted
  -- from retry_loop (nil: unknown, a session of callable.attempts).
  local function session(plan, m, start, level)
    return setmetatable({ plan = plan, m = m, start = start, reading = start, skew = 0, slept = 0,
      attempts = 1, level = level }, Session)
  end

  -- `level`: the callable's caller, counted from here (3 when on_fail or
  -- on_opts tail-called this from the C callable or the Lua one).
  local function retry_loop(plan, request, m, start, err, level)
    local s = session(plan, m, start, level or 3)
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

  local function on_fail(request, start, err, plan, level)
    return retry_loop(plan or default_plan, request, nil, start, err, level)
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
      elseif k == "metadata" then
        if v ~= DEFAULT then m = v end
      else error("bad argument #2 to 'callable' (" .. option_problem(k, v) .. ")", level)
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
        local p, why = make_plan(rr, tt, cc)
        if not p then error("bad argument #2 to 'callable' (" .. why .. ")", level) end
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
    if plan.needs_start then start = checked("clock", clock(), 3) end
    local okc, res = pcall(fn, request, plan.first, md, plan.compression)
    if okc then
      if bucket then bucket:success() end
      return res
    end
    return retry_loop(plan, request, m, start, res)
  end

  -- The call: in C under Lua 5.4, whose continuations let the target
  -- yield through it; in Lua under LuaJIT (or when asked).
  local call
  if compat.luajit or path == "lua" then
    local first, compression, needs_start = default_plan.first, default_plan.compression,
      default_plan.needs_start
    call = function(_, request, opts)
      if opts ~= nil then
        local res = on_opts(request, opts, false) -- not a tail call: errors name the caller
        return res
      end
      local start
      if needs_start then start = checked("clock", clock(), 2) end
      local okc, res = pcall(fn, request, first, default_md, compression)
      if okc then
        if bucket then bucket:success() end
        return res
      end
      return on_fail(request, start, res, nil, 2) -- tail calls: the caller is 2 up from retry_loop
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

  attempts_of[callable] = function(opts, level)
    local plan, m = default_plan, nil
    if opts ~= nil then
      plan, m = resolve(opts, false, level + 1)
      if m ~= nil then
        local p = metadata_problem(m)
        if p then error("bad argument #2 to 'callable' (" .. p .. ")", level + 1) end
      end
    end
    local start = checked("clock", clock(), level + 1)
    local s = session(plan, m, start)
    s.first, s.compression = plan.first, plan.compression
    return s
  end

  return callable
end
M.new = new

--- callable = pc.wrap_method(fn, {retry=, timeout=, compression=, metadata=,
-- cache_size=4, clock=, sleep=, random=, throttle=}).
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
-- pc.RetryError. `clock()` returns seconds (default: pc.now), `sleep(s)`
-- may yield the running coroutine (default: pc.sleep), `random()` returns
-- [0, 1] (default: math.random). Plans for distinct
-- per-call (retry, timeout, compression) are cached in a bounded LRU of
-- `cache_size` entries (0..4096); callable:cache_info() returns
-- {hits=, misses=, size=, capacity=} of that cache (the defaults' plan is
-- resolved once when wrapping, outside it). `throttle` (a pc.Throttle)
-- counts this callable's outcomes in that shared bucket and stops
-- retries while it is at or below half. Raises on bad arguments.
function M.wrap_method(fn, defaults)
  local callable, problem, arg = new(fn, defaults)
  if not callable then argerror("wrap_method", problem, 2, arg) end
  return callable
end

--- session = attempts(callable [, opts]) (internal: resumable streams run
-- their attempts themselves). session.first, session.compression and
-- session:metadata() are the first attempt's timeout, compression and
-- metadata; session:failed(err) raises what the caller sees or sleeps and
-- returns the next attempt's timeout (session.attempts counts them);
-- session:succeeded() counts the success in the throttle. Misuse of
-- `opts` raises as a call would, blaming `level` (as error's).
function M.attempts(callable, opts, level)
  return attempts_of[callable](opts, level + 1)
end

return M
