-- pc.to_json / pc.from_json: the canonical proto3 JSON mapping, its
-- options, the well-known types' forms, and every class of bad input with
-- its exact error ("<path>: <what> at offset <n>"). The differential test
-- against python3-protobuf is spec/json_diff_spec.lua.
local pc = require "protocall"
local R = require "runtime"

local p = pc.pool()
assert(p:load([[
  syntax = "proto3"; package jt;
  import "google/protobuf/timestamp.proto";
  import "google/protobuf/duration.proto";
  import "google/protobuf/struct.proto";
  import "google/protobuf/any.proto";
  import "google/protobuf/wrappers.proto";
  import "google/protobuf/field_mask.proto";
  import "google/protobuf/empty.proto";
  enum Color { RED = 0; GREEN = 1; }
  message Leaf { int32 v = 1; }
  message M {
    int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint64 s64 = 5;
    float f = 6; double d = 7; bool b = 8; string s = 9; bytes by = 10; Color c = 11;
    Leaf leaf = 12; repeated int32 r = 13; map<string, Leaf> ms = 14; map<int64, string> mi = 15;
    map<bool, int32> mb = 16;
    oneof o { string os = 17; int32 oi = 18; }
    optional int32 opt = 19; int32 snake_case_name = 20; repeated M kids = 21;
    fixed64 fx = 22; sfixed32 sf = 23;
    google.protobuf.Timestamp ts = 30; google.protobuf.Duration du = 31; google.protobuf.Struct st = 32;
    google.protobuf.Value va = 33; google.protobuf.Any any = 34; google.protobuf.Int64Value w64 = 35;
    google.protobuf.FieldMask fm = 36; google.protobuf.Empty em = 37; google.protobuf.ListValue lv = 38;
    google.protobuf.NullValue nv = 39; repeated google.protobuf.Value vals = 40;
    google.protobuf.BytesValue wby = 41; google.protobuf.BoolValue wb = 42;
  }
]], { name = "jt.proto" }))
assert(p:load([[
  syntax = "proto2"; package jt2;
  enum Closed { A = 1; B = 2; }
  message P { optional Closed c = 1; repeated Closed rc = 2; optional int32 x = 3 [default = 7];
              extensions 100 to 199; }
  extend P { optional string note = 100; repeated int32 nums = 101; }
]], { name = "jt2.proto" }))
local M, Leaf, P = p:type("jt.M"), p:type("jt.Leaf"), p:type("jt2.P")

local function err_of(T, json, opts)
  local m, err = pc.from_json(T, json, opts)
  assert.is_nil(m)
  return err
end

