-- Lua declarations refuse what they would otherwise ignore, and the
-- well-known types are there on first use (API.md "Schemas").
local pc = require "protocall"

describe("declarations", function()
  it("refuse unknown field, extension and message options", function()
    local p = pc.pool()
    assert.has_error(function() p:message("x.B", { { "r", "string", 3, label = "repeated" } }) end,
      "x.B.r: unknown option 'label' (expected repeated, required, optional, packed, json_name, oneof or default)")
    assert.has_error(function() p:message("x.C", { { "r", "string", 3, repaeted = true } }) end,
      "x.C.r: unknown option 'repaeted' (expected repeated, required, optional, packed, json_name, oneof or default)")
    assert.has_error(function() p:message("x.D", { { "r", "string", 3, [4] = true } }) end,
      "x.D.r: unknown option '4' (expected repeated, required, optional, packed, json_name, oneof or default)")
    assert.has_error(function() p:message("x.E", { { "r", "string", 3 } }, { sintax = "proto2" }) end,
      "x.E: unknown option 'sintax' (expected syntax or extensions)")
    p:message("x.Ext", { { "a", "int32", 1 } }, { syntax = "proto2", extensions = { { 100, 199 } } })
    assert.has_error(function() p:extend("x.Ext", { { "x.n", "int32", 100, packed = true } }) end,
      "x.n: unknown option 'packed' (expected repeated or default)")
    assert.is_nil(p:type("x.B"))
  end)

  it("find the well-known types on first use, by name or from a field", function()
    local p = pc.pool()
    local Ts = p:type("google.protobuf.Timestamp")
    assert.are.equal("google.protobuf.Timestamp", Ts.full_name)
    assert.are.equal(5, p:type("google.protobuf.Field.Kind").TYPE_INT32)
    local D = p:message("x.Span", { { "took", "google.protobuf.Duration", 1 },
                                    { "attrs", "map<string,google.protobuf.Value>", 2 } })
    local d = D{ took = { seconds = 5 }, attrs = { k = { string_value = "v" } } }
    assert.are.equal("\10\2\8\5", pc.encode(D{ took = { seconds = 5 } }))
    assert.are.equal("v", pc.decode(D, pc.encode(d)).attrs.k.string_value)
    assert.is_not_nil(p:file("google/protobuf/struct.proto"))
  end)

  it("answer nil for a name that is no type", function()
    assert.are.equal(1, select("#", pc.type("no.such.Type")))
    assert.is_nil(pc.type("no.such.Type"))
    assert.is_nil(pc.type("google.protobuf.NoSuchType"))
  end)
end)
