-- protocall.resty.grpc's wrapper without nginx: protocall.resty is loaded
-- under a stub of the few ngx fields it reads, and resty.grpc wraps the
-- transport of a stub pc.grpc, so what the wrapper itself does is seen:
-- the methods it forwards (only those the transport has), their arguments
-- and results, the phase check before a call, close(), that every wrapper
-- shares the same functions (none made per transport) and that a dropped
-- wrapper and its transport are collected. Runs under Lua 5.4 and LuaJIT.

local phase = "content" -- what the stub's ngx.get_phase answers

-- Loads protocall.resty under a stub ngx whose get_phase answers `phase`.
local function load_resty()
  local ngx_stub = require "ngx_stub"
  return ngx_stub.load("protocall.resty", ngx_stub.stub { get_phase = function() return phase end })
end

-- A stub protocall module: pc.grpc(target, opts) records its options and
-- returns a transport whose methods record (self, ...) and return "r1",
-- "r2" and their arguments; `multi` adds backends and set_load_balancing.
local function stub_pc(multi)
  local pc = { made = {} }
  function pc.Error(t)
    return setmetatable(t, { __tostring = function(e) return e.code .. ": " .. e.message end })
  end
  function pc.grpc(target, opts)
    if target == "bad" then error("pc.grpc: bad target", 2) end
    local t = { target = "t:" .. target, opts = opts, log = {} }
    local function method(name)
      t[name] = function(self, ...)
        t.log[#t.log + 1] = { name = name, self = self, args = { ... } }
        return "r1", name, ...
      end
    end
    for _, name in ipairs { "unary", "server_stream", "stream", "start_unary", "start_server_stream", "wait",
      "close" } do
      method(name)
    end
    if multi then
      method("backends")
      method("set_load_balancing")
    end
    pc.made[#pc.made + 1] = t
    return t
  end
  return pc
end

describe("protocall.resty.grpc's wrapper (no nginx: a stub ngx and pc.grpc)", function()
  local resty
  setup(function() resty = load_resty() end)
  before_each(function() phase = "content" end)

  it("forwards each call to its transport with the transport as self, the arguments and all results", function()
    local pc = stub_pc(false)
    local g = resty.grpc(pc, "127.0.0.1:1", { timeout = 3 })
    local t = pc.made[1]
    assert.are.equal(t, g.transport)
    assert.are.equal("t:127.0.0.1:1", g.target)
    assert.are.equal(3, t.opts.timeout)
    assert.is_table(t.opts.driver)
    for _, name in ipairs { "unary", "server_stream", "stream", "start_unary", "start_server_stream", "wait" } do
      assert.are.same({ "r1", name, "/s/M", 7, nil, "x" }, { g[name](g, "/s/M", 7, nil, "x") }, name)
      local entry = t.log[#t.log]
      assert.are.equal(name, entry.name)
      assert.are.equal(t, entry.self)
    end
    assert.are.same({ "r1", "close" }, { g:close() })
    assert.are.equal(t, t.log[#t.log].self)
    -- a transport of one backend has neither
    assert.is_nil(g.backends)
    assert.is_nil(g.set_load_balancing)
  end)

  it("gives backends() and set_load_balancing when the transport has them", function()
    local pc = stub_pc(true)
    local g = resty.grpc(pc, "a")
    assert.are.same({ "r1", "backends" }, { g:backends() })
    assert.are.same({ "r1", "set_load_balancing", "pick_first" }, { g:set_load_balancing("pick_first") })
    assert.are.equal(pc.made[1], pc.made[1].log[1].self)
    assert.are.equal(pc.made[1], pc.made[1].log[2].self)
  end)

  it("checks the phase before a call: FAILED_PRECONDITION in the log phase, the transport untouched", function()
    local pc = stub_pc(true)
    local g = resty.grpc(pc, "a")
    phase = "log"
    for _, name in ipairs { "unary", "server_stream", "stream", "start_unary", "start_server_stream", "wait" } do
      local ok, e = pcall(g[name], g, "/s/M")
      assert.is_false(ok)
      assert.are.equal("FAILED_PRECONDITION", e.code, name)
      assert.matches("cannot run in the log phase", e.message, 1, true)
    end
    assert.are.same({}, pc.made[1].log)
    -- close and the balancing calls are not calls of the upstream
    g:close()
    g:backends()
    assert.are.equal(2, #pc.made[1].log)
  end)

  it("makes no function per transport: every wrapper has the same ones", function()
    local pc = stub_pc(true)
    local a, b = resty.grpc(pc, "a"), resty.grpc(pc, "b", { per_request = true })
    for _, name in ipairs { "unary", "server_stream", "stream", "start_unary", "start_server_stream", "wait", "close",
      "backends", "set_load_balancing" } do
      assert.is_function(a[name], name)
      assert.are.equal(a[name], b[name], name)
    end
    -- per_request picks the other driver and does not reach pc.grpc
    assert.are_not.equal(pc.made[1].opts.driver, pc.made[2].opts.driver)
    assert.is_nil(pc.made[2].opts.per_request)
  end)

  it("lets a dropped wrapper and its transport be collected after calls through it", function()
    local pc = stub_pc(true)
    local gone = setmetatable({}, { __mode = "k" })
    for i = 1, 200 do -- enough calls for LuaJIT to compile the loop and the wrapper's methods
      local g = resty.grpc(pc, "a")
      g:unary("/s/M", i)
      g:wait()
      gone[g], gone[g.transport] = true, true
    end
    pc.made = {}
    for _ = 1, 3 do collectgarbage() end
    assert.is_nil(next(gone))
  end)

  it("refuses the 'driver' option and blames the caller for pc.grpc's errors", function()
    local pc = stub_pc(false)
    assert.has_error(function() resty.grpc(pc, "a", { driver = {} }) end,
      "protocall.resty.grpc: option 'driver' is this module's own")
    local ok, e = pcall(resty.grpc, pc, "bad")
    assert.is_false(ok)
    assert.matches("pc.grpc: bad target", e, 1, true)
    assert.has_error(function() resty.grpc({}, "a") end, "bad argument #1 to 'grpc' (the protocall module expected)")
  end)
end)

describe("protocall.resty.pool's backends() (no nginx: a stub ngx and pc.grpc)", function()
  local resty
  setup(function() resty = load_resty() end)

  -- A stub protocall module whose n-th transport made answers backends()
  -- with lists[n] (no backends() without `lists`: one backend) and whose
  -- unary first runs pc.during(n) when set.
  local function pool_pc(lists)
    local pc = { made = {} }
    function pc.Error(t) return t end
    function pc.grpc(target)
      local n = #pc.made + 1
      local t = { target = "t:" .. target }
      function t.unary()
        if pc.during then pc.during(n) end
        return "ok"
      end
      function t.close() end
      if lists then function t.backends() return lists[n] end end
      pc.made[n] = t
      return t
    end
    return pc
  end

  -- p:backends() while the pool has two connections: the first carries a
  -- call (max_streams 1), so a call made meanwhile opens the second.
  local function with_two(p, pc)
    local got
    pc.during = function(n)
      if n == 1 then p:unary("/s/M", "") else got = p:backends() end
    end
    p:unary("/s/M", "")
    assert.are.equal(2, #pc.made)
    return got
  end

  local function row(address, failed, ejected, outstanding)
    return { address = address, failed = failed, weight = 1, ejected = ejected, outstanding = outstanding }
  end

  it("lists each backend once over every connection: calls summed, failed or ejected on any of them", function()
    local pc = pool_pc {
      { row("10.0.0.1:1", false, false, 2), row("10.0.0.2:1", true, false, 0),
        calls = { outstanding = 2, max_requests = 10, dropped = 1 } },
      { row("10.0.0.2:1", false, true, 1), row("10.0.0.1:1", false, false, 3), row("10.0.0.3:1", false, false, 0),
        calls = { outstanding = 4, max_requests = 10, dropped = 0 } },
    }
    local p = resty.pool(pc, "dns:///x:1", { max_streams = 1 })
    assert.are.same({ row("10.0.0.1:1", false, false, 5), row("10.0.0.2:1", true, true, 1),
      row("10.0.0.3:1", false, false, 0), calls = { outstanding = 6, max_requests = 10, dropped = 1 } },
      with_two(p, pc))
    p:close()
    assert.has_error(function() p:backends() end, "protocall.resty.pool: the pool for dns:///x:1 is closed")
  end)

  it("keeps an xds target's clusters apart, its calls per cluster", function()
    local function in_cluster(cluster, r)
      r.cluster = cluster
      return r
    end
    local pc = pool_pc {
      { in_cluster("a", row("10.0.0.1:1", false, false, 1)), in_cluster("b", row("10.0.0.1:1", false, false, 0)),
        calls = { a = { outstanding = 1, dropped = 0 }, b = { outstanding = 0, dropped = 0 } },
        versions = { EDS = "1" }, nacked = {} },
      { in_cluster("a", row("10.0.0.1:1", false, false, 2)),
        calls = { a = { outstanding = 2, dropped = 1 } }, versions = { EDS = "2" }, nacked = {} },
    }
    local p = resty.pool(pc, "xds:///x", { max_streams = 1 })
    assert.are.same({ in_cluster("a", row("10.0.0.1:1", false, false, 3)),
      in_cluster("b", row("10.0.0.1:1", false, false, 0)),
      calls = { a = { outstanding = 3, dropped = 1 }, b = { outstanding = 0, dropped = 0 } },
      versions = { EDS = "1" }, nacked = {} }, with_two(p, pc))
    p:close()
  end)

  it("has no backends() over a target of one backend, as the transport has none", function()
    local p = resty.pool(pool_pc(nil), "127.0.0.1:1")
    assert.is_nil(p.backends)
    p:close()
  end)
end)
