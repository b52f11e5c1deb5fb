-- Plain Lua tables and the wire (bindings/lua/lpc_table.c). pc.encode(T, table):
-- every table gives the bytes pc.encode(T(table)) gives, and every table T{...}
-- refuses raises T{...}'s very error. pc.to_table(m) and pc.decode(T, bytes,
-- {table = true}): the tables a walk of the message through its fields gives.
local pc = require "protocall"
local R = require "runtime"
local corpus = require "corpus"

local pool = pc.pool()
pool:enum("te.E", { ZERO = 0, ONE = 1, TWO = 2 })
local Sub = pool:message("te.Sub", { { "x", "int32", 1 }, { "name", "string", 2 }, { "child", "te.Sub", 3 } })
local All = pool:message("te.All", {
  { "i32", "int32", 1 }, { "i64", "int64", 2 }, { "u32", "uint32", 3 }, { "u64", "uint64", 4 },
  { "s32", "sint32", 5 }, { "s64", "sint64", 6 }, { "f32", "fixed32", 7 }, { "f64", "fixed64", 8 },
  { "sf32", "sfixed32", 9 }, { "sf64", "sfixed64", 10 }, { "fl", "float", 11 }, { "d", "double", 12 },
  { "b", "bool", 13 }, { "s", "string", 14 }, { "by", "bytes", 15 }, { "e", "te.E", 16 },
  { "sub", "te.Sub", 17 },
  { "ri", "int32", 18, repeated = true }, { "ru", "int32", 19, repeated = true, packed = false },
  { "rd", "double", 20, repeated = true }, { "rs", "string", 21, repeated = true },
  { "rsub", "te.Sub", 22, repeated = true }, { "re", "te.E", 23, repeated = true },
  { "ms", "map<string,string>", 24 }, { "mi", "map<int64,te.Sub>", 25 }, { "mb", "map<bool,int32>", 26 },
  { "oi", "int32", 27, oneof = "o" }, { "os", "string", 28, oneof = "o" },
  { "opt", "int32", 29, optional = true }, { "big", "int32", 1000 },
  { "rf32", "fixed32", 30, repeated = true }, { "rsf64", "sfixed64", 31, repeated = true },
  { "rfl", "float", 32, repeated = true }, { "rb", "bool", 33, repeated = true },
})
local P2 = pool:message("te2.P2", { { "a", "int32", 1 }, { "req", "int32", 2, required = true } },
  { syntax = "proto2" })
pool:enum("te2.C", { C_ONE = 1 }, { syntax = "proto2" })
local P2E = pool:message("te2.P2E", { { "c", "te2.C", 1 } }, { syntax = "proto2" })

-- T{...} itself goes through pc.encode(T, table) for nested tables
-- (lpc_table_message): the reference is the message built field by field,
-- whose nested tables each become a message object.
local function built(T, t)
  local m = T()
  for k, v in pairs(t) do m[k] = v end
  return m
end

local function same_bytes(T, t)
  local direct = pc.encode(T, t)
  assert.are.equal(pc.encode(built(T, t)), direct)
  assert.are.equal(pc.encode(T(t)), direct)
  return direct
end

-- pcall(T, t) and pcall(pc.encode, T, t) on one line, so both errors carry the same position.
local function strip_position(e) return (tostring(e):gsub("^[^:]*:%d+: ", "")) end

local function same_error(T, t)
  local a, b = { pcall(T, t) }, { pcall(pc.encode, T, t) }
  assert.is_false(a[1])
  assert.is_false(b[1])
  assert.are.equal(a[2], b[2])
  return b[2]
end

