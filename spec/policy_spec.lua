-- Call policies and the cached callable (README "Calls").
-- Every retry and timeout case runs on a fake clock with a fake target and
-- counts attempts exactly.
local pc = require "protocall"
local R = require "runtime"
local it54 = R.only54(it, pending)

-- A fake world: a clock the test moves, a sleep that moves it, a random
-- source the test sets, and a log of attempts and sleeps.
local function world(random_value)
  local w = { t = 0, attempts = {}, sleeps = {}, random_value = random_value or 1 }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps[#w.sleeps + 1] = s; w.t = w.t + s end
  function w.random() return w.random_value end
  -- A target that records each attempt and runs `behave(n, timeout, md, compression)`.
  function w.target(behave)
    return function(request, timeout, md, compression)
      local n = #w.attempts + 1
      w.attempts[n] = { t = w.t, timeout = timeout, md = md, compression = compression,
        request = request }
      return behave(n, timeout, md, compression)
    end
  end
  function w.opts(t)
    t = t or {}
    t.clock, t.sleep, t.random = w.clock, w.sleep, w.random
    return t
  end
  return w
end

local function unavailable(message)
  return pc.Error { code = "UNAVAILABLE", message = message or "connection refused" }
end

local function fail_with(err) return function() error(err, 0) end end

-- The message of what `fn` raises, without "file:line: ".
local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok)
  return err
end

local function message_of(fn, ...)
  return (tostring(raised(fn, ...)):gsub("^[^:]*:%d+: ", ""))
end

after_each(function() collectgarbage() end)

describe("pc.Error", function()
  it("carries the status fields and prints as CODE: message", function()
    local e = pc.Error { code = "UNAVAILABLE", message = "connection refused", details = { 1 },
      metadata = { { "k", "v" } }, retry_delay = 0.5, ["local"] = true }
    assert.are.equal("UNAVAILABLE", e.code)
    assert.are.equal("connection refused", e.message)
    assert.are.same({ 1 }, e.details)
    assert.are.same({ { "k", "v" } }, e.metadata)
    assert.are.equal(0.5, e.retry_delay)
    assert.is_true(e["local"])
    assert.are.equal("UNAVAILABLE: connection refused", tostring(e))
    assert.are.equal(pc.Error, getmetatable(e))
  end)

  it("keeps other fields as given and does not share the table it was made from", function()
    local fields = { code = "UNAVAILABLE", message = "down", method = "/demo.Greeter/Hello" }
    local e = pc.Error(fields)
    assert.are.equal("/demo.Greeter/Hello", e.method)
    assert.are_not.equal(fields, e)
    assert.is_nil(getmetatable(fields))
  end)

  it("takes a code number and prints the bare code without a message", function()
    local e = pc.Error { code = 7 }
    assert.are.equal("PERMISSION_DENIED", e.code)
    assert.are.equal("PERMISSION_DENIED", tostring(e))
  end)

  it("rejects bad fields", function()
    assert.are.equal("bad argument #1 to 'Error' (code: gRPC status name or number expected, got NOPE)",
      message_of(pc.Error, { code = "NOPE" }))
    assert.are.equal("bad argument #1 to 'Error' (code: OK is not an error status (a failure needs another code))",
      message_of(pc.Error, { code = "OK" }))
    assert.are.equal("bad argument #1 to 'Error' (code: OK is not an error status (a failure needs another code))",
      message_of(pc.Error, { code = 0 }))
    assert.are.equal("bad argument #1 to 'Error' (table expected, got string)",
      message_of(pc.Error, "UNAVAILABLE"))
    assert.are.equal("bad argument #1 to 'Error' (retry_delay: number of seconds expected, got soon)",
      message_of(pc.Error, { code = "UNKNOWN", retry_delay = "soon" }))
  end)

  it("rejects metadata that is not a list of {key, value} pairs, and prints NaN as nan", function()
    assert.are.equal("bad argument #1 to 'Error' (metadata: list of {key, value} pairs expected, got string)",
      message_of(pc.Error, { code = "UNKNOWN", metadata = "x" }))
    assert.are.equal("bad argument #1 to 'Error' (metadata[2]: {key, value} pair of strings expected)",
      message_of(pc.Error, { code = "UNKNOWN", metadata = { { "a", "b" }, { "c", 5 } } }))
    assert.are.same({ { "a", "b" } }, pc.Error { code = "UNKNOWN", metadata = { { "a", "b" } } }.metadata)
    assert.are.equal("bad argument #1 to 'Error' (retry_delay: number of seconds expected, got nan)",
      message_of(pc.Error, { code = "UNKNOWN", retry_delay = 0 / 0 }))
  end)
end)

