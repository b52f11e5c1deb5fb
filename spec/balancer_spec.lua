-- Several backends behind one pc.grpc target (README "Load balancing",
-- lua/protocall/transport/balancer.lua): two python3-grpcio test servers
-- (spec/grpc_server.py) on two ports, attempts counted on each server.
local pc = require "protocall"
local helper = require "grpc_helper"

assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } }))

local serial = 0
local function id()
  serial = serial + 1
  return "lb-" .. serial
end

local RETRY = { methodConfig = { { name = { { service = "faults.Faults" } }, retryPolicy = { maxAttempts = 3,
  initialBackoff = "0.01s", maxBackoff = "0.01s", backoffMultiplier = 1,
  retryableStatusCodes = { "UNAVAILABLE" } } } } }

local function addr(s) return "127.0.0.1:" .. s.port end

-- Every transport a test opens, closed after it (no connection outlives
-- its servers).
local opened = {}
local real_grpc = pc.grpc
local function grpc(...)
  local t = real_grpc(...)
  opened[#opened + 1] = t
  return t
end

describe("pc.grpc with several backends", function()
  local a, b, direct_a, direct_b
  before_each(function()
    a, b = helper.spawn("grpc", 0), helper.spawn("grpc", 0)
    direct_a = pc.client("faults.Faults", { transport = grpc(a.url) })
    direct_b = pc.client("faults.Faults", { transport = grpc(b.url) })
  end)
  after_each(function()
    for i = #opened, 1, -1 do
      opened[i]:close()
      opened[i] = nil
    end
    helper.stop(a)
    helper.stop(b)
    collectgarbage()
  end)

  -- The attempts each server counted for `key`.
  local function spread(key)
    return { direct_a:Attempts({ id = key }).attempts, direct_b:Attempts({ id = key }).attempts }
  end

  it("round_robin spreads calls evenly over the backends", function()
    local c = pc.client("faults.Faults", { transport = grpc({ addr(a), addr(b) }, { load_balancing = "round_robin" }) })
    local key = id()
    for _ = 1, 10 do c:Echo { id = key } end
    assert.are.same({ 5, 5 }, spread(key))
  end)

  it("pick_first (the default) sends every call to the first backend", function()
    local c = pc.client("faults.Faults", { transport = grpc("ipv4:" .. addr(a) .. "," .. addr(b)) })
    local key = id()
    for _ = 1, 10 do c:Echo { id = key } end
    assert.are.same({ 10, 0 }, spread(key))
  end)

  it("takes the policy from the service config's loadBalancingConfig", function()
    local sc = { loadBalancingConfig = { { grpclb = {} }, { round_robin = {} } } }
    local c = pc.client("faults.Faults", { transport = grpc({ addr(a), addr(b) }), service_config = sc })
    local key = id()
    for _ = 1, 6 do c:Echo { id = key } end
    assert.are.same({ 3, 3 }, spread(key))
  end)

  it("skips a backend that is down: retried calls land on the other, none fails", function()
    local port_a = addr(a)
    helper.stop(a)
    local t = grpc({ port_a, addr(b) }, { load_balancing = "round_robin" })
    local c = pc.client("faults.Faults", { transport = t, service_config = RETRY })
    local key = id()
    for _ = 1, 6 do c:Echo { id = key } end
    assert.are.equal(6, direct_b:Attempts({ id = key }).attempts)
    local state = t:backends()
    assert.is_true(state[1].failed)
    assert.is_false(state[2].failed)
    -- pick_first moves past it at once, with no retry policy: the first
    -- call never left this client, so it goes on to the next address
    local p = pc.client("faults.Faults", { transport = grpc({ port_a, addr(b) }) })
    for _ = 1, 3 do p:Echo { id = key } end
    assert.are.equal(9, direct_b:Attempts({ id = key }).attempts)
  end)

  it("with wait_for_ready, still moves a call whose backend refuses the connection to the next one", function()
    local port_a = addr(a)
    helper.stop(a)
    -- wait-for-ready waits for a connection of the target, not of one
    -- backend: the refused backend's attempt fails the call there, and the
    -- balancer takes it to b long before its deadline
    local c = pc.client("faults.Faults", { transport = grpc({ port_a, addr(b) }, { wait_for_ready = true }) })
    local key = id()
    local t0 = helper.now()
    for _ = 1, 3 do assert.are.equal("x", c:Echo({ text = "x", id = key }, { timeout = 20 }).text) end
    assert.is_true(helper.now() - t0 < 10, "waited " .. (helper.now() - t0) .. " s")
    assert.are.equal(3, direct_b:Attempts({ id = key }).attempts)
  end)

  it("moves a call whose backend refuses the connection to the next one, no retry policy", function()
    local port_a = addr(a)
    helper.stop(a)
    -- hedged calls run as started calls; no status is non-fatal, so the
    -- first attempt's own move is what saves it
    local hedged = { methodConfig = { { name = { { service = "faults.Faults" } },
      hedgingPolicy = { maxAttempts = 2, hedgingDelay = "30s", nonFatalStatusCodes = {} } } } }
    for _, policy in ipairs { "pick_first", "round_robin" } do
      local key = id()
      local function client(sc)
        return pc.client("faults.Faults", { transport = grpc({ port_a, addr(b) }, { load_balancing = policy }),
          service_config = sc })
      end
      assert.are.equal("one", client():Echo({ id = key, text = "one" }).text)
      local n = 0
      for r in client():Stream { id = key, count = 2 } do n = n + r.index end
      assert.are.equal(3, n)
      assert.are.equal("two", client(hedged):Echo({ id = key, text = "two" }).text)
      assert.are.equal(3, direct_b:Attempts({ id = key }).attempts, policy)
    end
  end)

  it("fails UNAVAILABLE naming the last address when every backend refuses", function()
    local port_a, port_b = addr(a), addr(b)
    helper.stop(a)
    helper.stop(b)
    local c = pc.client("faults.Faults", { transport = grpc({ port_a, port_b }) })
    local ok, err = pcall(c.Echo, c, { id = id() })
    assert.is_false(ok)
    assert.are.equal("UNAVAILABLE", err.code)
    assert.matches("connect to 127.0.0.1:" .. port_b:match(":(%d+)$"), err.message, 1, true)
  end)

  it("keeps calls with a retry policy succeeding when a backend is killed mid-run", function()
    local c = pc.client("faults.Faults", { transport = grpc({ addr(a), addr(b) }, { load_balancing = "round_robin" }),
      service_config = RETRY })
    local key = id()
    for _ = 1, 4 do c:Echo { id = key } end
    assert.are.same({ 2, 2 }, spread(key))
    helper.stop(a)
    for _ = 1, 6 do c:Echo { id = key } end
    assert.are.equal(8, direct_b:Attempts({ id = key }).attempts)
  end)

  it("sends a hedge to another backend: one slow backend, the fast one's speed", function()
    local c = pc.client("faults.Faults", { transport = grpc({ addr(a), addr(b) }), service_config = {
      methodConfig = { { name = { { service = "faults.Faults" } },
        hedgingPolicy = { maxAttempts = 2, hedgingDelay = "0.2s", nonFatalStatusCodes = { "UNAVAILABLE" } } } } } })
    local key = id()
    local t0 = helper.now()
    -- every attempt on a is slow (pick_first would send both there)
    local r = c:Hedge { id = key, failures = 5, seconds = 5, text = tostring(a.port) }
    local took = helper.now() - t0
    assert.is_true(took < 2, "took " .. took)
    assert.are.equal("1", r.text)
    assert.are.same({ 1, 1 }, spread(key))
  end)

  -- 100 Hedge calls through `sc`/`opts`, one started every 15 ms, each in its own task
  -- (an open loop: calls pile up where they are slow): every call on a waits 0.3 s, on
  -- b and c answers at once; the calls each server counted, and a's most calls in flight.
  local function slow_a(c3, opts, sc)
    local t = grpc({ addr(a), addr(b), addr(c3) }, opts)
    local c = pc.client("faults.Faults", { transport = t, service_config = sc })
    local key, done, peak = id(), 0, 0
    pc.spawn(function()
      for _ = 1, 100 do
        pc.spawn(function()
          c:Hedge { id = key, failures = 1000000, seconds = 0.3, text = tostring(a.port) }
          done = done + 1
        end)
        pc.sleep(0.015)
        peak = math.max(peak, t:backends()[1].outstanding)
      end
    end)
    pc.run()
    assert.are.equal(100, done)
    local direct_c = pc.client("faults.Faults", { transport = grpc(c3.url) })
    local got = spread(key)
    got[3] = direct_c:Attempts({ id = key }).attempts
    local bk = t:backends()
    for _, e in ipairs(bk) do assert.are.equal(0, e.outstanding, e.address) end
    assert.are.equal(0, bk.calls.outstanding)
    return got, peak
  end

  it("least_request sends fewer calls to a slow backend than round_robin (gRFC A48)", function()
    local c3 = helper.spawn("grpc", 0)
    local ok, err = pcall(function()
      local rr, rr_peak = slow_a(c3, { load_balancing = "round_robin" })
      local lr, lr_peak = slow_a(c3, nil,
        { loadBalancingConfig = { { least_request_experimental = { choiceCount = 2 } } } })
      print(string.format("\n# 100 calls, one every 15 ms, backend a slow (0.3 s), b and c fast: round_robin "
        .. "a/b/c %d/%d/%d (a's calls in flight peaked at %d), least_request (choiceCount 2) %d/%d/%d (peak %d)",
        rr[1], rr[2], rr[3], rr_peak, lr[1], lr[2], lr[3], lr_peak))
      assert.are.equal(100, rr[1] + rr[2] + rr[3])
      assert.are.equal(100, lr[1] + lr[2] + lr[3])
      assert.is_true(rr[1] >= 33, "round_robin sent a " .. rr[1])
      -- two draws with replacement among three: a still takes the 1/9 of picks that draw it twice
      assert.is_true(lr[1] <= 22, "least_request sent a " .. lr[1])
      -- the option names the same policy
      local t = grpc({ addr(a), addr(b) }, { load_balancing = "least_request" })
      assert.are.equal("x", pc.client("faults.Faults", { transport = t }):Echo({ text = "x" }).text)
      local e = select(2, pcall(t.set_load_balancing, t, "least_request", { choice_count = 1 }))
      assert.matches("choice_count: an integer of at least 2 expected, got 1", e)
    end)
    helper.stop(c3)
    assert(ok, err)
  end)

  it("counts streams in flight until they end, and one left unread until it is closed", function()
    local t = grpc({ addr(a), addr(b) }, { load_balancing = "least_request" })
    local c = pc.client("faults.Faults", { transport = t })
    local function flight()
      local bk = t:backends()
      return bk[1].outstanding + bk[2].outstanding, bk.calls.outstanding
    end
    local rec = c:Record()
    rec:send { text = "a" }
    assert.are.same({ 1, 1 }, { flight() })
    assert.are.equal("a", rec:close_and_recv().text)
    assert.are.same({ 0, 0 }, { flight() })
    local n = 0
    for r in c:Stream { count = 3 } do n = n + r.index end
    assert.are.equal(6, n)
    assert.are.same({ 0, 0 }, { flight() })
    -- a server stream read in part and left: counted until its call is closed
    -- (4 MB of replies, more than the stream's receive window: its status
    -- cannot arrive while the first reply is unread, which would end it)
    local three = pc.encode(pc.type("faults.Request") { count = 3 })
    local big = pc.encode(pc.type("faults.Request") { count = 40, size = 100000 })
    local iter, _, _, call = t:server_stream("/faults.Faults/Stream", big)
    assert.is_not_nil(iter())
    os.execute("sleep 0.3")
    assert.are.same({ 1, 1 }, { flight() })
    call:close()
    assert.are.same({ 0, 0 }, { flight() })
    if not jit then -- Lua 5.4: a generic for left by break closes the call (its 4th value), counts back to 0
      for _ in t:server_stream("/faults.Faults/Stream", three) do break end -- luacheck: ignore 512
      assert.are.same({ 0, 0 }, { flight() })
    end
    -- started calls (hedging's) count until their result
    local h = t:start_unary("/faults.Faults/Echo", pc.encode(pc.type("faults.Request") { text = "x" }))
    assert.are.same({ 1, 1 }, { flight() })
    while h:result() == nil do t:wait({ h }, 0.05) end
    assert.are.same({ 0, 0 }, { flight() })
  end)

  it("gives a started call's result again on a later handle:result(), reported and counted once", function()
    local t = grpc({ addr(a), addr(b) }, { load_balancing = "round_robin" })
    local function flight()
      local bk = t:backends()
      return bk[1].outstanding, bk[2].outstanding
    end
    local h = t:start_unary("/faults.Faults/Echo", pc.encode(pc.type("faults.Request") { text = "x" }))
    while h:result() == nil do t:wait({ h }, 0.05) end
    local ok, bytes = h:result()
    assert.is_true(ok)
    assert.are.equal("x", pc.decode(pc.type("faults.Reply"), bytes).text)
    assert.are.same({ true, bytes }, { h:result() })
    local s = t:start_server_stream("/faults.Faults/Stream", pc.encode(pc.type("faults.Request") { count = 3 }))
    while s:result() == nil do t:wait({ s }, 0.05) end
    local ok2, iter, call = s:result()
    assert.is_true(ok2)
    local again = { s:result() }
    assert.is_true(again[1])
    assert.is_true(rawequal(iter, again[2]) and rawequal(call, again[3]))
    local n = 0
    for _ in iter do n = n + 1 end
    assert.are.equal(3, n)
    assert.are.same({ 0, 0 }, { flight() })
  end)

  it("fails calls past set_circuit_breaker's max_requests UNAVAILABLE at once, counted (gRFC A32)", function()
    local t = grpc({ addr(a), addr(b) }, { load_balancing = "round_robin" })
    t:set_circuit_breaker(2, "two backends")
    local c = pc.client("faults.Faults", { transport = t, service_config = RETRY })
    local key, codes = id(), {}
    for i = 1, 4 do
      pc.spawn(function()
        local ok, e = pcall(c.Sleep, c, { id = key, seconds = 0.3 })
        codes[i] = ok and "OK" or tostring(e.code) .. " " .. tostring(e.message or e)
      end)
    end
    pc.spawn(function()
      pc.sleep(0.1)
      local bk = t:backends()
      assert.are.same({ outstanding = 2, max_requests = 2, dropped = 2 }, bk.calls)
      assert.are.same({ 1, 1 }, { bk[1].outstanding, bk[2].outstanding })
    end)
    pc.run()
    table.sort(codes)
    assert.are.same({ "OK", "OK", "UNAVAILABLE two backends: circuit breaker drop: 2 calls in flight, max_requests 2",
      "UNAVAILABLE two backends: circuit breaker drop: 2 calls in flight, max_requests 2" }, codes)
    assert.are.same({ 1, 1 }, spread(key)) -- the drops reached no server and were not retried
    assert.are.equal("x", c:Echo({ text = "x" }).text)
    t:set_circuit_breaker(nil)
    assert.are.same({ outstanding = 0, dropped = 2 }, t:backends().calls)
  end)

  -- A started call's pc.grpc handle on its backend, pumped until it ended.
  local function ended(t, h)
    while h.inner:result() == nil do t:wait({ h }, 0.05) end
    return select(2, h.inner:result())
  end

  it("marks a refused backend failed though another call's new attempt is opening meanwhile", function()
    local port_a = addr(a)
    helper.stop(a)
    -- pick_first: every call goes to a until it is marked failed
    local t = grpc({ port_a, addr(b) }, { reconnect = { initial = 0.01, maximum = 0.01, jitter = 0 } })
    local echo = pc.encode(pc.type("faults.Request") { text = "x" })
    local h1 = t:start_unary("/faults.Faults/Echo", echo, { timeout = 10 })
    local err = ended(t, h1)
    assert.are.same({ "UNAVAILABLE", true }, { err.code, err.unsent })
    assert.is_nil(err.peer) -- this side's failure
    pc.sleep(0.05) -- past the reconnection backoff
    -- h1's failure not taken yet: a is not marked, so h2 goes there too and
    -- opens a new connection attempt (the channel "connected": opening)
    local h2 = t:start_unary("/faults.Faults/Echo", echo, { timeout = 10 })
    assert.is_false(t:backends()[1].failed)
    while h1:result() == nil do t:wait({ h1 }, 0.05) end -- moved on to b
    assert.is_true(t:backends()[1].failed)
    assert.is_false(t:backends()[2].failed)
    local ok, bytes = h1:result()
    assert.is_true(ok)
    assert.are.equal("x", pc.decode(pc.type("faults.Reply"), bytes).text)
    while h2:result() == nil do t:wait({ h2 }, 0.05) end
    assert.is_true((h2:result()))
  end)

  it("marks a backend failed whose connection was lost under a call though a new one is opening", function()
    local t = grpc({ addr(a), addr(b) }, { reconnect = { initial = 0.01, maximum = 0.01, jitter = 0 } })
    local req = pc.encode(pc.type("faults.Request") { seconds = 5 })
    local h1 = t:start_unary("/faults.Faults/Sleep", req, { timeout = 10 })
    for _ = 1, 10 do t:wait({ h1 }, 0.05) end -- connected, the call sent
    assert.is_nil((h1.inner:result()))
    helper.stop(a)
    local err = ended(t, h1)
    assert.are.same({ "UNAVAILABLE", true }, { err.code, err.lost })
    assert.is_nil(err.unsent) -- it had reached a: not moved, not sent again
    assert.is_nil(err.peer)
    local h2 = t:start_unary("/faults.Faults/Sleep", req, { timeout = 10 }) -- a new attempt to a
    assert.is_false(t:backends()[1].failed)
    assert.are.equal(err, select(2, h1:result()))
    assert.is_true(t:backends()[1].failed)
    h2:cancel()
  end)

  it("marks a backend failed whose connection was lost under a started server stream after its first reply", function()
    -- pick_first: the stream goes to a; its replies outrun the flow-control window, so it is still open
    local t = grpc({ addr(a), addr(b) })
    local req = pc.encode(pc.type("faults.Request") { count = 1000, size = 65536 })
    local h = t:start_server_stream("/faults.Faults/Stream", req, { timeout = 10 })
    while h:result() == nil do t:wait({ h }, 0.05) end
    local ok, iter = h:result()
    assert.is_true(ok)
    assert.is_not_nil(iter())
    assert.is_false(t:backends()[1].failed)
    helper.stop(a)
    local okn, err
    repeat okn, err = pcall(iter) until not okn or err == nil
    assert.is_false(okn)
    assert.are.same({ "UNAVAILABLE", true }, { err.code, err.lost })
    assert.is_true(t:backends()[1].failed)
    assert.is_false(t:backends()[2].failed)
  end)

  it("spreads a hedge with more attempts than backends over them in turn (round_robin)", function()
    local t = grpc({ addr(a), addr(b) }, { load_balancing = "round_robin" })
    local c = pc.client("faults.Faults", { transport = t, timeout = 1, service_config = { methodConfig = { {
      name = { { service = "faults.Faults" } }, hedgingPolicy = { maxAttempts = 5, hedgingDelay = "0.05s" } } } } })
    local key = id()
    -- each backend's first 5 attempts wait 5 s: every hedge is sent before the deadline
    local err = helper.failure(c.Hedge, c, { id = key, failures = 5, seconds = 5 })
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
    assert.are.same({ 3, 2 }, spread(key))
  end)

  it("marks nothing for an UNAVAILABLE the server sent (neither unsent nor lost)", function()
    local t = grpc({ addr(a), addr(b) })
    local c = pc.client("faults.Faults", { transport = t })
    local ok, err = pcall(c.FailThenSucceed, c, { id = id(), failures = 1, code = "UNAVAILABLE" })
    assert.is_false(ok)
    assert.are.same({ "UNAVAILABLE", "failure 1 of 1" }, { err.code, err.message })
    assert.is_nil(err.unsent)
    assert.is_nil(err.lost)
    assert.is_true(err.peer) -- the server's status, as a gateway passes it on
    assert.is_false(t:backends()[1].failed)
  end)

  it("takes a Connect end-of-stream read before the connection failed for no status of the server's", function()
    local noend = helper.spawn("connect_noend", 0)
    finally(function() helper.stop(noend) end)
    local t = pc.grpc("http://127.0.0.1:" .. noend.port, { protocol = "connect" })
    local ok, err = pcall(function()
      for _ in t:server_stream("/faults.Faults/Stream", "", { timeout = 5 }) do end -- luacheck: ignore 512
    end)
    assert.is_false(ok)
    assert.are.same({ "UNAVAILABLE", true }, { err.code, err.lost })
    assert.is_nil(err.peer) -- the connection's failure, which replaced it
  end)

  it("resolves a dns:/// name: every address a backend (here one: a plain transport)", function()
    local c = pc.client("faults.Faults",
      { transport = grpc("dns:///localhost:" .. a.port, { load_balancing = "round_robin" }) })
    assert.are.equal("x", c:Echo({ text = "x" }).text)
  end)
end)

describe("transport/least_request.lua's counts", function()
  it("counts a call again when it moves after a recount let its first attempt go", function()
    local lr = require "protocall.transport.least_request"
    local b1, b2 = {}, {}
    local bal = { members = { b1, b2 } }
    local tok = lr.start(bal, b1)
    lr.watch(tok, { done = true }) -- the first attempt's call has ended (failed unsent)
    lr.recount(bal)
    assert.are.same({ 0, 0, 0 }, { bal.outstanding, b1.outstanding, b2.outstanding })
    lr.move(tok, b2) -- the call goes on on b2: it counts there
    assert.are.same({ 1, 0, 1 }, { bal.outstanding, b1.outstanding, b2.outstanding })
    lr.finish(tok)
    assert.are.same({ 0, 0, 0 }, { bal.outstanding, b1.outstanding, b2.outstanding })
  end)
end)

describe("pc.grpc several-backend targets", function()
  it("refuses bad lists with the address named", function()
    local function refusal(target, opts)
      local ok, err = pcall(pc.grpc, target, opts)
      assert.is_false(ok)
      return (tostring(err):gsub("^[^:]*:%d+: ", ""))
    end
    assert.are.equal("pc.grpc: target '{...}': list of at least one address expected", refusal({}))
    assert.are.equal("pc.grpc: target '{...}': address 2: string expected, got number", refusal({ "a:1", 5 }))
    assert.are.equal("pc.grpc: target 'ipv4:127.0.0.1:1,127.0.0.1': address 2 '127.0.0.1': "
      .. "h2c needs a port (http://host:port)", refusal("ipv4:127.0.0.1:1,127.0.0.1"))
    assert.are.equal("pc.grpc: target '{...}': every address must use the same scheme (TLS or not)",
      refusal({ "a:1", "https://b:2" }))
    assert.are.equal("pc.grpc: option 'load_balancing' must be \"pick_first\", \"round_robin\" or "
      .. "\"least_request\", got \"random\"",
      refusal({ "a:1", "b:2" }, { load_balancing = "random" }))
    -- (not the balancer's, but pc.grpc's own option checks alike)
    assert.are.equal("pc.grpc: option 'protocol' must be \"grpc\", \"grpc-web\", \"grpc-web-text\" or "
      .. "\"connect\", got \"grpcweb\"",
      refusal("a:1", { protocol = "grpcweb" }))
    assert.are.equal("pc.grpc: option 'codec' must be \"proto\" or \"json\", got \"xml\"",
      refusal("a:1", { protocol = "connect", codec = "xml" }))
    assert.are.equal("pc.grpc: option 'codec' \"json\" needs protocol \"grpc-web\", \"grpc-web-text\" or \"connect\"",
      refusal("a:1", { codec = "json" }))
  end)

  it("raises a call's misuse at the caller's line as one backend's transport does, no backend blamed", function()
    local t = grpc({ "127.0.0.1:1", "127.0.0.1:2" }, { wait_for_ready = true })
    local function raises_at(line, fn, msg)
      local ok, e = pcall(fn)
      assert.is_false(ok)
      assert.are.equal("spec/balancer_spec.lua:" .. line .. ": " .. msg, e)
    end
    local line = debug.getinfo(1, "l").currentline
    raises_at(line + 1, function() t:unary("/a.B/C", "", { timeout = "x" }) end,
      "bad argument #3 to 'unary' (timeout: number of seconds or nil expected, got string)")
    raises_at(line + 3, function() t:server_stream("/a.B/C", "", { timeout = "x" }) end,
      "bad argument #3 to 'server_stream' (timeout: number of seconds or nil expected, got string)")
    raises_at(line + 5, function() t:unary("/a.B/C", "", { with_metadata = "yes" }) end,
      [[bad argument #3 to 'unary' (with_metadata: true, false or "present" expected, got string "yes")]])
    raises_at(line + 7, function() t:start_unary("/a.B/C", "", { ring_hash = -1 }) end,
      "bad argument #3 to 'start_unary' (ring_hash: a number in [0, 2^64) expected, got -1)")
    raises_at(line + 9, function() t:start_server_stream("/a.B/C", 5) end,
      "bad argument #2 to 'start_server_stream' (string expected, got number)")
    raises_at(line + 11, function() t:stream("/a.B/C", { bogus = 1 }) end,
      "bad argument #2 to 'stream' (unknown setting 'bogus')")
    raises_at(line + 13, function() t:unary("a.B/C", "") end,
      "bad argument #1 to 'unary' (method path 'a.B/C': expected /package.Service/Method)")
    for _, b in ipairs(t:backends()) do assert.is_false(b.failed, b.address) end
  end)

  -- a second check_call cost ~7,000 of ~73,000 instructions of a call (doc/performance.md)
  it("checks a call's settings once, not again in the backend's transport", function()
    local internal = require "protocall.internal"
    local real, n = internal.attempt_problem, 0
    internal.attempt_problem = function(...)
      n = n + 1
      return real(...)
    end
    local t = grpc({ "127.0.0.1:1", "127.0.0.1:2" })
    local ok, e = pcall(t.unary, t, "/a.B/C", "", { metadata = { { "x-k", "v" } }, timeout = 5 })
    local ok2, e2 = pcall(t.unary, t, "/a.B/C", "", { metadata = { { "x-k", "v" } } })
    internal.attempt_problem = real
    assert.is_false(ok)
    assert.are.equal("UNAVAILABLE", e.code) -- both backends tried (the second with the time left)
    assert.is_false(ok2)
    assert.are.equal("UNAVAILABLE", e2.code)
    assert.are.equal(2, n) -- before: 5 (the balancer's, then each backend's)
  end)
end)