describe("pc.to_json", function()
  it("prints the canonical mapping", function()
    local m = M{ i32 = -5, i64 = R.int("-9007199254740993"), u64 = -1, s64 = R.min64, f = 0.1, d = 1 / 3,
      b = true, s = "h\"é\n\1", by = "\0\255", c = 1, leaf = { v = 2 }, r = { 1, 2 }, ms = { a = { v = 1 } },
      mi = { [-3] = "x" }, mb = { [true] = 1 }, oi = 7, opt = 0, snake_case_name = 3, kids = { { i32 = 1 } },
      fx = -1, sf = -2 }
    assert.are.equal('{"i32":-5,"i64":"-9007199254740993","u64":"18446744073709551615",' ..
      '"s64":"-9223372036854775808","f":0.1,"d":0.3333333333333333,"b":true,"s":"h\\"é\\n\\u0001",' ..
      '"by":"AP8=","c":"GREEN","leaf":{"v":2},"r":[1,2],"ms":{"a":{"v":1}},"mi":{"-3":"x"},' ..
      '"mb":{"true":1},"oi":7,"opt":0,"snakeCaseName":3,"kids":[{"i32":1}],' ..
      '"fx":"18446744073709551615","sf":-2}', pc.to_json(m))
  end)

  it("prints map entries in key order, whatever order they were set in", function()
    local m = M{}
    for _, k in ipairs({ "b", "ab", "a", "" }) do m.ms[k] = { v = #k } end
    for _, k in ipairs({ 10, -3, 2, -20 }) do m.mi[k] = tostring(k) end
    m.mb[true], m.mb[false] = 1, 0
    assert.are.equal('{"ms":{"":{},"a":{"v":1},"ab":{"v":2},"b":{"v":1}},' ..
      '"mi":{"-20":"-20","-3":"-3","2":"2","10":"10"},"mb":{"false":0,"true":1}}', pc.to_json(m))
  end)

  it("prints floats as the shortest text that reads back, and the special values as strings", function()
    local cases = { { 0.1, '"d":0.1' }, { 1e300, '"d":1e+300' }, { 5e-324, '"d":5e-324' },
      { 2.2250738585072e-308, '"d":2.2250738585072e-308' },
      { -0.0, '"d":-0.0' }, { 0 / 0, '"d":"NaN"' }, { math.huge, '"d":"Infinity"' },
      { -math.huge, '"d":"-Infinity"' }, { 123456789012345678, '"d":1.2345678901234568e+17' } }
    for _, c in ipairs(cases) do
      assert.are.equal("{" .. c[2] .. "}", pc.to_json(M{ d = c[1] }))
    end
    assert.are.equal('{"f":3.4028235e+38}', pc.to_json(M{ f = 3.4028234663852886e+38 }))
    assert.are.equal('{"f":1e-45}', pc.to_json(M{ f = 1.4e-45 }))
    assert.are.equal('{"f":0.2}', pc.to_json(M{ f = 0.2 }))
  end)

  it("takes emit_defaults, proto_names, enums_as_ints and indent", function()
    assert.are.equal('{"i32":0,"i64":"0","u32":0,"u64":"0","s64":"0","f":0,"d":0,"b":false,"s":"",' ..
      '"by":"","c":"RED","r":[],"ms":{},"mi":{},"mb":{},"snakeCaseName":0,"kids":[],"fx":"0","sf":0,' ..
      '"nv":null,"vals":[]}', pc.to_json(M{}, { emit_defaults = true }))
    assert.are.equal('{"c":1,"snake_case_name":2}', pc.to_json(M{ c = 1, snake_case_name = 2 },
      { proto_names = true, enums_as_ints = true }))
    assert.are.equal('{\n  "leaf": {\n    "v": 1\n  },\n  "r": [\n    1\n  ],\n  "em": {}\n}',
      pc.to_json(M{ leaf = { v = 1 }, r = { 1 }, em = {} }, { indent = 2 }))
    assert.are.equal("{}", pc.to_json(M{}, { indent = 2 }))
    assert.are.equal('{"x":7}', pc.to_json(P{ x = 7 }))
    assert.are.equal('{"rc":[]}', pc.to_json(P{}, { emit_defaults = true })) -- proto2 singular fields have presence
  end)

  it("prints extensions as [pkg.ext] and unknown enum numbers as numbers", function()
    local m = P{ c = 2 }
    pc.set_extension(m, "jt2.note", "n")
    pc.set_extension(m, "jt2.nums", { 1, 2 })
    assert.are.equal('{"c":"B","[jt2.note]":"n","[jt2.nums]":[1,2]}', pc.to_json(m))
    assert.are.equal('{"c":5}', pc.to_json(M{ c = 5 }))
  end)

  it("prints the well-known types in their special forms", function()
    local m = M{ ts = { seconds = 1, nanos = 5000000 }, du = { seconds = -1, nanos = -500000000 },
      w64 = { value = 5 }, wby = { value = "\255" }, wb = {}, fm = { paths = { "a_b.c", "d" } }, em = {},
      va = { null_value = 0 }, vals = { { number_value = 1.5 }, { string_value = "s" }, { bool_value = false },
        { list_value = { values = { {} } } }, { struct_value = { fields = { k = { null_value = 0 } } } } },
      st = { fields = { a = { number_value = 2 } } }, lv = { values = { { string_value = "x" } } } }
    assert.are.equal('{"ts":"1970-01-01T00:00:01.005Z","du":"-1.500s","st":{"a":2},"va":null,' ..
      '"w64":"5","fm":"aB.c,d","em":{},"lv":["x"],"vals":[1.5,"s",false,[null],{"k":null}],' ..
      '"wby":"/w==","wb":false}', pc.to_json(m))
    local cases = {
      { { seconds = 0 }, "1970-01-01T00:00:00Z" }, { { seconds = 0, nanos = 1000 }, "1970-01-01T00:00:00.000001Z" },
      { { seconds = -1, nanos = 1 }, "1969-12-31T23:59:59.000000001Z" },
      { { seconds = -62135596800 }, "0001-01-01T00:00:00Z" },
      { { seconds = 253402300799, nanos = 999999999 }, "9999-12-31T23:59:59.999999999Z" },
      { { seconds = 951782400 }, "2000-02-29T00:00:00Z" },
    }
    for _, c in ipairs(cases) do assert.are.equal('{"ts":"' .. c[2] .. '"}', pc.to_json(M{ ts = c[1] })) end
    assert.are.equal('{"du":"-0.001s"}', pc.to_json(M{ du = { nanos = -1000000 } }))
    assert.are.equal('{"du":"315576000000s"}', pc.to_json(M{ du = { seconds = 315576000000 } }))
  end)

  it("prints Any with @type, the fields or a well-known type's value", function()
    local any = p:type("google.protobuf.Any")
    local m = M{ any = any{ type_url = "type.googleapis.com/jt.Leaf", value = pc.encode(Leaf{ v = 3 }) } }
    assert.are.equal('{"any":{"@type":"type.googleapis.com/jt.Leaf","v":3}}', pc.to_json(m))
    local D = p:type("google.protobuf.Duration")
    m = M{ any = any{ type_url = "type.googleapis.com/google.protobuf.Duration",
      value = pc.encode(D{ seconds = 2 }) } }
    assert.are.equal('{"any":{"@type":"type.googleapis.com/google.protobuf.Duration","value":"2s"}}', pc.to_json(m))
    assert.are.equal('{"any":{}}', pc.to_json(M{ any = {} }))
    -- Empty's JSON is an ordinary message's: no "value" member
    m = M{ any = any{ type_url = "t/google.protobuf.Empty" } }
    assert.are.equal('{"any":{"@type":"t/google.protobuf.Empty"}}', pc.to_json(m))
    assert.are.equal(pc.encode(m), pc.encode(assert(pc.from_json(M, pc.to_json(m)))))
  end)

  it("loads a well-known type an Any names that the pool lacks", function()
    local q = pc.pool()
    assert(q:load('syntax = "proto3"; import "google/protobuf/any.proto"; message H { google.protobuf.Any a = 1; }',
      { name = "h.proto" }))
    local H = q:type("H")
    local json = '{"a":{"@type":"type.googleapis.com/google.protobuf.Timestamp","value":"2020-01-01T00:00:00Z"}}'
    assert.are.equal(json, pc.to_json(assert(pc.from_json(H, json))))
  end)

  it("refuses what JSON cannot express, naming the path", function()
    assert.has_error(function() pc.to_json(M{ ts = { seconds = 253402300800 } }) end,
      "$.ts: Timestamp seconds 253402300800 out of range (years 1 to 9999)")
    assert.has_error(function() pc.to_json(M{ kids = { {}, { ts = { nanos = -1 } } } }) end,
      "$.kids[1].ts: Timestamp nanos -1 out of range 0..999999999")
    assert.has_error(function() pc.to_json(M{ du = { seconds = 1, nanos = -1 } }) end,
      "$.du: Duration nanos -1 out of range or of the other sign")
    assert.has_error(function() pc.to_json(M{ du = { seconds = 315576000001 } }) end,
      "$.du: Duration seconds 315576000001 out of range")
    assert.has_error(function() pc.to_json(M{ fm = { paths = { "fooBar" } } }) end,
      '$.fm: FieldMask path "fooBar" has no JSON form')
    assert.has_error(function() pc.to_json(M{ va = { number_value = math.huge } }) end,
      "$.va: Value number Infinity has no JSON form")
    assert.has_error(function() pc.to_json(M{ va = { number_value = 0 / 0 } }) end,
      "$.va: Value number NaN has no JSON form")
    assert.has_error(function() pc.to_json(M{ fm = { paths = { "a,b" } } }) end,
      '$.fm: FieldMask path "a,b" has no JSON form') -- it would read back as two paths
    -- nor would these read back (pc.from_json refuses them, as protobuf-go writes none of them)
    for _, path in ipairs { "a b", "a..b", "", "1a", "a.1b", "a-b" } do
      assert.has_error(function() pc.to_json(M{ fm = { paths = { "c", path } } }) end,
        '$.fm: FieldMask path "' .. path .. '" has no JSON form')
    end
    assert.has_error(function() pc.to_json(M{ fm = { paths = { "\1" .. ("x"):rep(200) } } }) end,
      '$.fm: FieldMask path "\\u0001' .. ("x"):rep(94) .. '..." has no JSON form') -- quoted, cut saying so
    assert.has_error(function() pc.to_json(M{ any = { type_url = "x/no.Such" } }) end,
      '$.any: Any type "x/no.Such" is not in the pool')
    assert.has_error(function() pc.to_json(M{ any = { type_url = "x/jt.Leaf", value = "\255" } }) end,
      "$.any: Any value does not decode: jt.Leaf: truncated input at offset 0")
    -- (a string that is not UTF-8 is refused as it is stored; bindings/lua/host_test.c stores one
    -- from C and pc.to_json refuses it)
    assert.has_error(function() pc.to_json({}) end, "bad argument #1 to 'to_json' (message expected, got table)")
    assert.has_error(function() pc.to_json(M{}, { indnet = 2 }) end,
      "bad argument #2 to 'to_json' (unknown option 'indnet')")
    assert.has_error(function() pc.to_json(M{}, { indent = 17 }) end,
      "bad argument #2 to 'to_json' (indent must be an integer in 0..16)")
  end)
end)

describe("pc.from_json", function()
  it("reads what to_json prints, under json_name or proto name", function()
    local m = M{ i32 = -5, i64 = R.min64, u64 = -1, f = 0.5, d = -1.5, b = true, s = "é\0", by = "\0\255",
      c = 1, leaf = { v = 2 }, r = { 1, 2 }, ms = { a = { v = 1 } }, mi = { [-3] = "x" }, mb = { [false] = 1 },
      os = "o", opt = 0, snake_case_name = 3, kids = { { i32 = 1 } }, ts = { seconds = -1, nanos = 5 },
      du = { seconds = 3 }, w64 = { value = 5 }, fm = { paths = { "a_b" } }, em = {}, wb = {},
      st = { fields = { k = { list_value = { values = { { bool_value = true } } } } } } }
    local json = pc.to_json(m)
    local back = assert(pc.from_json(M, json))
    assert.are.equal(pc.encode(m, { deterministic = true }), pc.encode(back, { deterministic = true }))
    assert.are.equal(json, pc.to_json(back))
    assert.are.equal(3, pc.from_json(M, '{"snake_case_name": 3}').snake_case_name)
    assert.are.equal(3, pc.from_json(M, '{"snakeCaseName": 3}').snake_case_name)
  end)

  it("reads integers exactly as numbers or strings, over the whole 64-bit range", function()
    local function i64(j) return assert(pc.from_json(M, '{"i64":' .. j .. '}')).i64 end
    local function u64(j) return assert(pc.from_json(M, '{"u64":' .. j .. '}')).u64 end
    assert.are.equal(R.max64, i64('"9223372036854775807"'))
    assert.are.equal(R.min64, i64('-9223372036854775808'))
    assert.are.equal(R.int("9007199254740993"), i64('9007199254740993'))
    assert.are.equal(R.uint("18446744073709551615"), u64('18446744073709551615'))
    assert.are.equal(R.uint("9223372036854775808"), u64('"9223372036854775808"'))
    assert.are.equal(100, i64('1e2'))
    assert.are.equal(100, i64('"1.00e2"'))
    assert.are.equal(-7, i64('-7.0'))
    assert.are.equal(0, i64('-0'))
    assert.are.equal(4294967295, assert(pc.from_json(M, '{"u32": 4294967295}')).u32)
    assert.are.equal(-2147483648, assert(pc.from_json(M, '{"i32": "-2147483648"}')).i32)
  end)

  it("reads floats, their special strings, bytes in both base64 alphabets and enums by number", function()
    local m = assert(pc.from_json(M, '{"d":"NaN","f":"-Infinity","by":"-_8","c":1,"wby":"_w"}'))
    assert.is_true(m.d ~= m.d)
    assert.are.equal(-math.huge, m.f)
    assert.are.equal("\251\255", m.by)
    assert.are.equal(1, m.c)
    assert.are.equal("\255", m.wby.value)
    assert.are.equal(1.5, assert(pc.from_json(M, '{"d":"1.5"}')).d)
    assert.are.equal(7, assert(pc.from_json(M, '{"c":7}')).c) -- open enum keeps the number
    assert.are.equal(3.4028234663852886e+38, assert(pc.from_json(M, '{"f":3.4028235e+38}')).f)
    assert.are.equal(2, assert(pc.from_json(P, '{"c":"B"}')).c)
  end)

  it("reads null as the default, and as null in Value and NullValue", function()
    local m = assert(pc.from_json(M, '{"i32":null,"leaf":null,"r":null,"ms":null,"va":null,"nv":null,"os":null,'
      .. '"oi":2,"vals":[null,{"a":[]}],"st":{"n":null}}'))
    assert.is_false(pc.has(m, "leaf"))
    assert.is_true(pc.has(m, "va"))
    assert.are.equal("null_value", pc.which_oneof(m.va, "kind"))
    assert.are.equal(2, m.oi)
    assert.are.equal('{"oi":2,"st":{"n":null},"va":null,"vals":[null,{"a":[]}]}', pc.to_json(m))
  end)

  it("reads the well-known types' forms", function()
    local m = assert(pc.from_json(M, '{"ts":"1972-06-30T23:59:59.5-02:30","du":"-0.25s","fm":"aB.c,d","em":{},' ..
      '"w64":"9","wb":true,"lv":[1,"x",{"y":false}],"any":{"v":4,"@type":"t/jt.Leaf"}}'))
    assert.are.equal(78796799 + 9000, m.ts.seconds)
    assert.are.equal(500000000, m.ts.nanos)
    assert.are.equal(0, m.du.seconds)
    assert.are.equal(-250000000, m.du.nanos)
    assert.are.same({ "a_b.c", "d" }, { m.fm.paths[1], m.fm.paths[2] })
    for json, paths in pairs { [""] = {}, ["a.b,c"] = { "a.b", "c" }, ["fooBar.baz"] = { "foo_bar.baz" },
      ["a1.b2C3"] = { "a1.b2_c3" } } do
      local fm = assert(pc.from_json(M, '{"fm": "' .. json .. '"}')).fm
      local got = {}
      for i = 1, #fm.paths do got[i] = fm.paths[i] end
      assert.are.same(paths, got, json)
    end
    assert.are.equal(9, m.w64.value)
    assert.is_true(m.wb.value)
    assert.are.equal("t/jt.Leaf", m.any.type_url)
    assert.are.equal(4, pc.decode(Leaf, m.any.value).v)
    assert.are.equal('{"ts":"1972-07-01T02:29:59.500Z","du":"-0.250s","any":{"@type":"t/jt.Leaf","v":4},' ..
      '"w64":"9","fm":"aB.c,d","em":{},"lv":[1,"x",{"y":false}],"wb":true}', pc.to_json(m))
    local e = assert(pc.from_json(p:type("google.protobuf.Empty"), "{}"))
    assert.are.equal("{}", pc.to_json(e))
    local v = assert(pc.from_json(p:type("google.protobuf.Value"), '[1, {"a": null}]'))
    assert.are.equal('[1,{"a":null}]', pc.to_json(v))
  end)

  it("takes ignore_unknown, max_depth and pool", function()
    local m = assert(pc.from_json(M, '{"nope":{"x":[1]},"c":"BLUE","i32":1}', { ignore_unknown = true }))
    assert.are.equal('{"i32":1}', pc.to_json(m))
    assert.are.same({ 1 }, { assert(pc.from_json(P, '{"rc":[3,1,"Z"]}', { ignore_unknown = true })).rc[1] })
    local deep = string.rep('{"kids":[', 5) .. "{}" .. string.rep("]}", 5)
    assert.is_truthy(pc.from_json(M, deep, { max_depth = 5 }))
    assert.are.equal("$.kids[0].kids[0].kids[0].kids[0].kids[0].kids[0]: messages nested deeper than 5 (max_depth) "
      .. "at offset 54",
      err_of(M, string.rep('{"kids":[', 6) .. "{}" .. string.rep("]}", 6), { max_depth = 5 }))
    local q = pc.pool()
    assert(q:load('syntax = "proto3"; package o; message Other { int32 z = 1; }', { name = "o.proto" }))
    assert.are.equal('$.any.@type: type "t/o.Other" is not in the pool at offset 16',
      err_of(M, '{"any":{"@type":"t/o.Other","z":1}}'))
    local any = assert(pc.from_json(M, '{"any":{"@type":"t/o.Other","z":1}}', { pool = q }))
    assert.are.equal('{"any":{"@type":"t/o.Other","z":1}}', pc.to_json(any, { pool = q }))
    assert.has_error(function() pc.from_json(M, "{}", { max_depth = 0 }) end,
      "bad argument #3 to 'from_json' (max_depth must be an integer in 1..1000)")
    assert.has_error(function() pc.from_json(M, "{}", { max_depth = "10" }) end,
      "bad argument #3 to 'from_json' (max_depth must be an integer in 1..1000)")
    assert.has_error(function() pc.from_json(M, "{}", { pool = 5 }) end,
      "bad argument #3 to 'from_json' (pool: protocall.Pool expected, got number)")
    assert.has_error(function() pc.to_json(M {}, { pool = {} }) end,
      "bad argument #2 to 'to_json' (pool: protocall.Pool expected, got table)")
    assert.has_error(function() pc.from_text(M, "", { pool = "p" }) end,
      "bad argument #3 to 'from_text' (pool: protocall.Pool expected, got string)")
    assert.has_error(function() pc.to_json(M {}, { indent = "2" }) end,
      "bad argument #2 to 'to_json' (indent must be an integer in 0..16)")
    assert.has_error(function() pc.from_json(M, "{}", { strict = true }) end,
      "bad argument #3 to 'from_json' (unknown option 'strict')")
    assert.has_error(function() pc.from_json("jt.M", "{}") end,
      "bad argument #1 to 'from_json' (protocall.Type expected, got string)")
    assert.has_error(function() pc.from_json(M, {}) end, "bad argument #2 to 'from_json' (string expected, got table)")
  end)

  it("refuses every class of bad input with its path and offset", function()
    local cases = {
      -- JSON syntax
      { '{"i32": 1} x', "$: unexpected data after the value at offset 11" },
      { '{"i32": 01}', "$: expected ',' or '}' at offset 9" },
      { '{"i32": 1', "$: unexpected end of input at offset 9" },
      { '{"i32" 1}', "$.i32: expected ':' at offset 7" },
      { "{'i32': 1}", "$: expected a member name at offset 1" },
      { '{"d": NaN}', "$.d: unexpected character 'N' at offset 6" },
      { '{"d": 1.}', "$.d: invalid number at offset 6" },
      { '{"s": "a', "$.s: unterminated string at offset 6" },
      { '{"s": "\\x"}', "$.s: invalid escape at offset 7" },
      { '{"s": "\\ud800"}', "$.s: lone surrogate in \\u escape at offset 7" },
      { '{"s": "\\udc00\\ud800"}', "$.s: lone surrogate in \\u escape at offset 7" },
      { '{"s": "\255"}', "$.s: invalid UTF-8 at offset 7" },
      { '{"s": "\237\160\128"}', "$.s: invalid UTF-8 at offset 7" },
      { '{"s": "a\tb"}', "$.s: control character U+0009 in a string at offset 8" },
      { "[]", "$: object expected, got an array at offset 0" },
      { "", "$: unexpected end of input at offset 0" },
      -- duplicates and oneofs
      { '{"i32": 1, "i32": 2}', "$.i32: duplicate key at offset 11" },
      { '{"snakeCaseName": 1, "snake_case_name": 2}',
        '$.snake_case_name: field jt.M.snake_case_name set twice (as "snakeCaseName" and "snake_case_name")'
        .. ' at offset 21' },
      { '{"os": "a", "oi": 1}', '$.oi: oneof jt.M.o set twice (by "os" and "oi") at offset 12' },
      { '{"ms": {"a": {}, "a": {}}}', "$.ms.a: duplicate map key at offset 17" },
      { '{"mb": {"true": 1, "true": 2}}', "$.mb.true: duplicate map key at offset 19" },
      { '{"any": {"@type": "t/jt.Leaf", "@type": "t/jt.Leaf"}}', "$.any.@type: duplicate key at offset 31" },
      -- numbers
      { '{"i32": 1.5}', "$.i32: integer expected, got 1.5 at offset 8" },
      { '{"i32": 2147483648}', "$.i32: 2147483648 out of range for int32 at offset 8" },
      { '{"i32": "-2147483649"}', "$.i32: -2147483649 out of range for int32 at offset 8" },
      { '{"u32": -1}', "$.u32: -1 out of range for uint32 at offset 8" },
      { '{"i64": "9223372036854775808"}', "$.i64: 9223372036854775808 out of range for int64 at offset 8" },
      { '{"u64": 18446744073709551616}', "$.u64: 18446744073709551616 out of range for uint64 at offset 8" },
      { '{"u64": 1e20}', "$.u64: 1e20 out of range for uint64 at offset 8" },
      { '{"i64": "12a"}', '$.i64: invalid integer "12a" at offset 8' },
      { '{"i64": " 1"}', '$.i64: invalid integer " 1" at offset 8' },
      { '{"i32": true}', "$.i32: integer expected, got true at offset 8" },
      { '{"f": 1e39}', "$.f: 1e39 out of range for float at offset 6" },
      { '{"d": 1e309}', "$.d: 1e309 out of range for double at offset 6" },
      { '{"d": "nan"}', '$.d: invalid number "nan" at offset 6' },
      { '{"mi": {"01": "b"}}', '$.mi["01"]: invalid integer "01" at offset 8' },
      { '{"mi": {"x": "b"}}', '$.mi.x: map key "x" is not an integer at offset 8' },
      { '{"mb": {"1": 1}}', '$.mb["1"]: map key "true" or "false" expected at offset 8' },
      -- other kinds
      { '{"b": "true"}', "$.b: true or false expected, got a string at offset 6" },
      { '{"s": 1}', "$.s: string expected, got a number at offset 6" },
      { '{"by": "a!"}', "$.by: invalid base64 at offset 9" },
      { '{"by": "+_8="}', "$.by: invalid base64 at offset 9" }, -- the two alphabets mixed
      { '{"kids": [{"kids": [{"by": "!!"}]}]}', "$.kids[0].kids[0].by: invalid base64 at offset 28" },
      { '{"c": "BLUE"}', '$.c: unknown value "BLUE" of enum jt.Color at offset 6' },
      { '{"c": 2.5}', "$.c: integer expected, got 2.5 at offset 6" },
      { '{"c": []}', "$.c: enum name or number expected, got an array at offset 6" },
      { '{"r": [1, null]}', "$.r[1]: null is not an element of a repeated field at offset 10" },
      { '{"r": 1}', "$.r: array expected, got a number at offset 6" },
      { '{"ms": {"a": null}}', "$.ms.a: null is not a map value at offset 13" },
      { '{"ms": []}', "$.ms: object expected, got an array at offset 7" },
      { '{"leaf": 1}', "$.leaf: object expected, got a number at offset 9" },
      { '{"nope": 1}', '$.nope: no field named "nope" in jt.M at offset 1' },
      { '{"leaf": {"v": 1, "w": 2}}', '$.leaf.w: no field named "w" in jt.Leaf at offset 18' },
      { '{"a\\u0000": 1}', '$["a\\u0000"]: no field named "a\\u0000" in jt.M at offset 1' },
      -- the input's text escaped as in a JSON string, cut after 100 bytes, never within a character
      { '{"q\\"\\\\\\n": 1}', '$["q\\"\\\\\\u000a"]: no field named "q\\"\\\\\\u000a" in jt.M at offset 1' },
      { '{"c": "B\\u0000LUE"}', '$.c: unknown value "B\\u0000LUE" of enum jt.Color at offset 6' },
      { '{"c": "' .. ("x"):rep(99) .. 'é!"}',
        '$.c: unknown value "' .. ("x"):rep(99) .. '..." of enum jt.Color at offset 6' },
      { '{"c": "' .. ("x"):rep(98) .. 'é!"}',
        '$.c: unknown value "' .. ("x"):rep(98) .. 'é..." of enum jt.Color at offset 6' },
      -- a key in the path: cut after 64 bytes (escaped), so the message stays whole
      { '{"' .. ("x"):rep(600) .. '": 1}',
        '$.' .. ("x"):rep(64) .. '...: no field named "' .. ("x"):rep(100) .. '..." in jt.M at offset 1' },
      { '{"mi": {"' .. ("x"):rep(600) .. '": "v"}}',
        '$.mi.' .. ("x"):rep(64) .. '...: map key "' .. ("x"):rep(100) .. '..." is not an integer at offset 8' },
      { '{"' .. ("\\u0001"):rep(100) .. '": 1}', '$["' .. ("\\u0001"):rep(10) .. '..."]: no field named "'
        .. ("\\u0001"):rep(16) .. '..." in jt.M at offset 1' },
      -- well-known types
      { '{"ts": "1970-01-01T00:00:00"}', '$.ts: invalid RFC 3339 timestamp "1970-01-01T00:00:00" at offset 7' },
      { '{"ts": "1970-02-30T00:00:00Z"}', '$.ts: invalid RFC 3339 timestamp "1970-02-30T00:00:00Z" at offset 7' },
      { '{"ts": "1970-01-01T00:00:00.1234567890Z"}',
        '$.ts: invalid RFC 3339 timestamp "1970-01-01T00:00:00.1234567890Z" at offset 7' },
      { '{"ts": "0001-01-01T00:00:00+00:01"}',
        '$.ts: timestamp "0001-01-01T00:00:00+00:01" out of range (years 1 to 9999) at offset 7' },
      { '{"ts": 0}', "$.ts: RFC 3339 timestamp string expected, got a number at offset 7" },
      { '{"du": "1.5"}', '$.du: invalid duration "1.5" (expected like "1.5s") at offset 7' },
      { '{"du": "315576000001s"}', '$.du: duration "315576000001s" out of range at offset 7' },
      { '{"fm": "a_b"}', "$.fm: FieldMask path \"a_b\" must be camelCase (no '_') at offset 7" },
      { '{"fm": "a..b"}', '$.fm: FieldMask path "a..b" has an empty field name at offset 7' },
      { '{"fm": "a,.b"}', '$.fm: FieldMask path ".b" has an empty field name at offset 7' },
      { '{"fm": "a."}', '$.fm: FieldMask path "a." has an empty field name at offset 7' },
      { '{"fm": "a,,b"}', '$.fm: FieldMask "a,,b" has an empty path at offset 7' },
      { '{"fm": "a,"}', '$.fm: FieldMask "a," has an empty path at offset 7' },
      -- a character no field name has (protobuf-go: not a valid name)
      { '{"fm": " "}', '$.fm: FieldMask path " " has " ", which no field name has at offset 7' },
      { '{"fm": "a, b"}', '$.fm: FieldMask path " b" has " ", which no field name has at offset 7' },
      { '{"fm": "a\\tb"}', '$.fm: FieldMask path "a\\u0009b" has "\\u0009", which no field name has at offset 7' },
      { '{"fm": "a-b.c"}', '$.fm: FieldMask path "a-b.c" has "-", which no field name has at offset 7' },
      { '{"fm": "a.\xc3\xa9"}',
        '$.fm: FieldMask path "a.\xc3\xa9" has "\xc3\xa9", which no field name has at offset 7' },
      { '{"fm": "a.1b"}', '$.fm: FieldMask path "a.1b" has a field name starting with a digit at offset 7' },
      { '{"em": {"a": 1}}', "$.em.a: google.protobuf.Empty has no fields at offset 8" },
      { '{"st": []}', "$.st: object expected, got an array at offset 7" },
      { '{"lv": {}}', "$.lv: array expected, got an object at offset 7" },
      { '{"w64": "x"}', '$.w64: invalid integer "x" at offset 8' },
      { '{"any": {"v": 1}}', '$.any: Any without "@type" at offset 8' },
      { '{"any": {"@type": "t/jt.Nope"}}', '$.any.@type: type "t/jt.Nope" is not in the pool at offset 18' },
      { '{"any": {"@type": "t/jt.Leaf", "w": 1}}', '$.any.w: no field named "w" in jt.Leaf at offset 31' },
      { '{"any": {"@type": "t/google.protobuf.Duration", "value": "1s", "x": 1}}',
        '$.any.x: unknown member of an Any holding google.protobuf.Duration (only "value") at offset 63' },
      { '{"any": {"@type": "t/google.protobuf.Duration", "value": 1}}',
        "$.any.value: duration string expected, got a number at offset 57" },
    }
    for _, c in ipairs(cases) do
      assert.are.equal(c[2], err_of(M, c[1]), c[1])
    end
    assert.are.equal("$.c: 3 is not a value of closed enum jt2.Closed at offset 6", err_of(P, '{"c": 3}'))
    assert.are.equal("$.rc[1]: 3 is not a value of closed enum jt2.Closed at offset 11", err_of(P, '{"rc": [1, 3]}'))
    assert.are.equal('$[\"[jt2.note]\"]: duplicate key at offset 20',
      err_of(P, '{"[jt2.note]": "a", "[jt2.note]": "b"}'))
  end)

  it("reads extensions as [pkg.ext]", function()
    local m = assert(pc.from_json(P, '{"[jt2.note]": "n", "[jt2.nums]": [1, 2], "x": 1}'))
    assert.are.equal("n", pc.get_extension(m, "jt2.note"))
    assert.are.equal(2, pc.get_extension(m, "jt2.nums")[2])
    assert.are.equal('$["[jt2.nope]"]: no field named "[jt2.nope]" in jt2.P at offset 1',
      err_of(P, '{"[jt2.nope]": 1}'))
  end)

  it("keeps the message whole under long keys at any depth: the path gives up steps from its middle", function()
    local keys = { ("x"):rep(70), ("é"):rep(40), ("\\u0001"):rep(30), '\\"q\\\\', "k" }
    for depth = 1, 24 do
      for _, key in ipairs(keys) do
        local json = '{"st": ' .. ('{"' .. key .. '": '):rep(depth) .. "@" .. ("}"):rep(depth + 1)
        local err = err_of(M, json)
        assert.is_true(#err <= 511, err)
        assert.matches(': unexpected character \'@\' at offset %d+$', err)
        assert.matches("^%$%.st", err)
        if utf8 then assert.is_truthy(utf8.len(err), err) end -- Lua 5.4: never within a character
      end
    end
    local err = err_of(M, '{"st": ' .. ('{"' .. ("é"):rep(40) .. '": '):rep(24) .. "@" .. ("}"):rep(25))
    assert.matches('%["' .. ("é"):rep(32) .. '%.%.%."%]: unexpected character', err) -- the last step kept
    assert.matches('%.%.%."%]%.%.%.%["', err) -- steps left out of the middle
  end)

  it("limits nesting (100 messages by default) without a crash on deep documents", function()
    local ok = string.rep('{"kids":[', 100) .. "{}" .. string.rep("]}", 100)
    assert.is_truthy(pc.from_json(M, ok))
    local err = err_of(M, string.rep('{"kids":[', 101) .. "{}" .. string.rep("]}", 101))
    assert.matches("^%$%.kids%[0%]%.kids%[0%]%.kids%[0%]%.kids%[0%]%.%.%."
      .. "%.kids%[0%]%.kids%[0%]%.kids%[0%]%.kids%[0%]: messages nested deeper than 100 %(max_depth%) "
      .. "at offset 909$", err)
    assert.matches("^%$%[0%]%[0%].*: JSON nested deeper than 204 %(2 %* max_depth %+ 4%) at offset 204$",
      err_of(M, string.rep("[", 100000)))
    assert.matches("%.a%.a: JSON nested deeper than 204 %(2 %* max_depth %+ 4%) at offset 1021$",
      err_of(M, '{"st":' .. string.rep('{"a":', 300)))
    assert.matches("%.a%.a: messages nested deeper than 100 %(max_depth%) at offset 506$",
      err_of(M, '{"st":' .. string.rep('{"a":', 150) .. "1" .. string.rep("}", 151)))
    local v = string.rep("[", 150) .. string.rep("]", 150) -- Struct nesting counts one level per JSON level
    assert.is_truthy(pc.from_json(M, '{"lv":' .. v .. "}", { max_depth = 200 }))
  end)
end)

describe("pc.json_to_wire and pc.wire_to_json", function()
  local DOC = '{"i32":-1,"i64":"9007199254740993","s":"h\\u00e9","by":"AAE=","c":"GREEN","leaf":{"v":2},'
    .. '"r":[1,2],"ms":{"a":{"v":1},"b":{}},"mi":{"7":"x"},"os":"o","opt":0,"kids":[{"i32":5}],'
    .. '"ts":"2020-01-01T00:00:00.500Z","du":"1.5s","st":{"a":[1,null,"x"]},'
    .. '"any":{"@type":"type.googleapis.com/jt.Leaf","v":3},"w64":"5","fm":"a.b,cD","wby":"AA=="}'

  it("give what pc.from_json then pc.encode, and pc.decode then pc.to_json give", function()
    local m = assert(pc.from_json(M, DOC))
    local bytes = assert(pc.json_to_wire(M, DOC))
    assert.are.equal(pc.encode(m), bytes)
    assert.are.equal(pc.to_json(m), assert(pc.wire_to_json(M, bytes)))
    for _, opts in ipairs { { emit_defaults = true }, { proto_names = true, enums_as_ints = true }, { indent = 2 } } do
      assert.are.equal(pc.to_json(m, opts), assert(pc.wire_to_json(M, bytes, opts)))
    end
    assert.are.equal("", pc.json_to_wire(M, "{}"))
    assert.are.equal("{}", pc.wire_to_json(M, ""))
    -- the options of pc.from_json
    assert.are.equal(pc.encode(Leaf { v = 1 }), pc.json_to_wire(Leaf, '{"v":1,"x":2}', { ignore_unknown = true }))
    local q = pc.pool()
    assert(q:load('syntax = "proto3"; package o; message Other { int32 z = 1; }', { name = "o.proto" }))
    local any = assert(pc.json_to_wire(M, '{"any":{"@type":"t/o.Other","z":1}}', { pool = q }))
    assert.are.equal('{"any":{"@type":"t/o.Other","z":1}}', pc.wire_to_json(M, any, { pool = q }))
  end)

  it("merge a second text over the first as pc.merge does", function()
    local a = '{"i32":1,"s":"a","leaf":{"v":1},"r":[1],"ms":{"k":{"v":1}},"os":"x"}'
    local b = '{"s":"b","r":[2],"ms":{"k":{"v":2},"l":{}},"oi":3,"ts":"1970-01-01T00:00:01Z"}'
    local m = assert(pc.from_json(M, a))
    pc.merge(m, assert(pc.from_json(M, b)))
    local bytes = assert(pc.json_to_wire(M, a, nil, b))
    assert.are.equal(pc.to_json(m), pc.to_json(assert(pc.decode(M, bytes))))
    -- `more` is read with pc.from_json's defaults, not the options of the first
    assert.are.same({ nil, err_of(M, '{"x":1}'), 2 },
      { pc.json_to_wire(M, '{"x":1}', { ignore_unknown = true }, '{"x":1}') })
  end)

  it("fail as pc.from_json and pc.decode do, naming the text; raise as pc.to_json does", function()
    assert.are.same({ nil, err_of(M, '{"i32": 1'), 1 }, { pc.json_to_wire(M, '{"i32": 1') })
    assert.are.same({ nil, err_of(M, '{"by":"!"}'), 2 }, { pc.json_to_wire(M, "{}", nil, '{"by":"!"}') })
    assert.are.same({ pc.decode(M, "\10") }, { pc.wire_to_json(M, "\10") })
    assert.has_error(function() pc.wire_to_json(M, pc.encode(M { ts = { seconds = 253402300800 } })) end,
      "$.ts: Timestamp seconds 253402300800 out of range (years 1 to 9999)")
    local q = pc.pool()
    assert(q:load('syntax = "proto2"; package p2; message R { required int32 a = 1; optional int32 b = 2; }',
      { name = "r.proto" }))
    assert.are.same({ nil, "missing required field: p2.R.a" }, { pc.json_to_wire(q:type("p2.R"), '{"b":1}') })
    assert.has_error(function() pc.json_to_wire("jt.M", "{}") end,
      "bad argument #1 to 'json_to_wire' (protocall.Type expected, got string)")
    assert.has_error(function() pc.json_to_wire(M, "{}", { strict = true }) end,
      "bad argument #3 to 'json_to_wire' (unknown option 'strict')")
    assert.has_error(function() pc.json_to_wire(M, "{}", nil, 5) end,
      "bad argument #4 to 'json_to_wire' (string expected, got number)")
    assert.has_error(function() pc.wire_to_json(M, {}) end,
      "bad argument #2 to 'wire_to_json' (string expected, got table)")
    assert.has_error(function() pc.wire_to_json(M, "", { indent = 17 }) end,
      "bad argument #3 to 'wire_to_json' (indent must be an integer in 0..16)")
  end)

  it("read and check their options as pc.from_json and pc.to_json do", function()
    local deep = string.rep('{"kids":[', 6) .. "{}" .. string.rep("]}", 6)
    assert.are.same({ nil, err_of(M, deep, { max_depth = 5 }), 1 }, { pc.json_to_wire(M, deep, { max_depth = 5 }) })
    assert.is_truthy(pc.json_to_wire(M, deep, { max_depth = 6 }))
    local m = assert(pc.from_json(M, DOC))
    local bytes = pc.encode(m)
    assert.are.equal(pc.to_json(m, { indent = 3, emit_defaults = true, proto_names = true, enums_as_ints = true }),
      pc.wire_to_json(M, bytes, { indent = 3, emit_defaults = true, proto_names = true, enums_as_ints = true }))
    -- each entry point, the position of its options, the options it reads
    local readers = {
      from_json = { 3, function(o) return pc.from_json(M, "{}", o) end },
      json_to_wire = { 3, function(o) return pc.json_to_wire(M, "{}", o) end },
    }
    local writers = {
      to_json = { 2, function(o) return pc.to_json(M {}, o) end },
      wire_to_json = { 3, function(o) return pc.wire_to_json(M, "", o) end },
    }
    local function check(group, bad)
      for name, e in pairs(group) do
        for _, case in ipairs(bad) do
          assert.has_error(function() e[2](case[1]) end,
            ("bad argument #%d to '%s' (%s)"):format(e[1], name, case[2]))
        end
      end
    end
    local common = {
      { "x", "table expected, got string" },
      { { strict = true }, "unknown option 'strict'" },
      { { [1] = true }, "unknown option '1'" },
      { { pool = 5 }, "pool: protocall.Pool expected, got number" },
    }
    check(readers, common)
    check(writers, common)
    check(readers, {
      { { ignore_unknown = 1 }, "ignore_unknown: boolean expected, got number" },
      { { max_depth = 0 }, "max_depth must be an integer in 1..1000" },
      { { max_depth = 1001 }, "max_depth must be an integer in 1..1000" },
      { { max_depth = "10" }, "max_depth must be an integer in 1..1000" },
      { { indent = 2 }, "unknown option 'indent'" },
    })
    check(writers, {
      { { emit_defaults = "yes" }, "emit_defaults: boolean expected, got string" },
      { { proto_names = 1 }, "proto_names: boolean expected, got number" },
      { { enums_as_ints = {} }, "enums_as_ints: boolean expected, got table" },
      { { indent = -1 }, "indent must be an integer in 0..16" },
      { { indent = 1.5 }, "indent must be an integer in 0..16" },
      { { max_depth = 5 }, "unknown option 'max_depth'" },
    })
  end)

  it("load a well-known type an Any names that the pool lacks", function()
    local q = pc.pool()
    assert(q:load('syntax = "proto3"; import "google/protobuf/any.proto"; message H { google.protobuf.Any a = 1; }',
      { name = "h.proto" }))
    local H = q:type("H")
    local json = '{"a":{"@type":"type.googleapis.com/google.protobuf.Timestamp","value":"2020-01-01T00:00:00Z"}}'
    local bytes = assert(pc.json_to_wire(H, json))
    local r = pc.pool()
    assert(r:load('syntax = "proto3"; import "google/protobuf/any.proto"; message H { google.protobuf.Any a = 1; }',
      { name = "h.proto" }))
    assert.are.equal(json, pc.wire_to_json(r:type("H"), bytes))
  end)

  it("keep their results whole with finalizers calling them meanwhile", function()
    local bytes = assert(pc.json_to_wire(M, DOC))
    local text = pc.to_json(assert(pc.decode(M, bytes)))
    local seen = {}
    local ok, mode = pcall(collectgarbage, "incremental") -- Lua 5.4's default is generational
    local pause = collectgarbage("setpause", 0) -- a collection step at every allocation
    for _ = 1, 200 do
      local function fin() seen[#seen + 1] = pc.json_to_wire(M, '{"s":"gc"}') end
      if newproxy then -- LuaJIT runs __gc for userdata alone
        getmetatable(newproxy(true)).__gc = fin
      else
        setmetatable({}, { __gc = fin })
      end
      local b = pc.json_to_wire(M, DOC)
      assert.are.equal(bytes, b)
      assert.are.equal(text, pc.wire_to_json(M, bytes))
    end
    collectgarbage("setpause", pause)
    if ok then collectgarbage(mode) end
    collectgarbage()
    for _, b in ipairs(seen) do assert.are.equal(pc.encode(M { s = "gc" }), b) end
  end)
end)

describe("errors on a real document", function()
  local corpus = require "corpus"
  it("name the JSON path and the byte offset of the bad character", function()
    local doc = corpus.read("payloads/opentelemetry/otlp_traces.json")
    if not doc then return corpus.skip(pending, "otlp_traces.json") end
    local q = pc.pool()
    assert(q:load_descriptor_set(assert(corpus.read("descriptors/opentelemetry.pb"))))
    local T = q:type("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
    assert(pc.from_json(T, doc))
    -- spoil the third traceId (a span's link): its first base64 character becomes '!'
    local n = 0
    local bad = doc:gsub('"traceId":%s*"(.)', function()
      n = n + 1
      if n == 3 then return '"traceId": "!' end
    end)
    local err = select(2, pc.from_json(T, bad))
    local at = tonumber(err:match(" at offset (%d+)$"))
    assert.are.equal("$.resourceSpans[0].scopeSpans[0].spans[0].links[1].traceId: invalid base64 at offset 12543", err)
    assert.are.equal("!", bad:sub(at + 1, at + 1))
  end)
end)

describe("examples/quickstart.lua", function()
  it("round-trips a JSON request through the client", function()
    local bin = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
    local out, ok = R.capture(bin .. " examples/quickstart.lua 2>&1")
    assert.is_true(ok, out)
    assert.matches('JSON request:  {"name":"json","points":[{"x":1,"y":1},{"x":4,"y":5}],"labels":{"via":"gateway"}}',
      out, 1, true)
    assert.matches('JSON response: {"length":5,"legs":1}', out, 1, true)
    assert.matches('bad JSON: $.points[0].x: invalid integer "four" at offset 34', out, 1, true)
  end)
end)
