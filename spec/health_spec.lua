-- The built-in health service (grpc.health.v1.Health): pc.health(),
-- health:set / get, Check and Watch as gRPC's health checking protocol
-- says, in process and over pc.listen; an idle watcher waits for a change
-- (health:set wakes it), not a timer.
local pc = require "protocall"

local function setup()
  local pool = pc.pool()
  assert(pool:load('syntax = "proto3"; package h; message M {} service S { rpc Do(M) returns (M); }',
    { name = "h.proto" }))
  local health = pc.health { pool = pool }
  local server = pc.server({ ["h.S"] = { Do = function(m) return m end } }, { pool = pool, health = health })
  local stub = pc.client("grpc.health.v1.Health", { pool = pool, transport = pc.inproc(server) })
  return health, stub, pool
end

local SERVING, NOT_SERVING, SERVICE_UNKNOWN = 1, 2, 3

-- Runs pc.step until `done()` (at most `limit` seconds; then fails).
local function step_until(done, limit)
  local t0 = pc.now()
  while not done() do
    assert(pc.now() - t0 < (limit or 5), "timed out at line " .. debug.getinfo(2, "l").currentline)
    pc.step(0.05)
  end
end

-- The rounds of the scheduler (pc.step, each waiting for what the tasks
-- wait on) over `seconds` while nothing happens: a watcher woken by a
-- 10 ms timer makes ~50 in 0.5 s, one waiting for health:set (looking at
-- its call once a second) one or two.
local function idle_rounds(seconds)
  local n, t0 = 0, pc.now()
  while pc.now() - t0 < seconds do
    pc.step(seconds)
    n = n + 1
  end
  return n
end