describe("pc.encode(T, table)", function()
  it("writes what pc.encode(T{...}) writes, for every kind of field", function()
    local bytes = same_bytes(All, {
      i32 = -5, i64 = -2 ^ 40, u32 = 4294967295, u64 = -1, s32 = -7, s64 = -2 ^ 50,
      f32 = 123, f64 = R.int("1152921504606846976"), sf32 = -3, sf64 = -4, fl = 1.5, d = -0.0, b = true, s = "héllo",
      by = "\0\255", e = "TWO", sub = { x = 1, name = "n", child = { x = 2 } },
      ri = { 1, -1, 300, 0 }, ru = { 5, 0, 7 }, rd = { 0.5, -2 }, rs = { "a", "", "c" },
      rsub = { { x = 1 }, {}, { name = "z" } }, re = { 1, "TWO", 0 },
      ms = { a = "1", b = "" }, mi = { [-3] = { x = 3 }, [4] = {} }, mb = { [true] = 1, [false] = 0 },
      os = "", opt = 0, big = 9,
    })
    assert.is_true(#bytes > 100)
    assert.is_true(1 / pc.decode(All, bytes).d < 0) -- -0.0 is written
  end)

  it("makes T{...} of nested tables the message a field-by-field build makes", function()
    local t = { sub = { x = 1, child = { name = "c" } }, rsub = { {}, { x = 0 } }, os = "",
      opt = 0, d = -0.0, fl = 0.5, mi = { [7] = { child = {} } }, e = "ONE", s = "x" }
    local a, b = All(t), built(All, t)
    assert.are.equal(b, a)
    assert.are.equal("os", pc.which_oneof(a, "o"))
    assert.is_true(pc.has(a, "opt") and pc.has(a.sub, "child") and pc.has(a.mi[7], "child"))
    assert.is_true(1 / a.d < 0)
    assert.is_true(All{ fl = 0 / 0, sub = {} }.fl ~= All{ fl = 0 / 0, sub = {} }.fl)
    a.sub.child.x = 5 -- the tree is writable as any message
    assert.are.equal(5, pc.decode(All, pc.encode(a)).sub.child.x)
    -- tables T{...} builds another way (a message object inside) still work
    local obj = Sub{ x = 9 }
    local c = All{ sub = obj, rsub = { { x = 1 } } }
    assert.are.equal(obj, c.sub)
    c.sub.x = 10
    assert.are.equal(10, obj.x)
  end)

  it("keeps one entry per map key in a nested table, and refuses keys naming one twice as T{...} does", function()
    -- Lua 5.4 inserts a nested table's entries without a lookup: its keys
    -- must be distinct map keys (integral floats are integer keys there)
    local t = { sub = {}, mi = { [1] = { x = 1 }, [2.0] = { x = 2 }, [-0.0] = { x = 3 }, [-2 ^ 31] = {} } }
    local m = All(t)
    local n = 0
    for k, v in pc.pairs(m.mi) do
      n = n + 1
      assert.are.equal(t.mi[k].x or 0, v.x)
    end
    assert.are.equal(4, n)
    assert.are.equal(pc.encode(built(All, t), { deterministic = true }), pc.encode(m, { deterministic = true }))
    local bad = { sub = {}, mi = { [1] = {}, ["1"] = {} } }
    local want = R.luajit and "te.All.mi: two keys of the table are map key 1 %(LuaJIT"
      or "te.All.mi%[\"1\"%]: key: integer expected, got string"
    local ok, err = pcall(All, bad)
    assert.is_false(ok)
    assert.matches(want, err)
  end)

  it("sizes T{...}'s arena by the type's last tree, leaving out a big string's block of its own", function()
    local core = require "protocall.core"
    local S = pc.pool():message("ta.S",
      { { "name", "string", 2 }, { "child", "ta.S", 3 }, { "l", "ta.S", 4, repeated = true } })
    local small = { child = { name = "a" } }
    local first = core.arena_size(S(small))
    local big = string.rep("z", 200000)
    for _ = 1, 3 do -- the string's block is its own: the next tree's first block stays small
      local m = S{ child = { name = big } }
      assert.are.equal(big, m.child.name)
      assert.is_true(core.arena_size(m) - #big < 4096)
    end
    local wide = { l = {} }
    for i = 1, 5000 do wide.l[i] = { name = "x" } end
    assert.are.equal(5000, #S(wide).l)
    -- one first block of at most 64 KiB after the big tree, then small again
    local after = core.arena_size(S(small))
    assert.is_true(after > 32 * 1024 and after <= 64 * 1024 + 1024)
    assert.are.equal(first, core.arena_size(S(small)))
  end)

  it("omits implicit defaults and keeps explicit presence, as T{...} does", function()
    assert.are.equal("", same_bytes(All, { i32 = 0, s = "", b = false, e = 0, fl = 0.0, ri = {}, ms = {} }))
    assert.are.equal("\232\1\0", same_bytes(All, { opt = 0 }))
    assert.are.equal("\216\1\0", same_bytes(All, { oi = 0 }))
    assert.are.equal("\138\1\0", same_bytes(All, { sub = {} }))
  end)

  it("takes what T{...} takes beyond plain values: message objects, lists in any order, deep tables", function()
    same_bytes(All, { sub = Sub { x = 4 }, rsub = { Sub { x = 1 }, { x = 2 } } })
    same_bytes(All, { ri = { [3] = 3, [1] = 1, [2] = 2 } })
    local deep = { x = 0 }
    for i = 1, 150 do deep = { x = i, child = deep } end
    same_bytes(Sub, deep)
    -- two members of one oneof: T{...}'s error, the members in field-number order
    for _, t in ipairs { { oi = 1, os = "x" }, { os = "x", oi = 1 } } do
      local ok1, err1 = pcall(pc.encode, All, t)
      local ok2, err2 = pcall(All, t)
      assert.is_false(ok1 or ok2)
      assert.are.equal("te.All: oneof o set twice (by oi and os)", (tostring(err1):gsub("^[^:]*:%d+: ", "")))
      assert.are.equal((tostring(err1):gsub("^[^:]*:%d+: ", "")), (tostring(err2):gsub("^[^:]*:%d+: ", "")))
    end
    same_bytes(All, { oi = nil, os = "x" })
    same_bytes(P2, { a = 1, req = 2 })
    same_bytes(P2E, { c = "C_ONE" })
  end)

  -- Each table's keys and values stay on the stack for its caller to drop: a
  -- sub-message's once they take 64 slots, a list element's and a map entry's
  -- at once (bindings/lua/lpc_table.c, put_message); the fields after them are
  -- read from below what they left.
  it("writes every field after deep sub-messages, and lists and maps of them", function()
    local function chain(n, tag)
      local t = { x = n, name = tag .. n }
      for i = n - 1, 1, -1 do t = { x = i, name = tag .. i, child = t } end
      return t
    end
    local t = {
      i32 = 1, sub = chain(60, "s"), ri = { 1, 2 }, rsub = { chain(30, "r"), { x = 1 }, chain(12, "q") },
      ms = { a = "b" }, mi = { [1] = chain(40, "m"), [2] = { x = 2, child = { x = 3 } } }, os = "after",
      opt = 7, big = 9,
    }
    for _ = 1, 2 do -- the second call with the stack the first one grew
      local m = pc.decode(All, same_bytes(All, t))
      local last = m.sub
      for _ = 1, 59 do last = last.child end
      assert.are.same({ 60, "s60", 9, "after", 7 }, { last.x, last.name, m.big, m.os, m.opt })
    end
    -- 150 sub-messages of 30 fields side by side: 9,000 slots left by siblings,
    -- dropped once the call's tables take 2,048 (LuaJIT gives a C function 8,000)
    local wide = pc.pool()
    local vf, wf = {}, {}
    for i = 1, 30 do vf[i] = { "v" .. i, "int32", i } end
    for i = 1, 150 do wf[i] = { "s" .. i, "w.V", i } end
    wide:message("w.V", vf)
    local W = wide:message("w.W", wf)
    local w = {}
    for i = 1, 150 do
      local v = {}
      for j = 1, 30 do v["v" .. j] = i * 100 + j end
      w["s" .. i] = v
    end
    local m = pc.decode(W, same_bytes(W, w))
    assert.are.same({ 101, 15030 }, { m.s1.v1, m.s150.v30 })
  end)

  -- Keys "a<i>", "b<i>" and "c<i>" first, then 1, which lands in a free node of
  -- the hash part: where that node comes after theirs, next(t, #t) is nil though
  -- t holds other keys, so a list is known to have no other keys only from a walk
  -- begun at its first key (a walk of 1..#t then next(t, #t) would take these).
  it("refuses a list whose other keys come before its last index in the hash part, as T{...} does", function()
    local seen = 0
    for i = 1, 400 do
      for _, c in ipairs { { "ri", 5 }, { "ru", 5 }, { "rs", "v" }, { "rsub", { x = 1 } } } do
        local t = { ["a" .. i] = 1, ["b" .. i] = 2, ["c" .. i] = 3 }
        t[1] = c[2]
        if #t == 1 and next(t, 1) == nil then
          seen = seen + 1
          assert.matches("te%.All%." .. c[1], same_error(All, { [c[1]] = t }))
        end
      end
    end
    assert.is_true(seen > 0)
  end)

  it("takes a number into a 64-bit field where a write of the field takes it, else raises its error", function()
    -- LuaJIT: numbers within +-2^53 only (past it a double may be a rounded
    -- literal: 2^53 + 1 reads as 2^53); Lua 5.4: floats with an integer value
    local function strip(e) return (tostring(e):gsub("^[^:]*:%d+: ", "")) end
    for _, v in ipairs { 2 ^ 53, -2 ^ 53, 2 ^ 53 + 2, -2 ^ 60, 1e18, 2 ^ 63 } do
      local cases = { { "mi", { [v] = {} }, function(m) m.mi[v] = {} end } }
      for _, k in ipairs { "i64", "u64", "s64", "f64", "sf64" } do
        cases[#cases + 1] = { k, v, function(m) m[k] = v end }
      end
      for _, c in ipairs(cases) do
        local ok, err = pcall(c[3], All())
        local t = { [c[1]] = c[2] }
        if ok then
          same_bytes(All, t)
        else
          assert.are.equal(strip(err), strip(same_error(All, t)), c[1] .. " = " .. v)
        end
      end
    end
    if R.luajit then
      assert.matches("te.All.u64: number 1%.152921504606847e%+18 is not an integer in %-2%^53%.%.2%^53",
                     same_error(All, { u64 = 2 ^ 60 }))
      assert.matches("te.All.mi%[1%.1529215046068e%+18%]: key: number 1%.152921504606847e%+18 is not an integer",
                     same_error(All, { mi = { [2 ^ 60] = {} } }))
    end
  end)

  it("takes a decimal string into a 64-bit field as a write of the field does under LuaJIT, else raises its error",
     function()
    local function strip(e) return (tostring(e):gsub("^[^:]*:%d+: ", "")) end
    local strings = { "0", "-1", "42", "0042", "-9223372036854775808", "9223372036854775807",
                      "9223372036854775808", "18446744073709551615", "18446744073709551616", "-",
                      "", "1.5", " 1", "+1", "0x10", "1\0002" }
    for _, s in ipairs(strings) do
      for _, k in ipairs { "i64", "u64", "s64", "f64", "sf64" } do
        local ok, err = pcall(function(m) m[k] = s end, All())
        local t = { [k] = s }
        if ok then
          same_bytes(All, t)
          same_bytes(All, { rsub = { {} }, sub = { x = 1 }, [k] = s }) -- beside nested tables
        else
          assert.are.equal(strip(err), strip(same_error(All, t)), k .. " = " .. s)
        end
      end
    end
    -- a map's int64 keys: "1" and 1 may name one key, which T{...} checks
    if R.luajit then
      same_bytes(All, { mi = { ["5"] = { x = 1 } } })
      assert.matches("te.All.mi", same_error(All, { mi = { ["5"] = {}, [5] = {} } }))
    else
      assert.matches("te.All.i64: integer expected, got string", same_error(All, { i64 = "1" }))
    end
  end)

  it("sorts map entries with {deterministic = true} as pc.encode does", function()
    local t = { ms = { b = "2", a = "1", c = "3" }, mi = { [9] = { x = 9 }, [1] = { x = 1 } } }
    assert.are.equal(pc.encode(All(t), { deterministic = true }), pc.encode(All, t, { deterministic = true }))
  end)

  it("raises T{...}'s error, naming type.field", function()
    assert.matches("te.All.nope: no such field", same_error(All, { nope = 1 }))
    assert.matches("te.All.i32: integer expected, got string", same_error(All, { i32 = "1" }))
    assert.matches("te.All.i32: value 2147483648 out of range for int32", same_error(All, { i32 = 2147483648 }))
    assert.matches("te.All.u32: value %-1 out of range for uint32", same_error(All, { u32 = -1 }))
    assert.matches("te.All.i64: integer expected, got 1%.5", same_error(All, { i64 = 1.5 }))
    assert.matches("te.All.u32: integer expected, got 1%.5", same_error(All, { u32 = 1.5 }))
    assert.matches("te.All.ri%[1%]: integer expected, got 2%.5", same_error(All, { ri = { 1, 2.5 } }))
    assert.matches("te.All.s: string expected, got number", same_error(All, { s = 1 }))
    assert.matches("te.All.b: boolean expected, got number", same_error(All, { b = 1 }))
    assert.matches("te.All.e: unknown value 'THREE' for enum te.E", same_error(All, { e = "THREE" }))
    assert.matches("te.All.sub.child.x: integer expected, got boolean",
      same_error(All, { sub = { child = { x = true } } }))
    -- LuaJIT's # of { 1, nil, 3 } is 1, so key 3 is the one past the list
    assert.matches(R.luajit and "te.All.ri: list expected, got a table with key 3 beyond its # %(1%)"
                   or "te.All.ri: list expected, got a table with a hole at element 2 within its # %(3%)",
                   same_error(All, { ri = { 1, nil, 3 } }))
    assert.matches("te.All.ri: list expected, got a table with key 3 beyond its # %(1%)",
                   same_error(All, { ri = { 1, [3] = 3 } }))
    assert.matches("te.All.ri: list expected, got a table with key \"k\"", same_error(All, { ri = { 1, k = 2 } }))
    -- an element names its index (as Lua counts), an entry its key
    local function raises(text, t) assert.are.equal(text, strip_position(same_error(All, t))) end
    raises("te.All.rsub[0]: te.Sub expected, got number", { rsub = { 1 } })
    raises("te.All.ri[2]: integer expected, got string", { ri = { 1, 2, "3" } })
    raises("te.All.rs[1]: string expected, got boolean", { rs = { "a", true } })
    raises("te.All.re[0]: unknown value 'THREE' for enum te.E", { re = { "THREE" } })
    raises('te.All.ms["k"]: string expected, got number', { ms = { k = 1 } })
    raises("te.All.mb[true]: integer expected, got string", { mb = { [true] = "1" } })
    raises("te.All.mi[7]: te.Sub expected, got boolean", { mi = { [7] = true } })
    raises("te.All.sub: te.Sub expected, got protocall.Type", { sub = All })
    raises(R.luajit and 'te.All.mi["k"]: key: decimal integer string expected, got "k"'
                     or 'te.All.mi["k"]: key: integer expected, got string', { mi = { k = {} } })
    assert.matches("2 is not a value of closed enum te2.C", same_error(P2E, { c = 2 }))
    local cycle = { x = 1 }
    cycle.child = cycle
    assert.matches("te.Sub.child: table with a cycle given to the constructor", same_error(Sub, cycle))
    assert.matches("^[^:]+:%d+: ", same_error(All, { nope = 1 })) -- the caller's position first
  end)

  it("names the whole path of an error below the first table: elements, entries, fields", function()
    local function raises(text, t) assert.are.equal(text, strip_position(same_error(All, t))) end
    raises("te.All.rsub[1].x: integer expected, got string", { rsub = { { x = 1 }, { x = "2" } } })
    raises('te.All.mi[7].name: string expected, got number', { mi = { [7] = { name = 5 } } })
    raises("te.All.sub.child.child.x: value 2147483648 out of range for int32",
      { sub = { child = { child = { x = 2 ^ 31 } } } })
    raises("te.All.rsub[0].child: te.Sub expected, got number", { rsub = { { child = 3 } } })
    raises("te.All.mi[7].child.nope: no such field", { mi = { [7] = { child = { nope = 1 } } } })
    raises("te.All.sub: field name expected, got number", { sub = { [1] = 1 } })
    raises("te.All.rsub[0].child.child.x: integer expected, got boolean",
      { rsub = { { child = { child = { x = true } } } } })
    -- a message object inside the table, which only T{...} takes, names it too
    raises("te.All.rsub[1].name: string expected, got boolean", { rsub = { Sub { x = 1 }, { name = true } } })
  end)

  it("reads a proxy (no entries of its own, a metatable) through __index, __len and __pairs, as T{...} does", function()
    local backing = { i32 = 5, s = "hi", sub = { x = 3 }, ri = { 1, 2 }, ms = { a = "1" } }
    local proxy = setmetatable({}, { __index = backing })
    assert.are.equal(pc.encode(All(backing)), pc.encode(All, proxy))
    assert.are.equal(pc.encode(All(backing)), pc.encode(All(proxy)))
    -- nested: a sub-message, a list element, a list, a map
    local sub = setmetatable({}, { __index = { x = 9, name = "n" } })
    local list = setmetatable({}, { __len = function() return 3 end,
      __index = function(_, i) return i <= 3 and i * 10 or nil end })
    local map = setmetatable({}, { __pairs = function() return next, { b = "2" }, nil end })
    local t = { sub = sub, rsub = { {}, sub }, ri = list, ms = map }
    local want = All { sub = { x = 9, name = "n" }, rsub = { {}, { x = 9, name = "n" } }, ri = { 10, 20, 30 },
      ms = { b = "2" } }
    assert.are.equal(pc.encode(want), pc.encode(All, t))
    assert.are.equal(pc.encode(want), pc.encode(All(t)))
    -- tables with entries of their own are read raw: a class's methods are no fields
    local Class = { describe = function() end, i32 = 7 }
    Class.__index = Class
    assert.are.equal(pc.encode(All { s = "x" }), pc.encode(All, setmetatable({ s = "x" }, Class)))
    assert.are.equal(pc.encode(All { s = "x" }), pc.encode(All(setmetatable({ s = "x" }, Class))))
    -- what cannot be read whole raises rather than losing elements
    local short = setmetatable({}, { __index = function(_, i) if i <= 2 then return i end end })
    assert.are.equal("te.All.ri: list expected, got a table with element 1 beyond its # (0)",
      strip_position(same_error(All, { ri = short })))
    local unlisted = setmetatable({}, { __index = function() return "0" end })
    assert.are.equal("te.All.ms: table without entries whose __index cannot be listed (no __pairs)",
      strip_position(same_error(All, { ms = unlisted })))
    assert.are.equal("te.All.i32: integer expected, got string",
      strip_position(same_error(All, setmetatable({}, { __index = { i32 = "1" } }))))
  end)

  it("raises T{...}'s error for a proto3 string that is not UTF-8, naming its place and first bad byte", function()
    local function raises(text, t) assert.are.equal(text, strip_position(same_error(All, t))) end
    raises("te.All.s: invalid UTF-8 at byte 1", { s = "\255" })
    raises("te.All.os: invalid UTF-8 at byte 3", { os = "ab\192\128" })
    raises("te.All.rs[1]: invalid UTF-8 at byte 2", { rs = { "ok", "a\237\160\128" } })
    raises('te.All.ms["k"]: invalid UTF-8 at byte 1', { ms = { k = "\128" } })
    raises('te.All.ms["\\226\\130"]: key: invalid UTF-8 at byte 1', { ms = { ["\226\130"] = "v" } })
    raises("te.All.sub.child.name: invalid UTF-8 at byte 4", { sub = { child = { name = "abc\255" } } })
    raises("te.All.rsub[1].name: invalid UTF-8 at byte 1", { rsub = { {}, { name = "\255" } } })
    raises("te.All.mi[7].name: invalid UTF-8 at byte 1", { mi = { [7] = { name = "\255" } } })
    -- UTF-8 of every length is taken, bytes fields take any bytes
    same_bytes(All, { s = "caf\195\169", rs = { "\240\159\152\128" }, ms = { ["\226\130\172"] = "\195\169" },
                      sub = { name = "\226\130\172" }, by = "\255" })
  end)

  it("refuses a non-table after a Type", function()
    local ok, err = pcall(pc.encode, All, 5)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'encode' %(table expected, got number%)", err)
  end)

  it("finds each call's sub-message types when Types come and go between calls", function()
    -- Calls on one Type reuse the types the last call met; a Type collected
    -- and another made (maybe at its address) must not find them.
    local t = { x = 1, name = "a", child = { x = 2, child = { name = "b" } } }
    local want = pc.encode(built(Sub, t))
    for i = 1, 40 do
      local p = pc.pool()
      local S = p:message("te.Sub", { { "x", "int32", 1 }, { "name", "string", 2 }, { "child", "te.Sub", 3 } })
      local Holder = p:message("te.Holder", { { "sub", "te.Sub", 1 }, { "n", "int32", 2 } })
      assert.are.equal(want, pc.encode(S, t))
      assert.are.equal(want, pc.encode(S(t)))
      assert.are.equal(pc.encode(Holder()), pc.encode(Holder, {}))
      local h = Holder { sub = t, n = i }
      assert.are.same({ 2, "b", i }, { h.sub.child.x, h.sub.child.child.name, h.n })
      assert.are.equal(pc.encode(h), pc.encode(Holder, { sub = t, n = i }))
      collectgarbage()
      collectgarbage()
    end
    -- another root in between: its types, then the first root's again
    assert.are.equal(want, pc.encode(Sub, t))
    assert.are.equal(pc.encode(All { sub = t }), pc.encode(All, { sub = t }))
    assert.are.equal(want, pc.encode(Sub, t))
  end)

  it("gives pc.encode(T{...})'s bytes for the plain table of every binary corpus payload", function()
    local manifest = corpus.read("payloads/MANIFEST.tsv")
    if not manifest then return corpus.skip(pending, "corpus payloads from tables") end
    local pools, count = {}, 0
    for line in manifest:gmatch("[^\n]+") do
      local file, _, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
      if format == "binary" then
        local project = file:match("^([^/]+)/")
        if not pools[project] then
          pools[project] = pc.pool()
          assert(pools[project]:load_descriptor_set(assert(corpus.read("descriptors/" .. project .. ".pb"))))
        end
        local T = assert(pools[project]:type(mtype), mtype)
        local t = pc.to_table(assert(pc.decode(T, assert(corpus.read("payloads/" .. file)))))
        same_bytes(T, t)
        count = count + 1
      end
    end
    assert.is_true(count >= 5)
    local otlp = corpus.read("payloads/opentelemetry/otlp_traces.bin")
    local T = pools.opentelemetry:type("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
    assert.are.equal(otlp, pc.encode(T, pc.to_table(pc.decode(T, otlp))))
  end)

  end)

-- The reference: a message walked through pc.fields and reads, as a Lua
-- program would build its plain table.
local function walk_table(m)
  local t = {}
  for _, info in ipairs(pc.fields(pc.type_of(m))) do
    local name = info.name
    if require("protocall.core").is_set(m, name) then -- set, with or without presence
      local v = m[name]
      local function plain(x) if type(x) == "userdata" then return walk_table(x) end return x end
      if info.type:sub(1, 4) == "map<" then
        local r = {}
        for k, x in pc.pairs(v) do r[k] = plain(x) end
        t[name] = r
      elseif info.label == "repeated" then
        local r = {}
        for i = 1, #v do r[i] = plain(v[i]) end
        t[name] = r
      else
        t[name] = plain(v)
      end
    end
  end
  return t
end

-- The key of t equal to k: k itself, except for LuaJIT's 64-bit map keys
-- beyond 2^53, cdata that are equal but not the same table key.
local function key_in(t, k)
  if type(k) ~= "cdata" then return k end
  for k2 in pairs(t) do
    if type(k2) == "cdata" and k2 == k then return k2 end
  end
  return k
end

-- Deep equality where NaN equals NaN (the corpus carries NaNs).
local function same_tables(a, b, path)
  path = path or "t"
  assert(type(a) == type(b), path .. ": " .. type(a) .. " against " .. type(b))
  if type(a) ~= "table" then
    assert(a == b or (a ~= a and b ~= b), path .. ": " .. tostring(a) .. " against " .. tostring(b))
    return
  end
  for k, v in pairs(a) do same_tables(v, b[key_in(b, k)], path .. "." .. tostring(k)) end
  for k in pairs(b) do assert(a[key_in(a, k)] ~= nil, path .. "." .. tostring(k) .. ": not expected") end
end

describe("pc.to_table and pc.decode(T, bytes, {table = true})", function()
  it("give the tables a walk of the message gives", function()
    local m = All { i32 = -5, u64 = -1, fl = 1.5, s = "x", e = "TWO", sub = { child = {} },
      ri = { 1, 2 }, rsub = { {}, { x = 1 } }, re = { 1, 0 }, ms = { a = "b" }, mi = { [7] = { x = 7 } },
      mb = { [true] = 0 }, oi = 0, opt = 0 }
    local want = walk_table(m)
    assert.are.same(want, pc.to_table(m))
    assert.are.same(want, pc.decode(All, pc.encode(m), { table = true }))
    assert.are.same({}, pc.decode(All, "", { table = true }))
    assert.are.same({ x = 3 }, pc.decode(Sub, "\8\3", { table = true }))
    local Point = pool:message("te.Point", { { "x", "uint32", 1 }, { "y", "uint32", 2 } }) -- all numbers
    assert.are.same({ y = 2 }, pc.decode(Point, "\16\2", { table = true }))
    local none, err = pc.decode(All, "\8", { table = true })
    assert.is_nil(none)
    assert.matches("te.All.i32", err)
  end)

  it("match the walk past the per-type name plan's 64 types and with many 64-bit values", function()
    -- A chain of 70 types: those past the plan's 64 set their fields by name.
    local chain = {}
    for i = 70, 1, -1 do
      local fields = { { "v", "sint64", 1 }, { "w", "string", 2 }, { "o", "fixed64", 3, oneof = "k" } }
      if i < 70 then fields[4] = { "next", "tc.C" .. (i + 1), 4 } end
      chain[i] = pool:message("tc.C" .. i, fields)
    end
    local m
    for i = 70, 1, -1 do m = chain[i] { v = -i, w = "w" .. i, o = i % 2 == 0 and i or nil, next = m } end
    local bytes = pc.encode(m)
    same_tables(walk_table(m), pc.to_table(m), "chain")
    same_tables(walk_table(m), pc.decode(chain[1], bytes, { table = true }), "chain")
    same_tables(walk_table(m.next.next), pc.to_table(m.next.next), "chain.next.next")
    -- 64-bit values in lists, maps and sub-messages, more than a call keeps on the C stack.
    local Wide = pool:message("tc.Wide", {
      { "u", "uint64", 1 }, { "ri", "int64", 2, repeated = true }, { "ru", "fixed64", 3, repeated = true },
      { "mi", "map<int64,sfixed64>", 4 }, { "subs", "tc.C69", 5, repeated = true }, { "ms", "map<string,tc.C70>", 6 },
    })
    local w = Wide { u = R.uint("18446744073709551615"), ri = {}, ru = {}, mi = {}, subs = {}, ms = {} }
    for i = 1, 100 do
      w.ri[i] = R.int("-9007199254740993") + i
      w.ru[i] = R.int("9007199254740993") + i
      w.mi[i * 1000] = -i
    end
    for i = 1, 30 do
      w.subs[i] = chain[69] { v = i, next = { v = -i } }
      w.ms["k" .. i] = chain[70] { v = R.int("4611686018427387904") + i }
    end
    same_tables(walk_table(w), pc.to_table(w), "wide")
    same_tables(walk_table(w), pc.decode(Wide, pc.encode(w), { table = true }), "wide")
  end)

  it("match the walk for every binary corpus payload", function()
    local manifest = corpus.read("payloads/MANIFEST.tsv")
    if not manifest then return corpus.skip(pending, "corpus payloads to tables") end
    local pools = {}
    for line in manifest:gmatch("[^\n]+") do
      local file, _, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
      if format == "binary" then
        local project = file:match("^([^/]+)/")
        if not pools[project] then
          pools[project] = pc.pool()
          assert(pools[project]:load_descriptor_set(assert(corpus.read("descriptors/" .. project .. ".pb"))))
        end
        local T = assert(pools[project]:type(mtype), mtype)
        local bytes = assert(corpus.read("payloads/" .. file))
        local want = walk_table(assert(pc.decode(T, bytes)))
        same_tables(want, pc.to_table(pc.decode(T, bytes)), file)
        same_tables(want, pc.decode(T, bytes, { table = true }), file)
      end
    end
  end)
end)

-- pc.decode(T, bytes, {table = true}) reads the wire straight into tables
-- (lpc_decode_plain) and leaves to a decode into an arena whatever it does
-- not take exactly; core.decode_direct is that first path alone (false
-- where it gives up). Both must give what pc.to_table(pc.decode(T, bytes))
-- gives, errors included.
describe("pc.decode(T, bytes, {table = true}) straight from the wire", function()
  local core = require "protocall.core"
  local dp = pc.pool()
  assert(dp:load([[
    syntax = "proto3";
    package td;
    enum E { Z = 0; A = 1; B = 2; }
    message Sub { int32 x = 1; string name = 2; Sub child = 3; map<string, int32> tags = 4; }
    message Node { Node child = 3; map<string, Node> m = 4; }
    message M {
      int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5; sint64 s64 = 6;
      fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10; float fl = 11; double d = 12;
      bool b = 13; string s = 14; bytes by = 15; E e = 16; Sub sub = 17;
      repeated int32 ri = 18; repeated sint64 rs64 = 19 [packed = false]; repeated double rd = 20;
      repeated string rs = 21; repeated Sub rsub = 22; repeated E re = 23; repeated fixed32 rf = 24;
      oneof o { int32 oi = 25; string os = 26; Sub osub = 27; }
      optional int32 opt = 28; optional string ostr = 29;
      int32 big = 1000; string huge = 100000;
      map<string, int32> ms = 30; map<int64, Sub> mi = 31; map<bool, E> mb = 32; map<uint64, sint64> mu = 33;
    }
  ]], { name = "td.proto" }))
  assert(dp:load([[
    syntax = "proto2";
    package td2;
    enum C { ONE = 1; TWO = 2; }
    enum C2 { Z2 = 0; K2 = 3; }
    message P {
      required int32 req = 1; optional int32 a = 2 [default = 5]; optional C c = 3; repeated C rc = 4;
      optional string s = 5; optional P child = 6; optional group G = 7 { optional int32 g = 1; }
      map<int32, C2> mc = 8;
      extensions 100 to 199;
    }
    extend P { optional int32 ext = 100; }
  ]], { name = "td2.proto" }))
  local M, TdSub, P = dp:type("td.M"), dp:type("td.Sub"), dp:type("td2.P")

  -- What the arena path gives: the tables, or nil and the error.
  local function reference(T, bytes, opts)
    local m, err = pc.decode(T, bytes, opts)
    if not m then return nil, err end
    return pc.to_table(m)
  end

  -- Checks decode{table} against the reference; returns whether the direct
  -- path took the input (and then its tables are checked too).
  local function check(T, bytes, what, opts)
    local want, want_err = reference(T, bytes, opts)
    local topts = { table = true }
    for k, v in pairs(opts or {}) do topts[k] = v end
    local got, err = pc.decode(T, bytes, topts)
    if want == nil then
      assert(got == nil, what .. ": tables where the decoder fails with " .. tostring(want_err))
      assert.are.equal(want_err, err, what)
    else
      same_tables(want, got, what)
    end
    local direct = core.decode_direct(T, bytes, opts and opts.max_depth, opts and opts.partial)
    if direct == false then return false end
    assert(want ~= nil, what .. ": the direct path took input the decoder refuses: " .. tostring(want_err))
    same_tables(want, direct, what .. " (direct)")
    return true
  end

  local function varint(v)
    local out = {}
    repeat
      local b = v % 128
      v = (v - b) / 128
      out[#out + 1] = string.char(v > 0 and b + 128 or b)
    until v == 0
    return table.concat(out)
  end
  local function tag(n, wt) return varint(n * 8 + wt) end
  local function len(n, body) return tag(n, 2) .. varint(#body) .. body end

  it("takes plain input and gives the decoder's tables, values and presence alike", function()
    local m = M { i32 = -7, i64 = R.int("-9007199254740993"), u32 = 4294967295, u64 = R.uint("18446744073709551615"),
      s32 = -2147483648, s64 = R.int("-9223372036854775808"), f32 = 1, f64 = R.uint("9007199254740993"),
      sf32 = -1, sf64 = -2, fl = -0.0, d = 0 / 0, b = true, s = "héllo", by = "\0\255", e = "B",
      sub = { x = 1, child = { name = "c" } }, ri = { 1, -1, 300 }, rs64 = { -5, 5 }, rd = { 0.5 },
      rs = { "", "a" }, rsub = { {}, { x = 2 } }, re = { 0, 7 }, rf = { 1, 2 }, osub = {}, opt = 0, ostr = "",
      big = 3, huge = "h" }
    assert.is_true(check(M, pc.encode(m), "every kind of field"))
    assert.is_true(check(M, "", "empty input"))
    assert.is_true(check(TdSub, pc.encode(TdSub { child = { child = { child = {} } } }), "nested"))
    -- Implicit defaults on the wire are not set; presence keeps them.
    local zeros = tag(1, 0) .. "\0" .. tag(14, 2) .. "\0" .. tag(11, 5) .. "\0\0\0\0" .. len(18, "")
      .. tag(28, 0) .. "\0" .. tag(25, 0) .. "\0"
    assert.is_true(check(M, zeros, "zeros on the wire"))
    assert.are.same({ opt = 0, oi = 0 }, pc.decode(M, zeros, { table = true }))
    -- Unknown fields and fields of another wire type are left out.
    local odd = tag(500, 0) .. "\1" .. tag(1, 2) .. "\1x" .. tag(2, 0) .. "\5" .. tag(501, 5) .. "\1\2\3\4"
      .. tag(502, 3) .. tag(1, 0) .. "\1" .. tag(502, 4)
    assert.is_true(check(M, odd, "unknown fields"))
    assert.are.same({ i64 = R.int("5") }, pc.decode(M, odd, { table = true }))
    -- Packed and unpacked elements in one run.
    local mixed = tag(18, 0) .. "\1" .. len(18, "\2\3") .. tag(18, 0) .. "\4" .. len(19, "\3")
    assert.is_true(check(M, mixed, "packed and unpacked"))
    assert.are.same({ ri = { 1, 2, 3, 4 }, rs64 = { -2 } }, pc.decode(M, mixed, { table = true }))
    -- Map entries: a missing key or value is its default, a repeated key or part keeps the last.
    local maps = len(30, len(1, "a") .. tag(2, 0) .. "\1") .. len(30, tag(2, 0) .. "\2") .. len(30, len(1, "a"))
      .. len(30, tag(2, 0) .. "\5" .. tag(2, 0) .. "\6" .. len(1, "b") .. tag(9, 0) .. "\1")
      .. len(31, tag(1, 0) .. "\7") .. len(31, len(2, tag(1, 0) .. "\3") .. tag(1, 0) .. "\8")
      .. len(32, "") .. len(33, tag(1, 0) .. "\3" .. tag(2, 0) .. "\3")
    assert.is_true(check(M, maps, "maps"))
    same_tables({ ms = { a = 0, [""] = 2, b = 6 }, mi = { [7] = {}, [8] = { x = 3 } }, mb = { [false] = 0 },
      mu = { [3] = R.int("-2") } }, pc.decode(M, maps, { table = true }), "maps")
    assert.is_true(check(P, tag(1, 0) .. "\1" .. len(8, tag(1, 0) .. "\4"), "a closed enum's missing value"))
    -- A type of 100 fields, the last required.
    local wide = { 'syntax = "proto2"; package tw; message W {' }
    for i = 1, 99 do wide[#wide + 1] = ("optional int32 f%d = %d;"):format(i, i) end
    wide[#wide + 1] = "required string last = 100; }"
    assert(dp:load(table.concat(wide, " "), { name = "tw.proto" }))
    local W = dp:type("tw.W")
    local w = tag(70, 0) .. "\7" .. tag(99, 0) .. "\9" .. len(100, "z")
    assert.is_true(check(W, w, "100 fields"))
    same_tables({ f70 = 7, f99 = 9, last = "z" }, pc.decode(W, w, { table = true }), "100 fields")
    assert.is_false(check(W, tag(70, 0) .. "\7", "100 fields, the required one missing"))
    assert.is_false(check(W, w .. tag(99, 0) .. "\1", "100 fields, field 99 twice"))
    local p2 = P { req = 0, c = "TWO", rc = { "ONE" }, s = "\255", child = { req = 1 }, mc = { [3] = "K2" } }
    assert.is_true(check(P, pc.encode(p2), "proto2"))
    assert.is_true(check(P, tag(2, 0) .. "\0", "partial", { partial = true }))
  end)

  it("gives up where the decoder's rules differ from setting each field once", function()
    local cases = {
      { M, tag(1, 0) .. "\1" .. tag(1, 0) .. "\2", { i32 = 2 }, "a scalar twice: the last wins" },
      { M, len(17, tag(1, 0) .. "\1") .. len(17, len(2, "n")), { sub = { x = 1, name = "n" } },
        "a sub-message twice: they merge" },
      { M, tag(25, 0) .. "\1" .. len(26, "s"), { os = "s" }, "two members of one oneof: the last wins" },
      { M, tag(18, 0) .. "\1" .. tag(1, 0) .. "\1" .. tag(18, 0) .. "\2", { ri = { 1, 2 }, i32 = 1 },
        "a repeated field in two runs: one list" },
      { M, tag(23, 0) .. "\1" .. tag(18, 0) .. "\9" .. tag(23, 0) .. "\2", { re = { 1, 2 }, ri = { 9 } },
        "an open enum in two runs" },
      { P, tag(1, 0) .. "\1" .. tag(3, 0) .. "\9", { req = 1 }, "a closed enum's unknown value" },
      { P, tag(1, 0) .. "\1" .. tag(4, 0) .. "\1" .. tag(4, 0) .. "\9", { req = 1, rc = { 1 } },
        "a closed enum's unknown value in a list" },
      { P, tag(1, 0) .. "\1" .. tag(100, 0) .. "\5", { req = 1 }, "an extension" },
      { P, tag(1, 0) .. "\1" .. tag(7, 3) .. tag(1, 0) .. "\4" .. tag(7, 4), { req = 1, g = { g = 4 } },
        "a group" },
      { M, len(31, len(2, len(1, "a")) .. len(2, len(2, "b"))), { mi = { [0] = { name = "b" } } },
        "a map entry's message value twice: they merge" },
      { P, tag(1, 0) .. "\1" .. len(8, tag(1, 0) .. "\1" .. tag(2, 0) .. "\9"), { req = 1 },
        "a map entry with a closed enum's unknown value" },
    }
    if R.luajit then -- 64-bit keys past 2^53 are cdata, which two equal keys would not share
      cases[#cases + 1] = { M, len(33, tag(1, 0) .. "\255\255\255\255\255\255\255\255\255\1"), nil, "a uint64 key" }
    end
    for _, c in ipairs(cases) do
      local T, bytes, want, what = c[1], c[2], c[3], c[4]
      assert.is_false(check(T, bytes, what), what)
      if want then same_tables(want, pc.decode(T, bytes, { table = true }), what) end
    end
    -- Refused input: the decoder's error, word for word.
    local bad = {
      { M, tag(14, 2) .. "\2\255\254", "bad UTF-8" },
      { P, tag(2, 0) .. "\1", "a required field missing" },
      { P, tag(1, 0) .. "\1" .. len(6, tag(2, 0) .. "\1"), "a nested required field missing" },
      { M, tag(1, 0) .. "\128", "a cut varint" },
      { M, len(17, "\8"), "a cut sub-message" },
      { M, tag(1, 0) .. "\255\255\255\255\255\255\255\255\255\255\1", "an 11-byte varint" },
      { M, len(24, "\1\2\3"), "a packed fixed32 run of 3 bytes" },
      { M, len(18, "\128"), "a packed run ending inside a varint" },
      { M, "\0", "field 0" },
      { M, tag(1, 7), "wire type 7" },
      { M, tag(1, 4), "an end-group alone" },
      { M, tag(500, 2) .. "\5ab", "an unknown field past the end" },
    }
    for _, c in ipairs(bad) do
      assert.is_false(check(c[1], c[2], c[3]), c[3])
      assert.is_nil((pc.decode(c[1], c[2], { table = true })), c[3])
    end
  end)

  it("stops at the decoder's depth limit, and the decoder says where", function()
    local function nested(n)
      local b = ""
      for _ = 1, n do b = len(3, b) end
      return b
    end
    for _, depth in ipairs({ 1, 2, 5 }) do
      for n = depth - 1, depth + 1 do
        check(TdSub, nested(n), ("%d levels, max_depth %d"):format(n, depth), { max_depth = depth })
      end
    end
    -- A map entry is a level, and its message value one more.
    local function tagged(n) -- n levels of child, then a map entry
      local b = len(4, len(1, "t") .. tag(2, 0) .. "\1")
      for _ = 1, n do b = len(3, b) end
      return b
    end
    for _, depth in ipairs({ 1, 2, 3 }) do
      for n = depth - 2, depth do
        if n >= 0 then
          check(TdSub, tagged(n), ("a map entry under %d levels, max_depth %d"):format(n, depth), { max_depth = depth })
        end
      end
    end
    assert.is_nil((pc.decode(TdSub, tagged(1), { table = true, max_depth = 1 })))
    assert.are.same({ child = { tags = { t = 1 } } }, pc.decode(TdSub, tagged(1), { table = true, max_depth = 2 }))
    assert.is_true(check(TdSub, nested(99), "99 levels"))
    check(TdSub, nested(100), "100 levels")
    assert.is_false(check(TdSub, nested(101), "101 levels"))
  end)

  -- A map entry is two levels of the depth limit but one of the tables: the
  -- stack room (made every fourth table) must not follow the depth's parity,
  -- which one sub-message level above the maps makes odd.
  it("makes its stack room by tables, whatever the depth left above maps of messages", function()
    local function chain(maps, children)
      local b = ""
      for _ = 1, maps do b = len(4, len(1, "k") .. len(2, b)) end
      for _ = 1, children do b = len(3, b) end
      return b
    end
    local N = dp:type("td.Node")
    for _, c in ipairs({ { 45, 1 }, { 45, 0 }, { 46, 1 }, { 300, 1, 999 }, { 301, 0, 1000 } }) do
      local opts, bytes = c[3] and { max_depth = c[3] } or nil, chain(c[1], c[2])
      local what = ("%d maps under %d levels"):format(c[1], c[2])
      assert.is_true(check(N, bytes, what, opts))
    end
    -- Past its room the decode wrote over whatever lay beyond the stack:
    -- seen from a fresh process's main thread, whose stack starts small.
    local script = os.tmpname()
    local f = assert(io.open(script, "wb"))
    f:write(([[
      local pc = require "protocall"
      local p = pc.pool()
      assert(p:load('syntax = "proto3"; package td; message Node { Node child = 3; map<string, Node> m = 4; }'))
      local bytes = %q
      for _ = 1, 3 do
        local t = assert(pc.decode(p:type("td.Node"), bytes, { table = true }))
        collectgarbage()
      end
      io.write("decoded")
    ]]):format(chain(45, 1)))
    f:close()
    local bin = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
    local out = io.popen(bin .. " " .. script .. " 2>&1")
    local text = out:read("*a")
    local ok = out:close()
    os.remove(script)
    assert.are.equal("decoded", text)
    assert.is_truthy(ok)
  end)

  it("uses its own type's plan when the options' reads decode another type", function()
    local A = pc.message("tp.A", { { "a", "int32", 1 }, { "s", "string", 2 }, { "sub", "tp.A", 3 } })
    local B = pc.message("tp.B", { { "zz", "int32", 1 } })
    local F = pc.message("tp.F", { { "n", "uint32", 1 } }) -- all numbers: a standalone decode
    local bytes = pc.encode(A { a = 5, s = "x", sub = { a = 6 } })
    for _, other in ipairs({ { B, "\8\7", { table = true } }, { F, "\8\7" } }) do
      local opts = setmetatable({}, { __index = function(_, k)
        if k == "table" then
          assert(pc.decode(other[1], other[2], other[3])) -- caches another type meanwhile
          return true
        end
      end })
      for _ = 1, 3 do
        same_tables({ a = 5, s = "x", sub = { a = 6 } }, pc.decode(A, bytes, opts), "A after " .. tostring(other[1]))
        local m = pc.decode(A, bytes, setmetatable({}, { __index = function(_, k)
          if k == "partial" then assert(pc.decode(other[1], other[2], other[3])) end
        end }))
        assert.are.equal(6, m.sub.a)
      end
    end
  end)

  it("keeps nothing of a tree it returned (LuaJIT sets 64-bit values last, through one reused table)", function()
    local weak = setmetatable({}, { __mode = "v" })
    local t = pc.decode(M, pc.encode(M { i64 = 5, rs64 = { 1, 2, 3, 4 }, sub = {} }), { table = true })
    weak[1], weak[2] = t, t.rs64
    assert.are.equal(4, #t.rs64)
    t = nil -- luacheck: ignore
    local u = pc.decode(M, pc.encode(M { i64 = 1 }), { table = true })
    assert.is_true(u.i64 == 1)
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak[1])
    assert.is_nil(weak[2])
  end)

  -- Random messages of td.M and td2.P, their bytes and mutations of them.
  it("agrees with the decoder on 3000 random and mutated inputs, and takes most valid ones", function()
    math.randomseed(20261201)
    local rnd = math.random
    local function rstr()
      local t = {}
      for i = 1, rnd(0, 6) do t[i] = string.char(rnd(97, 122)) end
      return table.concat(t)
    end
    local function rbytes()
      local t = {}
      for i = 1, rnd(0, 6) do t[i] = string.char(rnd(0, 255)) end
      return table.concat(t)
    end
    local function rint()
      local c = rnd(1, 4)
      return c == 1 and 0 or c == 2 and rnd(-200, 200) or rnd(-2147483648, 2147483647)
    end
    local function rsub(d)
      local s = { x = rnd(2) == 1 and rint() or nil, name = rnd(2) == 1 and rstr() or nil }
      if d < 3 and rnd(3) == 1 then s.child = rsub(d + 1) end
      return s
    end
    local function rlist(n, f) local t = {} for i = 1, rnd(0, n) do t[i] = f() end return t end
    local function rm()
      local t = {}
      if rnd(2) == 1 then t.i32 = rint() end
      if rnd(2) == 1 then
        t.i64 = R.int((rnd(2) == 1 and "-" or "") .. rnd(0, 922337203) .. ("%010d"):format(rnd(0, 2147483647)))
      end
      if rnd(2) == 1 then t.u32 = rnd(0, 4294967295) end
      if rnd(2) == 1 then t.u64 = R.uint(rnd(0, 1844674407) .. ("%010d"):format(rnd(0, 2147483647))) end
      if rnd(2) == 1 then t.s32 = rint() end
      if rnd(2) == 1 then t.s64 = R.int(tostring(rint())) end
      if rnd(2) == 1 then t.f32 = rnd(0, 4294967295) end
      if rnd(2) == 1 then t.sf64 = R.int(tostring(rint())) end
      if rnd(2) == 1 then t.fl = ({ 0.5, -0.0, 1 / 0, 0 / 0, 3 })[rnd(5)] end
      if rnd(2) == 1 then t.d = ({ 0.1, -0.0, -1 / 0, 0 / 0, 2 ^ 60 })[rnd(5)] end
      if rnd(2) == 1 then t.b = rnd(2) == 1 end
      if rnd(2) == 1 then t.s = rstr() end
      if rnd(2) == 1 then t.by = rbytes() end
      if rnd(2) == 1 then t.e = rnd(0, 3) end
      if rnd(2) == 1 then t.sub = rsub(0) end
      if rnd(2) == 1 then t.ri = rlist(5, rint) end
      if rnd(2) == 1 then t.rs64 = rlist(5, function() return R.int(tostring(rint())) end) end
      if rnd(2) == 1 then t.rd = rlist(3, function() return rnd() end) end
      if rnd(2) == 1 then t.rs = rlist(3, rstr) end
      if rnd(2) == 1 then t.rsub = rlist(3, function() return rsub(1) end) end
      if rnd(2) == 1 then t.re = rlist(4, function() return rnd(0, 5) end) end
      local o = rnd(4)
      if o == 1 then t.oi = rint() elseif o == 2 then t.os = rstr() elseif o == 3 then t.osub = rsub(2) end
      if rnd(2) == 1 then t.opt = rint() end
      if rnd(3) == 1 then t.big = rint() end
      if rnd(3) == 1 then t.huge = rstr() end
      if rnd(3) == 1 then t.ms = {} for _ = 1, rnd(0, 3) do t.ms[rstr()] = rint() end end
      if rnd(3) == 1 then t.mi = {} for _ = 1, rnd(0, 3) do t.mi[rint()] = rsub(2) end end
      if rnd(4) == 1 then t.mb = { [rnd(2) == 1] = rnd(0, 2) } end
      if rnd(4) == 1 then t.mu = { [R.uint(tostring(rnd(0, 2147483647)))] = R.int(tostring(rint())) } end
      return M(t)
    end
    local function rp(d)
      local t = { req = rnd(4) > 1 and rint() or nil }
      if rnd(2) == 1 then t.a = rint() end
      if rnd(2) == 1 then t.c = rnd(1, 2) end
      if rnd(2) == 1 then t.rc = rlist(3, function() return rnd(1, 2) end) end
      if rnd(2) == 1 then t.s = rbytes() end
      if d < 2 and rnd(3) == 1 then t.child = rp(d + 1) end
      if rnd(3) == 1 then t.mc = { [rint()] = rnd(2) == 1 and 0 or 3 } end
      return P(t)
    end
    local function mutate(b)
      local k = rnd(6)
      if #b == 0 or k == 1 then return b .. tag(rnd(1, 30), rnd(0, 5)) .. string.char(rnd(0, 255), rnd(0, 255)) end
      local i = rnd(#b)
      if k == 2 then return b:sub(1, i - 1) end
      if k == 3 then return b:sub(1, i - 1) .. string.char(rnd(0, 255)) .. b:sub(i + 1) end
      if k == 4 then return b .. b end
      if k == 5 then return b:sub(1, i) .. b:sub(i) end
      return b:sub(i) .. b:sub(1, i - 1)
    end
    local valid, taken = 0, 0
    for i = 1, 1500 do
      local T, m
      if i % 3 == 0 then T, m = P, rp(0) else T, m = M, rm() end
      local ok, b = pcall(pc.encode, m, { partial = true })
      assert(ok, b)
      if check(T, b, "random " .. i, { partial = true }) then taken = taken + 1 end
      valid = valid + 1
      check(T, b, "random " .. i .. " (required checked)")
      local mb = mutate(b)
      check(T, mb, "mutated " .. i, { partial = true })
      check(T, mb, "mutated " .. i .. " (required checked)")
    end
    -- What it gives up on among valid bytes: only types and cases named above.
    assert(taken >= valid * 0.95, ("the direct path took %d of %d valid inputs"):format(taken, valid))
  end)
end)

-- Generated tables: pc.encode(T, t) against T{...} and the field-by-field build
-- (the general path), bytes and error texts alike (bindings/lua/lpc_table.c).
describe("pc.encode(T, table) on generated tables", function()
  local function pick(list) return list[math.random(#list)] end
  local function chance(p) return math.random() < p end
  local big = { 0, 1, -1, 127, 128, 300, -300, 2 ^ 31 - 1, -2 ^ 31, 2 ^ 31, 2 ^ 32 - 1, 2 ^ 32, -2 ^ 31 - 1,
    2 ^ 53, -2 ^ 53, 2 ^ 40 + 3, 2 ^ 63, -2 ^ 63, 1.5, -0.5, 0 / 0, math.huge, -0.0 }
  local function int_value()
    if chance(0.93) then return pick { 0, 1, -1, 5, 127, 128, 300, -300, 16384, 2 ^ 31 - 1, -2 ^ 31 } end
    if chance(0.7) then return pick(big) end
    return pick { "5", "-7", "18446744073709551615", "9223372036854775807", "x", true, {}, "0x10" }
  end
  local function value_of(kind, depth)
    if chance(0.015) then return pick { "x", 1, 1.5, true, false, {}, "\255" } end -- now and then the wrong kind
    if kind == "int" then return int_value() end
    if kind == "float" then return pick { 0, 0.5, -2, 1e300, -0.0, 3, 0 / 0 } end
    if kind == "bool" then return chance(0.5) end
    if kind == "string" then
      return pick { "", "a", "héllo", "\0\1", string.rep("s", 200), chance(0.1) and "\255" or "b" }
    end
    if kind == "bytes" then return pick { "", "\0\255", string.rep("b", 130) } end
    if kind == "enum" then
      return pick { "ZERO", "ONE", "TWO", 0, 1, 2, 7, -1, chance(0.3) and "NONE" or 1, chance(0.3) and 1.5 or 2 }
    end
    if kind == "sub" then
      local t = {}
      if chance(0.6) then t.x = int_value() end
      if chance(0.5) then t.name = value_of("string", depth + 1) end
      if depth < 4 and chance(0.4) then t.child = value_of("sub", depth + 1) end
      if chance(0.05) then t.nope = 1 end
      if chance(0.05) then t = setmetatable({}, { __index = t }) end
      if chance(0.05) then t = Sub(t.x and { x = 1 } or {}) end
      return t
    end
  end
  -- A list of 'n' values: in the array part, with integer keys in the hash part
  -- (set in reverse or after a string key), with a hole, an extra key, or a proxy.
  local function list_of(kind, depth)
    local n, vals = math.random(0, 6), {}
    for i = 1, n do vals[i] = value_of(kind, depth) end
    local shape = math.random(12)
    if shape == 1 then
      local t = {}
      for i = n, 1, -1 do t[i] = vals[i] end
      return t
    elseif shape == 2 then
      local t = { tmp = 1 }
      for i = 1, n do t[i] = vals[i] end
      t.tmp = nil
      return t
    elseif shape == 3 and n > 1 then
      vals[math.random(n - 1)] = nil
      return vals
    elseif shape == 4 then
      vals[pick { "x", 0, n + 2, 1.5, -1 }] = value_of(kind, depth)
      return vals
    elseif shape == 5 then
      return setmetatable({}, { __index = vals, __len = function() return n end })
    elseif shape == 6 then
      local t = {}
      for i = 1, n do t[i * 2] = 1 end -- integer keys spread, then replaced
      for k in pairs(t) do t[k] = nil end
      for i = 1, n do t[i] = vals[i] end
      return t
    end
    return vals
  end
  local function map_of(kkind, vkind, depth)
    local t = {}
    for _ = 1, math.random(0, 4) do
      local k
      if kkind == "string" then
        k = pick { "a", "b", "", "héllo", chance(0.2) and 1 or "c", chance(0.1) and "\255" or "d" }
      elseif kkind == "bool" then k = pick { true, false, chance(0.2) and 1 or true }
      else k = pick { 0, 1, -3, 2 ^ 40, 2 ^ 53, chance(0.2) and 1.5 or 2, chance(0.2) and "5" or 3 } end
      t[k] = value_of(vkind, depth)
    end
    if chance(0.05) then t = setmetatable({}, { __pairs = function() return next, t, nil end }) end
    return t
  end
  local fields = {
    i32 = "int", i64 = "int", u32 = "int", u64 = "int", s32 = "int", s64 = "int", f32 = "int", f64 = "int",
    sf32 = "int", sf64 = "int", fl = "float", d = "float", b = "bool", s = "string", by = "bytes", e = "enum",
    sub = "sub", oi = "int", os = "string", opt = "int", big = "int",
  }
  local lists = { ri = "int", ru = "int", rd = "float", rs = "string", rsub = "sub", re = "enum", rf32 = "int",
    rsf64 = "int", rfl = "float", rb = "bool" }
  local maps = { ms = { "string", "string" }, mi = { "int", "sub" }, mb = { "bool", "int" } }
  -- The names of 'set' in order, so that a seed makes the same tables every run.
  local function sorted(set)
    local names = {}
    for name in pairs(set) do names[#names + 1] = name end
    table.sort(names)
    return names
  end
  local function message()
    local t = {}
    for _, name in ipairs(sorted(fields)) do if chance(0.25) then t[name] = value_of(fields[name], 0) end end
    for _, name in ipairs(sorted(lists)) do if chance(0.3) then t[name] = list_of(lists[name], 0) end end
    for _, name in ipairs(sorted(maps)) do
      if chance(0.25) then t[name] = map_of(maps[name][1], maps[name][2], 0) end
    end
    if chance(0.05) then t[pick { "nope", 99, true }] = 1 end
    if chance(0.05) then t = setmetatable({}, { __index = t }) end
    return t
  end

  it("gives pc.encode(T{...})'s bytes or raises its very error, and the field-by-field build agrees", function()
    math.randomseed(35)
    local taken, refused = 0, 0
    for _ = 1, 3000 do
      local t = message()
      local a = { pcall(function() return pc.encode(All(t)) end) }
      local b = { pcall(pc.encode, All, t) }
      assert.are.equal(a[1], b[1])
      if a[1] then
        taken = taken + 1
        assert.are.equal(a[2], b[2])
        local ok, m = pcall(built, All, t)
        -- (built reads a proxy's own entries: none)
        if ok and getmetatable(t) == nil then assert.are.equal(pc.encode(m), b[2]) end
      else
        refused = refused + 1
        assert.are.equal(strip_position(a[2]), strip_position(b[2]))
      end
    end
    assert.is_true(taken > 600 and refused > 600)
  end)
end)

-- Lua code run inside a call (a debug hook or a finalizer, run where the call
-- makes a Type) that begins another call on the same state: the outer call
-- declines and goes the general way, so neither writes into the other's types,
-- buffer or messages (bindings/lua/lpc_table.c, type_of_slow).
describe("pc.encode(T, table) and T{...} begun inside one another", function()
  it("give the bytes and messages they give alone", function()
    local other = pc.pool()
    local big = {}
    for i = 1, 8 do big[i] = { "f" .. i, "int64", i } end
    big[9] = { "x", "int64", 9 }
    other:message("q.Big", big)
    other:message("q.Mid", { { "y", "int32", 1 } })
    local O = other:message("q.O", { { "mid", "q.Mid", 2 }, { "big", "q.Big", 1 } })
    local O2 = other:message("q.O2", { { "a", "q.Mid", 1 } })
    local o = { mid = { y = 1 }, big = { x = 7 } }
    local o_bytes, o2_bytes = pc.encode(O(o)), pc.encode(O2 { a = { y = 2 } })
    local inner_wrong = 0
    -- two roots in turn, each with sub-messages: every inner call refills types[]
    local function inner()
      if pc.encode(O2, { a = { y = 2 } }) ~= o2_bytes then inner_wrong = inner_wrong + 1 end
      if pc.encode(O(o)) ~= o_bytes then inner_wrong = inner_wrong + 1 end
    end
    local t = { rsub = { { x = 1, inner = { v = 1 } }, { x = 2 }, { x = 3 } } }
    local function fresh() -- types whose Types are not made yet: the call makes them
      local p = pc.pool()
      p:message("r.Inner", { { "v", "int32", 1 }, { "p1", "int64", 2 }, { "p2", "int64", 3 }, { "x", "int64", 4 } })
      p:message("r.Sub", { { "x", "int32", 1 }, { "inner", "r.Inner", 2 } })
      local A = p:message("r.A", { { "rsub", "r.Sub", 1, repeated = true } })
      collectgarbage()
      collectgarbage()
      return A
    end
    local want = same_bytes(fresh(), t)
    for _, how in ipairs { "T{...}", "pc.encode" } do
      local A = fresh()
      local hooks, got = 0, nil
      debug.sethook(function()
        hooks = hooks + 1
        inner()
      end, "c")
      local ok, err = pcall(function()
        if how == "T{...}" then got = pc.encode(A(t)) else got = pc.encode(A, t) end
      end)
      debug.sethook()
      assert(ok, err)
      assert.is_true(hooks >= 4, how) -- the call itself, sethook, and the Types made inside
      assert.are.equal(want, got, how)
      assert.are.equal(0, inner_wrong, how)
    end
    local m = fresh()(t)
    assert.are.same({ 1, 2, 3 }, { m.rsub[1].x, m.rsub[2].x, m.rsub[3].x })
  end)
end)
