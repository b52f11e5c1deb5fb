-- Validation at the edge against hostile requests (README "Validation";
-- core/validate/README.md): what a request may cost a server or the gateway
-- that validates it, and verdicts on odd values. Each case failed before
-- its fix.
local pc = require "protocall"

local p = pc.pool()
assert(p:load([[
  syntax = "proto3";
  package hostile;
  import "buf/validate/validate.proto";
  message Items { repeated int32 n = 1 [(buf.validate.field).repeated.items.int32.gt = 5]; }
  message Res { int32 n = 1; }
  service S { rpc Do (Items) returns (Res); }
]], { name = "hostile.proto" }))
local Items = p:type("hostile.Items")

local function many(n, v)
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end

describe("validation of hostile requests", function()
  after_each(function() collectgarbage() end)

  it("a refusal keeps the first 100 violations and stops there", function()
    local m = Items { n = many(1000, 1) }
    assert.are.equal(1000, #pc.validate(m)) -- pc.validate keeps them all
    local err = require("protocall.validate").refusal(m)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.equal(100, #err.violations)
    assert.are.equal("n[99]", err.violations[100].field)
    assert.are.equal("validation failed: n[0]: must be greater than 5 [int32.gt], and at least 100 more violations",
      err.message)
    assert.are.equal(100, #err.details[1].field_violations)
    -- 100 exactly is not cut
    err = require("protocall.validate").refusal(Items { n = many(100, 1) })
    assert.are.equal(100, #err.violations)
    assert.are.equal("validation failed: n[0]: must be greater than 5 [int32.gt], and 99 more violations", err.message)
  end)

  it("a server answers a request breaking a rule on each of many items with 100 violations", function()
    local server = pc.server({ ["hostile.S"] = { Do = function() return { n = 1 } end } },
      { pool = p, validate = true })
    local client = pc.client("hostile.S", { transport = pc.inproc(server), pool = p })
    local ok, err = pcall(client.Do, client, Items { n = many(100000, 1) })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.equal(100, #err.details[1].field_violations)
    assert.truthy(err.message:find("and at least 100 more violations", 1, true), err.message)
  end)
end)
