-- gRPC service config given to pc.client (README "Service config"):
-- validation with JSON paths, gRPC's name matching, the policies as the
-- callables' default plans, message size limits, and retry throttling, all
-- on a fake clock counting attempts, sleeps and tokens exactly.
local pc = require "protocall"

local SCHEMA = [[
syntax = "proto3";
package sc;
message Req { string name = 1; int32 from = 2; }
message Resp { string text = 1; int32 n = 2; }
service Echo {
  rpc Say(Req) returns (Resp);
  rpc Shout(Req) returns (Resp);
  rpc Count(Req) returns (stream Resp);
}
service Other { rpc Ping(Req) returns (Resp); }
]]
local pool = pc.pool()
assert(pool:load(SCHEMA, { name = "sc/echo.proto" }))

-- A fake world: clock, sleep and random, and a server whose handlers fail
-- by a script. `log` lists each attempt as "Method@t".
local function world()
  local w = { t = 0, sleeps = {}, log = {} }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps[#w.sleeps + 1] = s; w.t = w.t + s end
  function w.random() return 1 end
  return w
end

local function server(w, behave)
  local function handler(name)
    return function(req, ctx)
      w.log[#w.log + 1] = name
      return behave(name, req, ctx)
    end
  end
  return pc.server({
    ["sc.Echo"] = { Say = handler("Say"), Shout = handler("Shout"), Count = handler("Count") },
    ["sc.Other"] = { Ping = handler("Ping") },
  }, { pool = pool })
end

local function client(w, transport, config, service, extra)
  local opts = { pool = pool, transport = transport, service_config = config,
    clock = w.clock, sleep = w.sleep, random = w.random }
  for k, v in pairs(extra or {}) do opts[k] = v end
  return pc.client(service or "sc.Echo", opts)
end

local function unavailable() error(pc.Error { code = "UNAVAILABLE", message = "down" }, 0) end

local RETRY = { maxAttempts = 4, initialBackoff = "0.1s", maxBackoff = "1s", backoffMultiplier = 2,
  retryableStatusCodes = { "UNAVAILABLE" } }

-- The message pc.client raises for `config`, without "file:line: ".
local function refusal(config)
  local w = world()
  local ok, err = pcall(client, w, pc.inproc(server(w, function() return {} end)), config)
  assert.is_false(ok)
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

describe("service_config validation", function()
  local function with_retry(changes)
    local r = {}
    for k, v in pairs(RETRY) do r[k] = v end
    for k, v in pairs(changes) do r[k] = v ~= false and v or nil end
    return { methodConfig = { { name = { {} } }, { name = { { service = "sc.Echo" } }, retryPolicy = r } } }
  end

  it("names each problem with its JSON path", function()
    local cases = {
      { with_retry { maxAttempts = 1 }, "methodConfig[1].retryPolicy.maxAttempts: at least 2 expected, got 1" },
      { with_retry { maxAttempts = 2.5 }, "methodConfig[1].retryPolicy.maxAttempts: integer expected, got 2.5" },
      { with_retry { maxAttempts = math.huge }, "methodConfig[1].retryPolicy.maxAttempts: integer expected, got inf" },
      { { methodConfig = { { name = { {} }, timeout = "315576000001s" } } },
        "methodConfig[0].timeout: duration of at most 315576000000s expected, got \"315576000001s\"" },
      -- the whole value against the limit, as outlier detection's check has it
      { { methodConfig = { { name = { {} }, timeout = "315576000000.5s" } } },
        "methodConfig[0].timeout: duration of at most 315576000000s expected, got \"315576000000.5s\"" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { maxEjectionTime = "315576000000.5s",
        childPolicy = { { round_robin = {} } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.maxEjectionTime: duration of at most 315576000000s "
          .. "expected, got \"315576000000.5s\"" },
      { with_retry { maxAttempts = false }, "methodConfig[1].retryPolicy.maxAttempts: required" },
      { with_retry { initialBackoff = "100ms" },
        "methodConfig[1].retryPolicy.initialBackoff: duration string such as \"0.1s\" expected, got \"100ms\"" },
      { with_retry { initialBackoff = 0.1 },
        "methodConfig[1].retryPolicy.initialBackoff: duration string such as \"0.1s\" expected, got number" },
      { with_retry { maxBackoff = "0s" },
        "methodConfig[1].retryPolicy.maxBackoff: positive duration expected, got \"0s\"" },
      { with_retry { backoffMultiplier = 0 },
        "methodConfig[1].retryPolicy.backoffMultiplier: positive number expected, got 0" },
      { with_retry { backoffMultiplier = "2" },
        "methodConfig[1].retryPolicy.backoffMultiplier: number expected, got string" },
      { with_retry { retryableStatusCodes = {} },
        "methodConfig[1].retryPolicy.retryableStatusCodes: at least one status code expected" },
      { with_retry { retryableStatusCodes = { "UNAVAILABLE", "unavailable" } },
        "methodConfig[1].retryPolicy.retryableStatusCodes[1]: status code name such as \"UNAVAILABLE\" expected, "
          .. "got \"unavailable\"" },
      { with_retry { retryableStatusCodes = { "OK" } },
        "methodConfig[1].retryPolicy.retryableStatusCodes[0]: status code name such as \"UNAVAILABLE\" expected, "
          .. "got \"OK\"" },
      { with_retry { perAttemptRecvTimeout = "0s" },
        "methodConfig[1].retryPolicy.perAttemptRecvTimeout: positive duration expected, got \"0s\"" },
      { with_retry { jitter = 0.2 }, "methodConfig[1].retryPolicy.jitter: unknown field" },
      { { methodConfig = { { name = { { method = "Say" } } } } },
        "methodConfig[0].name[0]: a method needs its service (only {} or {service=\"\"} names the default)" },
      { { methodConfig = { { name = { { service = "sc.Echo" } } }, { name = { { service = "sc.Echo" } } } } },
        "methodConfig[1].name[0]: duplicate name sc.Echo/ (also in methodConfig[0].name[0])" },
      { { methodConfig = { { name = { {} } }, { name = { { service = "" } } } } },
        "methodConfig[1].name[0]: duplicate name (the default) (also in methodConfig[0].name[0])" },
      { { methodConfig = { { timeout = "1s" } } }, "methodConfig[0].name: required" },
      { { methodConfig = { { name = {} } } }, "methodConfig[0].name: at least one name expected" },
      { { methodConfig = { { name = { {} }, timeout = "-1s" } } },
        "methodConfig[0].timeout: duration string such as \"0.1s\" expected, got \"-1s\"" },
      { { methodConfig = { { name = { {} }, timeout = "1.0000000001s" } } },
        "methodConfig[0].timeout: duration string such as \"0.1s\" expected, got \"1.0000000001s\"" },
      { { methodConfig = { { name = { {} }, waitForReady = "yes" } } },
        "methodConfig[0].waitForReady: boolean expected, got string" },
      { { methodConfig = { { name = { {} }, maxRequestMessageBytes = -1 } } },
        "methodConfig[0].maxRequestMessageBytes: non-negative integer expected, got -1" },
      { { methodConfig = { { name = { {} }, retryPolicy = RETRY, hedgingPolicy = { maxAttempts = 2 } } } },
        "methodConfig[0]: retryPolicy and hedgingPolicy are mutually exclusive" },
      { { methodConfig = { { name = { {} }, hedgingPolicy = { maxAttempts = 1 } } } },
        "methodConfig[0].hedgingPolicy.maxAttempts: at least 2 expected, got 1" },
      { { methodConfig = { { name = { {} }, hedgingPolicy = { maxAttempts = 3, hedgingDelay = "fast" } } } },
        "methodConfig[0].hedgingPolicy.hedgingDelay: duration string such as \"0.1s\" expected, got \"fast\"" },
      { { methodConfig = { { name = { {} }, hedgingPolicy = { maxAttempts = 3, nonFatalStatusCodes = { "NOPE" } } } } },
        "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]: status code name such as \"UNAVAILABLE\" expected, "
          .. "got \"NOPE\"" },
      { { retryThrottling = { maxTokens = 0, tokenRatio = 0.1 } },
        "retryThrottling.maxTokens: number in (0, 1000] expected" },
      { { retryThrottling = { maxTokens = 1001, tokenRatio = 0.1 } },
        "retryThrottling.maxTokens: number in (0, 1000] expected" },
      { { retryThrottling = { maxTokens = 10, tokenRatio = 0 } },
        "retryThrottling.tokenRatio: number of at least 0.001 expected" },
      { { retryThrottling = { maxTokens = 10 } }, "retryThrottling.tokenRatio: required" },
      { { retryThrottling = { maxTokens = 10, tokenRatio = 0.1, burst = 1 } }, "retryThrottling.burst: unknown field" },
      { { loadBalancingConfig = { { grpclb = {} } } },
        "loadBalancingConfig: no supported policy (pick_first, round_robin, least_request_experimental, "
          .. "ring_hash_experimental, outlier_detection_experimental)" },
      { { loadBalancingConfig = { { ring_hash_experimental = { minRingSize = 2048, maxRingSize = 1024 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.minRingSize: at most maxRingSize (1024) expected, got 2048" },
      { { loadBalancingConfig = { { ring_hash_experimental = { maxRingSize = 100 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.maxRingSize: at least the default minimum ring size (1024) "
          .. "expected, got 100" },
      { { loadBalancingConfig = { { ring_hash_experimental = { maxRingSize = 8388609 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.maxRingSize: integer in 1..8388608 expected, got 8388609" },
      { { loadBalancingConfig = { { ring_hash_experimental = { min_ring_size = 9000000 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.min_ring_size: integer in 1..8388608 expected, got 9000000" },
      { { loadBalancingConfig = { { ring_hash_experimental = { minRingSize = 0 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.minRingSize: integer in 1..8388608 expected, got 0" },
      { { loadBalancingConfig = { { ring_hash_experimental = { requestHashHeader = "x-key-bin" } } } },
        "loadBalancingConfig[0].ring_hash_experimental.requestHashHeader: a binary (-bin) header cannot be hashed" },
      { { loadBalancingConfig = { { ring_hash_experimental = { requestHashHeader = "a b" } } } },
        "loadBalancingConfig[0].ring_hash_experimental.requestHashHeader: a header name expected, got \"a b\"" },
      { { loadBalancingConfig = { { ring_hash_experimental = { ringSize = 5 } } } },
        "loadBalancingConfig[0].ring_hash_experimental.ringSize: unknown field" },
      { { loadBalancingConfig = { { least_request_experimental = { choiceCount = 1 } } } },
        "loadBalancingConfig[0].least_request_experimental.choiceCount: integer in 2..4294967295 expected, got 1" },
      { { loadBalancingConfig = { { least_request_experimental = { choiceCount = 2.5 } } } },
        "loadBalancingConfig[0].least_request_experimental.choiceCount: integer in 2..4294967295 expected, got 2.5" },
      { { loadBalancingConfig = { { least_request_experimental = { choiceCount = "3" } } } },
        "loadBalancingConfig[0].least_request_experimental.choiceCount: integer in 2..4294967295 expected, "
          .. "got string" },
      { { loadBalancingConfig = { { least_request_experimental = { choice_count = 3 } } } },
        "loadBalancingConfig[0].least_request_experimental.choice_count: unknown field" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { childPolicy = {
        { least_request_experimental = { choiceCount = 0 } } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.childPolicy[0].least_request_experimental.choiceCount: "
          .. "integer in 2..4294967295 expected, got 0" },
      { { loadBalancingConfig = { { round_robin = {}, pick_first = {} } } },
        "loadBalancingConfig[0]: object with one policy name expected" },
      { { loadBalancingConfig = { { round_robin = { x = 1 } } } },
        "loadBalancingConfig[0].round_robin.x: unknown field" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { childPolicy = { { grpclb = {} } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.childPolicy: no supported policy "
          .. "(pick_first, round_robin, least_request_experimental)" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { interval = 10,
        childPolicy = { { round_robin = {} } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.interval: duration string such as \"0.1s\" expected, "
          .. "got number" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { maxEjectionPercent = 101,
        childPolicy = { { round_robin = {} } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.maxEjectionPercent: integer in 0..100 expected, "
          .. "got 101" },
      { { loadBalancingConfig = { { outlier_detection_experimental = { failurePercentageEjection = { volume = 1 },
        childPolicy = { { round_robin = {} } } } } } },
        "loadBalancingConfig[0].outlier_detection_experimental.failurePercentageEjection.volume: unknown field" },
      { { loadBalancingPolicy = "random" },
        "loadBalancingPolicy: \"pick_first\" or \"round_robin\" expected, got \"random\"" },
      { { methodConfigs = {} }, "methodConfigs: unknown field" },
      { { methodConfig = { name = {} } }, "methodConfig: list expected, got an object" },
    }
    for _, c in ipairs(cases) do
      assert.are.equal("pc.client: service_config: " .. c[2], refusal(c[1]))
    end
    assert.are.equal("pc.client: service_config: table or JSON text expected, got number", refusal(1))
  end)

  it("reads JSON text: the same config, and its errors by path (and offset)", function()
    local w = world()
    local stub = client(w, pc.inproc(server(w, unavailable)), [[{
      "methodConfig": [{
        "name": [{"service": "sc.Echo", "method": "Say"}],
        "timeout": "2s",
        "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.25s", "maxBackoff": "1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
        "waitForReady": null
      }],
      "retryThrottling": {"maxTokens": 100, "tokenRatio": 0.1}
    }]])
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal(3, err.attempts)
    assert.are.same({ 0.25, 0.5 }, w.sleeps)
    assert.are.equal(97, stub:throttle_info().tokens)
    assert.are.equal("pc.client: service_config: methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, got 1",
      refusal([[{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 1}}]}]]))
    assert.are.equal("pc.client: service_config: JSON: $.methodConfig: unexpected character '}' at offset 17",
      refusal([[{"methodConfig": }]]))
    assert.are.equal("pc.client: service_config: JSON: $: object expected, got an array at offset 0", refusal("[]"))
  end)

  it("shows JSON's integral numbers as integers, and tells a JSON [] from {}", function()
    local retry = [["initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2]]
    local cases = {
      -- JSON numbers are floats: Lua 5.4 printed 99.0
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 3, ]] .. retry
        .. [[, "retryableStatusCodes": [99]}}]}]], "methodConfig[0].retryPolicy.retryableStatusCodes[0]: status code "
        .. "name such as \"UNAVAILABLE\" expected, got 99" },
      { [[{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 3, "nonFatalStatusCodes": [true]}}]}]],
        "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]: status code name such as \"UNAVAILABLE\" expected, "
          .. "got boolean" },
      { [[{"methodConfig": [{"name": [{}], "maxRequestMessageBytes": -3}]}]],
        "methodConfig[0].maxRequestMessageBytes: non-negative integer expected, got -3" },
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 1}}]}]],
        "methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, got 1" },
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": -1e300}}]}]],
        "methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, got -1e+300" },
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2.5}}]}]],
        "methodConfig[0].retryPolicy.maxAttempts: integer expected, got 2.5" },
      { [[{"loadBalancingConfig": [{"ring_hash_experimental": {"minRingSize": 0}}]}]],
        "loadBalancingConfig[0].ring_hash_experimental.minRingSize: integer in 1..8388608 expected, got 0" },
      { [[{"loadBalancingConfig": [{"outlier_detection_experimental": {"maxEjectionPercent": 101,
        "childPolicy": [{"round_robin": {}}]}}]}]],
        "loadBalancingConfig[0].outlier_detection_experimental.maxEjectionPercent: integer in 0..100 expected, "
          .. "got 101" },
      -- [] where an object goes, {} where a list goes (both were an empty table: taken, or "required")
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": []}]}]], "methodConfig[0].retryPolicy: object expected, "
        .. "got a list" },
      { [[{"methodConfig": [{"name": [{}], "retryPolicy": [1]}]}]], "methodConfig[0].retryPolicy: object expected, "
        .. "got a list" },
      { [=[{"methodConfig": [[]]}]=], "methodConfig[0]: object expected, got a list" },
      { [[{"methodConfig": {}}]], "methodConfig: list expected, got an object" },
      { [[{"methodConfig": [{"name": {}}]}]], "methodConfig[0].name: list expected, got an object" },
      { [=[{"methodConfig": [{"name": [[]]}]}]=], "methodConfig[0].name[0]: object expected, got a list" },
      { [[{"loadBalancingConfig": [{"round_robin": []}]}]],
        "loadBalancingConfig[0].round_robin: object expected, got a list" },
      { [=[{"loadBalancingConfig": [[]]}]=], "loadBalancingConfig[0]: object expected, got a list" },
      { [[{"loadBalancingConfig": {}}]], "loadBalancingConfig: list expected, got an object" },
      { [[{"loadBalancingConfig": [{"outlier_detection_experimental": {"childPolicy": [{"round_robin": []}]}}]}]],
        "loadBalancingConfig[0].outlier_detection_experimental.childPolicy[0].round_robin: object expected, "
          .. "got a list" },
      { [[{"healthCheckConfig": []}]], "healthCheckConfig: object expected, got a list" },
      { [[{"retryThrottling": []}]], "retryThrottling: object expected, got a list" },
    }
    for _, c in ipairs(cases) do
      assert.are.equal("pc.client: service_config: " .. c[2], refusal(c[1]))
    end
    -- a Lua table: a sequence is a list; {} either
    assert.are.equal("pc.client: service_config: methodConfig[0].retryPolicy: object expected, got a list",
      refusal { methodConfig = { { name = { {} }, retryPolicy = { 1 } } } })
    assert.are.equal("pc.client: service_config: methodConfig[0].name: at least one name expected",
      refusal { methodConfig = { { name = {} } } })
    assert.are.equal("pc.client: service_config: methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, "
      .. "got 1", refusal { methodConfig = { { name = { {} }, retryPolicy = { maxAttempts = 1.0 } } } })
  end)

  it("takes maxAttempts above 5 as 5 (gRFC A6)", function()
    local w = world()
    local stub = client(w, pc.inproc(server(w, unavailable)),
      { methodConfig = { { name = { {} },
        retryPolicy = with_retry { maxAttempts = 9 }.methodConfig[2].retryPolicy } } })
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(5, err.attempts)
    assert.are.equal(5, #w.log)
  end)

  it("gives the transport least_request_experimental's choiceCount (default 2, capped at 10: gRFC A48)", function()
    local function policy(lbc)
      local t = pc.inproc(pc.server({ ["sc.Echo"] = {} }, { pool = pool }))
      local got
      function t.set_load_balancing(_, name, config) got = { name, config and config.choice_count } end
      pc.client("sc.Echo", { pool = pool, transport = t, service_config = { loadBalancingConfig = lbc } })
      return got
    end
    assert.are.same({ "least_request", 2 }, policy { { least_request_experimental = {} } })
    assert.are.same({ "least_request", 7 }, policy { { least_request_experimental = { choiceCount = 7 } } })
    assert.are.same({ "least_request", 10 }, policy { { least_request_experimental = { choiceCount = 11 } } })
    assert.are.same({ "least_request", 3 }, policy { { grpclb = {} },
      { outlier_detection_experimental = { childPolicy = { { least_request_experimental = { choiceCount = 3 } } } } },
      { round_robin = {} } })
    assert.are.same({ "round_robin" }, policy { { round_robin = {} }, { least_request_experimental = {} } })
  end)
end)

describe("service_config matching", function()
  -- Each entry has its own timeout, which the handler reports.
  local config = { methodConfig = {
    { name = { {} }, timeout = "9s" },
    { name = { { service = "sc.Echo" } }, timeout = "5s" },
    { name = { { service = "sc.Echo", method = "Shout" } }, timeout = "0.25s" },
  } }

  local function timeouts(cfg, service, method, extra)
    local w = world()
    local seen
    local stub = client(w, pc.inproc(server(w, function(_, _, ctx) seen = ctx.timeout; return {} end)), cfg,
      service, extra)
    stub[method](stub, {})
    return seen
  end

  it("prefers the exact name, then the service-wide entry, then the default", function()
    assert.are.equal(0.25, timeouts(config, "sc.Echo", "Shout"))
    assert.are.equal(5, timeouts(config, "sc.Echo", "Say"))
    assert.are.equal(9, timeouts(config, "sc.Other", "Ping"))
    local no_default = { methodConfig = { config.methodConfig[3] } }
    assert.is_nil(timeouts(no_default, "sc.Echo", "Say"))
  end)

  it("lets methods.Name override an entry, and the client's options fill methods no entry names", function()
    local only_shout = { methodConfig = { config.methodConfig[3] } }
    assert.are.equal(2, timeouts(only_shout, "sc.Echo", "Shout", { methods = { Shout = { timeout = 2 } } }))
    assert.are.equal(0.25, timeouts(only_shout, "sc.Echo", "Shout", { timeout = 7 }))
    assert.are.equal(7, timeouts(only_shout, "sc.Echo", "Say", { timeout = 7 }))
  end)

  it("accepts waitForReady (wait-for-ready is the transport's option, pc.grpc{wait_for_ready=})", function()
    assert.are.equal(5, timeouts({ methodConfig = { { name = { {} }, timeout = "5s", waitForReady = true } } },
      "sc.Echo", "Say"))
  end)
end)

describe("service_config retryPolicy", function()
  it("retries the listed codes with gRPC's backoff, up to maxAttempts, and nothing else", function()
    local w = world()
    local stub = client(w, pc.inproc(server(w, function(name)
      if #w.log < 3 then unavailable() end
      return { text = name }
    end)), { methodConfig = { { name = { { service = "sc.Echo" } }, retryPolicy = RETRY } } })
    assert.are.equal("Say", stub:Say({}).text)
    assert.are.same({ "Say", "Say", "Say" }, w.log)
    assert.are.same({ 0.1, 0.2 }, w.sleeps) -- random() = 1: the caps themselves
    -- ABORTED is not listed: one attempt
    w = world()
    stub = client(w, pc.inproc(server(w, function() error(pc.Error { code = "ABORTED" }, 0) end)),
      { methodConfig = { { name = { {} }, retryPolicy = RETRY } } })
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal("ABORTED", err.code)
    assert.are.equal(1, #w.log)
  end)

  it("caps backoff at maxBackoff and gives up after maxAttempts", function()
    local w = world()
    local r = { maxAttempts = 5, initialBackoff = "0.5s", maxBackoff = "1.5s", backoffMultiplier = 3,
      retryableStatusCodes = { 14 } }
    local stub = client(w, pc.inproc(server(w, unavailable)), { methodConfig = { { name = { {} }, retryPolicy = r } } })
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal(5, err.attempts)
    assert.are.same({ 0.5, 1.5, 1.5, 1.5 }, w.sleeps)
  end)

  it("gives each attempt perAttemptRecvTimeout, within the call's timeout", function()
    local w = world()
    local seen = {}
    local stub = client(w, pc.inproc(server(w, function(_, _, ctx)
      seen[#seen + 1] = ctx.timeout
      w.t = w.t + 1 -- each attempt takes a second
      unavailable()
    end)), { methodConfig = { { name = { {} }, timeout = "3.5s",
      retryPolicy = { maxAttempts = 5, initialBackoff = "0.5s", maxBackoff = "0.5s", backoffMultiplier = 1,
        retryableStatusCodes = { "UNAVAILABLE" }, perAttemptRecvTimeout = "2s" } } } })
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    -- 0 +1 +0.5 = 1.5: 2 s; 1.5 +1 +0.5 = 3: 0.5 s left; then no time
    assert.are.same({ 2, 2, 0.5 }, seen)
    assert.are.equal(3, err.attempts)
  end)

  it("becomes each method's cached default plan: calls without options add no cache entry", function()
    local w = world()
    local stub = client(w, pc.inproc(server(w, function() return {} end)),
      { methodConfig = { { name = { {} }, retryPolicy = RETRY, timeout = "1s" } } })
    for _ = 1, 10 do stub:Say({}) end
    assert.are.same({ hits = 0, misses = 0, size = 0, capacity = 4 }, stub.Say:cache_info())
  end)
end)

describe("service_config message size limits", function()
  it("refuses a larger request before sending and a larger response, without retrying", function()
    local w = world()
    local stub = client(w, pc.inproc(server(w, function(_, req) return { text = req.name } end)),
      { methodConfig = { { name = { {} }, maxRequestMessageBytes = 8, maxResponseMessageBytes = 5,
        retryPolicy = { maxAttempts = 3, initialBackoff = "0.1s", maxBackoff = "1s", backoffMultiplier = 2,
          retryableStatusCodes = { "RESOURCE_EXHAUSTED" } } } } })
    assert.are.equal("abc", stub:Say({ name = "abc" }).text) -- 5 bytes each way
    local ok, err = pcall(stub.Say, stub, { name = "abcdefghij" })
    assert.is_false(ok)
    assert.are.equal("RESOURCE_EXHAUSTED", err.code)
    assert.are.equal("sc.Echo.Say: request of 12 bytes is larger than the service config's 8", err.message)
    assert.are.equal(1, #w.log)
    ok, err = pcall(stub.Say, stub, { name = "abcdef" })
    assert.is_false(ok)
    assert.are.equal("sc.Echo.Say: response of 8 bytes is larger than the service config's 5", err.message)
    assert.are.equal(2, #w.log) -- local: not retried
  end)
end)

describe("retry throttling", function()
  local THROTTLED = { retryThrottling = { maxTokens = 10, tokenRatio = 0.5 },
    methodConfig = { { name = { {} }, retryPolicy = RETRY } } }

  it("takes a token per retryable failure, stops retrying at half, and refills by tokenRatio", function()
    local w = world()
    local failing = true
    local stub = client(w, pc.inproc(server(w, function()
      if failing then unavailable() end
      return {}
    end)), THROTTLED)
    assert.are.same({ tokens = 10, max_tokens = 10, token_ratio = 0.5, retries_allowed = true },
      stub:throttle_info())
    -- call 1: 4 attempts (10 -> 6); call 2: 9 -> 6? no: 6 -> 5 at the first failure, not above half
    local ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal(4, err.attempts)
    assert.are.equal(6, stub:throttle_info().tokens)
    ok, err = pcall(stub.Say, stub, {})
    assert.is_false(ok)
    assert.are.equal(1, err.attempts)
    assert.matches("retries are throttled", err.message, 1, true)
    assert.are.equal(5, stub:throttle_info().tokens)
    assert.is_false(stub:throttle_info().retries_allowed)
    -- another method of the same client shares the bucket
    ok, err = pcall(stub.Shout, stub, {})
    assert.is_false(ok)
    assert.are.equal(1, err.attempts)
    assert.are.equal(4, stub:throttle_info().tokens)
    -- recovery: each success gives 0.5 back; 3 successes make 5.5 > 5
    failing = false
    for _ = 1, 3 do stub:Say({}) end
    assert.are.equal(5.5, stub:throttle_info().tokens)
    assert.is_true(stub:throttle_info().retries_allowed)
    for _ = 1, 20 do stub:Say({}) end
    assert.are.equal(10, stub:throttle_info().tokens) -- never above maxTokens
    assert.are.equal(4 + 1 + 1 + 23, #w.log)
  end)

  it("is shared by every client and transport of one server, not across servers", function()
    local w = world()
    local srv = server(w, unavailable)
    local t1 = pc.inproc(srv)
    local a = client(w, t1, THROTTLED)
    local b = client(w, t1, THROTTLED, "sc.Other")
    local c = client(w, pc.inproc(srv), THROTTLED) -- another transport to the same server
    local d = client(w, pc.inproc(server(w, unavailable)), THROTTLED)
    pcall(a.Say, a, {})
    assert.are.equal(6, b:throttle_info().tokens)
    pcall(b.Ping, b, {})
    assert.are.equal(5, a:throttle_info().tokens)
    assert.are.equal(5, c:throttle_info().tokens)
    pcall(c.Say, c, {})
    assert.are.equal(4, a:throttle_info().tokens)
    assert.are.equal(10, d:throttle_info().tokens)
    assert.is_nil(client(w, t1, { methodConfig = {} }):throttle_info())
    -- other numbers, another bucket
    local other = { retryThrottling = { maxTokens = 20, tokenRatio = 0.5 }, methodConfig = THROTTLED.methodConfig }
    assert.are.equal(20, client(w, t1, other):throttle_info().tokens)
  end)

  it("is shared by the pc.grpc transports of one target (gRPC's server name)", function()
    local w = world()
    -- nothing listens on port 1: each attempt fails UNAVAILABLE at once
    local a = client(w, pc.grpc("127.0.0.1:1"), THROTTLED)
    local b = client(w, pc.grpc("127.0.0.1:1"), THROTTLED)
    local c = client(w, pc.grpc({ "127.0.0.1:1", "127.0.0.2:1" }), THROTTLED)
    local d = client(w, pc.grpc({ "127.0.0.1:1", "127.0.0.2:1" }), THROTTLED)
    local ok, err = pcall(a.Say, a, {})
    assert.is_false(ok)
    assert.are.equal(4, err.attempts)
    assert.are.equal(6, b:throttle_info().tokens)
    ok, err = pcall(b.Say, b, {})
    assert.is_false(ok)
    assert.are.equal(1, err.attempts) -- throttled: the first transport spent the tokens
    assert.are.equal(5, a:throttle_info().tokens)
    assert.are.equal(10, c:throttle_info().tokens) -- another target
    pcall(c.Say, c, {})
    assert.are.equal(6, d:throttle_info().tokens)
  end)

  it("counts successes of the C fast path, of per-call options and of retried calls", function()
    local w = world()
    local n = 0
    local stub = client(w, pc.inproc(server(w, function()
      n = n + 1
      if n % 2 == 1 then unavailable() end
      return {}
    end)), { retryThrottling = { maxTokens = 4, tokenRatio = 0.25 },
      methodConfig = { { name = { {} }, retryPolicy = RETRY } } })
    stub:Say({}) -- fail (4 -> 3), retry, success (3.25)
    assert.are.equal(3.25, stub:throttle_info().tokens)
    n = 1
    stub:Say({}, { timeout = 5 }) -- per-call options: one success
    assert.are.equal(3.5, stub:throttle_info().tokens)
    n = 1
    stub:Say({}) -- fast path success
    assert.are.equal(3.75, stub:throttle_info().tokens)
  end)

  -- 1,000 clients, each of its own server (own bucket), against backends
  -- that fail every call for 20 rounds and then recover. gRFC A6:
  -- with throttling a client retries while its tokens are above
  -- maxTokens / 2, so during the outage it makes at most
  -- maxTokens / 2 - 1 retries (10 -> 6 allows 4), whatever the number of
  -- calls (without throttling: maxAttempts - 1 per call).
  it("keeps 1,000 clients' retries under gRFC A6's bound in an outage, and recovers", function()
    local w = world()
    local down = true
    local function behave()
      if down then unavailable() end
      return {}
    end
    local config = { retryThrottling = { maxTokens = 10, tokenRatio = 0.1 },
      methodConfig = { { name = { {} }, retryPolicy = RETRY } } }
    local clients = {}
    for i = 1, 1000 do clients[i] = client(w, pc.inproc(server(w, behave)), config) end
    local calls, attempts = 0, 0
    for _ = 1, 20 do
      for i = 1, 1000 do
        local before = #w.log
        pcall(clients[i].Say, clients[i], {})
        calls = calls + 1
        attempts = attempts + (#w.log - before)
      end
    end
    local retries = attempts - calls
    assert.are.equal(20000, calls)
    -- each client's first call: 3 retries (10 -> 6, then maxAttempts); its
    -- second call's failure takes 6 -> 5: no retry from then on
    assert.are.equal(3 * 1000, retries)
    assert.is_true(retries <= 1000 * (10 / 2 - 1))
    -- without throttling the same outage makes 3 retries per call
    assert.is_true(retries < calls * 3 / 10)
    for i = 1, 1000 do assert.are.equal(0, clients[i]:throttle_info().tokens) end
    -- recovery: 51 successes per client bring 0 tokens to 5.1, above half
    down = false
    local failed = 0
    for _ = 1, 51 do
      for i = 1, 1000 do
        if not pcall(clients[i].Say, clients[i], {}) then failed = failed + 1 end
      end
    end
    assert.are.equal(0, failed)
    for i = 1, 1000 do
      local info = clients[i]:throttle_info()
      assert.are.equal(5.1, info.tokens)
      assert.is_true(info.retries_allowed)
    end
    -- a fresh failure is retried again
    down = true
    local ok, err = pcall(clients[1].Say, clients[1], {})
    assert.is_false(ok)
    assert.are.equal(1, err.attempts) -- 5.1 -> 4.1: not above half
    print(string.format("# simulation: 1000 clients, 20 failing rounds: %d calls, %d retries (%.3f per call, "
      .. "bound %d, %d without throttling); recovered after 51 successes per client", calls, retries,
      retries / calls, 4000, calls * 3))
  end)
end)