describe("pc.Retry", function()
  it("has python-api-core's defaults and prints them", function()
    local r = pc.Retry()
    assert.are.equal(1, r.initial)
    assert.are.equal(60, r.maximum)
    assert.are.equal(2, r.multiplier)
    assert.are.equal(120, r.timeout)
    -- plus a finite attempt cap, 5 as gRPC A6 caps maxAttempts
    assert.are.equal(5, r.max_attempts)
    assert.is_nil(r.min_pushback) -- pushback sleeps are at least `initial`
    assert.are.equal(pc.if_transient_error, r.predicate)
    assert.are.equal("Retry{initial=1, maximum=60, multiplier=2, timeout=120, max_attempts=5}", tostring(r))
    assert.are.equal("Retry{initial=1, maximum=60, multiplier=2, timeout=120, max_attempts=7, "
      .. "min_pushback=0}", tostring(pc.Retry { max_attempts = 7, min_pushback = 0 }))
    assert.are.equal(pc.Retry, getmetatable(r))
  end)

  it("is immutable; with_* return changed copies", function()
    local r = pc.Retry { initial = 2 }
    assert.are.equal("protocall.Retry is immutable (its with_* methods return changed copies)",
      message_of(function() r.initial = 5 end))
    assert.are.equal("protocall.Retry is immutable (its with_* methods return changed copies)",
      message_of(function() r.anything = 5 end))
    local t = r:with_timeout(30)
    assert.are_not.equal(r, t)
    assert.are.equal(30, t.timeout)
    assert.are.equal(2, t.initial)
    assert.are.equal(120, r.timeout)
    local d = r:with_delay(nil, 10)
    assert.are.equal(2, d.initial)
    assert.are.equal(10, d.maximum)
    assert.are.equal(2, d.multiplier)
    local function p() return true end
    assert.are.equal(p, r:with_predicate(p).predicate)
    assert.are.equal(pc.if_transient_error, r.predicate)
  end)

  it("rejects bad fields, blaming the caller", function()
    assert.are.equal("bad argument #1 to 'Retry' (initial: positive number expected)",
      message_of(pc.Retry, { initial = 0 }))
    assert.are.equal("bad argument #1 to 'Retry' (multiplier: number >= 1 expected)",
      message_of(pc.Retry, { multiplier = 0.5 }))
    assert.are.equal("bad argument #1 to 'Retry' (initial: number expected, got string)",
      message_of(pc.Retry, { initial = "1" }))
    assert.are.equal("bad argument #1 to 'Retry' (max_attempts: positive integer expected, got 0)",
      message_of(pc.Retry, { max_attempts = 0 }))
    assert.are.equal("bad argument #1 to 'Retry' (unknown field 'deadline')",
      message_of(pc.Retry, { deadline = 5 }))
    assert.are.equal("bad argument #1 to 'with_timeout' (timeout: number of seconds or false expected, got string)",
      message_of(function() return pc.Retry():with_timeout("x") end))
    local ok, err = pcall(function()
      local r = pc.Retry { initial = -1 }
      return r
    end)
    assert.is_false(ok)
    assert.matches("policy_spec.lua:%d+: bad argument", err)
  end)
end)

describe("pc.ExponentialTimeout", function()
  it("has defaults, prints them and is immutable", function()
    local x = pc.ExponentialTimeout()
    assert.are.equal("ExponentialTimeout{initial=5, maximum=30, multiplier=2, deadline=120}", tostring(x))
    assert.are.equal(pc.ExponentialTimeout, getmetatable(x))
    assert.are.equal("protocall.ExponentialTimeout is immutable", message_of(function() x.initial = 1 end))
    assert.are.equal("bad argument #1 to 'ExponentialTimeout' (deadline: positive number of seconds expected, got 0)",
      message_of(pc.ExponentialTimeout, { deadline = 0 }))
    assert.are.equal("bad argument #1 to 'ExponentialTimeout' (initial: positive number of seconds expected, got -1)",
      message_of(pc.ExponentialTimeout, { initial = -1 }))
    assert.are.equal("bad argument #1 to 'ExponentialTimeout' (maximum: number of seconds expected, got string)",
      message_of(pc.ExponentialTimeout, { maximum = "30" }))
    assert.are.equal("bad argument #1 to 'Retry' (timeout: positive number of seconds expected, got 0)",
      message_of(pc.Retry, { timeout = 0 }))
  end)
end)

describe("predicates", function()
  it("if_transient_error retries UNAVAILABLE and RESOURCE_EXHAUSTED, not local ones, not INTERNAL", function()
    assert.is_true(pc.if_transient_error(unavailable()))
    assert.is_true(pc.if_transient_error(pc.Error { code = "RESOURCE_EXHAUSTED" }))
    assert.is_false(pc.if_transient_error(pc.Error { code = "INTERNAL" }))
    assert.is_false(pc.if_transient_error(pc.Error { code = "UNAVAILABLE", ["local"] = true }))
    assert.is_false(pc.if_transient_error(pc.Error { code = "DEADLINE_EXCEEDED" }))
  end)

  it("if_status matches names and numbers, never local errors", function()
    local p = pc.if_status("ABORTED", 14)
    assert.is_true(p(pc.Error { code = "ABORTED" }))
    assert.is_true(p(unavailable()))
    assert.is_false(p(pc.Error { code = "INTERNAL" }))
    assert.is_false(p(pc.Error { code = "ABORTED", ["local"] = true }))
    assert.are.equal("bad argument #2 to 'if_status' (unknown status code NOPE)",
      message_of(pc.if_status, "ABORTED", "NOPE"))
  end)
end)

-- The callable's two paths: under Lua 5.4 a call's first attempt runs in
-- C (core.callable) unless the callable is made for the Lua path, which
-- LuaJIT always takes; every case below runs through both.
local callable = require "protocall.call.callable"
local function lua_path(fn, defaults)
  local call, problem, arg = callable.new(fn, defaults, "lua")
  if not call then error(string.format("bad argument #%d to 'wrap_method' (%s)", arg, problem), 2) end
  return call
end

