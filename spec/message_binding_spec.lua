-- The message binding's edges: opening the C module again in a live state,
-- maps changed while pairs walks them, and container keys given as floats.
local pc = require "protocall"

local p = pc.pool()
assert(p:load([[
  syntax = "proto3"; package mb;
  message Inner { string s = 1; }
  message Outer { Inner inner = 1; map<string, int32> mp = 2; repeated int32 r = 3; }
]], { name = "mb.proto" }))
local Outer = p:type("mb.Outer")

describe("the message binding", function()
  it("keeps live messages intact when protocall.core is opened again", function()
    local Inner = p:type("mb.Inner")
    local made = {}
    for i = 1, 200 do made[i] = Outer{ inner = { s = "kept" .. i } } end -- sub-messages held by refs
    local saved = package.loaded["protocall.core"]
    package.loaded["protocall.core"] = nil
    local again = require "protocall.core"
    package.loaded["protocall.core"] = saved
    assert.is_table(again)
    collectgarbage()
    collectgarbage()
    local churn = {} -- luacheck: ignore 241 (only fills the freed memory)
    for i = 1, 2000 do churn[i] = Inner{ s = string.rep("x", 40) .. i } end -- reuse freed blocks
    for i = 1, 200 do assert.are.equal("kept" .. i, made[i].inner.s) end
  end)

  it("visits every entry of a map once while pairs deletes or changes entries", function()
    local m = Outer{ mp = { a = 1, b = 2, c = 3, d = 4, e = 5, f = 6 } }
    local seen = 0
    for k in pc.pairs(m.mp) do
      seen = seen + 1
      m.mp[k] = nil
    end
    assert.are.equal(6, seen)
    assert.are.equal(0, #m.mp)
    m.mp.a = 1 -- entries in this order
    m.mp.b = 2
    m.mp.c = 3
    local got = {}
    for k, v in pc.pairs(m.mp) do
      if k == "a" then m.mp.c = 30 end
      if k == "b" then m.mp.a = nil end
      got[k] = v
    end
    assert.are.same({ a = 1, b = 2, c = 30 }, got)
  end)

  it("reads a repeated element at an integral float index, as it writes one", function()
    local m = Outer{ r = { 7, 8 } }
    assert.are.equal(7, m.r[1.0])
    m.r[2.0] = 9
    assert.are.equal(9, m.r[2])
    assert.is_nil(m.r[1.5])
    assert.is_nil(m.r["1"])
  end)

  it("answers pc.type_of with one nil for a value that is not a message", function()
    assert.are.equal(1, select("#", pc.type_of(5)))
    assert.is_nil(pc.type_of({}))
    assert.are.equal(Outer, pc.type_of(Outer{}))
  end)
end)
