-- Client-side health checking (gRFC A17; lua/protocall/transport/health_check.lua):
-- three pc.listen backends in this process, each with pc.health, behind one
-- round_robin pc.grpc target whose pc.client has healthCheckConfig; calls
-- land only on backends whose health says SERVING, and move as it changes.
local pc = require "protocall"

local pool = pc.pool()
assert(pool:load([[syntax = "proto3"; package hc; message Id { string name = 1; }
  service Named { rpc Who(Id) returns (Id); }]], { name = "hc.proto" }))

local CONFIG = { loadBalancingConfig = { { round_robin = {} } }, healthCheckConfig = { serviceName = "hc.Named" } }

-- Backend `name`: a listener answering Who with its name, and its health
-- (`health` false: a server without the Health service).
local function backend(name, with_health)
  local health = with_health ~= false and pc.health { pool = pool } or nil
  local server = pc.server({ ["hc.Named"] = { Who = function() return { name = name } end } },
    { pool = pool, health = health })
  if health then health:set("hc.Named", "SERVING") end
  local l = pc.listen(server, "127.0.0.1:0")
  pc.spawn(function() l:serve() end)
  return { listener = l, health = health, addr = "127.0.0.1:" .. l.port }
end

-- Runs `body` as a task with backends made by `make` (a list of
-- backend() arguments); fails the test with the task's error.
local function with_backends(make, body)
  local bs, err = {}, nil
  for i, m in ipairs(make) do bs[i] = backend(m[1], m[2]) end
  pc.spawn(function()
    local ok, e = xpcall(body, debug.traceback, bs)
    if not ok then err = e end
    for _, b in ipairs(bs) do b.listener:shutdown(0) end
  end)
  pc.run()
  assert(err == nil, err)
end

local function client(bs, config, opts)
  local addrs = {}
  for i, b in ipairs(bs) do addrs[i] = b.addr end
  local t = pc.grpc(addrs, opts)
  return pc.client("hc.Named", { pool = pool, transport = t, service_config = config or CONFIG, timeout = 5 }), t
end

local function names(c, n)
  local count = {}
  for _ = 1, n do
    local who = c:Who({}).name
    count[who] = (count[who] or 0) + 1
  end
  return count
end

