-- pc.decode of a flat type (singular numbers, strings and bytes): one
-- standalone message whose strings point into the input string it keeps
-- (bindings/lua/lpc_wire.c). It reads, writes, clones and survives the
-- collector as any message does.
local pc = require "protocall"

local pool = pc.pool()
local Named = pool:message("fl.Named", { { "name", "string", 1 }, { "id", "uint32", 2 }, { "raw", "bytes", 3 } })
local Holder = pool:message("fl.Holder", { { "n", "fl.Named", 1 } })

describe("decoding a flat type", function()
  it("reads its strings after the input is gone", function()
    local m = pc.decode(Named, pc.encode(Named { name = ("checkout-"):rep(3), id = 42, raw = "\0\1" }))
    collectgarbage()
    collectgarbage()
    local junk = {} -- luacheck: ignore 241 (only fills the freed memory)
    for i = 1, 2000 do junk[i] = ("x"):rep(40) .. i end
    assert.are.equal(("checkout-"):rep(3), m.name)
    assert.are.equal("\0\1", m.raw)
    assert.are.equal(42, m.id)
  end)

  it("keeps the input for the other strings once a write makes its refs table", function()
    local m = pc.decode(Named, pc.encode(Named { name = ("kept-"):rep(5), raw = ("\1"):rep(30) }))
    m.name = "written" -- the refs table is made here; the input moves into it
    collectgarbage()
    collectgarbage()
    local junk = {} -- luacheck: ignore 241 (only fills the freed memory)
    for i = 1, 2000 do junk[i] = ("y"):rep(40) .. i end
    assert.are.equal("written", m.name)
    assert.are.equal(("\1"):rep(30), m.raw)
  end)

  it("writes, clones, merges and nests as a message", function()
    local bytes = pc.encode(Named { name = "a", id = 1 })
    local m = pc.decode(Named, bytes)
    m.name = "b"
    assert.are.equal("b", m.name)
    local c = pc.clone(m)
    m = nil -- luacheck: ignore 311 (drops the original before the collection)
    collectgarbage()
    assert.are.equal("b", c.name)
    local h = Holder { n = pc.decode(Named, bytes) }
    collectgarbage()
    assert.are.equal("a", h.n.name)
    pc.merge(c, pc.decode(Named, pc.encode(Named { raw = "r" })))
    assert.are.same({ name = "b", id = 1, raw = "r" }, pc.to_table(c))
    assert.are.equal(pc.encode(Named { name = "b", id = 1, raw = "r" }), pc.encode(c))
  end)

  it("keeps unknown fields and reports malformed input as before", function()
    local extra = pc.encode(Named { name = "a" }) .. "\32\5" -- field 4, varint 5
    local m = pc.decode(Named, extra)
    assert.are.equal("a", m.name)
    assert.are.equal(extra, pc.encode(m))
    assert.are.same({ name = "a" }, pc.decode(Named, extra, { table = true }))
    assert.are.same({ name = "a", id = 7 }, pc.decode(Named, pc.encode(Named { name = "a", id = 7 }), { table = true }))
    local none, err = pc.decode(Named, "\10\5ab")
    assert.is_nil(none)
    assert.matches("fl.Named.name", err)
    local bad, why = pc.decode(Named, "\10\1\255")
    assert.is_nil(bad)
    assert.matches("UTF%-8", why)
    local bad_t, why_t = pc.decode(Named, "\10\1\255", { table = true })
    assert.is_nil(bad_t)
    assert.are.equal(why, why_t)
  end)
end)
