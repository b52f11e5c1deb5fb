-- dns: targets resolved without blocking (transport/dns.lua, c-ares in
-- core/net/resolve.h) against spec/dns_server.py, a DNS server of a few
-- lines whose zone a spec rewrites; the backends are pc.listen servers of
-- the same pc.run loop, each answering with its own name.
local pc = require "protocall"
local helper = require "grpc_helper"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package dnst;
message Name { string name = 1; }
service Echo { rpc Who(Name) returns (Name); }
]], { name = "dnst/who.proto" }))

local zone_file = os.tmpname()

-- Writes the zone spec/dns_server.py answers from (its JSON, by hand), or
-- to file `path`.
local function zone(z, path)
  local parts = {}
  for name, e in pairs(z) do
    local fields = { '"ttl": ' .. (e.ttl or 300) }
    if e.delay then fields[#fields + 1] = '"delay": ' .. e.delay end
    for _, kind in ipairs { "A", "AAAA" } do
      if e[kind] then fields[#fields + 1] = '"' .. kind .. '": ["' .. table.concat(e[kind], '", "') .. '"]' end
    end
    if e.SRV then
      local rs = {}
      for i, r in ipairs(e.SRV) do rs[i] = string.format('[%d, %d, %d, "%s"]', r[1], r[2], r[3], r[4]) end
      fields[#fields + 1] = '"SRV": [' .. table.concat(rs, ", ") .. "]"
    end
    parts[#parts + 1] = '"' .. name .. '": {' .. table.concat(fields, ", ") .. "}"
  end
  local f = assert(io.open(path or zone_file, "w"))
  f:write("{" .. table.concat(parts, ", ") .. "}")
  f:close()
end

local dns, server

-- A listener on `address` ("IP:PORT") whose Who answers `name`.
local function backend(address, name)
  local srv = pc.server({ ["dnst.Echo"] = { Who = function() return { name = name } end } }, { pool = pool })
  return pc.listen(srv, address)
end

-- Runs `fn()` as a task beside the serve tasks of `listeners`, then shuts
-- them down; errors of `fn` are raised.
local function serving(listeners, fn)
  local err
  for _, l in ipairs(listeners) do pc.spawn(function() l:serve() end) end
  pc.spawn(function()
    local ok, e = pcall(fn)
    if not ok then err = e end
    for _, l in ipairs(listeners) do l:shutdown(1) end
  end)
  pc.run()
  if err then error(err, 0) end
end

local function client(target, opts)
  opts = opts or {}
  if opts.dns_server == nil then opts.dns_server = server end
  local t = pc.grpc(target, opts)
  return pc.client("dnst.Echo", { transport = t, pool = pool }), t
end

-- Two listeners on 127.0.0.2 and 127.0.0.3, one port.
local function pair()
  local b2 = backend("127.0.0.2:0", "b2")
  local b3 = backend("127.0.0.3:" .. b2.port, "b3")
  return b2, b3
end

describe("dns: targets", function()
  setup(function()
    zone {}
    dns = helper.spawn_command("/usr/bin/python3 spec/dns_server.py " .. zone_file, "dns_server.py")
    server = "127.0.0.1:" .. dns.port
  end)
  teardown(function()
    helper.stop(dns)
    os.remove(zone_file)
  end)
  after_each(function() collectgarbage() end)

  it("makes every A record a backend", function()
    local b2, b3 = pair()
    zone { ["svc.test"] = { A = { "127.0.0.2", "127.0.0.3" } } }
    serving({ b2, b3 }, function()
      local c, t = client("dns:///svc.test:" .. b2.port, { load_balancing = "round_robin" })
      local seen = {}
      for _ = 1, 10 do
        local name = c:Who({}).name
        seen[name] = (seen[name] or 0) + 1
      end
      assert.are.same({ b2 = 5, b3 = 5 }, seen)
      local addresses = {}
      for i, b in ipairs(t:backends()) do addresses[i] = b.address end
      table.sort(addresses)
      assert.are.same({ "127.0.0.2:" .. b2.port, "127.0.0.3:" .. b2.port }, addresses)
      t:close()
    end)
  end)

  it("asks the DNS server of the target's authority (dns://IP:PORT/name:port)", function()
    local b2, b3 = pair()
    zone { ["auth.test"] = { A = { "127.0.0.3" } } }
    serving({ b2, b3 }, function()
      local t = pc.grpc("dns://" .. server .. "/auth.test:" .. b2.port)
      local c = pc.client("dnst.Echo", { transport = t, pool = pool })
      assert.are.equal("b3", c:Who({}).name)
      t:close()
    end)
  end)

  it("picks up a new record when the TTL has passed, failing no call", function()
    local b2, b3 = pair()
    zone { ["ttl.test"] = { ttl = 1, A = { "127.0.0.2" } } }
    serving({ b2, b3 }, function()
      local c, t = client("dns:///ttl.test:" .. b2.port, { dns_min_interval = 0.2 })
      assert.are.equal("b2", c:Who({}).name)
      zone { ["ttl.test"] = { ttl = 1, A = { "127.0.0.3" } } }
      local calls, moved = 0, false
      while not moved and calls < 100 do -- 5 s
        calls = calls + 1
        moved = c:Who({}).name == "b3"
        if not moved then pc.sleep(0.05) end
      end
      assert.is_true(moved, "still on b2 after " .. calls .. " calls")
      assert.is_true(calls > 2, "moved before the TTL") -- 1 s TTL, 0.05 s apart
      assert.are.same({ { address = "127.0.0.3:" .. b2.port, failed = false, weight = 1, ejected = false,
        outstanding = 0 }, calls = { outstanding = 0, dropped = 0 } }, t:backends())
      t:close()
    end)
  end)

  it("asks again before the TTL when a backend says GOAWAY and leaves", function()
    local b2, b3 = pair()
    zone { ["bye.test"] = { A = { "127.0.0.2" } } } -- TTL 300 s
    serving({ b2, b3 }, function()
      local c, t = client("dns:///bye.test:" .. b2.port, { dns_min_interval = 0.2 })
      assert.are.equal("b2", c:Who({}).name)
      zone { ["bye.test"] = { A = { "127.0.0.3" } } }
      b2:shutdown(1) -- GOAWAY, then closed
      local calls, name = 0, nil
      while name ~= "b3" and calls < 60 do -- 3 s
        calls = calls + 1
        local ok, r = pcall(c.Who, c, {})
        name = ok and r.name or nil
        if name ~= "b3" then pc.sleep(0.05) end
      end
      assert.are.equal("b3", name)
      t:close()
    end)
  end)

  it("honours SRV weights in the lowest priority group", function()
    local a, b, c3 = backend("127.0.0.1:0", "a"), backend("127.0.0.1:0", "b"), backend("127.0.0.1:0", "c")
    zone {
      ["_grpc._tcp.srv.test"] = { SRV = { { 10, 3, a.port, "a.test" }, { 10, 1, b.port, "b.test" },
        { 20, 1, c3.port, "c.test" } } },
      ["a.test"] = { A = { "127.0.0.1" } }, ["b.test"] = { A = { "127.0.0.1" } },
      ["c.test"] = { A = { "127.0.0.1" } },
    }
    serving({ a, b, c3 }, function()
      local c, t = client("dns:///_grpc._tcp.srv.test")
      local seen = { a = 0, b = 0 }
      for _ = 1, 400 do
        local name = c:Who({}).name
        seen[name] = (seen[name] or 0) + 1
      end
      -- 3:1 within 5 % of the calls; priority 20 (c) unused
      assert.is_true(math.abs(seen.a - 300) <= 20 and math.abs(seen.b - 100) <= 20,
        "a " .. seen.a .. ", b " .. seen.b)
      assert.is_nil(seen.c)
      local weights = {}
      for _, e in ipairs(t:backends()) do weights[e.address] = e.weight end
      assert.are.same({ ["127.0.0.1:" .. a.port] = 3, ["127.0.0.1:" .. b.port] = 1 }, weights)
      t:close()
    end)
  end)

  it("does not block the loop while a DNS answer is slow", function()
    local b2, b3 = pair()
    local direct = backend("127.0.0.1:0", "direct")
    zone { ["slow.test"] = { delay = 1, A = { "127.0.0.3" } } }
    serving({ b2, b3, direct }, function()
      local slow = client("dns:///slow.test:" .. b2.port)
      local fast = client("127.0.0.1:" .. direct.port)
      local done, during, answer = false, 0, nil
      pc.spawn(function()
        answer = slow:Who({}).name
        done = true
      end)
      while not done do
        assert.are.equal("direct", fast:Who({}).name)
        during = during + 1
      end
      assert.are.equal("b3", answer)
      -- a call takes well under a millisecond here; the answer took 1 s
      assert.is_true(during >= 20, "only " .. during .. " calls while the name resolved")
    end)
  end)

  it("ends a call whose deadline passes while its name resolves DEADLINE_EXCEEDED", function()
    zone { ["late.test"] = { delay = 1, A = { "127.0.0.1" } } }
    serving({}, function()
      local c = client("dns:///late.test:1")
      local err = helper.status_error(c.Who, c, {}, { timeout = 0.2 })
      assert.are.same({ "DEADLINE_EXCEEDED", "deadline exceeded while resolving late.test" },
        { err.code, err.message })
    end)
  end)

  it("lists the resolver's socket in pc.poll_fds, for a host's own loop", function()
    local l = backend("127.0.0.1:0", "h")
    zone { ["host.test"] = { delay = 0.3, A = { "127.0.0.1" } } }
    local c = client("dns:///host.test:" .. l.port)
    local name
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      name = c:Who({}).name
      l:shutdown(0)
    end)
    local left = pc.step(0)
    -- the answer comes in 0.3 s: the listener's socket and the resolver's
    local fds, timeout = pc.poll_fds()
    assert.are.equal(2, #fds)
    assert.is_true(timeout == nil or timeout > 0)
    while left > 0 do left = pc.step(0.01) end
    assert.are.equal("h", name)
  end)

  it("fails a name that does not resolve UNAVAILABLE, naming it, in a task or outside", function()
    zone {}
    local c = client("dns:///nope.test:50051")
    local err = helper.status_error(c.Who, c, {}) -- outside: the call pumps the resolver itself
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("resolve nope.test: Domain name not found", err.message)
    serving({}, function()
      c = client("dns:///nope.test:50051")
      err = helper.status_error(c.Who, c, {})
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("resolve nope.test: Domain name not found", err.message)
      local t = pc.grpc("dns:///nope.test:50051", { dns_server = server })
      local ok, e = t:start_unary("/dnst.Echo/Who", ""):result() -- a started call (hedging's) too
      assert.is_false(ok)
      assert.are.same({ "UNAVAILABLE", "resolve nope.test: Domain name not found", "/dnst.Echo/Who" },
        { e.code, e.message, e.method })
      t:close()
    end)
  end)

  -- wait_for_ready (gRPC's wait-for-ready) through the balancer of a dns:
  -- target: no backend connects, or the name does not resolve yet.
  local WAIT = { wait_for_ready = true, dns_min_interval = 0.2, reconnect = { initial = 0.1, jitter = 0 } }

  -- A port nothing listens on, on 127.0.0.2 (and on 127.0.0.3 with it).
  local function quiet_port()
    local l = backend("127.0.0.2:0", "none")
    local port = l.port
    l:shutdown()
    return port
  end

  it("with wait_for_ready, waits while every address refuses, for the one that comes up", function()
    local port = quiet_port()
    zone { ["down.test"] = { A = { "127.0.0.2", "127.0.0.3" } } }
    serving({}, function()
      local c, t = client("dns:///down.test:" .. port, WAIT)
      local late, done
      pc.spawn(function()
        pc.sleep(0.5)
        if done then return end -- the call did not wait
        late = backend("127.0.0.3:" .. port, "b3")
        late:serve()
      end)
      local ok, r = pcall(c.Who, c, {}, { timeout = 20 })
      done = true
      if late then late:shutdown(0) end
      t:close()
      assert.is_true(ok, tostring(r))
      assert.are.equal("b3", r.name)
    end)
  end)

  it("with wait_for_ready, waits for a name that does not resolve yet, asking again", function()
    local b2 = backend("127.0.0.2:0", "b2")
    zone {}
    serving({ b2 }, function()
      local c, t = client("dns:///soon.test:" .. b2.port, WAIT)
      pc.spawn(function()
        pc.sleep(0.5)
        zone { ["soon.test"] = { A = { "127.0.0.2" } } }
      end)
      local ok, r = pcall(c.Who, c, {}, { timeout = 20 })
      t:close()
      assert.is_true(ok, tostring(r))
      assert.are.equal("b2", r.name)
    end)
  end)

  it("with wait_for_ready, outside any task, wakes for the next resolution, not at its deadline", function()
    local port = quiet_port()
    zone {}
    -- the zone changes 0.5 s from now, behind this process's back
    local next_zone = zone_file .. ".next"
    zone({ ["later.test"] = { A = { "127.0.0.2" } } }, next_zone)
    local c, t = client("dns:///later.test:" .. port, WAIT)
    assert(os.execute("(sleep 0.5; mv " .. next_zone .. " " .. zone_file .. ") &"))
    -- the call pumps the resolver itself: woken when the next resolution
    -- is due, it finds the address and waits for a connection to it (none
    -- listens); slept to its deadline, it would still be resolving then
    local err = helper.status_error(c.Who, c, {}, { timeout = 3 })
    t:close()
    assert.are.same({ "DEADLINE_EXCEEDED", "deadline exceeded waiting for a connection (the last attempt: connect to "
      .. "127.0.0.2:" .. port .. ": Connection refused)" }, { err.code, err.message })
  end)

  it("with wait_for_ready, fails DEADLINE_EXCEEDED naming the last resolution, or UNAVAILABLE when closed", function()
    zone {}
    serving({}, function()
      local c, t = client("dns:///never.test:50051", WAIT)
      local err = helper.status_error(c.Who, c, {}, { timeout = 0.5 })
      assert.are.same({ "DEADLINE_EXCEEDED", "deadline exceeded while resolving never.test (the last resolution: "
        .. "resolve never.test: Domain name not found)" }, { err.code, err.message })
      pc.spawn(function()
        pc.sleep(0.3)
        t:close()
      end)
      err = helper.status_error(c.Who, c, {}, { timeout = 30 })
      assert.are.same({ "UNAVAILABLE", "resolve never.test: the channel is closed" }, { err.code, err.message })
    end)
  end)

  it("with wait_for_ready, starts a call on a name that does not resolve without waiting for it", function()
    -- start_unary (hedging's) returns a pending handle; its result() asks
    -- again, and comes once the name resolves
    local b2 = backend("127.0.0.2:0", "b2")
    zone {}
    serving({ b2 }, function()
      local _, t = client("dns:///soon.test:" .. b2.port, WAIT)
      local changed = false
      pc.spawn(function()
        pc.sleep(0.5)
        zone { ["soon.test"] = { A = { "127.0.0.2" } } }
        changed = true
      end)
      local h = t:start_unary("/dnst.Echo/Who", "", { timeout = 20 })
      assert.is_false(changed) -- it did not wait for the answer
      local r = { h:result() }
      local t0 = pc.now()
      while r[1] == nil do
        assert(pc.now() - t0 < 15, "the started call never ended")
        t:wait({ h }, 1)
        r = { h:result() }
      end
      t:close()
      assert.are.same({ true, "\10\2b2" }, r)
      -- one that never resolves: cancelled, or past its deadline
      local _, t2 = client("dns:///never.test:" .. b2.port, WAIT)
      local gone = t2:start_unary("/dnst.Echo/Who", "", { timeout = 20 })
      gone:cancel()
      r = { gone:result() }
      assert.are.same({ false, "CANCELLED" }, { r[1], r[2].code })
      local late = t2:start_unary("/dnst.Echo/Who", "", { timeout = 0.3 })
      r = { late:result() }
      while r[1] == nil do
        t2:wait({ late }, 1)
        r = { late:result() }
      end
      t2:close()
      assert.are.same({ false, "DEADLINE_EXCEEDED", "deadline exceeded while resolving never.test (the last "
        .. "resolution: resolve never.test: Domain name not found)" }, { r[1], r[2].code, r[2].message })
    end)
  end)

  it("resolves by getaddrinfo under a host I/O driver, which owns the sockets (no SRV there)", function()
    local sdriver = require "socket_driver"
    local py = helper.spawn("grpc", 0)
    local t = pc.grpc("dns:///localhost:" .. py.port, { driver = sdriver.new(pc) })
    assert.are.equal("x", t:unary("/test.Test/Echo", "x", { timeout = 5 }))
    t:close()
    helper.stop(py)
    assert.has_error(function() pc.grpc("dns:///_grpc._tcp.x.test", { driver = sdriver.new(pc) }) end,
      "pc.grpc: target 'dns:///_grpc._tcp.x.test': SRV needs the built-in driver")
  end)

  it("fails an SRV name whose targets all have port 0, saying so", function()
    zone { ["_grpc._tcp.zero.test"] = { SRV = { { 10, 1, 0, "a.test" } } },
      ["a.test"] = { A = { "127.0.0.1" } } }
    local c, t = client("dns:///_grpc._tcp.zero.test")
    local err = helper.status_error(c.Who, c, {})
    assert.are.same({ "UNAVAILABLE", "resolve _grpc._tcp.zero.test: SRV target a.test has port 0" },
      { err.code, err.message })
    t:close()
  end)

  it("refuses a target's bad port, query, host characters or DNS server port", function()
    local function refused(target, why, opts)
      assert.has_error(function() pc.grpc(target, opts) end, "pc.grpc: target '" .. target .. "': " .. why)
    end
    refused("dns:///ok.test:-1", "port '-1' must be a number in 1..65535")
    refused("dns:///ok.test:47123?x=1", "a query or fragment ('?x=1') is not allowed")
    refused("dns:///ok.test:1#f", "a query or fragment ('#f') is not allowed")
    refused("dns:///a\\b.test:50051", "host 'a\\b.test' has a character not allowed in a host name")
    refused("http://a%b:1", "host 'a%b' has a character not allowed in a host name")
    refused("dns://127.0.0.1:0/ok.test:1", "DNS server '127.0.0.1:0': port must be in 1..65535")
    refused("dns://127.0.0.1:65536/ok.test:1", "DNS server '127.0.0.1:65536': port must be in 1..65535")
    refused("dns:///ok.test:1", "DNS server '127.0.0.1:0': port must be in 1..65535",
      { dns_server = "127.0.0.1:0" })
    refused("dns:///ok.test:1", "DNS server '[::1]:70000': port must be in 1..65535",
      { dns_server = "[::1]:70000" })
  end)

  it("refuses a DNS server c-ares cannot use, and dns_min_interval <= 0", function()
    assert.has_error(function() pc.grpc("dns:///x.test:1", { dns_server = "nowhere" }) end,
      "pc.grpc: target 'dns:///x.test:1': resolve x.test: DNS server 'nowhere': Misformatted string")
    assert.has_error(function() pc.grpc("dns:///x.test:1", { dns_min_interval = 0 }) end,
      "pc.grpc: option 'dns_min_interval': positive number of seconds up to 1000000000 expected, got 0")
  end)
end)
