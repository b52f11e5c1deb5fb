-- The wire format: every case of the wire-case table (core/wire/wire_cases_test.c), byte for byte.
local pc = require "protocall"
local R = require "runtime"

local function unhex(s)
  s = s:gsub("%s", "")
  return (s:gsub("..", function(h) return string.char(tonumber(h, 16)) end))
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x ", c:byte()) end):gsub(" $", ""))
end

-- The table's schemas, as `protoc -o` of these two files (made once with
-- Debian's protoc; loading them also exercises pc.load_descriptor_set):
-- t.proto:
-- syntax = "proto3";
-- package t;
-- enum E { ZERO = 0; MINUS_ONE = -1; }
-- message Neg { E e = 1; int32 i = 2; sint32 s = 3; }
-- message Ints { repeated int32 v = 1; }
-- message Unpacked { repeated int32 v = 31 [packed = false]; }
-- message A { int32 f = 1; }
-- message B { repeated A items = 1; }
-- message Sub { int32 x = 1; }
-- message M { map<int32, Sub> m = 1; map<string, string> s = 2; }
-- message Empty {}
-- message I64 { int64 r = 1; uint64 u = 2; fixed64 f = 3; sint64 s = 4; }
-- message Bin { string text = 1; bytes raw = 2; }
-- message Rec { Rec child = 1; int32 v = 2; }
-- t2.proto:
-- syntax = "proto2";
-- package t2;
-- message Inner { optional int32 f1 = 1; optional int32 f2 = 2; repeated int32 r = 3; }
-- message Outer { optional Inner sub = 5; }
-- message G { optional group Grp = 3 { optional int32 a = 1; } }
local CASES_PB = unhex(
  "0ac7040a07742e70726f746f12017422350a034e656712120a016518012001280e32042e742e45520165120c0a016918" ..
  "0220012805520169120c0a017318032001281152017322140a04496e7473120c0a0176180120032805520176221c0a08" ..
  "556e7061636b656412100a0176181f200328054202100052017622110a0141120c0a0166180120012805520166221f0a" ..
  "0142121a0a056974656d7318012003280b32042e742e4152056974656d7322130a03537562120c0a0178180120012805" ..
  "52017822ad010a014d12190a016d18012003280b320b2e742e4d2e4d456e74727952016d12190a017318022003280b32" ..
  "0b2e742e4d2e53456e7472795201731a3c0a064d456e74727912100a036b657918012001280552036b6579121c0a0576" ..
  "616c756518022001280b32062e742e537562520576616c75653a0238011a340a0653456e74727912100a036b65791801" ..
  "2001280952036b657912140a0576616c7565180220012809520576616c75653a02380122070a05456d707479223d0a03" ..
  "493634120c0a0172180120012803520172120c0a0175180220012804520175120c0a0166180320012806520166120c0a" ..
  "0173180420012812520173222b0a0342696e12120a047465787418012001280952047465787412100a03726177180220" ..
  "01280c520372617722310a03526563121c0a056368696c6418012001280b32062e742e52656352056368696c64120c0a" ..
  "01761802200128055201762a250a014512080a045a45524f100012160a094d494e55535f4f4e4510ffffffffffffffff" ..
  "ff01620670726f746f330aa2010a0874322e70726f746f1202743222350a05496e6e6572120e0a026631180120012805" ..
  "52026631120e0a02663218022001280552026632120c0a017218032003280552017222240a054f75746572121b0a0373" ..
  "756218052001280b32092e74322e496e6e6572520373756222350a0147121b0a0367727018032001280a32092e74322e" ..
  "472e47727052036772701a130a03477270120c0a0161180120012805520161"
)

local pool = pc.pool()
assert(pool:load_descriptor_set(CASES_PB))

local function T(name) return assert(pool:type(name), name) end

local function decode(tname, h)
  return pc.decode(T(tname), unhex(h))
end

local function ok(tname, h)
  local m, err = decode(tname, h)
  assert(m, err)
  return m
end

local function fails(tname, h)
  local m, err = decode(tname, h)
  assert.is_nil(m)
  assert.is_string(err)
  return err
end

