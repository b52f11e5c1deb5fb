-- Plain Lua tables and the wire (bindings/lua/lpc_table.c). pc.encode(T, table):
-- every table gives the bytes pc.encode(T(table)) gives, and every table T{...}
-- refuses raises T{...}'s very error. pc.to_table(m) and pc.decode(T, bytes,
-- {table = true}): the tables a walk of the message through its fields gives.
local pc = require "protocall"
local R = require "runtime"
local corpus = require "corpus"

local pool = pc.pool()
local E = pool:enum("te.E", { ZERO = 0, ONE = 1, TWO = 2 })
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
})
local P2 = pool:message("te2.P2", { { "a", "int32", 1 }, { "req", "int32", 2, required = true } },
  { syntax = "proto2" })
local Closed = pool:enum("te2.C", { C_ONE = 1 }, { syntax = "proto2" })
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
    same_bytes(All, { oi = 1, os = "x" }) -- two members of one oneof: T{...} keeps the one it meets last
    same_bytes(P2, { a = 1, req = 2 })
    same_bytes(P2E, { c = "C_ONE" })
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
    assert.matches(R.luajit and "te.All.i64: number is not an integer in %-2%^53%.%.2%^53"
                   or "te.All.i64: number has no integer representation", same_error(All, { i64 = 1.5 }))
    assert.matches("te.All.s: string expected, got number", same_error(All, { s = 1 }))
    assert.matches("te.All.b: boolean expected, got number", same_error(All, { b = 1 }))
    assert.matches("te.All.e: unknown value 'THREE' for enum te.E", same_error(All, { e = "THREE" }))
    assert.matches("te.Sub.x: integer expected, got boolean", same_error(All, { sub = { child = { x = true } } }))
    -- LuaJIT's # of { 1, nil, 3 } is 1, so key 3 is the one past the list
    assert.matches(R.luajit and "te.All.ri: list expected, got a table with key 3"
                   or "te.All.ri: list expected, got a table with holes", same_error(All, { ri = { 1, nil, 3 } }))
    assert.matches("te.All.ri: list expected, got a table with key k", same_error(All, { ri = { 1, k = 2 } }))
    assert.matches("te.All.rsub: te.Sub expected, got number", same_error(All, { rsub = { 1 } }))
    assert.matches("te.All.sub: te.Sub expected, got protocall.Type", same_error(All, { sub = All }))
    assert.matches(R.luajit and 'te.All.mi: decimal integer string expected, got "k"'
                              or "te.All.mi: integer expected, got string", same_error(All, { mi = { k = {} } }))
    assert.matches("2 is not a value of closed enum te2.C", same_error(P2E, { c = 2 }))
    local cycle = { x = 1 }
    cycle.child = cycle
    assert.matches("te.Sub: table with a cycle given to the constructor", same_error(Sub, cycle))
    assert.matches("^[^:]+:%d+: ", same_error(All, { nope = 1 })) -- the caller's position first
  end)

  it("raises pc.encode's error for a proto3 string that is not UTF-8", function()
    local ok, err = pcall(pc.encode, All, { s = "\255" })
    assert.is_false(ok)
    assert.matches("te.All.s: invalid UTF%-8 in a string field", err)
  end)

  it("refuses a non-table after a Type", function()
    local ok, err = pcall(pc.encode, All, 5)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'encode' %(table expected, got number%)", err)
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
