-- FFI struct messages (pc.ffi, lua/protocall/ffi/struct.lua; README "LuaJIT"):
-- a struct of pc.ffi(T) must read, store, refuse, encode and decode
-- exactly what a message of T does. Every operation is made on a message
-- and on a struct, and the two must agree: values, errors (the struct's
-- naming the caller's line) and wire bytes.
local pc = require "protocall"
local R = require "runtime"

local pool = pc.pool()
pool:enum("s.Open", { ZERO = 0, ONE = 1 })
pool:enum("s.Closed", { A = 1, B = 2 }, { syntax = "proto2" })
local F3 = pool:message("s.F3", {
  { "u32", "uint32", 1 }, { "i32", "int32", 2 }, { "s32", "sint32", 3 }, { "fx32", "fixed32", 4 },
  { "sf32", "sfixed32", 5 }, { "d", "double", 6 }, { "f", "float", 7 }, { "b", "bool", 8 },
  { "i64", "int64", 9 }, { "u64", "uint64", 10 }, { "s64", "sint64", 11 }, { "fx64", "fixed64", 12 },
  { "sf64", "sfixed64", 13 }, { "e", "s.Open", 14 }, { "oi", "int32", 15, oneof = "o" },
  { "od", "double", 16, oneof = "o" }, { "ob", "bool", 18, oneof = "o" },
  { "ou", "uint64", 19, oneof = "o" }, { "opt", "int32", 20, optional = true },
  { "optb", "bool", 21, optional = true },
})
local F2 = pool:message("s.F2", {
  { "i", "int32", 1 }, { "c", "s.Closed", 2 }, { "u", "uint64", 3 }, { "d", "double", 4, default = 1.5 },
  { "r", "sint32", 5, required = true }, { "big", "int64", 6, default = -9000000000 },
}, { syntax = "proto2" })
local Under = pool:message("s.Under", { { "_1", "int32", 1 }, { "__x", "uint32", 2 }, { "y", "double", 3 } })
local Point = pool:message("s.Point", { { "x", "uint32", 1 }, { "y", "uint32", 2 }, { "z", "uint32", 3 } })

if not R.luajit then
  describe("FFI struct messages", function()
    it("are refused under Lua 5.4, saying why", function()
      assert.has_error(function() pc.ffi(Point) end,
        "pc.ffi needs LuaJIT's FFI (this is " .. _VERSION .. "; use the message type)")
      assert.has_error(function() pc.to_message(Point {}) end,
        "pc.to_message takes pc.ffi structs, which need LuaJIT's FFI (this is " .. _VERSION .. ")")
    end)
    pending("the rest runs under LuaJIT only (Lua 5.4 has no FFI)")
  end)
  return
end

local ffi = require "ffi"
local P3, P2, PU, PP = pc.ffi(F3), pc.ffi(F2), pc.ffi(Under), pc.ffi(Point)

local function strip(err) return (tostring(err):gsub("^[^:]*:%d+: ", "")) end

-- The wire bytes of a message or struct, required fields or not.
local function bytes(x) return pc.encode(x, { partial = true }) end

-- Writes v to field k of a message and of a struct made from 'before';
-- both must succeed or fail alike, and end the same.
local function same_write(T, P, k, v, before)
  local m, p = T(before or {}), P(before or {})
  local ok1, err1 = pcall(function() m[k] = v end)
  local ok2, err2 = pcall(function() p[k] = v end)
  local what = T.full_name .. "." .. tostring(k) .. " = " .. tostring(v)
  assert.are.equal(ok1, ok2, what .. ": " .. tostring(err1 or err2))
  if not ok1 then
    assert.matches("ffi_struct_spec%.lua:%d+: ", err2) -- the caller's line
    assert.are.equal(strip(err1), strip(err2))
  end
  assert.are.equal(bytes(m), bytes(p), what)
  if ok1 and m[k] ~= m[k] then
    assert.is_true(p[k] ~= p[k], what .. " reads NaN")
  elseif ok1 then
    assert.are.equal(m[k], p[k], what)
  end
  return p
end

local values = { 0, 1, -1, 1.5, 2 ^ 31, -2 ^ 31, 2 ^ 31 - 1, -2 ^ 31 - 1, 2 ^ 32 - 1, 2 ^ 32, 2 ^ 53, 2 ^ 53 + 2,
                 -2 ^ 53, 1 / 0, -1 / 0, 0 / 0, 0.1, -0.0, true, false, "1", "-12", "ONE", "A", "B", "x", {},
                 ffi.new("int64_t", -5), ffi.new("uint64_t", 7), ffi.new("int32_t", 3),
                 ffi.new("uint64_t", -1), nil }

describe("FFI struct messages", function()
  it("are laid out as the message body: 12 bytes for three uint32 fields", function()
    assert.are.equal(12, ffi.sizeof(PP))
    assert.are.equal(PP, pc.ffi(Point)) -- one struct type per message type
    assert.is_true(ffi.istype(PP, PP { x = 1 }))
  end)

  it("store what a message stores, and refuse what it refuses", function()
    for _, T in ipairs { F3, F2 } do
      local P = pc.ffi(T)
      for _, f in ipairs(pc.fields(T)) do
        for i = 1, #values + 1 do same_write(T, P, f.name, values[i]) end
        for v = 0, 3 do same_write(T, P, f.name, v) end
      end
      same_write(T, P, "nope", 1)
      same_write(T, P, 1, 1)
    end
  end)

  it("set presence bits and oneof cases as a message does", function()
    local p = same_write(F3, P3, "opt", 0)
    assert.is_true(pc.has(p, "opt"))
    p = same_write(F3, P3, "oi", 5, { od = 2.5 })
    assert.are.equal("oi", pc.which_oneof(p, "o"))
    assert.are.equal(0, p.od)
    p = same_write(F3, P3, "ou", -1, { ob = true })
    assert.are.equal(R.uint("18446744073709551615"), p.ou)
    assert.is_false(p.ob)
    p.ob = true
    assert.are.equal(R.uint("0"), p.ou)
    p.ob = nil
    assert.is_nil(pc.which_oneof(p, "o"))
    p = P2 { r = 1 }
    assert.are.equal(1.5, p.d) -- the proto2 default while unset
    assert.are.equal(R.int("-9000000000"), p.big)
    assert.is_false(pc.has(p, "d"))
    p.d = 1.5
    assert.is_true(pc.has(p, "d"))
    assert.are.equal(bytes(F2 { r = 1, d = 1.5 }), bytes(p))
  end)

  it("name the caller's line in P{...}'s errors, as T{...} does", function()
    local ok, err = pcall(function() return PP { x = -1 } end)
    assert.is_false(ok)
    assert.are.equal(debug.getinfo(1, "S").short_src .. ":" .. (debug.getinfo(1, "l").currentline - 2)
                     .. ": s.Point.x: value -1 out of range for uint32", err)
    for _, t in ipairs { { w = 1 }, { x = 1, [1] = 2 }, { x = "1" }, { c = "C", r = 1 } } do
      local T = t.c and F2 or Point
      local ok1, err1 = pcall(T, t)
      local ok2, err2 = pcall(pc.ffi(T), t)
      assert.is_false(ok1)
      assert.is_false(ok2)
      assert.are.equal(strip(err1), strip(err2))
      assert.matches("ffi_struct_spec%.lua:%d+: ", err2)
    end
    assert.has_error(function() PP(P3()) end, "bad argument #1 to 's.Point' (a table, field values, or a "
      .. "s.Point message or struct expected, got another struct)")
    assert.has_error(function() PP(F3()) end, "bad argument #1 to 's.Point' (a table, field values, or a "
      .. "s.Point message or struct expected, got userdata)")
    ok, err = pcall(function() return PP(1, 2, 3, 4) end)
    assert.is_false(ok)
    assert.are.equal(debug.getinfo(1, "S").short_src .. ":" .. (debug.getinfo(1, "l").currentline - 2)
                     .. ": s.Point takes at most 3 field values (its fields, in declaration order)", err)
    ok, err = pcall(function() return PP(1, -2) end)
    assert.is_false(ok)
    assert.are.equal(debug.getinfo(1, "S").short_src .. ":" .. (debug.getinfo(1, "l").currentline - 2)
                     .. ": s.Point.y: value -2 out of range for uint32", err)
    -- a fraction is quoted, on every path of a struct (P{...}, P(...), a field write)
    assert.has_error(function() return PP { x = 1.5 } end, "s.Point.x: integer expected, got 1.5")
    assert.has_error(function() return PP(1, 2.5) end, "s.Point.y: integer expected, got 2.5")
    assert.has_error(function() PP().z = -0.5 end, "s.Point.z: integer expected, got -0.5")
    assert.has_error(function() P3().i64 = 0.5 end, "s.F3.i64: integer expected, got 0.5")
  end)

  it("construct from tables, messages and structs as T{...} does", function()
    local t = { u32 = 7, i32 = -7, s32 = -3, fx32 = 9, sf32 = -9, d = 0.25, f = 1.5, b = true, i64 = -2 ^ 40,
                u64 = 2 ^ 50, s64 = -1, fx64 = 3, sf64 = -3, e = "ONE", od = -0.0, opt = 0, optb = false }
    local p = P3(t)
    assert.are.equal(bytes(F3(t)), bytes(p))
    assert.are.equal(F3(t), pc.to_message(p))
    assert.are.equal(bytes(p), bytes(P3(F3(t))))
    local q = P3(p)
    q.u32 = 8
    assert.are.equal(7, p.u32) -- a copy
    assert.are.equal(bytes(P3()), bytes(F3()))
    assert.are.equal("", bytes(P3 {}))
    -- field values in declaration order, as ffi.new takes initializers
    assert.are.equal(bytes(Point { x = 1, z = 3 }), bytes(PP(1, nil, 3)))
    assert.are.equal(bytes(F3 { u32 = 7, i32 = -7, s32 = -3 }), bytes(P3(7, -7, -3)))
    assert.are.equal(bytes(F2 { i = 1, c = "B", u = 5 }), bytes(P2(1, "B", 5)))
    local wide = {}
    for i = 1, 70 do wide[i] = { "f" .. i, "int32", i } end
    local W = pool:message("s.Wide", wide)
    local PW, args, named = pc.ffi(W), {}, {}
    for i = 1, 70 do args[i], named["f" .. i] = i, i end
    assert.are.equal(bytes(W(named)), bytes(PW(unpack(args))))
    args[71] = 1
    assert.has_error(function() PW(unpack(args)) end)
    args[71], args[65] = nil, "x"
    assert.has_error(function() PW(unpack(args)) end)
  end)

  it("encode and decode as messages do, unknown fields kept", function()
    math.randomseed(13)
    local checked = 0
    for round = 1, 400 do
      local T = round % 2 == 0 and F3 or F2
      local P = pc.ffi(T)
      local m = T()
      for _, f in ipairs(pc.fields(T)) do
        if math.random() < 0.5 then pcall(function() m[f.name] = values[math.random(#values)] end) end
      end
      local b = bytes(m)
      local r = math.random(4)
      if r == 1 then
        b = b .. "\200\1\42" .. "\210\2\3abc" -- unknown fields 25 and 42
      elseif r == 2 and #b > 0 then
        b = b:sub(1, math.random(#b) - 1) -- truncated
      elseif r == 3 then
        local i = math.random(#b + 1)
        b = b:sub(1, i - 1) .. string.char(math.random(0, 255)) .. b:sub(i)
      end
      for _, opts in ipairs { {}, { partial = true } } do
        local dm, e1 = pc.decode(T, b, opts)
        local dp, e2 = pc.decode(P, b, opts)
        assert.are.equal(e1, e2)
        if dm then
          checked = checked + 1
          assert.is_true(ffi.istype(P, dp))
          assert.are.equal(bytes(dm), bytes(dp))
        else
          assert.is_nil(dp)
        end
      end
    end
    assert.is_true(checked > 200)
    local p = pc.decode(PP, pc.encode(PP { x = 1 }) .. "\200\1\42")
    assert.are.equal(pc.encode(Point { x = 1 }) .. "\200\1\42", pc.encode(p))
    assert.are.equal(pc.encode(p), pc.encode(PP(p))) -- copies keep them
    assert.are.equal(pc.encode(p), pc.encode(pc.to_message(p)))
    assert.are.equal(pc.encode(p), pc.encode(PP(pc.to_message(p))))
    local ok1, err1 = pcall(pc.encode, F2())
    local ok2, err2 = pcall(pc.encode, P2())
    assert.is_false(ok1 or ok2)
    assert.are.equal(strip(err1), strip(err2))
    assert.are.equal("", pc.encode(P2(), { partial = true }))
    assert.are.equal(pc.encode(Point, { y = 2 }), pc.encode(PP, { y = 2 }))
    local ok, err = pcall(pc.decode, PP, 5)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'decode' %(string expected, got number%)", err)
  end)

  it("go through the other message functions by way of a copy", function()
    local p = P3 { u32 = 1, od = 2.5, opt = 3, e = 1 }
    local m = pc.to_message(p)
    assert.are.equal(F3, pc.type_of(p))
    assert.are.same(pc.to_table(m), pc.to_table(p))
    assert.are.equal(pc.to_json(m), pc.to_json(p))
    assert.are.equal(pc.to_text(m), pc.to_text(p))
    assert.are.equal(tostring(m), tostring(p))
    assert.are.equal("od", pc.which_oneof(p, "o"))
    assert.is_true(pc.has(p, "opt"))
    assert.is_true(pc.is_initialized(P2 { r = 1 }))
    assert.is_false(pc.is_initialized(P2()))
    pc.clear(p, "opt")
    assert.is_false(pc.has(p, "opt"))
    pc.clear(p)
    assert.are.equal("", pc.encode(p))
    p = P3 { u32 = 1 }
    pc.merge(p, P3 { i32 = 2 })
    pc.merge(p, F3 { d = 3 })
    assert.are.equal(bytes(F3 { u32 = 1, i32 = 2, d = 3 }), bytes(p))
    -- a struct merged into itself is refused, as a message is
    assert.has_error(function() pc.merge(p, p) end,
      "bad argument #2 to 'merge' (a message cannot be merged into itself: merge pc.clone(m))")
    pc.merge(p, pc.clone(p))
    assert.are.equal(bytes(F3 { u32 = 1, i32 = 2, d = 3 }), bytes(p))
    local c = pc.clone(p)
    c.u32 = 9
    assert.are.equal(1, p.u32)
    assert.is_true(ffi.istype(P3, c))
    assert.is_true(P3 { u32 = 1 } == P3 { u32 = 1 })
    assert.is_false(P3 { u32 = 1 } == P3 { u32 = 2 })
    assert.is_false(P3 { u32 = 1 } == PP { x = 1 })
    local j = pc.from_json(P3, '{"u32": 5, "e": "ONE"}')
    assert.is_true(ffi.istype(P3, j))
    assert.are.equal(5, j.u32)
    assert.are.equal(1, j.e)
    local x = pc.from_text(P3, "u32: 6")
    assert.are.equal(6, x.u32)
    local bad, err = pc.from_json(P3, '{"u32": -1}')
    assert.is_nil(bad)
    assert.is_string(err)
    assert.has_error(function() pc.to_message(5) end,
      "bad argument #1 to 'to_message' (pc.ffi struct expected, got number)")
  end)

  it("refuse types a struct cannot hold, saying why", function()
    local cases = {
      { { { "s", "string", 1 } }, "s.R1.s is a string field" },
      { { { "s", "bytes", 1 } }, "s.R2.s is a bytes field" },
      { { { "m", "s.Point", 1 } }, "s.R3.m is a message field" },
      { { { "r", "int32", 1, repeated = true } }, "s.R4.r is a repeated field" },
      { { { "mp", "map<int32, int32>", 1 } }, "s.R5.mp is a map" },
    }
    for i, c in ipairs(cases) do
      local T = pool:message("s.R" .. i, c[1])
      local ok, err = pcall(pc.ffi, T)
      assert.is_false(ok)
      assert.are.equal("pc.ffi: " .. c[2] .. "; an FFI struct holds only numbers, bools and enums (use the "
                       .. "message type)", strip(err))
    end
    local X = pool:message("s.Ext", { { "a", "int32", 1 } }, { syntax = "proto2", extensions = { { 100, 200 } } })
    assert.has_error(function() pc.ffi(X) end, "pc.ffi: s.Ext takes extensions, which an FFI struct cannot hold")
    assert.has_error(function() pc.ffi(5) end, "bad argument #1 to 'ffi' (protocall.Type expected, got number)")
  end)

  it("keep field names that start with underscores apart from their members", function()
    local p = PU { _1 = 5, __x = 6, y = 0.5 }
    assert.are.equal(5, p._1)
    assert.are.equal(6, p.__x)
    p._1 = -1
    assert.are.equal(bytes(Under { _1 = -1, __x = 6, y = 0.5 }), bytes(p))
    same_write(Under, PU, "_1", 2 ^ 31)
  end)

  it("are separate types for types of the same name in two pools", function()
    local other = pc.pool()
    local O = other:message("s.Point", { { "x", "double", 1 } })
    local PO = pc.ffi(O)
    assert.are_not.equal(PP, PO)
    local p = PO { x = 0.5 }
    assert.are.equal(0.5, p.x)
    assert.are.equal(pc.encode(O { x = 0.5 }), pc.encode(p))
  end)

  it("keep unknown fields of live structs through collections", function()
    local list = {}
    for i = 1, 2000 do
      list[i] = pc.decode(PP, pc.encode(PP { x = i }) .. "\200\1" .. string.char(i % 128))
    end
    collectgarbage()
    collectgarbage()
    for i = 1, 2000 do
      assert.are.equal(pc.encode(Point { x = i }) .. "\200\1" .. string.char(i % 128), pc.encode(list[i]))
    end
  end)

  it("refuse P itself, ffi.typeof(p) and NULL pointers where a struct is expected, without crashing", function()
    local src = debug.getinfo(1, "S").short_src
    local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(function() local x = PP.x return x end)
    assert.is_false(ok)
    assert.are.equal(src .. ":" .. (line + 1) .. ": s.Point: struct expected, got its type (a ctype)", err)
    assert.has_error(function() return PP.nope end, "s.Point: struct expected, got its type (a ctype)")
    assert.has_error(function() PP.x = 1 end, "s.Point: struct expected, got its type (a ctype)")
    local p = PP { x = 1 }
    local ct = ffi.typeof(p)
    assert.is_true(ct == PP)
    assert.is_false(p == ct)
    assert.is_false(ct == p)
    local pct = ffi.typeof(ffi.cast(ffi.typeof("$ *", PP), p)) -- a pointer type's ctype
    for _, x in ipairs { ct, pct } do
      assert.has_error(function() pc.to_message(x) end,
        "bad argument #1 to 'to_message' (pc.ffi struct expected, got cdata)")
      for _, f in ipairs { pc.to_json, pc.clear, pc.clone, PP, function(y) pc.merge(Point(), y) end,
                           function(y) return pc.has(y, "x") end, function(y) return PP(y) end } do
        assert.has_error(function() f(x) end)
      end
      assert.is_nil(pc.type_of(x))
    end
    assert.has_error(function() pc.encode(pct) end, "bad argument #1 to 'encode' (message expected, got cdata)")
    -- pc.encode(P) and pc.encode(ffi.typeof(p)): the same error through the
    -- Lua codec and, once the type has met unknown fields, through C
    for _, x in ipairs { ct, PP } do
      assert.has_error(function() pc.encode(x) end, "s.Point: struct expected, got its type (a ctype)")
    end
    assert.has_error(function() pc.encode(ct, 5) end, "bad argument #2 to 'encode' (table expected, got number)")
    assert.are.equal(2, pc.decode(ct, pc.encode(PP { x = 2 })).x) -- as ffi.typeof(p) == P says
    -- pointers and references to a struct reach its fields
    local ptr = ffi.cast(ffi.typeof("$ *", PP), p)
    assert.are.equal(1, ptr.x)
    ptr.y = 5
    assert.are.equal(5, p.y)
    assert.has_error(function() return ptr.nope end, "s.Point.nope: no such field")
    local null = ffi.new(ffi.typeof("$ *", PP))
    assert.has_error(function() return null.nope end, "s.Point: struct expected, got a NULL pointer")
    -- the fields' FFI loads and stores too (they would read address 0),
    -- and P(null), which LuaJIT's null == nil would take for P()
    local e = "s.Point: struct expected, got a NULL pointer"
    assert.has_error(function() return null.x end, e)
    assert.has_error(function() null.y = 3 end, e)
    assert.has_error(function() return PP(null) end, e)
    assert.has_error(function() return PP(ffi.cast("void *", 0)) end, "s.Point.x: integer expected, got cdata")
    assert.has_error(function() return PP(1, 2, 3, ffi.cast("void *", 0)) end)
    -- const and volatile pointers are pointers to the struct too
    for _, q in ipairs { "const $ *", "volatile $ *", "const volatile $ *" } do
      local cp = ffi.cast(ffi.typeof(q, PP), p)
      assert.are.equal(1, cp.x)
      assert.are.equal("s.Point{x=1, y=5}", tostring(cp))
      assert.are.equal(Point { x = 1, y = 5 }, pc.to_message(cp))
      assert.is_true(cp == p)
      assert.is_true(pc.is_initialized(cp))
      assert.are.equal(5, pc.clone(cp).y)
      local m = Point()
      pc.merge(m, cp)
      assert.are.equal(5, m.y)
      if q:find("const") then -- no write through them, as cp.x = 9 is refused
        assert.has_error(function() pc.clear(cp) end,
          "bad argument #1 to 'clear' (s.Point: a pointer to const, which takes no write)")
        assert.has_error(function() pc.merge(cp, PP { x = 7 }) end,
          "bad argument #1 to 'merge' (s.Point: a pointer to const, which takes no write)")
        assert.are.equal(1, p.x)
      end
    end
    local vp = ffi.cast(ffi.typeof("volatile $ *", PP), p)
    pc.merge(vp, PP { z = 3 })
    assert.are.equal(3, p.z)
    pc.clear(vp, "z")
    assert.are.equal(0, p.z)
  end)

  it("take types of a thousand fields and more", function()
    for _, ty in ipairs { "int64", "int32", "bool", "uint64" } do
      local fields, t = {}, {}
      for i = 1, 1500 do
        fields[i] = { "f" .. i, ty, i }
        t["f" .. i] = ty == "bool" or i
      end
      local T = pc.pool():message("s.Big", fields)
      local P = pc.ffi(T)
      assert.are.equal(bytes(T(t)), bytes(P(t)))
    end
  end)

  it("read P{...}'s table raw and in T{...}'s order, and a proxy through its __index, as T{...} does", function()
    local defaults = { x = 7 }
    for _, t in ipairs { setmetatable({ y = 2 }, { __index = defaults }), setmetatable({}, {}),
                         setmetatable({}, { __index = defaults }) } do
      assert.are.equal(bytes(Point(t)), bytes(PP(t)))
    end
    assert.are.equal(bytes(Point { x = 7 }), bytes(PP(setmetatable({}, { __index = defaults }))))
    local reads = setmetatable({}, { __index = function(_, k) error("read " .. k, 0) end })
    local okr1, errr1 = pcall(Point, reads)
    local okr2, errr2 = pcall(PP, reads)
    assert.is_false(okr1 or okr2)
    assert.are.equal("read x", errr1)
    assert.are.equal(errr1, errr2)
    local ok1, err1 = pcall(Point, setmetatable({ w = 2 }, { __index = defaults }))
    local ok2, err2 = pcall(PP, setmetatable({ w = 2 }, { __index = defaults }))
    assert.is_false(ok1 or ok2)
    assert.are.equal(strip(err1), strip(err2))
    -- two members of a oneof: the same error in both, the members in
    -- field-number order whatever order pairs visits them in (names is)
    local members = { oi = 1, od = 2.5, ob = true, ou = 7 }
    local names = { "oi", "od", "ob", "ou" }
    for i = 1, 4 do
      for j = 1, 4 do
        if i ~= j then
          local want = ("s.F3: oneof o set twice (by %s and %s)"):format(names[math.min(i, j)],
                                                                          names[math.max(i, j)])
          local t = { u32 = 1, [names[i]] = members[names[i]], [names[j]] = members[names[j]] }
          ok1, err1 = pcall(F3, t)
          ok2, err2 = pcall(P3, t)
          assert.is_false(ok1 or ok2)
          assert.are.equal(want, strip(err1))
          assert.are.equal(want, strip(err2))
          ok2, err2 = pcall(P3, setmetatable({}, { __index = t }))
          assert.is_false(ok2)
          assert.are.equal(want, strip(err2))
        end
      end
    end
    -- one member beside a value C refuses: that value's error, in both
    ok1, err1 = pcall(F3, { oi = 1, e = "NOPE" })
    ok2, err2 = pcall(P3, { oi = 1, e = "NOPE" })
    assert.is_false(ok1 or ok2)
    assert.are.equal(strip(err1), strip(err2))
    assert.are.equal("ou", pc.which_oneof(P3({ ou = 7, od = nil }), "o"))
    -- several bad values: the first pairs visits is named, in both
    for _, t in ipairs { { u32 = -1, i32 = 2 ^ 40 }, { i32 = 2 ^ 40, u32 = -1, e = "NOPE" },
                         { b = 1, d = "x", f = "y", u64 = -1.5 } } do
      ok1, err1 = pcall(F3, t)
      ok2, err2 = pcall(P3, t)
      assert.is_false(ok1 or ok2)
      assert.are.equal(strip(err1), strip(err2))
    end
  end)

  it("take no field values for a type without fields", function()
    local P0 = pc.ffi(pool:message("s.Empty", {}))
    assert.are.equal("", pc.encode(P0()))
    assert.has_error(function() pc.encode(P0) end, "s.Empty: struct expected, got its type (a ctype)")
    assert.has_error(function() P0(5) end,
      "s.Empty takes at most 0 field values (its fields, in declaration order)")
  end)

  it("name the caller's line in the errors of the message functions, as messages do", function()
    local src = debug.getinfo(1, "S").short_src
    local function at(line, f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.are.equal(src .. ":" .. line .. ":", err:match("^[^:]*:%d+:"))
      return strip(err)
    end
    local l = debug.getinfo(1, "l").currentline
    local e1 = at(l + 1, function() local p = PP { x = -1 } return p end)
    assert.are.equal("s.Point.x: value -1 out of range for uint32", e1)
    at(l + 3, function() local p = PP { w = 1 } return p end)
    at(l + 4, function() local p = PP(1, "x") return p end)
    at(l + 5, function() local p = PP(1, 2, 3, 4) return p end)
    at(l + 6, function() local p = PP(F3()) return p end)
    at(l + 7, function() local s = pc.encode(P2()) return s end)
    assert.are.equal("bad argument #2 to 'clear' (s.Point.nope: no such field)",
      at(l + 9, function() local p = PP() pc.clear(p, "nope") return p end))
    assert.are.equal(at(l + 10, function() local m = Point() pc.merge(m, 5) return m end),
      at(l + 11, function() local p = PP() pc.merge(p, 5) return p end))
    assert.are.equal(at(l + 12, function() local m = pc.from_json(Point, 5) return m end),
      at(l + 13, function() local p = pc.from_json(PP, 5) return p end))
  end)

  it("check options as pc.encode and pc.decode do", function()
    for _, c in ipairs {
      { function() return pc.encode(Point(), 5) end, function() return pc.encode(PP(), 5) end },
      { function() return pc.decode(Point, "", 5) end, function() return pc.decode(PP, "", 5) end },
      { function() return pc.encode(Point, 5) end, function() return pc.encode(PP, 5) end },
      { function() return pc.encode(Point, {}, 5) end, function() return pc.encode(PP, {}, 5) end },
      -- a misspelt option raises, naming it, on both
      { function() return pc.encode(Point(), { partail = true }) end,
        function() return pc.encode(PP(), { partail = true }) end },
      { function() return pc.encode(Point, {}, { [1] = true }) end,
        function() return pc.encode(PP, {}, { [1] = true }) end },
      { function() return pc.decode(Point, "", { partail = true }) end,
        function() return pc.decode(PP, "", { partail = true }) end },
      { function() return pc.decode(Point, "", { ["partial\0"] = true }) end, -- the whole key
        function() return pc.decode(PP, "", { ["partial\0"] = true }) end },
      { function() return pc.decode(Point, "", { max_depth = 0 }) end,
        function() return pc.decode(PP, "", { max_depth = 0 }) end },
      { function() return pc.decode(Point, "", { max_depth = 1.5 }) end,
        function() return pc.decode(PP, "", { max_depth = 1.5 }) end },
      { function() return pc.decode(Point, "", { max_depth = "5" }) end,
        function() return pc.decode(PP, "", { max_depth = "5" }) end },
    } do
      local ok1, err1 = pcall(c[1])
      local ok2, err2 = pcall(c[2])
      assert.is_false(ok1 or ok2)
      assert.are.equal(strip(err1), strip(err2))
    end
    assert.matches("bad argument #3 to 'decode' %(unknown option 'partail'%)$",
      select(2, pcall(pc.decode, PP, "", { partail = true })))
    assert.matches("bad argument #2 to 'encode' %(unknown option '1'%)$",
      select(2, pcall(pc.encode, PP(), { [1] = true })))
    local m = Point { x = 1 }
    pc.merge(m, PP { y = 2 }) -- a struct merges into a message too
    assert.are.equal(bytes(Point { x = 1, y = 2 }), bytes(m))
  end)

  it("check P{...}'s keys without table.nkeys too (Debian's LuaJIT has none)", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
package.preload["table.nkeys"] = function() error("not in this LuaJIT") end
local pc = require "protocall"
local T = pc.message("n.Point", { { "x", "uint32", 1 }, { "y", "uint32", 2 } })
local P = pc.ffi(T)
assert(pc.encode(P { x = 1, y = 2 }) == pc.encode(T { x = 1, y = 2 }))
local ok, err = pcall(P, { x = 1, w = 2 })
assert(not ok and err:find("n.Point.w: no such field", 1, true), err)
ok, err = pcall(P, { x = -1 })
assert(not ok and err:find("n.Point.x: value -1 out of range for uint32", 1, true), err)
io.write("ok")
]])
    f:close()
    local p = io.popen("LUA_CPATH='" .. package.cpath .. "' luajit " .. script .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(script)
    assert.are.equal("ok", out)
  end)

  it("say so when LuaJIT has no C type ids left for another struct type", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local ffi = require "ffi"
local pc = require "protocall"
local T = pc.message("n.Point", { { "x", "uint32", 1 }, { "y", "uint32", 2 } })
for _, decl in ipairs { "struct { int a, b, c, d, e, f, g, h; }", "struct { int a; }", "struct {}" } do
  while pcall(ffi.typeof, decl) do end -- use up the ids
end
local ok, err = pcall(pc.ffi, T)
io.write(tostring(err))
]])
    f:close()
    local p = io.popen("LUA_CPATH='" .. package.cpath .. "' luajit " .. script .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(script)
    assert.are.equal("pc.ffi: n.Point: LuaJIT cannot declare another C type (table overflow; a Lua state has "
                     .. "65536 C type ids, and the struct types, with their fields, keep theirs)", out)
  end)

  it("encode and decode right when a finalizer or hook encodes and decodes meanwhile", function()
    -- LuaJIT runs finalizers when it boxes an FFI call's result or makes
    -- a string, and hooks between any two instructions: here, between the
    -- codec's call and the copy of its bytes.
    local other = pc.decode(PP, pc.encode(PP { x = 9 }) .. string.rep("\200\1\1", 100))
    local p = PP { x = 1, y = 2 }
    local want = pc.encode(p)
    jit.flush()
    jit.off()
    debug.sethook(function() pc.decode(PP, pc.encode(other)) end, "", 1)
    local got = pc.encode(p)
    local d = pc.decode(PP, want .. "\200\1\5")
    debug.sethook()
    jit.on()
    assert.are.equal(want, got)
    assert.are.equal(want .. "\200\1\5", pc.encode(d))
    -- the same through the Lua codec (a type that met no unknown fields),
    -- whose scratch a hook's codec call would otherwise overwrite
    local PH = pc.ffi(pool:message("s.Hooked", { { "x", "uint32", 1 }, { "d", "double", 2 }, { "f", "fixed32", 3 } }))
    local q, r = PH { x = 300, d = 2.5, f = 7 }, PH { x = 5, d = -1e10, f = 2 ^ 31 }
    local want_q, want_r = pc.encode(q), pc.encode(r)
    jit.flush()
    jit.off()
    debug.sethook(function() pc.decode(PH, pc.encode(r)) end, "", 1)
    local got_q = pc.encode(q)
    local dq = pc.decode(PH, want_q)
    debug.sethook()
    jit.on()
    assert.are.equal(want_q, got_q)
    assert.are.equal(want_q, pc.encode(dq))
    assert.are.equal(want_r, pc.encode(r))
    assert.is_function(require("protocall.ffi.struct").lua_codec(PH))
  end)

  it("name the line that called them from inside functions and through pcall", function()
    local here = debug.getinfo(1, "S").short_src
    local function make() local p = PP { x = -1 } return p end -- this line
    local line = debug.getinfo(1, "l").currentline - 1
    local function outer() local r = make() return r end
    local ok, err = pcall(outer)
    assert.is_false(ok)
    assert.are.equal(here .. ":" .. line .. ": s.Point.x: value -1 out of range for uint32", err)
    local function encode() local s = pc.encode(P2()) return s end -- this line
    line = debug.getinfo(1, "l").currentline - 1
    ok, err = pcall(encode)
    assert.is_false(ok)
    assert.are.equal(here .. ":" .. line .. ": missing required field: s.F2.r", err)
    ok, err = pcall(PP, { x = -1 }) -- this line: the Lua function calling pcall
    line = debug.getinfo(1, "l").currentline - 1
    assert.is_false(ok)
    assert.are.equal(here .. ":" .. line .. ": s.Point.x: value -1 out of range for uint32", err)
  end)

  it("are refused by pc.pairs, as messages are, naming their type", function()
    assert.has_error(function() for _ in pc.pairs(P3 { u32 = 5 }) do end end,
      "bad argument #1 to 'pairs' (table expected, got s.F3 struct)")
    assert.has_error(function() for _ in pc.pairs(F3 { u32 = 5 }) do end end)
  end)

  it("mix with messages in pc.merge and ==", function()
    local m = Point { x = 2 }
    pc.merge(m, PP { y = 3 })
    assert.are.equal(Point { x = 2, y = 3 }, m)
    assert.is_true(PP { x = 1 } == Point { x = 1 })
    assert.is_true(Point { x = 1 } == PP { x = 1 })
    assert.is_false(PP { x = 1 } == Point { x = 2 })
    assert.is_false(PP { x = 1 } == F3 { u32 = 1 })
    assert.is_false(PP { x = 1 } == 1)
  end)

  it("keep the Lua codec after an error raised inside it, and leave types too large for it to C", function()
    local S = pc.ffi(pool:message("s.Stuck", { { "a", "int32", 1 }, { "b", "int32", 2 } }))
    local enc, dec = require("protocall.ffi.struct").lua_codec(S)
    local p = S { a = 1, b = 2 }
    jit.off()
    debug.sethook(function() -- raises once the codec has started
      local i = debug.getinfo(2, "fl")
      if i and i.func == enc and i.currentline >= 5 then
        debug.sethook()
        error("boom")
      end
    end, "", 1)
    local ok, err = pcall(pc.encode, p)
    debug.sethook()
    jit.on()
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.is_not_nil(enc(p)) -- no state left set by the error
    assert.is_not_nil(dec("\8\1"))
    -- 5000 required fields: the Lua codec's test of them would pass
    -- LuaJIT's jump range; the type works through the core codec
    local fs = {}
    for i = 1, 5000 do fs[i] = { "f" .. i, "int32", i, required = true } end
    local B = pc.ffi(pool:message("s.ManyRequired", fs, { syntax = "proto2" }))
    assert.is_nil(require("protocall.ffi.struct").lua_codec(B))
    local b = B()
    for i = 1, 5000 do b["f" .. i] = i end
    assert.are.equal(5000, pc.decode(B, pc.encode(b)).f5000)
  end)

  it("read a NaN of any payload as Lua's NaN and keep its bits on the wire", function()
    -- LuaJIT NaN-boxes its values: a double whose NaN payload an FFI load
    -- kept would read as another type (here a "trace"), and could crash it
    local N = pool:message("s.Nan", { { "d", "double", 1 }, { "f", "float", 2 }, { "od", "double", 3, oneof = "o" } })
    local PN = pc.ffi(N)
    for _, b in ipairs { "\9\0\0\0\0\0\0\251\255", "\9\1\0\0\0\0\0\255\255", "\21\0\0\224\255",
                         "\21\1\0\192\127", "\25\0\0\0\0\0\0\252\255" } do
      for _, x in ipairs { pc.decode(PN, b), pc.decode(N, b), pc.decode(N, b, { table = true }) } do
        for _, k in ipairs { "d", "f", "od" } do
          local v = x[k]
          if v ~= nil then assert.are.equal("number", type(v), k) end
        end
      end
      local p = pc.decode(PN, b)
      assert.is_true(p.d ~= p.d or p.f ~= p.f or p.od ~= p.od)
      assert.are.equal(b, pc.encode(p)) -- the payload kept, as C keeps it
      assert.are.equal(b, pc.encode(pc.decode(N, b)))
    end
  end)

  it("encode and decode through the Lua codec exactly as the core codec does, or leave it to C", function()
    -- lua/protocall/ffi/codec.lua: each encode it makes must be the core
    -- encoder's bytes, each decode the core decoder's fields; what it
    -- leaves (nil) goes to C. Random values and wire bytes, with the cases
    -- it must leave, and counts showing it took most of the rest.
    math.randomseed(13)
    local MAX64 = ffi.new("int64_t", 2) ^ 62 * 2 - 1
    local pools = {
      uint32 = { 0, 1, 127, 128, 16383, 16384, 2 ^ 21, 2 ^ 28 - 1, 2 ^ 28, 2 ^ 32 - 1 },
      int32 = { 0, 1, -1, 127, 300, 2 ^ 31 - 1, -2 ^ 31, -300, 2 ^ 28 },
      double = { 0, -0.0, 1.5, -2.25, 1e300, 1 / 0, -1 / 0, 0 / 0, 5e-324, 0.1 },
      bool = { true, false },
      int64 = { 0, 1, -1, 2 ^ 48, 2 ^ 49 - 1, 2 ^ 52, 2 ^ 53, -2 ^ 53, -2 ^ 52 + 1, MAX64, -MAX64 - 1, 12345678901 },
      uint64 = { 0, 1, 2 ^ 49, 2 ^ 53 - 1, ffi.new("uint64_t", 2) ^ 53, ffi.new("uint64_t", 2) ^ 63,
                 ffi.new("uint64_t", -1) },
    }
    pools.fixed32, pools.sint32, pools.sfixed32, pools.float = pools.uint32, pools.int32, pools.int32, pools.double
    pools.sint64, pools.sfixed64, pools.fixed64 = pools.int64, pools.int64, pools.uint64
    local function pick(list) return list[math.random(#list)] end
    local function same_value(a, b) return a == b or (a ~= a and b ~= b) end
    local counts = { enc = 0, enc_lua = 0, dec = 0, dec_lua = 0 }
    local function check_decode(T, P, b, partial, valid)
      local _, ldec = require("protocall.ffi.struct").lua_codec(P)
      local q = ldec(b, partial)
      if valid then counts.dec = counts.dec + 1 end
      if q == nil then return end
      if valid then counts.dec_lua = counts.dec_lua + 1 end
      local m = pc.decode(T, b, { partial = partial })
      assert.is_not_nil(m, "the Lua codec decoded what C refuses")
      for _, f in ipairs(pool:fields(T)) do
        local k = f.name
        if f.has_presence then assert.are.equal(pc.has(m, k), pc.has(q, k), k) end
        assert.is_true(same_value(m[k], q[k]), k .. ": " .. tostring(m[k]) .. " ~= " .. tostring(q[k]))
      end
      assert.are.equal(bytes(m), bytes(q)) -- and no unknown fields that q lacks
    end
    for _, case in ipairs { { F3, P3 }, { F2, P2 }, { Point, PP } } do
      local T, P = case[1], case[2]
      local lenc = require("protocall.ffi.struct").lua_codec(P)
      assert.is_function(lenc, T.full_name)
      local oneof_members = {}
      for _, f in ipairs(pool:fields(T)) do
        if f.oneof then
          oneof_members[#oneof_members + 1] = f.name
          oneof_members[f.name] = f
        end
      end
      for _ = 1, 600 do
        local m = T()
        local function value_of(f)
          if f.type_name == "s.Closed" then return pick { 1, 2 } end
          return pick(pools[f.type == "enum" and "int32" or f.type])
        end
        for _, f in ipairs(pool:fields(T)) do
          if not f.oneof and math.random() < 0.6 then m[f.name] = value_of(f) end
        end
        if #oneof_members > 0 and math.random() < 0.7 then
          local k = pick(oneof_members)
          m[k] = value_of(oneof_members[k])
        end
        local p = P(m)
        for _, partial in ipairs { false, true } do
          local s = lenc(p, partial)
          counts.enc = counts.enc + 1
          local ok, want = pcall(pc.encode, m, { partial = partial })
          if s ~= nil then
            counts.enc_lua = counts.enc_lua + 1
            assert.is_true(ok, "the Lua codec encoded what C refuses: " .. tostring(want))
            assert.are.equal(want, s)
          end
        end
        local b = bytes(m)
        for _, partial in ipairs { false, true } do check_decode(T, P, b, partial, true) end
        local cut = math.random(0, #b)
        local flip = math.random(#b + 1)
        for _, x in ipairs {
          b:sub(1, cut), b .. b, b .. "\152\6\1", "\152\6\1" .. b,
          b:sub(1, flip - 1) .. string.char(math.random(0, 255)) .. b:sub(flip + 1),
        } do
          check_decode(T, P, x, true)
        end
      end
    end
    -- crafted: non-canonical and long varints, fields out of order or of
    -- another wire type, a 10-byte int32, a closed enum's unknown value
    for _, b in ipairs { "\8\128\0", "\8\255\255\255\255\15", "\8\255\255\255\255\255\1",
                         "\8\255\255\255\255\255\255\255\255\255\1", "\16\1\8\1", "\13\1\0\0\0",
                         "\8\1\8\2", "\8", "\8\128", "" } do
      check_decode(Point, PP, b, false)
    end
    for _, b in ipairs { "\16\255\255\255\255\15", "\16\255\255\255\255\255\255\255\255\255\1",
                         "\24\255\255\255\255\15", "\24\254\255\255\255\31", "\112\128\128\128\128\8",
                         "\49\0\0\0\0\0\0\248\127", "\61\0\0\192\127", "\64\2", "\64\128\1",
                         "\72\128\128\128\128\128\128\128\1", "\88\3", "\120\5\128\1\9",
                         "\120\5\160\1\1\152\1\0" } do
      check_decode(F3, P3, b, false)
    end
    for _, b in ipairs { "\16\3\40\2", "\16\1\40\2", "\16\1", "\8\1\40\1", "\48\127\40\1" } do
      check_decode(F2, P2, b, false)
      check_decode(F2, P2, b, true)
    end
    assert.is_true(counts.enc_lua > counts.enc * 0.4, counts.enc_lua .. " of " .. counts.enc .. " encodes")
    assert.is_true(counts.dec_lua > counts.dec * 0.4, counts.dec_lua .. " of " .. counts.dec .. " decodes")
  end)

  it("are reached through FFI arrays and pointers too", function()
    local a = ffi.new(ffi.typeof("$[?]", PP), 3)
    a[1].x, a[1].y = 5, 6
    assert.has_error(function() a[1].x = -1 end)
    assert.are.equal(pc.encode(Point { x = 5, y = 6 }), pc.encode(a[1]))
    local ptr = ffi.cast(ffi.typeof("$ *", PP), a + 1)
    assert.are.equal(5, ptr.x)
    assert.are.equal(pc.encode(Point { x = 5, y = 6 }), pc.encode(ptr))
    assert.are.equal(Point { x = 5, y = 6 }, pc.to_message(ptr))
    pc.clear(ptr, "x")
    assert.are.equal(0, a[1].x)
    local copy = PP(a[1])
    a[1].y = 7
    assert.are.equal(6, copy.y)
    local null = ffi.cast(ffi.typeof("$ *", PP), nil)
    assert.has_error(function() pc.encode(null) end)
  end)

  it("are taken as a call's request and a handler's response", function()
    local spool = pc.pool()
    assert(spool:load('syntax = "proto3"; package c; message Pt { uint32 x = 1; uint32 y = 2; } '
                      .. 'message Other { int32 a = 1; } service S { rpc Flip(Pt) returns (Pt); }',
                      { name = "c.proto" }))
    local Pt, Other = spool:type("c.Pt"), spool:type("c.Other")
    local PS = pc.ffi(Pt)
    local server = pc.server({ ["c.S"] = { Flip = function(p) return PS { x = p.y, y = p.x } end } }, { pool = spool })
    local stub = pc.client("c.S", { pool = spool, transport = pc.inproc(server) })
    local r = stub:Flip(PS { x = 1, y = 2 })
    assert.are.equal(2, r.x)
    assert.are.equal(1, r.y)
    local ok, err = pcall(stub.Flip, stub, pc.ffi(Other) { a = 1 })
    assert.is_false(ok)
    assert.matches("c.S.Flip request: c.Pt expected, got a struct of c.Other", tostring(err), 1, true)
    local opool = pc.pool()
    assert(opool:load('syntax = "proto3"; package c; message Pt { uint32 x = 1; uint32 y = 2; }', { name = "c.proto" }))
    ok, err = pcall(stub.Flip, stub, pc.ffi(opool:type("c.Pt")) { x = 1 })
    assert.is_false(ok)
    assert.matches("c.S.Flip request: c.Pt expected, got a struct of c.Pt of another pool", tostring(err), 1, true)
  end)
end)
