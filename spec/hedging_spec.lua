-- Hedging (gRFC A6 hedgingPolicy, README "Service config"): pc.client's
-- hedged methods on a fake concurrent transport over a fake clock (when
-- each attempt starts, ends and is cancelled, exactly), on pc.inproc (one
-- attempt after another), and on pc.grpc against the python3-grpcio test
-- server (spec/grpc_server.py: attempts counted and cancellations seen on
-- the server side).
local pc = require "protocall"

local SCHEMA = [[
syntax = "proto3";
package hg;
message Req { string name = 1; }
message Resp { string text = 1; int32 n = 2; }
service Svc {
  rpc Get(Req) returns (Resp);
  rpc List(Req) returns (stream Resp);
}
]]
local pool = pc.pool()
assert(pool:load(SCHEMA, { name = "hg/svc.proto" }))
local Resp = pool:type("hg.Resp")

local function config(policy, extra)
  local sc = { methodConfig = { { name = { { service = "hg.Svc" } }, hedgingPolicy = policy } } }
  for k, v in pairs(extra or {}) do
    if k == "timeout" then sc.methodConfig[1].timeout = v else sc[k] = v end
  end
  return sc
end

-- A fake transport whose started calls end when the fake clock reaches
-- their script's time: `script(n)` -> {at = seconds after the start, ok =
-- response table (or list of them for a stream) | err = pc.Error fields}
-- for attempt n. `log` records "start n @t" and "cancel n @t" in order;
-- `previous` each attempt's previous_attempts.
local function fake(script)
  local w = { t = 0, log = {}, previous = {}, sleeps = {} }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps[#w.sleeps + 1] = s; w.t = w.t + s end
  local n = 0
  local function start(streaming, settings)
    n = n + 1
    local k, plan = n, script(n)
    w.log[#w.log + 1] = string.format("start %d @%g", k, w.t)
    w.previous[k] = settings.previous_attempts or 0
    local h = { ends = plan.at and w.t + plan.at or math.huge, live = true }
    function h.result()
      if not h.live or w.t < h.ends then return nil end
      h.live = false
      if plan.err then return false, pc.Error(plan.err) end
      if streaming then
        local i, list = 0, plan.ok
        return true, function()
          i = i + 1
          return list[i] and pc.encode(Resp(list[i])) or nil
        end
      end
      return true, pc.encode(Resp(plan.ok))
    end
    function h.cancel()
      if h.live then
        h.live = false
        w.log[#w.log + 1] = string.format("cancel %d @%g", k, w.t)
      end
    end
    return h
  end
  w.transport = {
    start_unary = function(_, _, _, settings) return start(false, settings) end,
    start_server_stream = function(_, _, _, settings) return start(true, settings) end,
    -- Advances the clock to the earliest end among `handles`, at most `seconds`.
    wait = function(_, handles, seconds)
      local soonest = w.t + seconds
      for _, h in ipairs(handles) do
        if h.live and h.ends < soonest then soonest = h.ends end
      end
      w.t = soonest
    end,
  }
  return w
end

local function client(w, sc, extra)
  local opts = { pool = pool, transport = w.transport, service_config = sc, clock = w.clock, sleep = w.sleep }
  for k, v in pairs(extra or {}) do opts[k] = v end
  return pc.client("hg.Svc", opts)
end

local function failure(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "the call succeeded")
  return err
end

local NEVER = { at = nil, ok = { text = "never" } }

describe("hedging on a concurrent transport (fake clock)", function()
  it("sends a hedge every hedgingDelay until one answers, then cancels the others", function()
    local w = fake(function(n)
      if n == 1 then return { at = 1.2, ok = { text = "first", n = 1 } } end
      return NEVER
    end)
    local c = client(w, config { maxAttempts = 4, hedgingDelay = "0.5s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    local r = c:Get { name = "x" }
    assert.are.equal("first", r.text)
    assert.are.same({ "start 1 @0", "start 2 @0.5", "start 3 @1", "cancel 2 @1.2", "cancel 3 @1.2" }, w.log)
    assert.are.same({ 0, 1, 2 }, w.previous)
  end)

  it("sends at most maxAttempts, all at once with hedgingDelay 0s (or unset)", function()
    local w = fake(function(n) return n == 3 and { at = 2, ok = { text = "third" } } or NEVER end)
    local c = client(w, config { maxAttempts = 3 })
    assert.are.equal("third", c:Get({}).text)
    assert.are.same({ "start 1 @0", "start 2 @0", "start 3 @0", "cancel 1 @2", "cancel 2 @2" }, w.log)
  end)

  it("sends the next hedge at once after a non-fatal code, the rest hedgingDelay after it", function()
    local w = fake(function(n)
      if n == 1 then return { at = 0.2, err = { code = "UNAVAILABLE", message = "down" } } end
      if n == 3 then return { at = 0.1, ok = { text = "third" } } end
      return NEVER
    end)
    local c = client(w, config { maxAttempts = 5, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    assert.are.equal("third", c:Get({}).text)
    assert.are.same({ "start 1 @0", "start 2 @0.2", "start 3 @1.2", "cancel 2 @1.3" }, w.log)
  end)

  it("commits on a fatal code: the others are cancelled and the error raised", function()
    local w = fake(function(n)
      if n == 2 then return { at = 0.1, err = { code = "INVALID_ARGUMENT", message = "bad" } } end
      return NEVER
    end)
    local c = client(w, config { maxAttempts = 3, hedgingDelay = "0.5s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    local err = failure(c.Get, c, {})
    assert.are.equal(pc.Error, getmetatable(err))
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.same({ "start 1 @0", "start 2 @0.5", "cancel 1 @0.6" }, w.log)
  end)

  it("gives up with pc.RetryError once every hedge failed with a non-fatal code", function()
    local w = fake(function(n) return { at = 0.1 * n, err = { code = "UNAVAILABLE", message = "down " .. n } } end)
    local c = client(w, config { maxAttempts = 3, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    local err = failure(c.Get, c, {})
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(3, err.attempts)
    assert.are.equal("down 3", err.cause.message)
    assert.matches("gave up after 3 hedged attempts %(every hedged attempt failed%)", err.message)
  end)

  it("follows pushback: n ms delays the next hedge, a negative value stops hedging", function()
    local w = fake(function(n)
      if n == 1 then return { at = 0.1, err = { code = "UNAVAILABLE", retry_delay = 0.5 } } end
      if n == 3 then return { at = 0.1, ok = { text = "third" } } end
      return NEVER
    end)
    local c = client(w, config { maxAttempts = 3, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    assert.are.equal("third", c:Get({}).text)
    -- the next in 0.5 s, the one after hedgingDelay later (gRFC A6: n + hedgingDelay)
    assert.are.same({ "start 1 @0", "start 2 @0.6", "start 3 @1.6", "cancel 2 @1.7" }, w.log)

    w = fake(function(n)
      if n == 1 then return { at = 0.1, err = { code = "UNAVAILABLE", retry_delay = 2 } } end
      return { at = 0.1, ok = { text = "second" } }
    end)
    c = client(w, config { maxAttempts = 3, hedgingDelay = "5s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    assert.are.equal("second", c:Get({}).text)
    assert.are.same({ "start 1 @0", "start 2 @2.1" }, w.log)

    w = fake(function(n)
      if n == 1 then return { at = 0.1, err = { code = "UNAVAILABLE", retry_delay = -1 } } end
      return { at = 1, err = { code = "UNAVAILABLE", message = "second" } }
    end)
    c = client(w, config { maxAttempts = 5, hedgingDelay = "0.05s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    local err = failure(c.Get, c, {})
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(2, err.attempts) -- 2 was out before the pushback; none after
    assert.matches("the server asked not to retry", err.message)
  end)

  it("counts tokens as gRFC A6 says: no hedge at or below half, the winner gives tokenRatio back", function()
    local fail_first = true
    local w = fake(function(n)
      if fail_first then return { at = 0.1 * n, err = { code = "UNAVAILABLE", message = "down" } } end
      return { at = 3, ok = { text = "slow" } }
    end)
    local c = client(w, config({ maxAttempts = 3, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } },
      { retryThrottling = { maxTokens = 4, tokenRatio = 0.5 } }))
    local err = failure(c.Get, c, {})
    assert.are.equal(2, err.attempts) -- 4 -> 3 -> 2 tokens: half, so no third
    assert.matches("hedges are throttled", err.message)
    assert.are.equal(2, c:throttle_info().tokens)
    fail_first = false
    w.log = {}
    local t0 = w.t
    assert.are.equal("slow", c:Get({}).text) -- the first attempt always goes; no hedges
    assert.are.same({ string.format("start 3 @%g", t0) }, w.log)
    assert.are.equal(2.5, c:throttle_info().tokens)
    -- a fatal code takes no token
    w = fake(function() return { at = 0.1, err = { code = "NOT_FOUND" } } end)
    c = client(w, config({ maxAttempts = 3, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } },
      { retryThrottling = { maxTokens = 4, tokenRatio = 0.5 } }))
    failure(c.Get, c, {})
    assert.are.equal(4, c:throttle_info().tokens)
  end)

  it("holds every hedge to the call's deadline", function()
    local w = fake(function() return NEVER end)
    local c = client(w, config({ maxAttempts = 5, hedgingDelay = "0.4s", nonFatalStatusCodes = { "UNAVAILABLE" } },
      { timeout = "1s" }))
    local err = failure(c.Get, c, {})
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
    assert.are.same({ "start 1 @0", "start 2 @0.4", "start 3 @0.8", "cancel 1 @1", "cancel 2 @1", "cancel 3 @1" },
      w.log)
  end)

  it("commits a server stream at its first response; its loop sees that stream", function()
    local w = fake(function(n)
      if n == 2 then return { at = 0.1, ok = { { text = "a", n = 2 }, { text = "b", n = 2 } } } end
      return NEVER
    end)
    local c = client(w, config { maxAttempts = 2, hedgingDelay = "0.5s", nonFatalStatusCodes = { "UNAVAILABLE" } })
    local got = {}
    for r in c:List({}) do got[#got + 1] = r.text .. r.n end
    assert.are.same({ "a2", "b2" }, got)
    assert.are.same({ "start 1 @0", "start 2 @0.5", "cancel 1 @0.6" }, w.log)
  end)

  it("leaves a method whose methods.Name sets a retry unhedged", function()
    local w = fake(function() return { at = 0.1, ok = { text = "x" } } end)
    w.transport.unary = function() return pc.encode(Resp { text = "plain" }) end
    local c = client(w, config { maxAttempts = 3 }, { methods = { Get = { retry = false } } })
    assert.are.equal("plain", c:Get({}).text)
    assert.are.same({}, w.log)
  end)
end)

describe("hedging on pc.inproc", function()
  it("runs one attempt after another: a non-fatal failure sends the next at once", function()
    local seen, sleeps = {}, {}
    local server = pc.server({ ["hg.Svc"] = {
      Get = function(_, ctx)
        local prev = "0"
        for _, kv in ipairs(ctx.metadata) do
          if kv[1] == "grpc-previous-rpc-attempts" then prev = kv[2] end
        end
        seen[#seen + 1] = prev
        if #seen < 3 then error(pc.Error { code = "UNAVAILABLE", message = "busy" }, 0) end
        return { text = "ok", n = #seen }
      end,
      List = function(_, ctx) ctx.send { text = "only" } end,
    } }, { pool = pool })
    local c = pc.client("hg.Svc", { pool = pool, transport = pc.inproc(server),
      sleep = function(s) sleeps[#sleeps + 1] = s end,
      service_config = config { maxAttempts = 4, hedgingDelay = "10s", nonFatalStatusCodes = { "UNAVAILABLE" } } })
    assert.are.equal(3, c:Get({}).n)
    assert.are.same({ "0", "1", "2" }, seen)
    assert.are.same({}, sleeps) -- no hedging delay waited: each attempt had ended
    local got = {}
    for r in c:List({}) do got[#got + 1] = r.text end
    assert.are.same({ "only" }, got)
  end)
end)

describe("hedging on pc.grpc (python3-grpcio test server)", function()
  local helper = require "grpc_helper"
  local server, faults
  setup(function()
    assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } }))
    server = helper.spawn("grpc", 0)
  end)
  teardown(function() helper.stop(server) end)

  local serial = 0
  local function id()
    serial = serial + 1
    return "hedge-" .. serial
  end

  local function hedged(policy, transport)
    return pc.client("faults.Faults", { transport = transport or pc.grpc(server.url), service_config = {
      methodConfig = { { name = { { service = "faults.Faults" } }, hedgingPolicy = policy } } } })
  end

  -- The server's counts for `key` once `cancelled` reached `want` (or 5 s passed).
  local function counts(c, key, want)
    local r
    for _ = 1, 100 do
      r = c:Attempts { id = key }
      if r.cancelled >= want then break end
      os.execute("sleep 0.05")
    end
    return r
  end

  it("returns at the fast hedge's speed while the slow first attempt still runs, then cancels it", function()
    faults = hedged { maxAttempts = 3, hedgingDelay = "0.2s", nonFatalStatusCodes = { "UNAVAILABLE" } }
    local key = id()
    local t0 = helper.now()
    local r = faults:Hedge { id = key, failures = 1, seconds = 5 }
    local took = helper.now() - t0
    assert.are.equal(2, r.attempts)
    assert.are.equal("1", r.text) -- grpc-previous-rpc-attempts of the hedge
    assert.is_true(took >= 0.2 and took < 2, "took " .. took)
    local n = counts(faults, key, 1)
    assert.are.equal(2, n.attempts)
    assert.are.equal(1, n.cancelled)
  end)

  it("sends the next hedge at once after a non-fatal code, and raises a fatal one", function()
    faults = hedged { maxAttempts = 3, hedgingDelay = "10s", nonFatalStatusCodes = { "UNAVAILABLE" } }
    local key = id()
    local t0 = helper.now()
    local r = faults:Hedge { id = key, failures = 2, code = "UNAVAILABLE" }
    assert.are.equal(3, r.attempts)
    assert.is_true(helper.now() - t0 < 3)
    local ok, err = pcall(faults.Hedge, faults, { id = id(), failures = 1, code = "NOT_FOUND" })
    assert.is_false(ok)
    assert.are.equal("NOT_FOUND", err.code)
  end)

  it("hedges a server stream until its first response", function()
    faults = hedged { maxAttempts = 2, hedgingDelay = "0.2s", nonFatalStatusCodes = { "UNAVAILABLE" } }
    local key = id()
    local got = {}
    for r in faults:HedgeStream { id = key, failures = 1, seconds = 5, count = 3 } do
      got[#got + 1] = r.attempts * 10 + r.index
    end
    assert.are.same({ 21, 22, 23 }, got)
    assert.are.equal(1, counts(faults, key, 1).cancelled)
  end)

  it("hedges inside pc.run tasks, several calls interleaved on one connection", function()
    local transport = pc.grpc(server.url)
    faults = hedged({ maxAttempts = 2, hedgingDelay = "0.2s", nonFatalStatusCodes = { "UNAVAILABLE" } }, transport)
    local results, t0 = {}, helper.now()
    for i = 1, 3 do
      pc.spawn(function()
        results[i] = faults:Hedge({ id = id(), failures = 1, seconds = 5 }).attempts
      end)
    end
    pc.run()
    assert.are.same({ 2, 2, 2 }, results)
    local took = helper.now() - t0
    assert.is_true(took < 2, "took " .. took) -- together, not one after another
  end)

  it("hands the winner's headers and trailers to a call made with_metadata", function()
    faults = hedged { maxAttempts = 2, hedgingDelay = "0.1s", nonFatalStatusCodes = { "UNAVAILABLE" } }
    local r, md = faults:Hedge({ id = id(), failures = 1, seconds = 5 }, { with_metadata = true })
    assert.are.equal(2, r.attempts)
    assert.are.equal("table", type(md.headers))
    assert.are.equal("table", type(md.trailers))
  end)

  it("sends grpc-previous-rpc-attempts on retries too", function()
    local c = pc.client("faults.Faults", { transport = pc.grpc(server.url), service_config = {
      methodConfig = { { name = { { service = "faults.Faults" } }, retryPolicy = { maxAttempts = 3,
        initialBackoff = "0.01s", maxBackoff = "0.01s", backoffMultiplier = 1,
        retryableStatusCodes = { "UNAVAILABLE" } } } } } })
    local r = c:Hedge { id = id(), failures = 2, code = "UNAVAILABLE" }
    assert.are.equal(3, r.attempts)
    assert.are.equal("2", r.text)
  end)
end)