local function list(c)
  local out = {}
  for i = 1, #c do out[i] = c[i] end
  return out
end

describe("wire format", function()
  it("writes negative enums, int32 as 10-byte varints and sint32 as ZigZag", function()
    local m = T "t.Neg" { e = "MINUS_ONE", i = -1, s = -1 }
    assert.are.equal("08 ff ff ff ff ff ff ff ff ff 01 10 ff ff ff ff ff ff ff ff ff 01 18 01",
      hex(pc.encode(m)))
  end)

  it("reads a 5-byte negative enum and re-encodes the 10-byte form", function()
    local m = ok("t.Neg", "08 ff ff ff ff 0f")
    assert.are.equal(-1, m.e)
    assert.are.equal("08 ff ff ff ff ff ff ff ff ff 01", hex(pc.encode(m)))
  end)

  it("keeps an unknown value of an open enum", function()
    local m = ok("t.Neg", "08 7b")
    assert.are.equal(123, m.e)
    assert.are.equal("08 7b", hex(pc.encode(m)))
  end)

  it("reads packed and unpacked repeated scalars and writes proto3 packed", function()
    for _, h in ipairs { "0a 03 01 02 03", "08 01 08 02 08 03" } do
      local m = ok("t.Ints", h)
      assert.are.same({ 1, 2, 3 }, list(m.v))
      assert.are.equal("0a 03 01 02 03", hex(pc.encode(m)))
    end
  end)

  it("reads several packed and unpacked chunks mixed", function()
    assert.are.same({ 1, 2, 3, 4 }, list(ok("t.Ints", "0a 02 01 02 08 03 0a 01 04").v))
  end)

  it("reads packed input for [packed = false] and writes it unpacked", function()
    local m = ok("t.Unpacked", "fa 01 02 01 02")
    assert.are.same({ 1, 2 }, list(m.v))
    assert.are.equal("f8 01 01 f8 01 02", hex(pc.encode(m)))
  end)

  it("writes an empty repeated item and rejects a truncated one", function()
    local b = T "t.B" { items = { {} } }
    assert.are.equal("0a 00", hex(pc.encode(b)))
    assert.are.equal("t.B.items: truncated input at offset 1", fails("t.B", "0a"))
  end)

  it("merges a sub-message seen twice, last scalar wins", function()
    local m = ok("t2.Outer", "2a 04 08 0a 10 2a 2a 03 08 89 06")
    assert.are.equal(777, m.sub.f1)
    assert.are.equal(42, m.sub.f2)
  end)

  it("appends repeated fields across merged sub-messages", function()
    assert.are.same({ 0, 1, 2, 3 }, list(ok("t2.Outer", "2a 04 18 00 18 01 2a 04 18 02 18 03").sub.r))
  end)

  it("gives map entries with a missing value or key their defaults", function()
    local m = ok("t.M", "0a 02 08 05")
    assert.is_not_nil(m.m[5])
    assert.are.equal(0, m.m[5].x)
    assert.are.equal("0a 04 08 05 12 00", hex(pc.encode(m)))
    local z = ok("t.M", "0a 00")
    assert.is_not_nil(z.m[0])
    assert.are.equal(0, z.m[0].x)
    assert.are.equal("b", ok("t.M", "12 03 12 01 62").s[""])
  end)

  it("keeps the last value of a duplicate map key", function()
    local m = ok("t.M", "0a 04 08 01 12 00 0a 06 08 01 12 02 08 07")
    assert.are.equal(7, m.m[1].x)
    assert.are.equal("0a 06 08 01 12 02 08 07", hex(pc.encode(m)))
  end)

  it("re-emits unknown fields of every wire type verbatim", function()
    for _, h in ipairs { "1b 08 01 1c", "08 96 01 12 02 68 69 1d 01 02 03 04 21 01 02 03 04 05 06 07 08" } do
      assert.are.equal(h, hex(pc.encode(ok("t.Empty", h))))
    end
  end)

  it("rejects broken groups and invalid wire types", function()
    assert.are.equal("t.Empty field 3: truncated input at offset 3", fails("t.Empty", "1b 08 01"))
    assert.are.equal("t.Empty field 3: end-group does not match its start-group at offset 1",
      fails("t.Empty", "1b 24"))
    assert.are.equal("t.Empty field 3: end-group without a start-group at offset 0",
      fails("t.Empty", "1c"))
    assert.are.equal("t.Empty field 1: invalid wire type at offset 0", fails("t.Empty", "0e"))
    assert.are.equal("t.Empty field 1: invalid wire type at offset 0", fails("t.Empty", "0f"))
  end)

  it("reads a proto2 group and writes it back as a group", function()
    local m = ok("t2.G", "1b 08 01 1c")
    assert.are.equal(1, m.grp.a)
    assert.are.equal("1b 08 01 1c", hex(pc.encode(m)))
  end)

  it("rejects field number 0, wide tags and numbers past 2^29-1", function()
    assert.are.equal("t.Empty: field number 0 at offset 0", fails("t.Empty", "00 01"))
    assert.are.equal("t.Empty: field number 0 at offset 0", fails("t.Empty", "05 de ad be ef"))
    assert.are.equal("t.I64: tag wider than 32 bits at offset 0",
      fails("t.I64", "88 80 80 80 40 d2 09"))
    assert.are.equal("t.Empty: tag wider than 32 bits at offset 0",
      fails("t.Empty", "f8 ff ff ff 1f 01"))
  end)

  it("rejects tags written in more than 5 bytes, as protoc and python3-protobuf do", function()
    assert.are.equal("t.I64: tag longer than 5 bytes at offset 0",
      fails("t.I64", "88 80 80 80 80 00 01"))
    assert.are.equal("t.Empty: tag longer than 5 bytes at offset 2",
      fails("t.Empty", "08 01 88 80 80 80 80 80 80 80 80 00 01"))
    -- five bytes within 32 bits is still field 1
    assert.are.equal(1, ok("t.I64", "88 80 80 80 00 01").r)
  end)

  it("keeps field 536870911 as an unknown field", function()
    assert.are.equal("f8 ff ff ff 0f 01", hex(pc.encode(ok("t.Empty", "f8 ff ff ff 0f 01"))))
  end)

  it("rejects truncated varints, 11-byte varints and lengths past the end", function()
    assert.are.equal("t.I64.r: truncated input at offset 1", fails("t.I64", "08 80"))
    assert.are.equal("t.I64.r: varint longer than 10 bytes at offset 1",
      fails("t.I64", "08 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 10 10 03"))
    assert.are.equal("t.Bin.raw: length runs past the end of the input at offset 1",
      fails("t.Bin", "12 05 61 62"))
  end)

  it("accepts a 10-byte varint of zero", function()
    local m = ok("t.I64", "08 80 80 80 80 80 80 80 80 80 00")
    assert.are.equal(0, m.r)
    assert.are.equal("", pc.encode(m))
  end)

  it("checks UTF-8 in proto3 strings, not in bytes", function()
    assert.are.equal("t.Bin.text: invalid UTF-8 in a string field at offset 1",
      fails("t.Bin", "0a 02 c0 80"))
    assert.are.equal("\192\128", ok("t.Bin", "12 02 c0 80").raw)
    assert.are.equal("caf\195\169", ok("t.Bin", "0a 05 63 61 66 c3 a9").text)
  end)

  it("parses 100 nested messages and refuses 101", function()
    local function nested(n)
      local s = ""
      for _ = 1, n do
        assert(#s < 128 * 128)
        local len = #s
        local lv = len < 128 and string.char(len) or string.char(len % 128 + 128, math.floor(len / 128))
        s = "\10" .. lv .. s
      end
      return s
    end
    local m, err = pc.decode(T "t.Rec", nested(100))
    assert(m, err)
    local depth, c = 0, m.child
    while c do depth, c = depth + 1, c.child end
    assert.are.equal(100, depth)
    local m2, err2 = pc.decode(T "t.Rec", nested(101))
    assert.is_nil(m2)
    assert.matches("^t%.Rec%.child: messages nested deeper than 100 %(max_depth%) at offset %d+$", err2)
  end)

  it("decodes at max_depth 1000 what re-encodes, merges, clones and assigns at that depth", function()
    -- max_depth once went to 10000, where decoding took ~300 bytes of stack a
    -- level (a segfault on a 2 MiB stack) while encode stopped at 1000 and
    -- assignment at 200. Now every operation handles 1000 levels, and no more.
    local function nested(n) -- n levels of t.Rec.child below the root
      local s = "\16\7"
      for _ = 1, n do
        local len, lv = #s, ""
        repeat
          local b = len % 128
          len = math.floor(len / 128)
          lv = lv .. string.char(b + (len > 0 and 128 or 0))
        until len == 0
        s = "\10" .. lv .. s
      end
      return s
    end
    local bytes = nested(1000)
    local m, err = pc.decode(T "t.Rec", bytes, { max_depth = 1000 })
    assert(m, err)
    assert.are.equal(bytes, pc.encode(m))
    assert.are.equal(bytes, pc.encode(pc.clone(m)))
    local into = T "t.Rec" {}
    pc.merge(into, m)
    assert.are.equal(m, into)
    local other = T "t.Rec" {}
    other.child = m.child -- 999 levels under a new root: 1000 again
    assert.are.equal(bytes, pc.encode(other))
    local top = T "t.Rec" {}
    -- 1001 levels: refused at the assignment (pc.encode would refuse it later)
    local assigned, e = pcall(function() top.child = m end)
    assert.is_false(assigned)
    assert.matches("t.Rec.child: the message would nest deeper than 1000 levels$", e)
    assert.is_nil(top.child)
    m, err = pc.decode(T "t.Rec", nested(1001), { max_depth = 1000 })
    assert.is_nil(m)
    assert.matches("^t%.Rec%.child: messages nested deeper than 1000 %(max_depth%) at offset %d+$", err)
    assert.are.equal("bad argument #3 to 'decode' (max_depth must be in 1..1000)",
      select(2, pcall(pc.decode, T "t.Rec", bytes, { max_depth = 10000 })))
  end)

  it("survives 200,000 nested start-groups", function()
    local m, err = pc.decode(T "t.Empty", string.rep("\11", 200000))
    assert.is_nil(m)
    assert.matches("nesting too deep at offset", err)
  end)

  it("writes -0.0 and skips proto3 defaults", function()
    local p = pc.pool()
    local D = p:message("z.D", { { "d", "double", 1 }, { "f", "float", 2 }, { "s", "string", 3 } })
    assert.are.equal("", pc.encode(D { d = 0.0, f = 0.0, s = "" }))
    assert.are.equal("09 00 00 00 00 00 00 00 80 15 00 00 00 80", hex(pc.encode(D { d = -0.0, f = -0.0 })))
  end)

  it("sorts map entries by key in deterministic mode", function()
    local m = T "t.M" { s = { b = "2", a = "1", c = "3" }, m = { [3] = {}, [-1] = {}, [2] = {} } }
    assert.are.equal(
      "0a 0d 08 ff ff ff ff ff ff ff ff ff 01 12 00 0a 04 08 02 12 00 0a 04 08 03 12 00 " ..
      "12 06 0a 01 61 12 01 31 12 06 0a 01 62 12 01 32 12 06 0a 01 63 12 01 33",
      hex(pc.encode(m, { deterministic = true })))
    local back = pc.decode(T "t.M", pc.encode(m))
    assert.are.equal("2", back.s.b)
  end)
end)

describe("pc.decode and pc.encode arguments", function()
  it("takes max_depth", function()
    local s = "\10\2\10\0" -- child { child {} }
    assert.is_not_nil(pc.decode(T "t.Rec", s, { max_depth = 2 }))
    local m, err = pc.decode(T "t.Rec", s, { max_depth = 1 })
    assert.is_nil(m)
    assert.are.equal("t.Rec.child: messages nested deeper than 1 (max_depth) at offset 3", err)
    assert.has_error(function() pc.decode(T "t.Rec", s, { max_depth = 0 }) end,
      "bad argument #3 to 'decode' (max_depth must be in 1..1000)")
  end)

  it("raises on misuse with Lua's wording", function()
    assert.has_error(function() pc.decode(T "t.Rec", 5) end,
      "bad argument #2 to 'decode' (string expected, got number)")
    assert.has_error(function() pc.decode("t.Rec", "") end)
    assert.has_error(function() pc.encode({}) end)
    assert.has_error(function() pc.encode(T "t.Rec" {}, 5) end)
    -- named 'decode' and 'encode' however they are called (pcall gives no name)
    local function message_of(...) return select(2, pcall(...)) end
    assert.are.equal("bad argument #2 to 'decode' (string expected, got nil)", message_of(pc.decode, T "t.Rec", nil))
    assert.are.equal("bad argument #1 to 'decode' (protocall.Type expected, got string)",
      message_of(pc.decode, "t.Rec", ""))
    assert.are.equal("bad argument #3 to 'decode' (table expected, got number)",
      message_of(pc.decode, T "t.Rec", "", 1))
    assert.are.equal("bad argument #3 to 'decode' (max_depth must be in 1..1000)",
      message_of(pc.decode, T "t.Rec", "", { max_depth = 1.5 }))
    -- a number, not a numeric string (Lua 5.4 would convert "10"; LuaJIT does not)
    assert.are.equal("bad argument #3 to 'decode' (max_depth must be in 1..1000)",
      message_of(pc.decode, T "t.Rec", "", { max_depth = "10" }))
    assert.are.equal("bad argument #3 to 'decode' (max_depth must be in 1..1000)",
      message_of(pc.decode, T "t.Rec", "", { max_depth = "10", table = true }))
    assert.is_not_nil(pc.decode(T "t.Rec", "", { max_depth = 10.0 }))
    assert.are.equal("bad argument #1 to 'encode' (message expected, got table)", message_of(pc.encode, {}))
    assert.are.equal("bad argument #2 to 'encode' (table expected, got number)", message_of(pc.encode, T "t.Rec" {}, 5))
  end)

  it("raises on an option it does not know, naming it, and takes every one it does", function()
    local function message_of(...) return select(2, pcall(...)) end
    local m = T "t.Rec" {}
    assert.are.equal("bad argument #3 to 'decode' (unknown option 'tabel')",
      message_of(pc.decode, T "t.Rec", "", { tabel = true }))
    assert.are.equal("bad argument #3 to 'decode' (unknown option '1')",
      message_of(pc.decode, T "t.Rec", "", { true }))
    -- a key that is no string, as tostring shows it (not confused with the option 'table')
    assert.matches("^bad argument #3 to 'decode' %(unknown option 'table: 0?x?%x+'%)$",
      message_of(pc.decode, T "t.Rec", "", { [{}] = true }))
    assert.are.equal("bad argument #2 to 'encode' (unknown option 'determinstic')",
      message_of(pc.encode, m, { determinstic = true }))
    assert.are.equal("bad argument #3 to 'encode' (unknown option 'table')",
      message_of(pc.encode, T "t.Rec", {}, { table = true }))
    -- the whole key, a NUL in it too: "partial\0" is not "partial"
    assert.are.equal("bad argument #3 to 'decode' (unknown option 'partial\0')",
      message_of(pc.decode, T "t.Rec", "", { ["partial\0"] = true }))
    assert.are.equal("bad argument #2 to 'encode' (unknown option 'deterministic\0x')",
      message_of(pc.encode, m, { ["deterministic\0x"] = true }))
    assert.are.equal("bad argument #2 to 'to_json' (unknown option 'indent\0')",
      message_of(pc.to_json, m, { ["indent\0"] = 2 }))
    -- a flag is a boolean (nil: unset)
    assert.are.equal("bad argument #2 to 'encode' (deterministic: boolean expected, got string)",
      message_of(pc.encode, m, { deterministic = "x" }))
    assert.are.equal("bad argument #3 to 'encode' (partial: boolean expected, got number)",
      message_of(pc.encode, T "t.Rec", {}, { partial = 1 }))
    assert.are.equal("bad argument #3 to 'decode' (table: boolean expected, got number)",
      message_of(pc.decode, T "t.Rec", "", { table = 1 }))
    assert.are.equal("bad argument #2 to 'to_json' (emit_defaults: boolean expected, got string)",
      message_of(pc.to_json, m, { emit_defaults = "yes" }))
    -- the ones it knows, together
    assert.are.same({}, pc.decode(T "t.Rec", "", { table = true, extensions = false, max_depth = 5, partial = true }))
    assert.are.equal("", pc.encode(m, { deterministic = true, partial = true }))
    assert.are.equal("", pc.encode(T "t.Rec", {}, { deterministic = true, partial = true }))
    assert.are.equal("", pc.encode(T "t.Rec", {}, { partial = false }))
    -- keys only an __index gives are read, not checked (no raw key)
    local opts = setmetatable({}, { __index = { table = true } })
    assert.are.same({}, pc.decode(T "t.Rec", "", opts))
  end)

  it("decodes all-number types with unknown fields too", function()
    local m = assert(pc.decode(T "t.I64", unhex "08 01 f8 01 07 10 02"))
    assert.are.equal(1, m.r)
    assert.are.equal(2, m.u)
    assert.are.equal("08 01 10 02 f8 01 07", hex(pc.encode(m)))
    m.r = 5
    assert.are.equal("08 05 10 02 f8 01 07", hex(pc.encode(m)))
  end)

  it("round-trips uint64 and fixed64 above 2^63 as negative integers", function()
    local m = T "t.I64" { u = -1, f = R.min64, s = R.min64, r = R.max64 }
    local back = assert(pc.decode(T "t.I64", pc.encode(m)))
    assert.are.equal(R.uint("18446744073709551615"), back.u)
    assert.are.equal(R.min64, back.f)
    assert.are.equal(R.min64, back.s)
    assert.are.equal(R.max64, back.r)
  end)
end)

describe("oneofs on the wire", function()
  local p = pc.pool()
  p:message("z.S", { { "x", "int32", 1 }, { "y", "int32", 2 } })
  local O = p:message("z.O", {
    { "a", "int32", 1, oneof = "k" }, { "s", "string", 2, oneof = "k" }, { "sub", "z.S", 3, oneof = "k" },
  })

  it("keeps the last member seen", function()
    local m = assert(pc.decode(O, unhex "08 05 12 01 61"))
    assert.are.equal("s", pc.which_oneof(m, "k"))
    assert.are.equal("a", m.s)
    assert.are.equal("12 01 61", hex(pc.encode(m)))
    m = assert(pc.decode(O, unhex "12 01 61 08 05"))
    assert.are.equal("a", pc.which_oneof(m, "k"))
    assert.are.equal(5, m.a)
  end)

  it("merges a message member seen twice, and starts afresh after another member", function()
    local m = assert(pc.decode(O, unhex "1a 02 08 01 1a 02 10 02"))
    assert.are.equal(1, m.sub.x)
    assert.are.equal(2, m.sub.y)
    m = assert(pc.decode(O, unhex "1a 02 08 01 08 07 1a 02 10 02"))
    assert.are.equal(0, m.sub.x)
    assert.are.equal(2, m.sub.y)
  end)

  it("writes a member set to its default", function()
    assert.are.equal("08 00", hex(pc.encode(O { a = 0 })))
  end)
end)

describe("encode and decode across kinds of messages", function()
  it("encodes views, standalone messages and other types in turn", function()
    local outer = assert(pc.decode(T "t2.Outer", unhex "2a 04 08 0a 10 2a"))
    local view = outer.sub
    local own = T "t2.Inner" { f1 = 10, f2 = 42 }
    for _ = 1, 3 do
      assert.are.equal("08 0a 10 2a", hex(pc.encode(view)))
      assert.are.equal("08 0a 10 2a", hex(pc.encode(own)))
      assert.are.equal("2a 04 08 0a 10 2a", hex(pc.encode(outer)))
      assert.has_error(function() pc.encode(T "t2.Inner") end)
      assert.are.equal(10, pc.decode(T "t2.Inner", "\8\10").f1)
      assert.are.equal(10, pc.decode(T "t2.Outer", "\42\2\8\10").sub.f1)
    end
  end)
end)