for _, path in ipairs { { "wrap_method", pc.wrap_method }, { "wrap_method, the Lua path", lua_path } } do
describe(path[1], function()
  local wrap_method = path[2]

  it("calls fn(request, timeout, metadata, compression) once, without retry or timeout by default", function()
    local w = world()
    local call = wrap_method(w.target(function() return "response", "ignored" end), w.opts())
    assert.are.equal("response", call("req"))
    assert.are.equal(1, #w.attempts)
    local a = w.attempts[1]
    assert.are.equal("req", a.request)
    assert.is_nil(a.timeout)
    assert.are.equal(0, #a.md)
    assert.is_nil(a.compression)
    w.attempts = {}
    assert.are.equal("UNAVAILABLE: connection refused", tostring(raised(wrap_method(
      w.target(fail_with(unavailable())), w.opts()), "req")))
    assert.are.equal(1, #w.attempts)
  end)

  it("case: timeout 10 gives every call's first attempt 10, whenever it starts", function()
    local w = world()
    local call = wrap_method(w.target(function() return true end),
      w.opts { timeout = 10, retry = pc.Retry() })
    for _, t in ipairs { 0, 5, 9.5, 20 } do
      w.t = t
      call("req")
    end
    assert.are.equal(4, #w.attempts)
    for i = 1, 4 do assert.are.equal(10, w.attempts[i].timeout) end
  end)

  it("case: an ExponentialTimeout starts afresh for each call", function()
    local w = world()
    local call = wrap_method(w.target(function() return true end),
      w.opts { timeout = pc.ExponentialTimeout { initial = 1, multiplier = 2, maximum = 8 } })
    for i = 1, 5 do
      w.t = i * 3
      call("req")
    end
    assert.are.equal(5, #w.attempts)
    for i = 1, 5 do assert.are.equal(1, w.attempts[i].timeout) end
  end)

  it("an ExponentialTimeout grows within one call, capped by its deadline", function()
    local w = world(0)
    local call = wrap_method(w.target(function()
      w.t = w.t + 1
      error(unavailable(), 0)
    end), w.opts { retry = pc.Retry { timeout = 100, max_attempts = 10 },
      timeout = pc.ExponentialTimeout { initial = 1, multiplier = 2, maximum = 8, deadline = 6 } })
    local err = raised(call, "req")
    assert.are.equal(pc.RetryError, getmetatable(err))
    -- starts at 0, 1, 2, 3, 4, 5: timeouts 1, 2, min(4, 4), min(8, 3), 2, 1
    local got = {}
    for i, a in ipairs(w.attempts) do got[i] = a.timeout end
    assert.are.same({ 1, 2, 4, 3, 2, 1 }, got)
    assert.are.equal(6, err.attempts)
    assert.are.equal(6, w.t)
  end)

  it("case: metadata is the caller's pairs then the defaults', never accumulating", function()
    local w = world()
    local seen = {}
    local call = wrap_method(w.target(function(n, _, md)
      seen[n] = #md
      -- What an attempt does to its list is its own business.
      md[#md + 1] = { "grown", "x" }
      md[1][2] = "changed"
      if n % 2 == 1 then error(unavailable(), 0) end
      return true
    end), w.opts { retry = pc.Retry(), metadata = { { "x-default", "d" } } })
    local mine = { { "x-mine", "m" } }
    for _ = 1, 3 do call("req", { metadata = mine }) end
    assert.are.same({ 2, 2, 2, 2, 2, 2 }, seen)
    assert.are.same({ { "x-mine", "m" } }, mine)
    local first = w.attempts[6].md
    assert.are.equal("x-mine", first[1][1])
    assert.are.equal("x-default", first[2][1])
    assert.are.equal("d", first[2][2])
  end)

  it("hands the defaults' metadata as a read-only view made once", function()
    local w = world()
    local call = wrap_method(w.target(function(_, _, md) return md end),
      w.opts { metadata = { { "a", "1" }, { "b", "2" } } })
    local md = call("req")
    assert.are.equal(md, call("req"))
    assert.are.equal(2, #md)
    local keys = {}
    for i, p in ipairs(md) do keys[i] = p[1] .. "=" .. p[2] end
    assert.are.same({ "a=1", "b=2" }, keys)
  end)

  it54("refuses writes to the defaults' metadata handed to a call",
       "LuaJIT's # and ipairs ignore a proxy's __len and __index, so it hands a copy", function()
    local w = world()
    local call = wrap_method(w.target(function(_, _, md) return md end),
      w.opts { metadata = { { "a", "1" }, { "b", "2" } } })
    local md = call("req")
    assert.are.equal("protocall: metadata handed to a call is read-only (copy it to change it)",
      message_of(function() md[3] = { "c", "3" } end))
    assert.are.equal("protocall: metadata handed to a call is read-only (copy it to change it)",
      message_of(function() md[1][2] = "x" end))
    assert.are.equal("protocall: metadata handed to a call is read-only (copy it to change it)",
      message_of(table.insert, md, { "c", "3" }))
    assert.are.equal("1", call("req")[1][2])
  end)

  it("case: Retry{1, 2, 8, timeout 10} on a target always UNAVAILABLE gives up at t = 7", function()
    local w = world(1)
    local last
    local call = wrap_method(w.target(function()
      last = unavailable()
      error(last, 0)
    end), w.opts { retry = pc.Retry { initial = 1, multiplier = 2, maximum = 8, timeout = 10 } })
    local err = raised(call, "req")
    local starts = {}
    for i, a in ipairs(w.attempts) do starts[i] = a.t end
    assert.are.same({ 0, 1, 3, 7 }, starts)
    assert.are.same({ 1, 2, 4 }, w.sleeps)
    assert.are.equal(7, w.t)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(4, err.attempts)
    assert.are.equal(last, err.cause)
    assert.are.equal("RetryError: gave up after 4 attempts (the next sleep would pass the retry "
      .. "deadline); last error: UNAVAILABLE: connection refused", tostring(err))
  end)

  it("case: the backoff caps are 1, 2, 4, 8, 16, 32, 60, 60; sleeps span [0, cap]", function()
    for _, r in ipairs { 1, 0 } do
      local w = world(r)
      local call = wrap_method(w.target(fail_with(unavailable())),
        w.opts { retry = pc.Retry { initial = 1, multiplier = 2, maximum = 60, timeout = 1000,
          max_attempts = 9 } })
      local err = raised(call, "req")
      assert.are.equal(9, err.attempts)
      if r == 1 then
        assert.are.same({ 1, 2, 4, 8, 16, 32, 60, 60 }, w.sleeps)
      else
        assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0 }, w.sleeps)
      end
    end
  end)

  it("case: timeout 600 and Retry{timeout = 600} with 200 s attempts end at t = 600 exactly", function()
    local w = world(0)
    local call = wrap_method(w.target(function()
      w.t = w.t + 200
      error(unavailable(), 0)
    end), w.opts { timeout = 600, retry = pc.Retry { timeout = 600 } })
    local err = raised(call, "req")
    local timeouts = {}
    for i, a in ipairs(w.attempts) do timeouts[i] = a.timeout end
    assert.are.same({ 600, 400, 200 }, timeouts)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(3, err.attempts)
    assert.are.equal(600, w.t)
    assert.are.equal("RetryError: gave up after 3 attempts (no time left before the call's "
      .. "deadline); last error: UNAVAILABLE: connection refused", tostring(err))
  end)

  it("gives up at once, without sleeping, when the drawn sleep would reach the call's deadline", function()
    local w = world(0.999)
    local last
    local call = wrap_method(w.target(function()
      last = unavailable()
      error(last, 0)
    end), w.opts { timeout = 3, retry = pc.Retry { initial = 1, maximum = 4, multiplier = 2, timeout = 10 } })
    local err = raised(call, "req")
    -- attempts at 0, 0.999 and 2.997; the next sleep (3.996) would pass t = 3
    assert.are.same({ 0.999, 1.998 }, w.sleeps)
    assert.are.equal(3, #w.attempts)
    assert.is_true(math.abs(w.t - 2.997) < 1e-9)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(3, err.attempts)
    assert.are.equal(last, err.cause)
    assert.are.equal("RetryError: gave up after 3 attempts (no time left before the call's "
      .. "deadline); last error: UNAVAILABLE: connection refused", tostring(err))
    -- a server's pushback is held to the same rule: 2 s left, 2 s asked
    w = world(1)
    local pushback = pc.Error { code = "UNAVAILABLE", retry_delay = 2 }
    call = wrap_method(w.target(function() w.t = w.t + 1; error(pushback, 0) end),
      w.opts { timeout = 3, retry = pc.Retry() })
    err = raised(call, "req")
    assert.are.same({}, w.sleeps)
    assert.are.equal(1, err.attempts)
    assert.are.equal(pushback, err.cause)
  end)

  it("case: a non-retryable error is raised as is; on_error sees each retryable one", function()
    local w = world(0)
    local denied = pc.Error { code = "PERMISSION_DENIED", message = "no" }
    local seen = {}
    local retry = pc.Retry { on_error = function(e) seen[#seen + 1] = e end, max_attempts = 3 }
    local call = wrap_method(w.target(fail_with(denied)), w.opts { retry = retry })
    assert.are.equal(denied, raised(call, "req"))
    assert.are.equal(1, #w.attempts)
    assert.are.equal(0, #seen)

    w.attempts = {}
    local errors = {}
    call = wrap_method(w.target(function(n)
      errors[n] = unavailable("try " .. n)
      error(errors[n], 0)
    end), w.opts { retry = retry })
    local err = raised(call, "req")
    assert.are.equal(3, err.attempts)
    assert.are.same({ errors[1], errors[2], errors[3] }, seen)
    for i = 1, 3 do assert.are.equal(errors[i], seen[i]) end

    w.attempts, seen = {}, {}
    call = wrap_method(w.target(function(n)
      error(n == 1 and unavailable() or denied, 0)
    end), w.opts { retry = retry })
    assert.are.equal(denied, raised(call, "req"))
    assert.are.equal(2, #w.attempts)
    assert.are.equal(1, #seen)
  end)

  it("case: max_attempts = 3 stops after exactly three attempts", function()
    local w = world(0)
    local call = wrap_method(w.target(fail_with(unavailable())),
      w.opts { retry = pc.Retry { max_attempts = 3 } })
    local err = raised(call, "req")
    assert.are.equal(3, #w.attempts)
    assert.are.equal(3, err.attempts)
    assert.are.equal("RetryError: gave up after 3 attempts (max_attempts reached); last error: "
      .. "UNAVAILABLE: connection refused", tostring(err))
  end)

  it("case: a pushback delay of 0.25 s on the error is the next sleep (min_pushback = 0)", function()
    local w = world(1)
    local call = wrap_method(w.target(function(n)
      if n == 1 then
        error(pc.Error { code = "UNAVAILABLE", retry_delay = 0.25 }, 0)
      elseif n == 2 then
        error(unavailable(), 0)
      end
      return "ok"
    end), w.opts { retry = pc.Retry { min_pushback = 0 } })
    assert.are.equal("ok", call("req"))
    -- The cap grew past the pushback's turn: the drawn sleep after it is 2.
    assert.are.same({ 0.25, 2 }, w.sleeps)
  end)

  it("never sleeps less than `initial` on a server's pushback of 0 unless min_pushback says so", function()
    -- A server answering every attempt with grpc-retry-pushback-ms: 0 used
    -- to replace each backoff sleep by 0: Retry{initial = 0.5, timeout = 2}
    -- sent thousands of attempts in 2 s.
    local w = world(1)
    local hammer = pc.Error { code = "UNAVAILABLE", retry_delay = 0 }
    local call = wrap_method(w.target(function() w.t = w.t + 0.001; error(hammer, 0) end),
      w.opts { retry = pc.Retry { initial = 0.5, timeout = 2, max_attempts = 1000 } })
    local err = raised(call, "req")
    assert.are.same({ 0.5, 0.5, 0.5 }, w.sleeps)
    assert.are.equal(4, #w.attempts)
    assert.are.equal("RetryError: gave up after 4 attempts (the next sleep would pass the retry "
      .. "deadline); last error: UNAVAILABLE", tostring(err))
    -- min_pushback sets the floor; 0.25 s here
    w = world(1)
    call = wrap_method(w.target(function() w.t = w.t + 0.001; error(hammer, 0) end),
      w.opts { retry = pc.Retry { initial = 0.5, timeout = 2, max_attempts = 1000, min_pushback = 0.25 } })
    err = raised(call, "req")
    assert.are.equal(0.25, w.sleeps[1])
    assert.are.equal(8, #w.attempts)
    assert.are.equal("RetryError: gave up after 8 attempts (the next sleep would pass the retry "
      .. "deadline); last error: UNAVAILABLE", tostring(err))
    assert.are.equal("bad argument #1 to 'Retry' (min_pushback: number >= 0 expected)",
      message_of(pc.Retry, { min_pushback = -1 }))
    assert.are.equal("bad argument #1 to 'Retry' (min_pushback: number expected, got string)",
      message_of(pc.Retry, { min_pushback = "0" }))
  end)

  it("gives up after 5 attempts when the Retry names no max_attempts (gRPC A6's cap)", function()
    local w = world(0) -- every drawn sleep is 0: only the cap ends the loop
    local call = wrap_method(w.target(fail_with(unavailable())),
      w.opts { retry = pc.Retry { timeout = false } })
    local err = raised(call, "req")
    assert.are.equal(5, #w.attempts)
    assert.are.equal("RetryError: gave up after 5 attempts (max_attempts reached); last error: "
      .. "UNAVAILABLE: connection refused", tostring(err))
  end)

  it("counts time slept toward the deadline when the clock steps back", function()
    -- timeout 0.3 s; the clock steps 2 s back during the first attempt.
    -- Holding the loop's clock at its highest reading made the call last
    -- 2.28 s over 94 attempts.
    local w = world(1)
    local call = wrap_method(w.target(function(n)
      w.t = w.t + 0.01
      if n == 1 then w.t = w.t - 2 end
      error(unavailable(), 0)
    end), w.opts { timeout = 0.3, retry = pc.Retry { initial = 0.01, maximum = 0.01, max_attempts = 1000 } })
    local err = raised(call, "req")
    local real = 0 -- time the target and the sleeps took
    for _, s in ipairs(w.sleeps) do real = real + s end
    real = real + 0.01 * #w.attempts
    assert.is_true(real <= 0.3 + 0.01 + 1e-9, "the call took " .. real .. " s")
    assert.is_true(#w.attempts <= 16, #w.attempts .. " attempts")
    assert.matches("no time left before the call's deadline", tostring(err))
  end)

  it("ends a retry loop whose clock is frozen by the time it slept", function()
    local slept, attempts = 0, 0
    local call = wrap_method(function()
      attempts = attempts + 1
      if attempts > 10000 then error("runaway: the loop never saw its deadline", 0) end
      error(unavailable(), 0)
    end, { retry = pc.Retry { initial = 0.01, maximum = 0.01, timeout = 1, max_attempts = 100000 },
      clock = function() return 42 end, sleep = function(s) slept = slept + s end,
      random = function() return 1 end })
    local err = raised(call, "req")
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.is_true(math.abs(slept - 1) < 0.011, "slept " .. slept)
    assert.matches("the next sleep would pass the retry deadline", tostring(err))
  end)

  it("a negative pushback stops retrying (gRPC A6)", function()
    local w = world(1)
    local call = wrap_method(w.target(fail_with(pc.Error { code = "UNAVAILABLE", retry_delay = -1 })),
      w.opts { retry = pc.Retry() })
    local err = raised(call, "req")
    assert.are.equal(1, err.attempts)
    assert.are.same({}, w.sleeps)
    assert.matches("the server asked not to retry", tostring(err))
  end)

  it("case: a sleep that yields the coroutine; resuming completes the call", function()
    local w = world(1)
    local call = wrap_method(w.target(function(n)
      if n < 3 then error(unavailable(), 0) end
      return "done after " .. n
    end), {
      retry = pc.Retry(),
      clock = w.clock,
      random = w.random,
      sleep = function(s) w.t = w.t + coroutine.yield(s) end,
    })
    local co = coroutine.create(function() return call("req") end)
    local ok, s = coroutine.resume(co)
    assert.is_true(ok)
    assert.are.equal(1, s)
    assert.are.equal("suspended", coroutine.status(co))
    ok, s = coroutine.resume(co, s)
    assert.is_true(ok)
    assert.are.equal(2, s)
    local res
    ok, res = coroutine.resume(co, s)
    assert.is_true(ok)
    assert.are.equal("done after 3", res)
    assert.are.equal("dead", coroutine.status(co))
    assert.are.equal(3, #w.attempts)
    assert.are.equal(3, w.t)
  end)

  it("survives a target that yields, on the fast path and with options", function()
    local call = wrap_method(function(req, timeout)
      local v = coroutine.yield("waiting")
      if v == "fail" then error("boom", 0) end
      return req .. v .. tostring(timeout)
    end, { timeout = 3 })
    for _, opts in ipairs { false, true } do
      local co = coroutine.wrap(function() return call("a", opts and { timeout = 4 } or nil) end)
      assert.are.equal("waiting", co())
      assert.are.equal(opts and "ab4" or "ab3", co("b"))
    end
    local co = coroutine.wrap(function() return pcall(call, "a") end)
    co()
    local ok, err = co("fail")
    assert.is_false(ok)
    assert.are.equal("UNKNOWN: boom", tostring(err))
  end)

  it("turns a raised string or other value into UNKNOWN carrying it, never retried", function()
    local w = world(0)
    local call = wrap_method(w.target(function() error("boom") end), w.opts { retry = pc.Retry() })
    local err = raised(call, "req")
    assert.are.equal(pc.Error, getmetatable(err))
    assert.are.equal("UNKNOWN", err.code)
    assert.matches("policy_spec.lua:%d+: boom$", err.value)
    assert.are.equal(err.value, err.message)
    assert.are.equal(1, #w.attempts)
    local value = { reason = "odd" }
    err = raised(wrap_method(fail_with(value), { retry = pc.Retry() }), "req")
    assert.are.equal("UNKNOWN", err.code)
    assert.are.equal(value, err.value)
  end)

  it("retry = false or timeout = false per call turn them off; DEFAULT keeps the defaults", function()
    local w = world(0)
    local call = wrap_method(w.target(fail_with(unavailable())),
      w.opts { retry = pc.Retry { max_attempts = 2 }, timeout = 5 })
    assert.are.equal(unavailable().code, raised(call, "req", { retry = false }).code)
    assert.are.equal(1, #w.attempts)
    assert.are.equal(5, w.attempts[1].timeout)
    w.attempts = {}
    assert.are.equal(2, raised(call, "req", { retry = pc.DEFAULT, timeout = false }).attempts)
    assert.is_nil(w.attempts[1].timeout)
    assert.is_nil(w.attempts[2].timeout)
    w.attempts = {}
    assert.are.equal(2, raised(call, "req", { timeout = pc.DEFAULT }).attempts)
    assert.are.equal(5, w.attempts[1].timeout)
  end)

  it("honours a per-call compression whatever the default", function()
    local w = world()
    local plain = wrap_method(w.target(function(_, _, _, c) return c end), w.opts())
    assert.is_nil(plain("r"))
    assert.are.equal("gzip", plain("r", { compression = "gzip" }))
    local zipped = wrap_method(w.target(function(_, _, _, c) return c end),
      w.opts { compression = "gzip" })
    assert.are.equal("gzip", zipped("r"))
    assert.are.equal("deflate", zipped("r", { compression = "deflate" }))
    assert.is_nil(zipped("r", { compression = false }))
  end)

  it("rejects bad options and arguments with the caller's wording", function()
    local call = wrap_method(function() return 1 end)
    assert.are.equal("bad argument #2 to 'callable' (unknown option 'timeot')",
      message_of(call, "r", { timeot = 3 }))
    assert.are.equal("bad argument #2 to 'callable' (timeout: positive number of seconds expected, got -3)",
      message_of(call, "r", { timeout = -3 }))
    assert.are.equal("bad argument #2 to 'callable' (retry: pc.Retry or false expected, got number)",
      message_of(call, "r", { retry = 3 }))
    assert.are.equal("bad argument #2 to 'callable' (table of options expected, got string)",
      message_of(call, "r", "fast"))
    assert.are.equal("bad argument #2 to 'callable' (metadata: pair 1: {key, value} of strings expected)",
      message_of(call, "r", { metadata = { { "k", 1 } } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata: list of {key, value} pairs expected, got a table "
      .. 'with key "x-a")', message_of(call, "r", { metadata = { ["x-a"] = "1" } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata: list of {key, value} pairs expected, got a table "
      .. 'with key "x-b")', message_of(call, "r", { metadata = { { "x-a", "1" }, ["x-b"] = "2" } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata: pair 1: {key, value} of strings expected)",
      message_of(call, "r", { metadata = { { "k", "v", "extra" } } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata key 'X-Up': only lowercase letters, digits, "
      .. "'_', '-', '.')", message_of(call, "r", { metadata = { { "X-Up", "1" } } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata key 'grpc-timeout' is reserved for the "
      .. "transport)", message_of(call, "r", { metadata = { { "grpc-timeout", "1S" } } }))
    assert.are.equal("bad argument #2 to 'callable' (metadata 'x-a': value must be printable ASCII (use a "
      .. "'-bin' key for bytes))", message_of(call, "r", { metadata = { { "x-a", "a\nb" } } }))
    assert.are.equal("bad argument #2 to 'wrap_method' (metadata: list of {key, value} pairs expected, got a "
      .. 'table with key "x-a")', message_of(wrap_method, print, { metadata = { ["x-a"] = "1" } }))
    assert.are.equal("bad argument #2 to 'wrap_method' (metadata: list of {key, value} pairs expected, got "
      .. "string)", message_of(wrap_method, print, { metadata = "x-a: 1" }))
    -- raised at the caller's line, before any attempt
    local attempts = 0
    local counted = wrap_method(function() attempts = attempts + 1 end)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() counted("r", { metadata = { ["x-a"] = "1" } }) end)
    assert.is_false(ok)
    assert.are.equal("spec/policy_spec.lua:" .. line .. ":", err:match("^[^:]*:%d+:"))
    assert.are.equal(0, attempts)
    -- the read-only metadata a call hands out is good metadata for another call
    local inner = wrap_method(function(_, _, md) return md[1][1] .. "=" .. md[1][2] .. " " .. #md end)
    local outer = wrap_method(function(r, _, md) return inner(r, { metadata = md }) end,
      { metadata = { { "x-a", "1" } } })
    assert.are.equal("x-a=1 1", outer("r"))
    -- bytes under a -bin key
    assert.are.equal(1, wrap_method(function(_, _, md) return #md end)("r",
      { metadata = { { "x-b-bin", "\0\255" } } }))
    assert.are.equal("bad argument #1 to 'wrap_method' (function expected, got nil)",
      message_of(wrap_method, nil))
    assert.are.equal("bad argument #2 to 'wrap_method' (timeout: positive number of seconds expected, got 0)",
      message_of(wrap_method, print, { timeout = 0 }))
    assert.are.equal("bad argument #2 to 'wrap_method' (unknown field 'retries')",
      message_of(wrap_method, print, { retries = pc.Retry() }))
    assert.are.equal("bad argument #2 to 'wrap_method' (cache_size: integer in 0..4096 expected, got -1)",
      message_of(wrap_method, print, { cache_size = -1 }))
    assert.are.equal("clock: number expected, got string",
      message_of(wrap_method(print, { retry = pc.Retry(), clock = function() return "now" end }), 1))
  end)

  it("checks what clock and random return", function()
    local function call_with(t)
      t.retry = pc.Retry()
      t.sleep = function() end
      return wrap_method(fail_with(unavailable()), t)
    end
    assert.are.equal("random: number expected, got nil",
      message_of(call_with { random = function() end, clock = function() return 0 end }, 1))
    local n = 0
    assert.are.equal("clock: number expected, got nil", message_of(call_with {
      clock = function() n = n + 1; if n == 1 then return 0 end end }, 1))
    assert.are.equal("clock: number expected, got boolean", message_of(call_with {
      clock = function() return true end }, 1, { timeout = 3 }))
  end)

  it("raises a bad clock or random at the caller's line, NaN shown as nan", function()
    local function at(line, fn, msg)
      local ok, e = pcall(fn)
      assert.is_false(ok)
      assert.are.equal("spec/policy_spec.lua:" .. line .. ": " .. msg, e)
    end
    local function call_with(t)
      t.retry = pc.Retry()
      t.sleep = function() end
      return wrap_method(fail_with(unavailable()), t)
    end
    local nan = call_with { clock = function() return 0 / 0 end }
    local t, n = 0, 0
    local later = call_with { clock = function() n = n + 1; return n == 1 and 0 or 0 / 0 end }
    local rand = call_with { clock = function() return t end, random = function() return 5 end }
    local line = debug.getinfo(1, "l").currentline
    at(line + 1, function() nan(1) end, "clock: finite number expected, got nan")
    at(line + 2, function() nan(1, { timeout = 3 }) end, "clock: finite number expected, got nan")
    at(line + 3, function() later(1) end, "clock: finite number expected, got nan") -- in the retry loop
    n = 0
    at(line + 5, function() later(1, { timeout = 3 }) end, "clock: finite number expected, got nan")
    at(line + 6, function() rand(1) end, "random: number in [0, 1] expected, got 5")
    at(line + 7, function() rand(1, { timeout = 3 }) end, "random: number in [0, 1] expected, got 5")
  end)

  it("retries without a budget when Retry's timeout is false, up to max_attempts", function()
    local w = world(1)
    local call = wrap_method(w.target(fail_with(unavailable())),
      w.opts { retry = pc.Retry { timeout = false, initial = 1000, maximum = 1000, max_attempts = 4 } })
    assert.are.equal(4, raised(call, "req").attempts)
    assert.are.same({ 1000, 1000, 1000 }, w.sleeps)
  end)

  it("lets errors raised by a predicate or on_error through", function()
    local call = wrap_method(fail_with(unavailable()),
      { retry = pc.Retry { predicate = function() error("predicate broke", 0) end } })
    assert.are.equal("predicate broke", raised(call, 1))
    call = wrap_method(fail_with(unavailable()),
      { retry = pc.Retry { on_error = function() error("log full", 0) end } })
    assert.are.equal("log full", raised(call, 1))
  end)

  it("sleeps for real with the default monotonic clock and nanosleep", function()
    local n = 0
    local call = wrap_method(function()
      n = n + 1
      if n < 3 then error(unavailable(), 0) end
      return n
    end, { retry = pc.Retry { initial = 0.001, maximum = 0.002 }, timeout = 5 })
    assert.are.equal(3, call("r"))
    local core = require "protocall.core"
    local a = core.monotonic()
    core.sleep(0.001)
    assert.is_true(core.monotonic() - a >= 0.001)
  end)
end)
end

describe("the plan cache", function()
  it("counts hits and misses, keyed by object identity and numbers by value", function()
    local call = pc.wrap_method(function() return 1 end, { retry = pc.Retry() })
    local r1, r2 = pc.Retry { initial = 2 }, pc.Retry { initial = 2 }
    call("x")
    call("x", {})
    call("x", { retry = pc.DEFAULT, timeout = pc.DEFAULT })
    assert.are.same({ hits = 0, misses = 0, size = 0, capacity = 4 }, call:cache_info())
    call("x", { retry = r1 })
    call("x", { retry = r1 })
    call("x", { retry = r2 })
    call("x", { timeout = 5 })
    call("x", { timeout = 5.0 })
    assert.are.same({ hits = 2, misses = 3, size = 3, capacity = 4 }, call:cache_info())
  end)

  it("does not take true for 1", function()
    local call = pc.wrap_method(function(_, t) return t end)
    assert.are.equal(1, call("x", { timeout = 1 }))
    assert.are.equal("bad argument #2 to 'callable' (timeout: number of seconds, pc.ExponentialTimeout or false "
      .. "expected, got boolean)", message_of(call, "x", { timeout = true }))
    assert.are.same({ hits = 0, misses = 2, size = 1, capacity = 4 }, call:cache_info())
  end)

  it("is a bounded LRU of cache_size plans", function()
    local call = pc.wrap_method(function(_, t) return t end, { cache_size = 2 })
    assert.are.equal(1, call("x", { timeout = 1 }))
    assert.are.equal(2, call("x", { timeout = 2 }))
    assert.are.equal(1, call("x", { timeout = 1 })) -- hit; 2 is now the oldest
    assert.are.equal(3, call("x", { timeout = 3 })) -- evicts 2
    assert.are.equal(1, call("x", { timeout = 1 })) -- hit
    assert.are.equal(2, call("x", { timeout = 2 })) -- miss again
    assert.are.same({ hits = 2, misses = 4, size = 2, capacity = 2 }, call:cache_info())
    local none = pc.wrap_method(function(_, t) return t end, { cache_size = 0 })
    assert.are.equal(7, none("x", { timeout = 7 }))
    assert.are.equal(7, none("x", { timeout = 7 }))
    assert.are.same({ hits = 0, misses = 2, size = 0, capacity = 0 }, none:cache_info())
  end)

  it("keeps a cached plan's objects alive, so a new object never hits an old plan", function()
    local call = pc.wrap_method(function(_, t) return t end, { cache_size = 8 })
    for i = 1, 50 do
      local x = pc.ExponentialTimeout { initial = i, maximum = 100 }
      assert.are.equal(i, call("x", { timeout = x }))
      collectgarbage()
    end
    assert.are.equal(50, call:cache_info().misses)
  end)

  it54("the fast path and cached per-call options allocate nothing",
       "the allocation-free fast path is C (core.callable); LuaJIT's callables are Lua functions", function()
    local call = pc.wrap_method(function() return 1 end, { retry = pc.Retry(), timeout = 10 })
    local opts = { timeout = 5 }
    call("x")
    call("x", opts)
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ = 1, 100000 do call("x") end
    local after_fast = collectgarbage("count")
    for _ = 1, 100000 do call("x", opts) end
    local after_opts = collectgarbage("count")
    collectgarbage("restart")
    assert.are.equal(before, after_fast)
    assert.are.equal(before, after_opts)
  end)
end)

describe("pc.Throttle", function()
  it("is a shared bucket: failures the predicate accepts take a token, successes give the ratio", function()
    local w = world()
    local th = pc.Throttle { max_tokens = 4, token_ratio = 0.5 }
    local fail = true
    local behave = function() if fail then error(unavailable(), 0) end return "ok" end
    local a = pc.wrap_method(w.target(behave),
      w.opts { retry = pc.Retry { initial = 1, max_attempts = 5 }, throttle = th })
    local b = pc.wrap_method(w.target(behave), w.opts { retry = pc.Retry { initial = 1 }, throttle = th })
    -- 4 -> 3 allows a retry, 3 -> 2 does not (2 is half)
    local err = raised(a, "r")
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(2, err.attempts)
    assert.matches("retries are throttled", err.message, 1, true)
    assert.are.same({ tokens = 2, max_tokens = 4, token_ratio = 0.5, retries_allowed = false }, th:info())
    assert.are.equal(1, raised(b, "r").attempts) -- the other callable shares it: 2 -> 1
    -- a non-retryable error takes nothing
    local c = pc.wrap_method(w.target(fail_with(pc.Error { code = "NOT_FOUND" })),
      w.opts { retry = pc.Retry {}, throttle = th })
    raised(c, "r")
    assert.are.equal(1, th:info().tokens)
    fail = false
    a("r"); b("r", { timeout = 3 }) -- fast path and per-call options
    assert.are.equal(2, th:info().tokens)
    assert.are.same({ 1 }, w.sleeps) -- only a's one retry slept
  end)

  it("counts a success whose target yields on the fast path", function()
    local th = pc.Throttle { max_tokens = 2, token_ratio = 0.25 }
    local call = pc.wrap_method(function() coroutine.yield("paused"); return "done" end,
      { retry = pc.Retry {}, throttle = th })
    -- drain one token first
    local failing = pc.wrap_method(fail_with(unavailable()), { retry = pc.Retry { max_attempts = 1 }, throttle = th })
    raised(failing, "r")
    assert.are.equal(1, th:info().tokens)
    local co = coroutine.create(function(r) return call(r) end)
    assert.are.same({ true, "paused" }, { coroutine.resume(co, "r") })
    assert.are.same({ true, "done" }, { coroutine.resume(co) })
    assert.are.equal(1.25, th:info().tokens)
  end)

  it("refuses bad numbers and non-buckets", function()
    assert.are.equal("bad argument #1 to 'Throttle' (max_tokens: number in (0, 1000] expected)",
      message_of(pc.Throttle, { max_tokens = 0, token_ratio = 1 }))
    assert.are.equal("bad argument #1 to 'Throttle' (token_ratio: number of at least 0.001 expected)",
      message_of(pc.Throttle, { max_tokens = 1, token_ratio = 0.0001 }))
    assert.are.equal("bad argument #1 to 'Throttle' (token_ratio: number expected, got string)",
      message_of(pc.Throttle, { max_tokens = 1, token_ratio = "1" }))
    assert.are.equal("bad argument #1 to 'Throttle' (unknown field 'burst')",
      message_of(pc.Throttle, { max_tokens = 1, token_ratio = 1, burst = 2 }))
    assert.are.equal("bad argument #2 to 'wrap_method' (throttle: pc.Throttle expected, got table)",
      message_of(pc.wrap_method, print, { throttle = {} }))
    local th = pc.Throttle { max_tokens = 1, token_ratio = 1 }
    assert.has_error(function() th.x = 1 end, "protocall.Throttle is read-only")
    -- LuaJIT prints every number as Lua 5.4 prints integers
    assert.are.equal(R.luajit and "Throttle{max_tokens=1, token_ratio=1} (1 tokens)"
                     or "Throttle{max_tokens=1.0, token_ratio=1.0} (1.0 tokens)", tostring(th))
  end)
end)