describe("client-side health checking (healthCheckConfig)", function()
  it("sends calls only to backends whose server says SERVING", function()
    with_backends({ { "a" }, { "b" }, { "c" } }, function(bs)
      bs[2].health:set("hc.Named", "NOT_SERVING")
      local c, t = client(bs)
      assert.are.same({ a = 5, c = 5 }, names(c, 10))
      local states = {}
      for i, b in ipairs(t:backends()) do states[i] = b.health end
      assert.are.same({ "SERVING", "NOT_SERVING", "SERVING" }, states)
      t:close()
    end)
  end)

  it("moves traffic as a backend's health changes, with no failed call", function()
    with_backends({ { "a" }, { "b" } }, function(bs)
      local c, t = client(bs)
      assert.are.same({ a = 2, b = 2 }, names(c, 4))
      bs[1].health:set("hc.Named", "NOT_SERVING")
      -- the Watch stream carries the change: within a few calls none goes to a
      local t0 = pc.now()
      while t:backends()[1].health ~= "NOT_SERVING" do
        c:Who {}
        assert(pc.now() - t0 < 5, "the NOT_SERVING change never arrived")
        pc.sleep(0.01)
      end
      assert.are.same({ b = 6 }, names(c, 6))
      bs[1].health:set("hc.Named", "SERVING")
      t0 = pc.now()
      while t:backends()[1].health ~= "SERVING" do
        c:Who {}
        assert(pc.now() - t0 < 5, "the SERVING change never arrived")
        pc.sleep(0.01)
      end
      assert.are.same({ a = 3, b = 3 }, names(c, 6))
      t:close()
    end)
  end)

  it("takes a backend without the Health service as healthy (UNIMPLEMENTED)", function()
    with_backends({ { "a", false }, { "b" } }, function(bs)
      bs[2].health:set("hc.Named", "NOT_SERVING")
      local c, t = client(bs)
      assert.are.same({ a = 4 }, names(c, 4))
      assert.are.equal("UNIMPLEMENTED", t:backends()[1].health)
      t:close()
    end)
  end)

  it("fails UNAVAILABLE when no backend is SERVING, and recovers", function()
    with_backends({ { "a" }, { "b" } }, function(bs)
      bs[1].health:set("hc.Named", "NOT_SERVING")
      bs[2].health:set("hc.Named", nil) -- SERVICE_UNKNOWN
      local c, t = client(bs)
      local ok, err = pcall(c.Who, c, {})
      assert.is_false(ok)
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches('no backend is SERVING (health check of service "hc.Named")', err.message, 1, true)
      bs[2].health:set("hc.Named", "SERVING")
      local t0 = pc.now()
      while not pcall(c.Who, c, {}) do
        assert(pc.now() - t0 < 5, "never recovered")
        pc.sleep(0.01)
      end
      assert.are.same({ b = 3 }, names(c, 3))
      t:close()
    end)
  end)

  it("lets a wait_for_ready call wait while no backend is SERVING, until one is or its deadline", function()
    -- gRPC's wait-for-ready: backends not SERVING are in TRANSIENT_FAILURE, where such a call waits
    with_backends({ { "a" }, { "b" } }, function(bs)
      bs[1].health:set("hc.Named", "NOT_SERVING")
      bs[2].health:set("hc.Named", "NOT_SERVING")
      local c, t = client(bs, nil, { wait_for_ready = true })
      local ok, err = pcall(c.Who, c, {}, { timeout = 0.5 })
      assert.is_false(ok)
      assert.are.equal("DEADLINE_EXCEEDED", err.code, tostring(err))
      assert.are.equal("deadline exceeded while waiting for a backend's health check (no backend is SERVING "
        .. '(health check of service "hc.Named"))', err.message)
      local who
      pc.spawn(function() who = c:Who({}, { timeout = 20 }).name end)
      pc.sleep(0.3)
      assert.is_nil(who) -- still waiting
      bs[2].health:set("hc.Named", "SERVING")
      local t0 = pc.now()
      while who == nil do
        assert(pc.now() - t0 < 10, "the waiting call never ended")
        pc.sleep(0.01)
      end
      assert.are.equal("b", who)
      t:close()
    end)
  end)

  it("keeps a backend whose server ends each Watch after one SERVING answer", function()
    pc.health { pool = pool } -- loads grpc/health/v1/health.proto into the pool
    local server = pc.server({
      ["hc.Named"] = { Who = function() return { name = "once" } end },
      ["grpc.health.v1.Health"] = { Watch = function(_, ctx) ctx.send { status = "SERVING" } end },
    }, { pool = pool })
    local l = pc.listen(server, "127.0.0.1:0")
    local err
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local ok, e = pcall(function()
        local c, t = client({ { addr = "127.0.0.1:" .. l.port }, { addr = "127.0.0.1:" .. l.port } })
        assert.are.same({ once = 20 }, names(c, 20))
        t:close()
      end)
      if not ok then err = e end
      l:shutdown(0)
    end)
    pc.run()
    assert(err == nil, err)
  end)

  -- Runs `body(t, release)` as a task with backends answering Who with
  -- their name (`who_names`, default one "late" listed twice; Who taking
  -- `seconds`, default 0) whose Health/Watch sends its first answer
  -- (SERVING) only once release() was called; `t` a round_robin transport
  -- over them (`opts` more pc.grpc options) with health checking on.
  local function late_health(opts, body, who_names, seconds)
    pc.health { pool = pool } -- loads grpc/health/v1/health.proto into the pool
    local released = false
    local listeners, addrs = {}, {}
    for i, name in ipairs(who_names or { "late" }) do
      local server = pc.server({
        ["hc.Named"] = { Who = function()
          if seconds then pc.sleep(seconds) end
          return { name = name }
        end },
        ["grpc.health.v1.Health"] = { Watch = function(_, ctx)
          while not released and not ctx:cancelled() do pc.sleep(0.01) end
          ctx.send { status = "SERVING" }
          while not ctx:cancelled() do pc.sleep(0.05) end
        end },
      }, { pool = pool })
      local l = pc.listen(server, "127.0.0.1:0")
      listeners[i], addrs[i] = l, "127.0.0.1:" .. l.port
      pc.spawn(function() l:serve() end)
    end
    if #addrs == 1 then addrs[2] = addrs[1] end
    local err
    pc.spawn(function()
      local o = { load_balancing = "round_robin" }
      for k, v in pairs(opts or {}) do o[k] = v end
      local t = pc.grpc(addrs, o)
      t:set_health_check("hc.Named")
      local ok, e = xpcall(body, debug.traceback, t, function() released = true end)
      if not ok then err = e end
      released = true
      t:close()
      for _, l in ipairs(listeners) do l:shutdown(0) end
    end)
    pc.run()
    assert(err == nil, err)
  end

  it("returns a started call at once while the first health answer is pending; it goes out at SERVING", function()
    for _, opts in ipairs { {}, { wait_for_ready = true } } do
      late_health(opts, function(t, release)
        local h = t:start_unary("/hc.Named/Who", "", { timeout = 10 })
        assert.is_nil(h:result()) -- not blocked in start_unary until the answer (or the deadline)
        assert.are.equal("connecting", t:backends()[1].health)
        release()
        while h:result() == nil do t:wait({ h }, 0.05) end
        assert.are.same({ true, "\10\4late" }, { h:result() })
        assert.are.equal("SERVING", t:backends()[1].health)
      end)
    end
  end)

  it("fails a started call DEADLINE_EXCEEDED at its deadline while the first health answer is pending", function()
    late_health(nil, function(t)
      local h = t:start_unary("/hc.Named/Who", "", { timeout = 0.3 })
      assert.is_nil(h:result())
      while h:result() == nil do t:wait({ h }, 0.05) end
      local ok, err = h:result()
      assert.is_false(ok)
      assert.are.same({ "DEADLINE_EXCEEDED", "deadline exceeded while waiting for a backend's health check",
        "/hc.Named/Who" }, { err.code, err.message, err.method })
    end)
  end)

  it("sends a hedged call's next attempt to another backend than the one its first took after waiting", function()
    -- ring_hash with one key: without the hedge's `tried` every attempt
    -- would take the same backend; the first attempt waits for a health
    -- answer (wait_for_ready: also while none is SERVING) before it has one
    for _, opts in ipairs { {}, { wait_for_ready = true } } do
      late_health(opts, function(t, release)
        t:set_ring_hash()
        local tried = {} -- as call/hedge.lua keeps it for one call
        local settings = { timeout = 10, tried = tried, ring_hash = 12345 }
        local h1 = t:start_unary("/hc.Named/Who", "", settings)
        assert.is_nil(h1:result())
        release()
        local bk
        repeat -- h1:result() takes the answers and moves h1 to a backend: Who takes 0.5 s there
          assert.is_nil(h1:result())
          t:wait({ h1 }, 0.01)
          bk = t:backends()
        until bk[1].health == "SERVING" and bk[2].health == "SERVING"
        local h2 = t:start_unary("/hc.Named/Who", "", settings)
        while h1:result() == nil or h2:result() == nil do t:wait({ h1, h2 }, 0.05) end
        local one, two = select(2, h1:result()), select(2, h2:result())
        assert.are_not.equal(one, two)
      end, { "a", "b" }, 0.5)
    end
  end)

  it("clears a backend's failure backoff when its watch answers SERVING anew (READY is not in backoff)", function()
    pc.health { pool = pool } -- loads grpc/health/v1/health.proto into the pool
    local phase, entered = "SERVING", 0 -- what a's Watch says; Who calls a began
    local function a_server()
      return pc.server({
        ["hc.Named"] = { Who = function()
          entered = entered + 1
          pc.sleep(0.3)
          return { name = "a" }
        end },
        ["grpc.health.v1.Health"] = { Watch = function(_, ctx)
          local said
          while not ctx:cancelled() do
            if said ~= phase then
              said = phase
              ctx.send { status = phase }
            end
            pc.sleep(0.01)
          end
        end },
      }, { pool = pool })
    end
    local l1 = pc.listen(a_server(), "127.0.0.1:0")
    local port, l2, err = l1.port, nil, nil
    pc.spawn(function() l1:serve() end)
    local other = backend("b")
    other.health:set("hc.Named", "NOT_SERVING") -- every call goes to a
    pc.spawn(function()
      local ok, e = xpcall(function()
        local c, t = client({ { addr = "127.0.0.1:" .. port }, other })
        local first
        pc.spawn(function() first = { pcall(c.Who, c, {}) } end)
        while entered == 0 do pc.sleep(0.01) end
        l1:shutdown(0) -- the call's connection is lost under it: a is marked failed for 1 s
        phase = "NOT_SERVING"
        l2 = pc.listen(a_server(), "127.0.0.1:" .. port) -- a is back at once
        pc.spawn(function() l2:serve() end)
        while first == nil do pc.sleep(0.01) end
        assert.are.same({ false, "UNAVAILABLE", true }, { first[1], first[2].code, first[2].lost })
        assert.is_true(t:backends()[1].failed)
        local t0 = pc.now()
        while t:backends()[1].health ~= "NOT_SERVING" do -- each call's pick takes the watch's news
          assert(pc.now() - t0 < 5, "the new watch never answered")
          assert.is_false((pcall(c.Who, c, {})))
          pc.sleep(0.01)
        end
        phase = "SERVING"
        local ok1, r
        repeat -- the call whose pick takes the SERVING answer goes to a, its backoff cleared
          assert(pc.now() - t0 < 5, "the SERVING answer never arrived")
          ok1, r = pcall(c.Who, c, {})
          pc.sleep(0.01)
        until t:backends()[1].health == "SERVING"
        assert.is_true(ok1, tostring(r))
        assert.are.equal("a", r.name)
        assert.is_false(t:backends()[1].failed)
        t:close()
      end, debug.traceback)
      if not ok then err = e end
      other.listener:shutdown(0)
      if l2 then l2:shutdown(0) end
    end)
    pc.run()
    assert(err == nil, err)
  end)

  it("is off with pick_first (A17) and without healthCheckConfig", function()
    with_backends({ { "a" }, { "b" } }, function(bs)
      bs[1].health:set("hc.Named", "NOT_SERVING")
      local c, t = client(bs, { healthCheckConfig = { serviceName = "hc.Named" } })
      assert.are.same({ a = 3 }, names(c, 3))
      assert.is_nil(t:backends()[1].health)
      t:close()
      local c2, t2 = client(bs, { loadBalancingConfig = { { round_robin = {} } } })
      assert.are.same({ a = 2, b = 2 }, names(c2, 4))
      t2:close()
    end)
  end)

  it("checks healthCheckConfig in the service config", function()
    local t = pc.grpc({ "127.0.0.1:1", "127.0.0.1:2" })
    for _, case in ipairs {
      { { healthCheckConfig = "x" }, "healthCheckConfig: object expected, got string" },
      { { healthCheckConfig = { serviceName = 1 } }, "healthCheckConfig.serviceName: string expected, got number" },
      { { healthCheckConfig = { service = "x" } }, "healthCheckConfig.service: unknown field" },
    } do
      local ok, err = pcall(pc.client, "hc.Named", { pool = pool, transport = t, service_config = case[1] })
      assert.is_false(ok)
      assert.matches(case[2], tostring(err), 1, true)
    end
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() t:set_health_check(5) end)
    assert.is_false(ok)
    assert.are.equal("spec/health_check_spec.lua:" .. line
      .. ": bad argument #1 to 'set_health_check' (string or nil expected, got number)", err)
    assert.has_error(function() t:set_health_check({}) end,
      "bad argument #1 to 'set_health_check' (string or nil expected, got table)")
    t:close()
  end)
