-- The built-in health service (grpc.health.v1.Health): pc.health(),
-- health:set / get, Check and Watch as gRPC's health checking protocol
-- says, in process.
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
