-- Lua declarations refuse what they would otherwise ignore, and the
-- well-known types are there on first use (README "Schemas").
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

  it("come with a descriptor set that imports them without carrying them", function()
    local a = pc.pool()
    assert(a:load('syntax = "proto3"; package s; import "google/protobuf/timestamp.proto"; '
      .. "message M { google.protobuf.Timestamp at = 1; }", { name = "s.proto" }))
    local fdp = pc.encode(a:file_descriptor("s.proto"))
    assert(#fdp < 128)
    local set = "\10" .. string.char(#fdp) .. fdp -- FileDescriptorSet{file = [s.proto]}, no imports
    local b = pc.pool()
    local files = assert(b:load_descriptor_set(set))
    assert.are.equal(1, #files)
    assert.are.equal("\10\2\8\3", pc.encode(b:type("s.M"){ at = { seconds = 3 } }))
  end)

  it("are not kept alive by the codec's cache of the last type it met", function()
    local probe = setmetatable({}, { __mode = "k" })
    do
      local p = pc.pool()
      local T = p:message("gc.T", { { "a", "int32", 1 } })
      assert.are.equal(1, pc.decode(T, pc.encode(T{ a = 1 })).a)
      probe[p] = true
    end
    for _ = 1, 3 do collectgarbage() end
    assert.is_nil(next(probe))
  end)

  it("answer nil for a name that is no type", function()
    assert.are.equal(1, select("#", pc.type("no.such.Type")))
    assert.is_nil(pc.type("no.such.Type"))
    assert.is_nil(pc.type("google.protobuf.NoSuchType"))
  end)
end)

describe("names holding a NUL byte", function()
  -- C reads a name up to its first NUL: "f3.All\0x" would be f3.All
  local p = pc.pool()
  assert(p:load([[syntax = "proto2"; package f3;
    message All { optional int32 i32 = 1; oneof o { int32 a = 2; } extensions 100 to 199; }
    enum Color { RED = 0; }
    extend All { optional int32 ext1 = 100; }
    service S { rpc M(All) returns (All); }]], { name = "f3.proto" }))

  it("are refused where a type, field, oneof, enum value or extension is declared", function()
    local why = "a name holds no NUL byte"
    assert.has_error(function() p:message("zz.A\0b", { { "a", "int32", 1 } }) end)
    assert.matches(why, select(2, pcall(p.message, p, "zz.A\0b", { { "a", "int32", 1 } })), 1, true)
    assert.has_error(function() p:message("zz.B", { { "a\0x", "int32", 1 } }) end, "zz.B: " .. why)
    assert.has_error(function() p:message("zz.C", { { "a", "f3.All\0x", 1 } }) end, "zz.C.a: " .. why)
    assert.has_error(function() p:message("zz.D", { { "a", "int32", 1, oneof = "o\0" } }) end, "zz.D.a: " .. why)
    assert.has_error(function() p:message("zz.E", { { "a", "int32", 1, json_name = "a\0" } }) end, "zz.E.a: " .. why)
    assert.has_error(function() p:enum("zz.F", { ["A\0"] = 1 }) end, "zz.F: " .. why)
    assert.has_error(function() p:extend("f3.All", { { "f3.ext2\0", "int32", 101 } }) end, "f3.All: " .. why)
    assert.is_nil(p:type("zz.A"))
  end)

  it("name nothing where one is looked up, and errors show the NUL", function()
    assert.is_nil(p:type("f3.All\0x"))
    assert.is_not_nil(p:type("f3.All"))
    local m = p:type("f3.All")()
    assert.has_error(function() pc.set_extension(m, "f3.ext1\0junk", 5) end,
      "f3.All: no extension named 'f3.ext1\\0junk'")
    assert.has_error(function() return m["i32\0"] end, "f3.All.i32\\0: no such field")
    assert.has_error(function() pc.which_oneof(m, "o\0") end,
      "bad argument #2 to 'which_oneof' (f3.All: no oneof named 'o\\0')")
    assert.has_error(function() pc.has(m, "i32\0y") end, "bad argument #2 to 'has' (f3.All.i32\\0y: no such field)")
    assert.has_error(function() pc.clear(m, "i32\0y") end,
      "bad argument #2 to 'clear' (f3.All.i32\\0y: no such field)")
    local E = p:message("f3.WithEnum", { { "e", "f3.Color", 1 } }, { syntax = "proto2" })
    assert.has_error(function() E().e = "RED\0zz" end,
      "f3.WithEnum.e: unknown value 'RED\\0zz' for enum f3.Color")
    assert.is_nil(pc.builtin_source("google/protobuf/any.proto\0"))
  end)

  it("are refused in .proto text, file names, import paths and descriptor sets", function()
    local q = pc.pool()
    assert.are.same({ nil, "de.proto:2:39: A name holds no NUL byte." },
      { q:load('syntax = "proto3"; package de;\nmessage M { string j = 2 [json_name = "a\\0b"]; }',
               { name = "de.proto" }) })
    assert.are.same({ nil, "df.proto:1:27: A name holds no NUL byte." },
      { q:load('syntax = "proto3"; import "x.proto\\0zz";', { name = "df.proto" }) })
    assert.has_error(function() q:load('syntax = "proto3";', { name = "x.proto\0a" }) end,
      "load: option 'name' holds a NUL byte")
    assert.has_error(function() q:load('syntax = "proto3";', { import_paths = { "d\0j" } }) end,
      "load: import_paths[1] holds a NUL byte")
    assert.has_error(function() q:load_file("lf.proto\0junk") end,
      "bad argument #1 to 'load_file' (a path holds no NUL byte)")
    assert.is_nil(q:file("x.proto"))
    local FDS = pc.type("google.protobuf.FileDescriptorSet")
    local function set_of(file) return pc.encode(FDS { file = { file } }) end
    local field = { name = "x", number = 1, label = "LABEL_OPTIONAL", type = "TYPE_INT32" }
    for _, c in ipairs {
      { { name = "d.proto", package = "d", message_type = { { name = "M\0zz" } } }, "name" },
      { { name = "d.proto\0zz", package = "d" }, "name" },
      { { name = "d.proto", package = "d", dependency = { "any.proto\0zz" } }, "dependency" },
      { { name = "d.proto", package = "d", message_type = { { name = "M", field = {
          { name = "x", number = 1, label = "LABEL_OPTIONAL", type = "TYPE_INT32", json_name = "j\0zz" } } } } },
        "json_name" },
    } do
      assert.are.same({ nil, "descriptor set: a " .. c[2] .. " holds a NUL byte" },
        { pc.pool():load_descriptor_set(set_of(c[1])) })
    end
    assert.is_truthy(pc.pool():load_descriptor_set(set_of { name = "d.proto", package = "d",
      message_type = { { name = "M", field = { field } } } }))
  end)

  it("are no names: a string default keeps them, from .proto text, pc.message and a descriptor set", function()
    local q = pc.pool()
    assert(q:load('syntax = "proto2"; package dd; message M { optional string s = 1 [default = "a\\0b"]; }',
      { name = "dd.proto" }))
    assert.are.equal("a\0b", q:type("dd.M")().s)
    assert.are.equal("a\0b", q:message("dd.L", { { "s", "string", 1, default = "a\0b" } }, { syntax = "proto2" })().s)
    local set = pc.encode(q:type("google.protobuf.FileDescriptorSet") { file = { q:file_descriptor("dd.proto") } })
    local r = pc.pool()
    assert(r:load_descriptor_set(set))
    assert.are.equal("a\0b", r:type("dd.M")().s)
  end)
end)

describe("hostile input found by testing", function()
  it("refuses a proto3 string that is not UTF-8 as it is stored (decode would refuse it)", function()
    local p = pc.pool()
    local M = p:message("u.M", { { "s", "string", 1 }, { "m", "map<string,string>", 2 },
                                 { "b", "bytes", 3 } })
    assert.has_error(function() M{ s = "\255\254" } end, "u.M.s: invalid UTF-8 at byte 1")
    assert.has_error(function() M{ m = { ["\192\128"] = "x" } } end,
      'u.M.m["\\192\\128"]: key: invalid UTF-8 at byte 1') -- the error itself is UTF-8
    assert.are.equal("\26\1\255", pc.encode(M{ b = "\255" }))
    local P2 = p:message("u.P2", { { "s", "string", 1 } }, { syntax = "proto2" })
    assert.are.equal("\10\1\255", pc.encode(P2{ s = "\255" })) -- proto2 strings are not checked
  end)

  it("refuses an injected clock that returns NaN or a random source out of [0, 1]", function()
    local function failing() error(pc.Error{ code = "UNAVAILABLE" }) end
    local f = pc.wrap_method(failing, { retry = pc.Retry{ initial = 0.01, timeout = 1 },
      clock = function() return 0 / 0 end, sleep = function() end })
    assert.matches("^clock: finite number expected", select(2, pcall(f, 1)))
    local t = 0
    local g = pc.wrap_method(failing, { retry = pc.Retry{ initial = 0.01, timeout = 1 },
      clock = function() return t end, sleep = function() end, random = function() return 2 end })
    assert.are.equal("random: number in [0, 1] expected, got 2", select(2, pcall(g, 1)))
  end)

  it("ends a retry loop whose clock goes backwards", function()
    local t, sleeps = 100, 0
    local f = pc.wrap_method(function() error(pc.Error{ code = "UNAVAILABLE" }) end,
      { retry = pc.Retry{ initial = 0.01, timeout = 1 }, clock = function() t = t - 1 return t end,
        sleep = function() sleeps = sleeps + 1 end, random = function() return 1 end })
    local ok, err = pcall(f, 1)
    assert.is_false(ok)
    assert.are.equal(getmetatable(pc.RetryError{ cause = pc.Error{ code = "UNAVAILABLE" }, attempts = 1 }),
      getmetatable(err))
    assert.is_true(sleeps < 10)
  end)

  it("answers load_file of a folder with nil and the reason", function()
    local ok, err = pc.load_file("/tmp")
    assert.is_nil(ok)
    assert.are.equal("/tmp: Is a directory", err)
    assert.has_error(function() pc.load("syntax = 'proto3';", { pool = "x" }) end,
      "option 'pool': protocall.Pool expected, got string")
  end)

  it("takes a Pool alone as the default pool, or a pool option: a message (whose metatable is hidden as a"
    .. " Pool's) is refused and the default stays", function()
    local schema = require "protocall.schema"
    local original, before = schema.default_pool(), pc.type("google.protobuf.Duration")
    local m = pc.message("declare.DefaultPoolProbe", { { "a", "int32", 1 } }) { a = 1 }
    assert.has_error(function() pc.set_default_pool(m) end,
      "bad argument #1 to 'set_default_pool' (protocall.Pool expected, got userdata)")
    assert.has_error(function() pc.load("syntax = 'proto3';", { pool = m }) end,
      "option 'pool': protocall.Pool expected, got userdata")
    assert.are.equal(before, pc.type("google.protobuf.Duration"))
    local p = pc.pool()
    pc.set_default_pool(p)
    assert.is_nil(pc.type("declare.DefaultPoolProbe"))
    pc.set_default_pool(original)
    assert.are.equal(before, pc.type("google.protobuf.Duration"))
  end)

  it("checks messages of many thousand fields without pairwise loops, and names duplicates", function()
    local t = { 'syntax = "proto3"; package big; message A {' }
    for i = 1, 20000 do t[#t + 1] = ("int32 f%d = %d;"):format(i, i < 19000 and i or i + 1000) end
    t[#t + 1] = "}"
    local p = pc.pool()
    assert(p:load(table.concat(t), { name = "big.proto" }))
    assert.are.equal(20000, #pc.fields(p:type("big.A")))
    local ok, err = pc.pool():load('syntax = "proto3"; message A { int32 a = 1; int32 b = 2; int32 c = 1; '
      .. 'int32 a_b = 4; int32 aB = 5; }', { name = "d.proto" })
    assert.is_nil(ok)
    assert.are.equal('d.proto:1:68: Field number 1 has already been used in "A" by field "a".', err)
    ok, err = pc.pool():load('syntax = "proto3"; message A { int32 a_b = 4; int32 aB = 5; int32 ab = 6; }',
      { name = "j.proto" })
    assert.is_nil(ok)
    assert.are.equal('j.proto:1:53: The JSON camel-case name of field "aB" conflicts with field "a_b". '
      .. "This is not allowed in proto3.", err)
    assert.has_error(function() p:message("x.D", { { "a", "int32", 1 }, { "b", "int32", 2 }, { "a", "int32", 3 } }) end)
  end)

  it("prints a deep message in time linear in its size", function()
    local p = pc.pool()
    local P = p:message("d.P", { { "i", "int32", 1 }, { "sub", "d.P", 2 } })
    local m = P{}
    local cur = m
    for _ = 1, 3000 do
      local n = P{}
      cur.sub = n
      cur = n
    end
    local s = tostring(m)
    assert.are.equal(3001 * #"d.P{}" + 3000 * #"sub=", #s)
  end)
end)