end)

describe("outlier detection (outlier_detection_experimental, gRFC A50)", function()
  -- Backend "a" fails every other call; "b" never fails.
  local function od_config(extra)
    local od = { interval = "0.2s", baseEjectionTime = "0.6s", maxEjectionPercent = 50,
      failurePercentageEjection = { threshold = 30, minimumHosts = 2, requestVolume = 4 },
      childPolicy = { { round_robin = {} } } }
    for k, v in pairs(extra or {}) do
      if v == "none" then v = nil end
      od[k] = v
    end
    return { loadBalancingConfig = { { outlier_detection_experimental = od } } }
  end

  local function flaky_backends(body)
    local n = 0
    local listeners, addrs = {}, {}
    for i, name in ipairs { "a", "b" } do
      local server = pc.server({ ["hc.Named"] = { Who = function()
        if name == "a" then
          n = n + 1
          if n % 2 == 0 then error(pc.Error { code = "INTERNAL", message = "flaky" }) end
        end
        return { name = name }
      end } }, { pool = pool })
      listeners[i] = pc.listen(server, "127.0.0.1:0")
      addrs[i] = "127.0.0.1:" .. listeners[i].port
      pc.spawn(function() listeners[i]:serve() end)
    end
    local err
    pc.spawn(function()
      local ok, e = xpcall(body, debug.traceback, addrs)
      if not ok then err = e end
      for _, l in ipairs(listeners) do l:shutdown(0) end
    end)
    pc.run()
    assert(err == nil, err)
  end

  -- Calls `n` times, counting answers by name and failures.
  local function spread(c, n)
    local count = {}
    for _ = 1, n do
      local ok, r = pcall(c.Who, c, {})
      local k = ok and r.name or "failed"
      count[k] = (count[k] or 0) + 1
    end
    return count
  end

  -- Calls on `c` until a sweep of transport `t` ejects "a" (in 5 s).
  local function until_ejected(t, c)
    local t0 = pc.now()
    while not t:backends()[1].ejected do
      spread(c, 4)
      assert(pc.now() - t0 < 5, "a was never ejected")
      pc.sleep(0.05)
    end
  end

  it("ejects a backend failing 50 % of its calls and returns it after the ejection time", function()
    flaky_backends(function(addrs)
      local t = pc.grpc(addrs)
      local c = pc.client("hc.Named", { pool = pool, transport = t, service_config = od_config(), timeout = 5 })
      until_ejected(t, c)
      assert.is_false(t:backends()[2].ejected)
      assert.are.same({ b = 10 }, spread(c, 10))
      -- back after baseEjectionTime (0.6 s), at a sweep (every 0.2 s): not before 0.6 s less the
      -- time the loop above took to see the ejection (at most one round: 4 calls and 0.05 s)
      local t0 = pc.now()
      while t:backends()[1].ejected do
        spread(c, 1)
        assert(pc.now() - t0 < 5, "a never came back")
        pc.sleep(0.05)
      end
      local out = pc.now() - t0
      assert.is_true(out >= 0.5, "a came back after " .. out .. " s, before baseEjectionTime")
      local back = spread(c, 4)
      assert.is_true((back.a or 0) + (back.failed or 0) > 0, "a takes calls again")
      t:close()
    end)
  end)

  it("ejects nobody below the request volume or the minimum of hosts", function()
    flaky_backends(function(addrs)
      local t = pc.grpc(addrs)
      local c = pc.client("hc.Named", { pool = pool, transport = t, timeout = 5, service_config = od_config {
        failurePercentageEjection = { threshold = 30, minimumHosts = 3, requestVolume = 4 } } })
      for _ = 1, 6 do
        spread(c, 4)
        pc.sleep(0.05)
      end
      assert.is_false(t:backends()[1].ejected)
      t:close()
    end)
  end)

  it("lets a wait_for_ready call wait while every backend is ejected, for one to return", function()
    -- gRPC's wait-for-ready: ejected backends are in TRANSIENT_FAILURE, where such a call waits
    local failing = true
    local listeners, addrs = {}, {}
    for i, name in ipairs { "a", "b" } do
      listeners[i] = pc.listen(pc.server({ ["hc.Named"] = { Who = function()
        if failing then error(pc.Error { code = "INTERNAL", message = "down" }) end
        return { name = name }
      end } }, { pool = pool }), "127.0.0.1:0")
      addrs[i] = "127.0.0.1:" .. listeners[i].port
      pc.spawn(function() listeners[i]:serve() end)
    end
    local t = pc.grpc(addrs, { wait_for_ready = true })
    local c = pc.client("hc.Named", { pool = pool, transport = t,
      service_config = od_config { maxEjectionPercent = 100 } })
    local err, who
    pc.spawn(function()
      local t0 = pc.now()
      repeat -- calls short enough not to wait out an ejection
        local ok, e = pcall(c.Who, c, {}, { timeout = 0.1 })
        if not ok and e.message:find("every backend is ejected", 1, true) then err = e end
        assert(pc.now() - t0 < 10, "both backends were never ejected together")
        pc.sleep(0.02)
      until err
      failing = false
      who = c:Who({}, { timeout = 20 }).name
      for _, l in ipairs(listeners) do l:shutdown(0) end
    end)
    pc.run()
    t:close()
    assert.are.same({ "DEADLINE_EXCEEDED", "deadline exceeded while every backend is ejected by outlier detection" },
      { err.code, err.message })
    assert.is_truthy(who == "a" or who == "b", tostring(who))
  end)

  it("takes set_outlier_detection's config in the transport's spelling, defaults filled, or names the field",
    function()
    flaky_backends(function(addrs)
      local t = pc.grpc(addrs, { load_balancing = "round_robin" })
      local c = pc.client("hc.Named", { pool = pool, transport = t, timeout = 5 })
      t:set_outlier_detection { interval = 0.2, base_ejection_time = 0.6, max_ejection_percent = 50,
        failure_percentage = { threshold = 30, minimum_hosts = 2, request_volume = 4 } }
      assert.are.same({ interval = 0.2, base_ejection_time = 0.6, max_ejection_time = 300, max_ejection_percent = 50,
        failure_percentage = { threshold = 30, enforcement_percentage = 100, minimum_hosts = 2, request_volume = 4 } },
        t.outlier.config)
      until_ejected(t, c)
      assert.is_false(t:backends()[2].ejected)
      t:set_outlier_detection(nil) -- off: the ejected backend returns at once
      assert.is_false(t:backends()[1].ejected)
      t:set_outlier_detection {}
      assert.are.same({ interval = 10, base_ejection_time = 30, max_ejection_time = 300, max_ejection_percent = 10 },
        t.outlier.config)
      t:set_outlier_detection { success_rate = {}, base_ejection_time = 0 } -- as an xDS cluster may say
      assert.are.same({ stdev_factor = 1900, enforcement_percentage = 100, minimum_hosts = 5, request_volume = 100 },
        t.outlier.config.success_rate)
      for _, case in ipairs {
        { 5, "table or nil expected, got number" },
        { { interval = 0 }, "interval: seconds above 0 and at most 315576000000 expected, got 0" },
        { { interval = "10s" }, "interval: seconds above 0 and at most 315576000000 expected, got string" },
        { { base_ejection_time = -1 },
          "base_ejection_time: seconds at least 0 and at most 315576000000 expected, got -1" },
        { { max_ejection_time = 0 / 0 },
          "max_ejection_time: seconds at least 0 and at most 315576000000 expected, got " },
        { { max_ejection_percent = 150 }, "max_ejection_percent: an integer in 0..100 expected, got 150" },
        { { max_ejection_percent = 5.5 }, "max_ejection_percent: an integer in 0..100 expected, got 5.5" },
        { { success_rate = true }, "success_rate: table or nil expected, got boolean" },
        { { success_rate = { minimum_hosts = -1 } },
          "success_rate.minimum_hosts: an integer in 0..4294967295 expected, got -1" },
        { { failure_percentage = { threshold = 150 } },
          "failure_percentage.threshold: an integer in 0..100 expected, got 150" },
        { { failure_percentage = { stdev_factor = 1 } }, "failure_percentage: unknown field 'stdev_factor' "
          .. "(enforcement_percentage, minimum_hosts, request_volume, threshold)" },
        { { maxEjectionPercent = 10 }, "unknown field 'maxEjectionPercent' (base_ejection_time, failure_percentage, "
          .. "interval, max_ejection_percent, max_ejection_time, success_rate)" },
      } do
        local ok, err = pcall(t.set_outlier_detection, t, case[1])
        assert.is_false(ok)
        assert.matches("set_outlier_detection: " .. case[2], tostring(err), 1, true)
      end
      assert.are.same({ stdev_factor = 1900, enforcement_percentage = 100, minimum_hosts = 5, request_volume = 100 },
        t.outlier.config.success_rate) -- a refused config leaves the last one
      t:close()
    end)
  end)

  -- the service config's durations and the detector's check share one limit,
  -- the whole value compared: what pc.client takes the transport takes
  it("takes durations up to Duration's limit and refuses past it, seconds and fraction together", function()
    flaky_backends(function(addrs)
      local t = pc.grpc(addrs)
      pc.client("hc.Named", { pool = pool, transport = t, timeout = 5,
        service_config = od_config { maxEjectionTime = "315576000000s", baseEjectionTime = "315576000000.000s" } })
      assert.are.equal(315576000000, t.outlier.config.max_ejection_time)
      assert.are.equal(315576000000, t.outlier.config.base_ejection_time)
      local ok, err = pcall(pc.client, "hc.Named", { pool = pool, transport = t, timeout = 5,
        service_config = od_config { maxEjectionTime = "315576000000.5s" } })
      assert.is_false(ok)
      assert.matches("loadBalancingConfig[0].outlier_detection_experimental.maxEjectionTime: duration of at most "
        .. "315576000000s expected, got \"315576000000.5s\"", tostring(err), 1, true)
      ok, err = pcall(t.set_outlier_detection, t, { max_ejection_time = 315576000000.5 })
      assert.is_false(ok)
      assert.matches("max_ejection_time: seconds at least 0 and at most 315576000000 expected", tostring(err), 1, true)
      t:close()
    end)
  end)

  it("ejects by success rate: below mean - stdev * stdevFactor / 1000", function()
    flaky_backends(function(addrs)
      local t = pc.grpc(addrs)
      local c = pc.client("hc.Named", { pool = pool, transport = t, timeout = 5, service_config = od_config {
        failurePercentageEjection = "none",
        successRateEjection = { stdevFactor = 500, minimumHosts = 2, requestVolume = 4 } } })
      until_ejected(t, c)
      assert.is_false(t:backends()[2].ejected)
      t:close()
    end)
  end)
end)

