-- LuaJIT's FFI field access (lua/protocall/message.lua, README "LuaJIT"):
-- the generated __index and __newindex must read and store exactly what
-- the C metamethods behind them do, presence bits and oneof cases
-- included, and hand every value they do not store to C (whose errors
-- name the caller's line). Each write is made through the FFI on one
-- message and through the C __newindex on another; the two must encode
-- alike and read alike.
local pc = require "protocall"
local R = require "runtime"

local pool = pc.pool()
pool:enum("f.Open", { ZERO = 0, ONE = 1 })
pool:enum("f.Closed", { A = 1, B = 2 }, { syntax = "proto2" })
local Fields = { { "u32", "uint32", 1 }, { "i32", "int32", 2 }, { "s32", "sint32", 3 },
                 { "fx32", "fixed32", 4 }, { "sf32", "sfixed32", 5 }, { "d", "double", 6 },
                 { "f", "float", 7 }, { "b", "bool", 8 }, { "i64", "int64", 9 },
                 { "u64", "uint64", 10 }, { "s64", "sint64", 11 }, { "fx64", "fixed64", 12 },
                 { "sf64", "sfixed64", 13 }, { "e", "f.Open", 14 },
                 { "oi", "int32", 15, oneof = "o" }, { "od", "double", 16, oneof = "o" },
                 { "os", "string", 17, oneof = "o" }, { "ob", "bool", 18, oneof = "o" },
                 { "opt", "int32", 19, optional = true }, { "optb", "bool", 20, optional = true } }
local M3 = pool:message("f.M3", Fields)
local M2 = pool:message("f.M2", {
  { "i", "int32", 1 }, { "c", "f.Closed", 2 }, { "u", "uint64", 3 }, { "d", "double", 4, default = 1.5 },
}, { syntax = "proto2" })
local fields = {}
for i = 1, 60 do fields[i] = { "x" .. i, "int32", i } end
local Wide = pool:message("f.Wide", fields) -- more fields than the generated test chain holds

local function c_meta(m, key)
  local fn = debug.getmetatable(m)[key]
  for u = 1, math.huge do
    local name, v = debug.getupvalue(fn, u)
    if name == nil then return nil end
    if name == "c_meta" then return v end
  end
end

-- got, by_c = read_noting_c(m, k): m[k] with the C __index behind the FFI
-- one (its upvalue c_meta) swapped for a hook that notes it ran. One hook
-- for the whole file, which finds the C __index by the metatable of what it
-- is given: LuaJIT takes c_meta for an immutable upvalue (nothing assigns
-- it), so a trace compiled while the hook was in place may go on calling
-- that closure after debug.setupvalue put C's back; a hook made for each
-- read, holding its own message and flag, then answered another read with
-- its old message.
local hooked = { c = {}, by_c = false }
local function hook(self, key)
  hooked.by_c = true
  return hooked.c[debug.getmetatable(self)](self, key)
end
local function read_noting_c(m, k)
  local mt = debug.getmetatable(m)
  local fn = mt.__index
  local u = 1
  while debug.getupvalue(fn, u) ~= "c_meta" do u = u + 1 end
  local _, index = debug.getupvalue(fn, u)
  hooked.c[mt], hooked.by_c = index, false
  debug.setupvalue(fn, u, hook)
  local got = m[k]
  debug.setupvalue(fn, u, index)
  return got, hooked.by_c
end

-- Writes v to field k of a fresh T (or of 'base' copies) through the FFI
-- and through C; both must succeed or fail alike.
local function same_write(T, k, v, before)
  local a, b = T(before or {}), T(before or {})
  local ok1, err1 = pcall(function() a[k] = v end)
  local ok2, err2 = pcall(c_meta(b, "__newindex"), b, k, v)
  assert.are.equal(ok2, ok1, k .. " = " .. tostring(v) .. ": " .. tostring(err1 or err2))
  if not ok1 then
    assert.matches("ffi_spec%.lua:%d+: ", err1) -- the caller's line
    assert.are.equal(err2:gsub("^[^:]*:%d+: ", ""), (err1:gsub("^[^:]*:%d+: ", "")))
  end
  assert.are.equal(pc.encode(b), pc.encode(a), k .. " = " .. tostring(v))
  if not ok1 then
    return a
  elseif b[k] ~= b[k] then
    assert.is_true(a[k] ~= a[k], k .. " reads NaN") -- NaN
  else
    assert.are.equal(b[k], a[k])
  end
  return a
end

if not R.luajit then
  describe("the FFI field access", function()
    pending("runs under LuaJIT only (Lua 5.4 has no FFI)")
  end)
  return
end

local ffi = require "ffi"

describe("the FFI field access", function()
  it("is installed in front of the C metamethods", function()
    for _, m in ipairs { M3(), pc.decode(M3, pc.encode(M3 { u32 = 1 })) } do
      assert.is_function(c_meta(m, "__index"))
      assert.is_function(c_meta(m, "__newindex"))
    end
  end)

  it("stores what the C __newindex stores, and refuses what it refuses", function()
    local values = { 0, 1, -1, 1.5, 2 ^ 31, -2 ^ 31, 2 ^ 31 - 1, -2 ^ 31 - 1, 2 ^ 32 - 1, 2 ^ 32, 2 ^ 53,
                     2 ^ 53 + 2, -2 ^ 53, 1 / 0, -1 / 0, 0 / 0, 0.1, true, false, "1", "ONE", "x", {},
                     ffi.new("int64_t", -5), ffi.new("uint64_t", 7), ffi.new("int32_t", 3) }
    for _, f in ipairs(Fields) do
      for _, v in ipairs(values) do same_write(M3, f[1], v) end
    end
    for _, k in ipairs { "i", "c", "u", "d" } do
      for _, v in ipairs(values) do same_write(M2, k, v) end
      for v = 0, 3 do same_write(M2, k, v) end
    end
    same_write(M3, "nope", 1)
    same_write(M3, 1, 1)
  end)

  it("sets presence bits and oneof cases as the C path does", function()
    local m = same_write(M3, "opt", 0)
    assert.is_true(pc.has(m, "opt"))
    m = same_write(M3, "optb", false)
    assert.is_true(pc.has(m, "optb"))
    m = same_write(M2, "i", 0)
    assert.is_true(pc.has(m, "i"))
    m = same_write(M3, "oi", 5, { os = "a string" })
    assert.are.equal("oi", pc.which_oneof(m, "o"))
    assert.are.equal("", m.os)
    m = same_write(M3, "od", 2.5, { oi = -1 })
    assert.are.equal("od", pc.which_oneof(m, "o"))
    assert.are.equal(0, m.oi)
    m = same_write(M3, "ob", true, { od = 2.5 })
    assert.are.equal("ob", pc.which_oneof(m, "o"))
    m.oi = 7
    assert.is_false(m.ob)
    assert.are.equal(7, m.oi)
    m.oi = nil -- clearing goes through C
    assert.is_nil(pc.which_oneof(m, "o"))
  end)

  it("writes decoded views and reads back through the FFI", function()
    local v = pc.decode(M3, pc.encode(M3 { u32 = 1, d = 2 }))
    v.u32, v.d, v.b, v.e, v.i64, v.oi = 4294967295, -0.5, true, 1, -3, 9
    assert.are.equal(4294967295, v.u32)
    assert.are.equal(-0.5, v.d)
    assert.is_true(v.b)
    assert.are.equal(1, v.e)
    assert.are.equal(R.int("-3"), v.i64)
    assert.are.equal(9, v.oi)
    assert.are.equal(M3 { u32 = 4294967295, d = -0.5, b = true, e = 1, i64 = -3, oi = 9 }, v)
  end)

  it("reads strings and bytes as the C __index does", function()
    local S = pool:message("f.S", { { "s", "string", 1 }, { "b", "bytes", 2 }, { "n", "f.S", 3 },
                                    { "os", "string", 4, oneof = "k" }, { "opt", "bytes", 5, optional = true } })
    local values = { "", "a", "caf\195\169", ("x"):rep(5000), "\0\1\0" }
    for _, v in ipairs(values) do
      local m = S { s = v, b = v .. "\255", n = { s = v }, os = v, opt = v }
      local decoded = pc.decode(S, pc.encode(m))
      local flat = pc.decode(pool:message("f.Flat" .. #v, { { "s", "string", 1 } }), pc.encode(S { s = v }))
      for _, x in ipairs { m, m.n, decoded, decoded.n, flat } do
        local index = c_meta(x, "__index")
        assert.is_function(index)
        for _, k in ipairs { "s", "b", "os", "opt" } do
          if x ~= flat or k == "s" then assert.are.equal(index(x, k), x[k], k) end
        end
      end
      m.s = nil
      assert.are.equal("", m.s)
      m.b = "new"
      assert.are.equal("new", m.b)
      collectgarbage()
      assert.are.equal(v, decoded.s)
    end
  end)

  it("reads fields with presence (optional, proto2, oneof members) as the C __index does, without it", function()
    local P = pool:message("f.P", {
      { "i", "int32", 1 }, { "c", "f.Closed", 2 }, { "u", "uint64", 3 }, { "d", "double", 4, default = 1.5 },
      { "s", "string", 5 }, { "t", "string", 6, default = "hi" }, { "b", "bool", 7 }, { "x", "int64", 8 },
      { "z", "float", 9, default = -1.25 }, { "n", "int32", 10, default = 4 },
    }, { syntax = "proto2" })
    local set = { i = -2, c = 2, u = R.uint("18446744073709551615"), d = 0.25, s = "set", t = "there", b = true,
                  x = R.int("-9007199254740993"), z = 2.5, n = 0 }
    local cases = {}
    for _, m in ipairs { P(), P(set), pc.decode(P, pc.encode(P(set))), M3(), M3 { oi = 5, opt = 0, optb = true },
                         M3 { od = 2.5 }, M3 { os = "o" }, M3 { ob = false },
                         pc.decode(M3, pc.encode(M3 { os = "o", opt = 3 })) } do
      local keys = pc.type_of(m) == P and { "i", "c", "u", "d", "s", "t", "b", "x", "z", "n" }
                   or { "oi", "od", "os", "ob", "opt", "optb" }
      cases[#cases + 1] = { m, keys, c_meta(m, "__index") }
    end
    -- Set fields, and unset ones whose default is zero, are loaded by the
    -- FFI reader; an unset field with another default is read by C.
    local zero = { i = true, u = true, s = true, b = true, x = true, oi = true, od = true, os = true, ob = true,
                   opt = true, optb = true }
    for _, case in ipairs(cases) do
      local m, keys, index = case[1], case[2], case[3]
      for _, k in ipairs(keys) do
        local want = index(m, k)
        local got, by_c = read_noting_c(m, k)
        assert.are.equal(want, got, k)
        assert.are.equal(type(want), type(got), k)
        if type(want) == "cdata" then assert.is_true(ffi.istype(ffi.typeof(want), got), k) end
        if want == 0 then assert.are.equal(1 / want, 1 / got, k) end -- -0.0 stays
        assert.are.equal(not pc.has(m, k) and not zero[k], by_c, k .. (by_c and " read by C" or " read by the FFI"))
      end
    end
  end)

  it("reads an unset sub-message as nil without the C __index, and a set one through it", function()
    pool:message("f.QP", { { "i", "int32", 1 } })
    local Q = pool:message("f.Q", { { "p", "f.QP", 1 }, { "oq", "f.QP", 2, oneof = "w" },
                                    { "oi", "int32", 3, oneof = "w" }, { "r", "f.QP", 4, optional = true } })
    for _, m in ipairs { Q(), Q { p = {} }, Q { oq = { i = 1 } }, Q { oi = 1, r = {} },
                         pc.decode(Q, pc.encode(Q { p = { i = 2 }, oq = {} })),
                         pc.decode(Q, pc.encode(Q { oi = 0 })) } do
      local index = c_meta(m, "__index")
      for _, k in ipairs { "p", "oq", "r" } do
        local want = index(m, k)
        local got, by_c = read_noting_c(m, k)
        assert.is_true(rawequal(want, got), k) -- the one view C keeps for the slot
        assert.are.equal(want ~= nil, by_c, k)
      end
    end
  end)

  it("reads 64-bit integers as the C __index does: the same cdata type and value", function()
    local i64, u64 = ffi.typeof("int64_t"), ffi.typeof("uint64_t")
    local signed = { "0", "1", "-1", "9007199254740993", "9223372036854775807", "-9223372036854775808" }
    local unsigned = { "0", "1", "9007199254740993", "18446744073709551615" }
    for i = 1, #signed do
      local u = unsigned[(i - 1) % #unsigned + 1]
      local m = M3 { i64 = R.int(signed[i]), s64 = R.int(signed[i]), sf64 = R.int(signed[i]),
                     u64 = R.uint(u), fx64 = R.uint(u) }
      local m2 = M2 { u = R.uint(u) }
      for _, x in ipairs { m, pc.decode(M3, pc.encode(m)), M3(), m2, pc.decode(M2, pc.encode(m2)) } do
        local index = c_meta(x, "__index")
        local keys = pc.type_of(x) == M2 and { "u" } or { "i64", "s64", "sf64", "u64", "fx64" }
        for _, k in ipairs(keys) do
          local want, got = index(x, k), x[k]
          assert.are.equal(want, got, k)
          assert.is_true(ffi.istype(ffi.typeof(want), got), k)
          local kind = (k == "u64" or k == "fx64" or k == "u") and u64 or i64
          assert.is_true(ffi.istype(kind, got), k)
        end
      end
    end
  end)

  it("refuses a table whose keys name one map key twice (1 and an int64_t 1), before changing the map", function()
    local K = pool:message("f.K", { { "m64", "map<int64, string>", 1 }, { "mu64", "map<uint64, int32>", 2 },
                                    { "m32", "map<int32, string>", 3 } })
    local why = " (LuaJIT: a number, an int64_t or uint64_t cdata and a decimal string may name one integer)"
    local cases = {
      { "m64", { [ffi.new("int64_t", 1)] = "a", [1] = "b" }, "f.K.m64: two keys of the table are map key 1" },
      { "m64", { [ffi.new("int64_t", -5)] = "a", ["-5"] = "b" }, "f.K.m64: two keys of the table are map key -5" },
      { "mu64", { [2 ^ 53] = 1, [ffi.new("uint64_t", 2 ^ 53)] = 2 },
        "f.K.mu64: two keys of the table are map key 9007199254740992" },
      { "mu64", { [-1] = 1, ["18446744073709551615"] = 2 },
        "f.K.mu64: two keys of the table are map key 18446744073709551615" },
      { "m32", { [5] = "x", [ffi.new("int64_t", 5)] = "y" }, "f.K.m32: two keys of the table are map key 5" },
    }
    for _, c in ipairs(cases) do
      assert.has_error(function() return K { [c[1]] = c[2] } end, c[3] .. why)
      assert.has_error(function() return pc.encode(K, { [c[1]] = c[2] }) end, c[3] .. why)
      local m = K { m64 = { [7] = "kept" } }
      assert.has_error(function() m[c[1]] = c[2] end, c[3] .. why)
      assert.are.equal("kept", m.m64[7])
    end
    local m = K { m64 = { [ffi.new("int64_t", 1)] = "a", [2] = "b", ["3"] = "c" } } -- distinct keys of every kind
    assert.are.same({ "a", "b", "c" }, { m.m64[1], m.m64[2], m.m64[3] })
  end)

  it("reads repeated elements as the C __index does, from the list the field holds now", function()
    local kinds = { "int32", "uint32", "sint32", "fixed32", "sfixed32", "int64", "uint64", "sint64", "fixed64",
                    "sfixed64", "double", "float", "bool", "string", "bytes", "f.Open" }
    local decl = {}
    for i, k in ipairs(kinds) do decl[i] = { "r" .. i, k, i, repeated = true } end
    decl[#decl + 1] = { "sub", "f.R", #decl + 1, repeated = true }
    local T = pool:message("f.R", decl)
    local values = { int32 = { 1, -2, 2 ^ 31 - 1 }, uint32 = { 0, 2 ^ 32 - 1 }, sint32 = { -2 ^ 31, 5 },
                     fixed32 = { 7 }, sfixed32 = { -7 }, int64 = { -5, 2 ^ 53 }, uint64 = { 1, -1 },
                     sint64 = { -1 }, fixed64 = { 3 }, sfixed64 = { -3 }, double = { 1.5, 0 / 0, -1 / 0 },
                     float = { 0.5, 0 / 0 }, bool = { true, false }, string = { "", "a", "\0b" },
                     bytes = { "\255", "" }, ["f.Open"] = { 0, 1, 9 } }
    local t = { sub = { {} } }
    for i, k in ipairs(kinds) do t["r" .. i] = values[k] end
    local m = T(t)
    local rep_mt = debug.getmetatable(m.r1)
    local c_index
    for u = 1, math.huge do
      local name, v = debug.getupvalue(rep_mt.__index, u)
      assert(name, "the FFI __index holds the C one")
      if name == "c_index" then c_index = v break end
    end
    assert.are.equal("C", debug.getinfo(c_index, "S").what)
    for _, x in ipairs { m, pc.decode(T, pc.encode(m)) } do
      for i = 1, #kinds do
        local c = x["r" .. i]
        for _, k in ipairs { 0, 1, 2, 3, 4, 1.0, 1.5, -1, 0 / 0, 1 / 0, 2 ^ 53, "1", ffi.new("int64_t", 1), true } do
          local a, b = c[k], c_index(c, k)
          if b ~= b then
            assert.is_true(a ~= a, kinds[i] .. " NaN")
          else
            assert.are.equal(type(b), type(a))
            assert.are.equal(b, a, kinds[i] .. "[" .. tostring(k) .. "]")
            if type(b) == "cdata" then assert.is_true(ffi.istype(ffi.typeof(b), a), kinds[i]) end
          end
        end
      end
      assert.are.equal(c_index(x.sub, 1), x.sub[1]) -- a message element: C's view, the same object
    end
    -- the array is loaded at each read: a list replaced, cleared or left
    -- by its parent reads as it is now
    local c, s
    do -- the containers alone keep the decoded message (and its arena) once this block ends
      local d = pc.decode(T, pc.encode(m))
      c, s = d.r1, d.r14
      d.r1 = { 40, 41, 42, 43 }
      d.r14 = { ("x"):rep(100) }
      collectgarbage()
      assert.are.same({ 40, 43, 4 }, { c[1], c[4], #c })
      assert.are.equal(("x"):rep(100), s[1])
      pc.clear(d)
      assert.is_nil(c[1])
      assert.is_nil(s[1])
    end
    collectgarbage()
    c[1] = 5
    s[1] = "y"
    collectgarbage()
    assert.are.same({ 5, "y" }, { c[1], s[1] })
  end)

  it("covers types with more fields than the generated chain", function()
    local m = Wide()
    for i = 1, 60 do m["x" .. i] = i end
    for i = 1, 60 do assert.are.equal(i, m["x" .. i]) end
    same_write(Wide, "x60", 2 ^ 31)
    same_write(Wide, "x60", -7)
    same_write(Wide, "x1", 1.5)
  end)
end)