-- Watches `service` over `stub` in a task: `seen` gets each status, the
-- time it came (`at`), and the call's error (`seen.err`).
local function watcher(stub, service, opts)
  local seen = { at = {} }
  pc.spawn(function()
    local ok, err = pcall(function()
      local it, _, _, closing = stub:Watch({ service = service }, opts)
      for r in it do
        seen[#seen + 1] = r.status
        seen.at[#seen] = pc.now()
        if #seen == 3 then break end
      end
      closing:close() -- what a generic for's break does under Lua 5.4 (not LuaJIT)
    end)
    seen.done, seen.err = true, not ok and err or nil
  end)
  return seen
end

-- Sets statuses of h.S (UNKNOWN at first) while `seen` watches it: each
-- change reaches the watcher at once (under 0.9 s, room for a loaded
-- machine, against the second it would otherwise wait), and between
-- changes the scheduler stays idle.
local function check_watch(health, seen)
  step_until(function() return #seen == 1 end)
  assert.are.equal(SERVICE_UNKNOWN, seen[1])
  local rounds = idle_rounds(0.5)
  assert.is_true(rounds <= 6, rounds .. " scheduler rounds in 0.5 s with an idle watcher")
  local t = pc.now()
  health:set("h.S", "SERVING")
  step_until(function() return #seen == 2 end, 2)
  assert.is_true(seen.at[2] - t < 0.9, "a change took " .. (seen.at[2] - t) .. " s")
  health:set("h.S", "SERVING") -- no change: nothing sent
  rounds = idle_rounds(0.5)
  assert.is_true(rounds <= 6, rounds .. " scheduler rounds in 0.5 s with an idle watcher")
  t = pc.now()
  health:set("h.S", "NOT_SERVING")
  step_until(function() return seen.done end, 2)
  assert.is_true(seen.at[3] - t < 0.9, "a change took " .. (seen.at[3] - t) .. " s")
  assert.are.same({ SERVICE_UNKNOWN, SERVING, NOT_SERVING }, { seen[1], seen[2], seen[3] })
  assert.is_nil(seen.err)
end

describe("pc.health", function()
  it("checks the server as a whole and the services set, NOT_FOUND for others", function()
    local health, stub = setup()
    assert.are.equal(SERVING, stub:Check{ service = "" }.status)
    health:set("h.S", "NOT_SERVING")
    assert.are.equal(NOT_SERVING, stub:Check{ service = "h.S" }.status)
    assert.are.equal("NOT_SERVING", health:get("h.S"))
    local ok, err = pcall(stub.Check, stub, { service = "h.Other" })
    assert.is_false(ok)
    assert.are.equal("NOT_FOUND", err.code)
    assert.are.equal("unknown service 'h.Other'", err.message)
    health:set("h.S", nil)
    ok, err = pcall(stub.Check, stub, { service = "h.S" })
    assert.is_false(ok)
    assert.are.equal("NOT_FOUND", err.code)
  end)

  it("watches: the current status (SERVICE_UNKNOWN for an unknown service), then each change", function()
    local health, stub = setup()
    local seen = {}
    pc.spawn(function()
      for r in stub:Watch{ service = "h.S" } do
        seen[#seen + 1] = r.status
        if #seen == 3 then break end
      end
    end)
    pc.spawn(function()
      pc.sleep(0.05)
      health:set("h.S", "SERVING")
      pc.sleep(0.05)
      health:set("h.S", "SERVING") -- no change: nothing sent
      pc.sleep(0.05)
      health:set("h.S", "NOT_SERVING")
    end)
    pc.run()
    assert.are.same({ SERVICE_UNKNOWN, SERVING, NOT_SERVING }, seen)
  end)

  it("wakes a watcher at each change and lets an idle one wait without a timer", function()
    local health, stub = setup()
    check_watch(health, watcher(stub, "h.S"))
  end)

  it("ends a watch DEADLINE_EXCEEDED at its deadline", function()
    local _, stub = setup()
    local seen = watcher(stub, "h.S", { timeout = 0.2 })
    step_until(function() return seen.done end, 3)
    assert.are.same({ SERVICE_UNKNOWN }, { seen[1], seen[2] })
    assert.are.equal("DEADLINE_EXCEEDED", seen.err.code)
  end)

  it("is a handler table pc.server takes under its own name too", function()
    local pool = pc.pool()
    local health = pc.health { pool = pool }
    local keys = {}
    for k in pairs(health) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "Check", "Watch" }, keys)
    local server = pc.server({ ["grpc.health.v1.Health"] = health }, { pool = pool })
    local stub = pc.client("grpc.health.v1.Health", { pool = pool, transport = pc.inproc(server) })
    assert.are.equal(SERVING, stub:Check{}.status)
    local s2 = pc.server({}, { pool = pool, health = true })
    stub = pc.client("grpc.health.v1.Health", { pool = pool, transport = pc.inproc(s2) })
    assert.are.equal(SERVING, stub:Check{}.status)
  end)

  it("is named with its fix when a hand-written handler or a client comes before pc.health()", function()
    local pool = pc.pool()
    local hand = { Check = function() return { status = "SERVING" } end }
    assert.has_error(function() pc.server({ ["grpc.health.v1.Health"] = hand }, { pool = pool }) end,
      "pc.server: grpc.health.v1.Health is not loaded: call pc.health() (or load grpc/health/v1/health.proto) first")
    assert.has_error(function() pc.client("grpc.health.v1.Health", { pool = pool, transport = {} }) end,
      "pc.client: grpc.health.v1.Health is not loaded: call pc.health() (or load grpc/health/v1/health.proto) first")
    assert.has_error(function() pc.server({ ["grpc.reflection.v1.ServerReflection"] = {} }, { pool = pool }) end,
      "pc.server: grpc.reflection.v1.ServerReflection is not loaded: give pc.server reflection = true (or load "
      .. "grpc/reflection/v1/reflection.proto) first")
    assert.has_error(function() pc.server({ ["h.Nope"] = {} }, { pool = pool }) end,
      "pc.server: unknown service 'h.Nope'")
    -- the fix it names mends it
    assert(pool:load('syntax = "proto3"; import "grpc/health/v1/health.proto";', { name = "uses_health.proto" }))
    local stub = pc.client("grpc.health.v1.Health", { pool = pool, transport = pc.inproc(pc.server({
      ["grpc.health.v1.Health"] = hand }, { pool = pool })) })
    assert.are.equal(SERVING, stub:Check{}.status)
  end)

  it("with health = true, answers SERVING for each service the server serves", function()
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; package h; message M {} service S { rpc Do(M) returns (M); }',
      { name = "h.proto" }))
    local server = pc.server({ ["h.S"] = { Do = function(m) return m end } }, { pool = pool, health = true })
    local stub = pc.client("grpc.health.v1.Health", { pool = pool, transport = pc.inproc(server) })
    assert.are.equal(SERVING, stub:Check{ service = "h.S" }.status)
    assert.are.equal(SERVING, stub:Check{ service = "" }.status)
    local ok, err = pcall(stub.Check, stub, { service = "h.Other" })
    assert.is_false(ok)
    assert.are.equal("NOT_FOUND", err.code)
  end)

  it("refuses bad statuses and arguments", function()
    local health = setup()
    assert.has_error(function() health:set("h.S", "SERVICE_UNKNOWN") end,
      'bad argument #2 to \'set\' ("SERVING", "NOT_SERVING", "UNKNOWN" or nil expected, got "SERVICE_UNKNOWN")')
    assert.has_error(function() health:set("h.S", 1) end,
      'bad argument #2 to \'set\' ("SERVING", "NOT_SERVING", "UNKNOWN" or nil expected, got number)')
    assert.has_error(function() health:set(nil, "SERVING") end,
      "bad argument #1 to 'set' (service name expected, got nil)")
    assert.has_error(function() pc.health { nope = 1 } end, "pc.health: unknown option 'nope'")
    assert.has_error(function() pc.health(5) end, "bad argument #1 to 'health' (table expected, got number)")
    local frozen = pc.pool()
    frozen:freeze()
    assert.has_error(function() pc.health { pool = frozen } end)
  end)
end)

describe("pc.health over pc.listen", function()
  -- A listener of h.S with `health` and a client stub of it, each a task.
  local function served()
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; package h; message M {} service S { rpc Do(M) returns (M); }',
      { name = "h.proto" }))
    local health = pc.health { pool = pool }
    local l = pc.listen(pc.server({ ["h.S"] = { Do = function(m) return m end } },
      { pool = pool, health = health }), "127.0.0.1:0")
    pc.spawn(function() l:serve() end)
    local stub = pc.client("grpc.health.v1.Health",
      { pool = pool, transport = pc.grpc("http://127.0.0.1:" .. l.port) })
    return health, stub, l
  end

  local function stop(l)
    pc.spawn(function() l:shutdown(1) end)
    step_until(function() return pc.step(0.05) == 0 end)
  end

  it("wakes a watcher at each change and lets an idle one wait without a timer", function()
    local health, stub, l = served()
    local seen = watcher(stub, "h.S")
    check_watch(health, seen)
    step_until(function() return l.active == 0 end, 3) -- the client's close cancelled the call
    stop(l)
  end)

  it("ends a watcher's handler when its client cancels or its deadline passes", function()
    local _, stub, l = served()
    local seen = watcher(stub, "", { timeout = 0.3 })
    step_until(function() return seen.done end, 3)
    assert.are.equal("DEADLINE_EXCEEDED", seen.err.code)
    step_until(function() return l.active == 0 end, 3)
    local call
    pc.spawn(function()
      local it
      it, call = stub:Watch { service = "" }
      it()
      call:cancel()
    end)
    step_until(function() return call ~= nil and l.active == 1 end, 3)
    step_until(function() return l.active == 0 end, 3)
    stop(l)
  end)
end)