describe("a hedged call's attempts after a wait_for_ready wait (transport/balancer.lua)", function()
  it("go to distinct backends once the backends that refused them come up", function()
    local err
    pc.spawn(function()
      local listeners, ports, whos = {}, {}, 0
      local ok, e = xpcall(function()
        for i = 1, 2 do -- two ports with nothing listening on them yet
          local l = pc.listen(pc.server({}, { pool = pool }), "127.0.0.1:0")
          ports[i] = l.port
          l:shutdown(0)
        end
        local t = pc.grpc({ "127.0.0.1:" .. ports[1], "127.0.0.1:" .. ports[2] }, { wait_for_ready = true,
          reconnect = { initial = 0.05, maximum = 0.05, jitter = 0 } })
        t:set_ring_hash() -- one key: without the hedge's `tried` every attempt takes the same backend
        local tried = {} -- as call/hedge.lua keeps it for one call
        local settings = { timeout = 10, tried = tried, ring_hash = 12345 }
        local h1 = t:start_unary("/hc.Named/Who", "", settings)
        for _ = 1, 10 do -- refused by both: it waits, trying them again
          assert.is_nil(h1:result())
          t:wait({ h1 }, 0.02)
        end
        assert.are.same({ true, true }, { t:backends()[1].failed, t:backends()[2].failed })
        for i, name in ipairs { "a", "b" } do
          local server = pc.server({ ["hc.Named"] = { Who = function()
            whos = whos + 1
            pc.sleep(0.5)
            return { name = name }
          end } }, { pool = pool })
          listeners[i] = pc.listen(server, "127.0.0.1:" .. ports[i])
          pc.spawn(function() listeners[i]:serve() end)
        end
        repeat -- until h1 reached one (its Who takes 0.5 s there)
          assert.is_nil(h1:result())
          t:wait({ h1 }, 0.02)
        until whos == 1
        local h2 = t:start_unary("/hc.Named/Who", "", settings)
        while h1:result() == nil or h2:result() == nil do t:wait({ h1, h2 }, 0.05) end
        local ok1, one = h1:result()
        local ok2, two = h2:result()
        assert.are.same({ true, true }, { ok1, ok2 })
        assert.are_not.equal(one, two)
        t:close()
      end, debug.traceback)
      if not ok then err = e end
      for _, l in ipairs(listeners) do l:shutdown(0) end
    end)
    pc.run()
    assert(err == nil, err)
  end)
end)
