-- Schemas at sizes and shapes that used to cost quadratic time or memory,
-- the compiler's verdicts where protoc 3.21.12 decides otherwise, and the
-- errors users meet when a schema does not load. protoc's own wording is
-- pinned; where protoc (Debian's protobuf-compiler) is installed the specs
-- also run it on the same input and check that it still says so.
local pc = require "protocall"
local R = require "runtime"

--- Resident memory of this process in KiB (Linux /proc), or nil.
local function rss_kib()
  local f = io.open("/proc/self/status", "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

--- protoc's field number for the i-th generated field (skipping the
--- numbers 19000..19999 reserved for protobuf).
local function number(i)
  return i < 19000 and i or i + 1000
end

local function lines(head, n, fmt, tail, first)
  local t = { head }
  for i = first or 1, n + (first or 1) - 1 do t[#t + 1] = fmt(i) end
  t[#t + 1] = tail
  return table.concat(t, "\n")
end

--- Loads `src` into a fresh pool; returns the files or raises the error.
local function load_fresh(src, name)
  local pool = pc.pool()
  local files, err = pool:load(src, { name = name })
  assert(files, err)
  return pool, files
end

--- The same file as a serialized FileDescriptorSet, through a first pool.
local function as_descriptor_set(src, name)
  local pool = load_fresh(src, name)
  local fdp = assert(pool:file_descriptor(name))
  local set = pool:type("google.protobuf.FileDescriptorSet")
  return pc.encode(set{ file = { fdp } })
end

describe("large schemas", function()
  -- A proto3 optional is a oneof of its own, so each of these files has
  -- thousands of oneofs; their member lists once took oneofs x fields
  -- pointers (1.7 GB for the first file).
  local optional = lines('syntax = "proto3"; package big.opt; message M {', 15000,
    function(i) return ("  optional int32 f%d = %d;"):format(i, number(i)) end, "}")
  local oneofs = lines('syntax = "proto3"; package big.oneof; message M {', 20000,
    function(i) return ("  oneof o%d { int32 f%d = %d; }"):format(i, i, number(i)) end, "}")

  local function grows_less_than(kib, f)
    collectgarbage()
    local before = assert(rss_kib(), "no /proc/self/status")
    f()
    local grown = rss_kib() - before
    assert(grown < kib, ("resident memory grew by %d KiB"):format(grown))
  end

  it("loads 15,000 proto3 optional fields in memory linear in the fields", function()
    grows_less_than(200 * 1024, function()
      local pool = load_fresh(optional, "opt.proto")
      local M = pool:type("big.opt.M")
      local m = M{ f14999 = 7 }
      assert.are.equal(7, pc.decode(M, pc.encode(m)).f14999)
      assert.is_false(pc.has(m, "f1"))
    end)
  end)

  it("loads 20,000 oneofs from .proto and from a descriptor set in linear memory", function()
    grows_less_than(200 * 1024, function()
      local pool = load_fresh(oneofs, "oneof.proto")
      local m = pool:type("big.oneof.M"){ f20000 = 3 }
      assert.are.equal(3, m.f20000)
      assert(pc.pool():load_descriptor_set(as_descriptor_set(oneofs, "oneof.proto")))
      assert(pc.pool():load_descriptor_set(as_descriptor_set(optional, "opt.proto")))
    end)
  end)

  -- The clash checks were cubic for extensions (10,000: 104 s) and
  -- quadratic for enum values (100,000: 17 s); protoc takes under a second.
  -- The bound is generous: only a quadratic check misses it.
  local extensions = lines('syntax = "proto2"; package big.ext; message M { extensions 1 to max; }',
    10000, function(i) return ("extend M { optional int32 e%d = %d; }"):format(i, number(i)) end, "")
  local values = lines('syntax = "proto3"; package big.enum; enum E {', 100000,
    function(i) return ("  V%d = %d;"):format(i, i) end, "}", 0)

  -- Under valgrind (make memcheck sets PC_MEMCHECK) everything runs some 40x slower: the
  -- load takes about 10 s there, the quadratic one would take minutes.
  local bound = os.getenv("PC_MEMCHECK") and 60 or 10
  it("loads 10,000 extensions and 100,000 enum values in well under 10 s (60 s under valgrind)", function()
    local t0 = os.clock()
    local pool = load_fresh(extensions, "ext.proto")
    assert.are.equal(10000, #pool:file_descriptor("ext.proto").extension)
    local E = load_fresh(values, "enum.proto"):type("big.enum.E")
    assert.are.equal(99999, E.V99999)
    assert.are.equal("V4242", E[4242])
    assert(pc.pool():load_descriptor_set(as_descriptor_set(extensions, "ext.proto")))
    assert(pc.pool():load_descriptor_set(as_descriptor_set(values, "enum.proto")))
    local elapsed = os.clock() - t0
    assert(elapsed < bound, ("took %.1f s"):format(elapsed))
  end)

  it("refuses a package name 78 KB long at once, as protoc", function()
    -- every prefix of the package was copied: 1.5 GB and 6 s, then the
    -- error "\"A\" is not defined."
    local src = 'syntax = "proto3";\npackage ' .. ("a."):rep(39000) .. "a;\nmessage A {}\nmessage B { A a = 1; }\n"
    grows_less_than(20 * 1024, function()
      local clock = os.clock()
      local files, err = pc.pool():load(src, { name = "long_package.proto" })
      assert.is_nil(files)
      assert.are.equal("long_package.proto:2:1: Package name is too long", err)
      assert(os.clock() - clock < bound / 10, ("took %.1f s"):format(os.clock() - clock))
    end)
  end)

  it("refuses a descriptor set whose package is too long or too deep, as protoc", function()
    local set = pc.pool():type("google.protobuf.FileDescriptorSet")
    local function load(name, package)
      return pc.pool():load_descriptor_set(pc.encode(set{ file = { {
        name = name, package = package, syntax = "proto3", message_type = { { name = "A" } } } } }))
    end
    assert.are.same({ nil, "long.proto: Package name is too long" },
      { load("long.proto", ("a."):rep(300) .. "a") })
    assert.are.same({ nil, "deep.proto: Exceeds Maximum Package Depth" },
      { load("deep.proto", ("a."):rep(101) .. "a") })
    assert(load("limits.proto", ("abcd."):rep(100) .. "abcd"))
  end)
end)

--- protoc's stderr and exit status on `args` (run from the repository
--- root), or nil when protoc is not installed.
local function protoc(args)
  if not io.open("/usr/bin/protoc", "rb") then return nil end
  local out = os.tmpname()
  local ok = R.execute("/usr/bin/protoc " .. args .. " 2>" .. out)
  local f = io.open(out, "rb")
  local text = f:read("a")
  f:close()
  os.remove(out)
  return text, ok == true
end

describe("loading files", function()
  local VIRTUAL = "spec/fixtures/virtual"

  it("takes a path that is not on disk as a name inside the import paths, as protoc", function()
    local pool = pc.pool()
    local file = assert(pool:load_file("google/api/http.proto", { import_paths = { VIRTUAL } }))
    assert.are.equal("google/api/http.proto", file.name)
    assert.are.same({ "google/api/dep.proto" }, file.dependencies)
    assert(pool:type("google.api.Http"))
    local text, ok = protoc("-I " .. VIRTUAL .. " -o /dev/null google/api/http.proto")
    if text then assert.are.same({ "", true }, { text, ok }) end
    -- absent everywhere: still not found
    assert.are.same({ nil, "google/api/nope.proto: File not found." },
      { pool:load_file("google/api/nope.proto", { import_paths = { VIRTUAL } }) })
  end)

  it("takes a built-in file's import name found on no path as that file, as protoc its include folder", function()
    local pool = pc.pool()
    local file = assert(pool:load_file("google/protobuf/field_mask.proto", { import_paths = { VIRTUAL } }))
    assert.are.equal("google/protobuf/field_mask.proto", file.name)
    local FM = assert(pool:type("google.protobuf.FieldMask"))
    local mask = pc.decode(FM, pc.encode(pc.from_json(FM, '"fooBar,baz.qux"')), { table = true })
    assert.are.same({ "foo_bar", "baz.qux" }, mask.paths)
    assert(pool:load_file("google/protobuf/duration.proto")) -- no import paths at all
    assert.are.same({ nil, "google/protobuf/nope.proto: File not found." },
      { pool:load_file("google/protobuf/nope.proto") })
  end)

  it("says an import names a folder or no file at all", function()
    local opts = { import_paths = { VIRTUAL } }
    assert.are.same({ nil, 'imports_folder.proto: Import "google" was not found or had errors ('
      .. VIRTUAL .. '/google is a folder).' },
      { pc.pool():load_file(VIRTUAL .. "/imports_folder.proto", opts) })
    assert.are.same({ nil, 'imports_empty.proto: Import "" was not found or had errors (an empty '
      .. 'file name).' }, { pc.pool():load_file(VIRTUAL .. "/imports_empty.proto", opts) })
    -- protoc's verdict: not found (it says so on two lines)
    local text = protoc("-I " .. VIRTUAL .. " -o /dev/null imports_folder.proto")
    if text then
      assert.are.equal('google: File not found.\nimports_folder.proto:3:1: Import "google" was not '
        .. 'found or had errors.\n', text)
    end
  end)

  it("names the import a descriptor set lacks and the file importing it", function()
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; package a; message A {}', { name = "a.proto" }))
    assert(pool:load('syntax = "proto3"; package b; import "a.proto"; message B { a.A a = 1; }',
      { name = "b.proto" }))
    local set = pool:type("google.protobuf.FileDescriptorSet")
    local bytes = pc.encode(set{ file = { pool:file_descriptor("b.proto") } })
    assert.are.same({ nil, "descriptor set: b.proto imports a.proto, which is neither in the set "
      .. "nor in the pool (b.B.a: unknown type '.a.A')" }, { pc.pool():load_descriptor_set(bytes) })
    -- with the import first in the pool, the same set loads
    local other = pc.pool()
    assert(other:load('syntax = "proto3"; package a; message A {}', { name = "a.proto" }))
    assert(other:load_descriptor_set(bytes))
  end)

  it("reads a descriptor set's bytes defaults as protoc 3.21 reads them, whatever escapes they hold", function()
    -- (what protoc --descriptor_set_in=x --descriptor_set_out=y writes back
    -- for each: hex of any length keeps its low 8 bits; an unknown escape,
    -- "\x" without a hex digit and a '\' at the end stand for nothing)
    local cases = { { "\\x", "" }, { "\\xg", "g" }, { "a\\xZb", "aZb" }, { "\\x414", "\20" }, { "\\q", "" },
      { "end\\", "end" }, { "\\1234", "S4" }, { "\\X41", "A" }, { "\\'\\\"\\?\\\\", "'\"?\\" } }
    local pool = pc.pool()
    local src = 'syntax = "proto2"; package bd; message M {'
    for i = 1, #cases do src = src .. " optional bytes b" .. i .. " = " .. i .. ";" end
    assert(pool:load(src .. " }", { name = "bd.proto" }))
    local fd = pool:file_descriptor("bd.proto")
    for i, c in ipairs(cases) do fd.message_type[1].field[i].default_value = c[1] end
    local other = pc.pool()
    assert(other:load_descriptor_set(pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } })))
    local m = other:type("bd.M")()
    for i, c in ipairs(cases) do assert.are.equal(c[2], m["b" .. i], c[1]) end
  end)

  it("names a built-in file read from disk by its import name, so an import of it finds it", function()
    -- it was named by its path: an import of the same file then defined every type twice
    local dir = os.tmpname()
    os.remove(dir)
    local type_proto = assert(pc.builtin_source("google/protobuf/type.proto"))
    assert(os.execute("mkdir -p " .. dir .. "/include/google/protobuf " .. dir .. "/copy"))
    for _, path in ipairs { "/include/google/protobuf/type.proto", "/copy/mytype.proto" } do
      local f = assert(io.open(dir .. path, "wb"))
      f:write(type_proto)
      f:close()
    end
    local user = 'syntax = "proto3"; import "google/protobuf/type.proto"; message U { google.protobuf.Type t = 1; }'
    local pool = pc.pool()
    local file = assert(pool:load_file(dir .. "/include/google/protobuf/type.proto"))
    assert.are.equal("google/protobuf/type.proto", file.name)
    assert(pool:load(user, { name = "user.proto" }))
    -- the other order: the import brought the built-in file, the path finds it loaded
    local other = pc.pool()
    assert(other:load(user, { name = "user.proto" }))
    assert.are.equal("google/protobuf/type.proto",
      assert(other:load_file(dir .. "/include/google/protobuf/type.proto")).name)
    -- under another name it is another file: the error says which defines the type
    local copy = pc.pool()
    assert(copy:load_file(dir .. "/copy/mytype.proto"))
    assert.are.same({ nil, "google/protobuf/type.proto: 'google.protobuf.Enum' is already defined in "
      .. "the pool, by " .. dir .. "/copy/mytype.proto" }, { copy:load(user, { name = "user.proto" }) })
    os.execute("rm -rf " .. dir)
  end)

  it("names a map whose value is a group, as protoc", function()
    local src = 'syntax = "proto2";\nmessage M {\n  map<string, group> m = 1;\n}\n'
    assert.are.same({ nil, "mg.proto: Field with message or enum type missing type_name." },
      { pc.pool():load(src, { name = "mg.proto" }) })
  end)
end)

describe("argument errors", function()
  local P = pc.message("hardening.P", { { "x", "int32", 1 } })

  local function raised(f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    return (tostring(err):gsub("^[^:]*:%d+: ", ""))
  end

  it("are Lua's own form for options that are not tables", function()
    assert.are.equal("bad argument #2 to 'to_text' (table expected, got number)",
      raised(function() return pc.to_text(P{ x = 1 }, 5) end))
    assert.are.equal("bad argument #2 to 'load_descriptor_set' (table expected, got number)",
      raised(function() return pc.load_descriptor_set("", 5) end))
    assert.are.equal("bad argument #2 to 'server' (table expected, got number)",
      raised(function() return pc.server({}, 5) end))
  end)

  it("refuse a number where a full name is expected", function()
    -- named by themselves, under LuaJIT too (luaL_argerror found no name there: '?')
    assert.are.equal("bad argument #1 to 'message' (string expected, got number)",
      raised(function() return pc.message(1.5, {}) end))
    assert.are.equal("bad argument #1 to 'enum' (string expected, got number)",
      raised(function() return pc.enum(7, { A = 0 }) end))
    assert.are.equal("bad argument #1 to 'extend' (string expected, got number)",
      raised(function() return pc.extend(7, {}) end))
  end)
end)

describe("verdicts of protoc 3.21.12", function()
  local DESCRIPTOR = 'import "google/protobuf/descriptor.proto";\n'
  local OPTION_O = DESCRIPTOR .. "message O { optional int32 a = 1; optional int32 b = 2; "
    .. "oneof k { int32 c = 3; int32 d = 4; } optional group G = 5 { optional int32 x = 1; } }\n"
    .. "extend google.protobuf.FileOptions { optional O o = 50000; }\n"
  -- {file name, source, protoc's first error ("" when it accepts)}
  local cases = {
    { "enum_prefix.proto", 'syntax = "proto3";\nenum Foo {\n  FOO_UNKNOWN = 0;\n  BAR = 1;\n  FOO_BAR = 2;\n}\n',
      "enum_prefix.proto:5:3: Enum name FOO_BAR has the same name as BAR if you ignore case and "
      .. "strip out the enum name prefix (if any). This is error-prone and can lead to undefined "
      .. "behavior. Please avoid doing this. If you are using allow_alias, please assign the same "
      .. "numeric value to both enums." },
    { "enum_prefix_alias.proto", 'syntax = "proto3";\nenum Foo {\n  option allow_alias = true;\n'
      .. "  FOO_UNKNOWN = 0;\n  UNKNOWN = 0;\n}\n", "" },
    { "enum_prefix_proto2.proto", 'syntax = "proto2";\nenum E {\n  E_A = 0;\n  A = 1;\n}\n', "" },
    { "required_ext.proto", 'syntax = "proto2";\npackage p;\nmessage M { extensions 100 to 199; }\n'
      .. "message N {\n  extend M { required int32 x = 100; }\n}\n",
      "required_ext.proto:5:23: The extension p.N.x cannot be required." },
    { "message_set_field.proto", 'syntax = "proto2";\nmessage M {\n  option message_set_wire_format = true;\n'
      .. "  extensions 4 to max;\n  optional int32 a = 1;\n}\n",
      "message_set_field.proto:5:18: MessageSets cannot have fields, only extensions." },
    { "message_set_ext.proto", 'syntax = "proto2";\nmessage M {\n  option message_set_wire_format = true;\n'
      .. "  extensions 4 to max;\n}\nextend M { optional int32 e = 5; }\n",
      "message_set_ext.proto:6:21: Extensions of MessageSets must be optional messages." },
    { "reserved_twice.proto", 'syntax = "proto2";\nmessage M {\n  reserved "a", "b", "a";\n}\n',
      'reserved_twice.proto:2:9: Field name "a" is reserved multiple times.' },
    { "enum_reserved_twice.proto", 'syntax = "proto2";\nenum E {\n  A = 0;\n  reserved "X", "Y", "X";\n}\n',
      'enum_reserved_twice.proto:2:6: Enum value "X" is reserved multiple times.' },
    { "lazy_scalar.proto", 'syntax = "proto2";\nmessage M {\n  optional int32 a = 1 [lazy = true];\n}\n',
      "lazy_scalar.proto:3:12: [lazy = true] can only be specified for submessage fields." },
    { "lazy_message.proto", 'syntax = "proto2";\nmessage M {\n  optional M a = 1 [lazy = true];\n}\n', "" },
    { "jstype_int32.proto", 'syntax = "proto2";\nmessage M {\n  optional int32 a = 1 [jstype = JS_STRING];\n}\n',
      "jstype_int32.proto:3:12: jstype is only allowed on int64, uint64, sint64, fixed64 or sfixed64 fields." },
    { "jstype_int64.proto", 'syntax = "proto2";\nmessage M {\n  optional int64 a = 1 [jstype = JS_STRING];\n'
      .. "  optional string b = 2 [jstype = JS_NORMAL];\n}\n", "" },
    { "aggregate_twice.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o) = { a: 1 a: 2 };\n",
      'aggregate_twice.proto:5:14: Error while parsing option value for "o": Non-repeated field "a" '
      .. "is specified multiple times." },
    { "aggregate_oneof.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o) = { c: 1 d: 2 };\n",
      'aggregate_oneof.proto:5:14: Error while parsing option value for "o": Field "d" is specified '
      .. 'along with field "c", another member of oneof "k".' },
    { "aggregate_group_lower.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o) = { g { x: 1 } };\n",
      'aggregate_group_lower.proto:5:14: Error while parsing option value for "o": Message type "O" '
      .. 'has no field named "g".' },
    { "aggregate_group.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o) = { G { x: 1 } };\n", "" },
    { "option_group_type.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o).G.x = 1;\n",
      'option_group_type.proto:5:8: Option "(o).G" unknown. Ensure that your proto definition file '
      .. "imports the proto which defines the option." },
    { "option_group_field.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o).g.x = 1;\n", "" },
    -- a custom option set twice in its two forms, as protoc's ExamineIfOptionIsSet sees it
    { "option_mixed_after.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o) = { a: 1 };\noption (o).a = 2;\n",
      'option_mixed_after.proto:6:8: Option "(o).a" was already set.' },
    { "option_mixed_before.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o).a = 2;\noption (o) = { b: 1 };\n",
      'option_mixed_before.proto:6:8: Option "(o)" was already set.' },
    { "option_mixed_group.proto", 'syntax = "proto2";\n' .. OPTION_O
      .. "option (o) = { G { x: 1 } };\noption (o).g.x = 2;\n",
      'option_mixed_group.proto:6:8: Option "(o).g.x" was already set.' },
    { "option_mixed_apart.proto", 'syntax = "proto2";\n' .. OPTION_O
      .. "option (o) = { b: 1 };\noption (o).a = 2;\n", "" },
    { "option_twice_dotted.proto", 'syntax = "proto2";\n' .. OPTION_O .. "option (o).a = 1;\noption (.o).a = 2;\n",
      'option_twice_dotted.proto:6:8: Option "(.o).a" was already set.' },
    { "escape_upper_x.proto", 'syntax = "proto2";\nmessage M {\n  optional string s = 1 [default = "\\X41"];\n}\n',
      "escape_upper_x.proto:3:38: Invalid escape sequence in string literal." },
    { "escape_x_alone.proto", 'syntax = "proto2";\nmessage M { optional string s = 1 [default = "\\xZ"]; }\n',
      "escape_x_alone.proto:2:49: Expected hex digits for escape sequence." },
    { "escape_big_u.proto", 'syntax = "proto2";\nmessage M { optional string s = 1 [default = "\\U00210000"]; }\n',
      "escape_big_u.proto:2:51: Expected eight hex digits up to 10ffff for \\U escape sequence" },
    { "nul_comment.proto", 'syntax = "proto2";\n// a \0 b\nmessage M {}\n',
      "nul_comment.proto:2:6: Invalid control characters encountered in text." },
    { "nul_block_comment.proto", 'syntax = "proto2";\n/* a \0 b */\nmessage M {}\n',
      "nul_block_comment.proto:2:6: End-of-file inside block comment." },
    { "nested_comment.proto", 'syntax = "proto2";\n/* a /* b */\nmessage M {}\n',
      'nested_comment.proto:2:7: "/*" inside block comment.  Block comments cannot be nested.' },
    { "stream_type.proto", 'syntax = "proto3";\nmessage M {}\nmessage stream {}\nservice S {\n'
      .. "  rpc A (stream) returns (stream stream);\n}\n", "stream_type.proto:5:16: Expected type name." },
    { "stream_of_stream.proto", 'syntax = "proto3";\nmessage stream {}\nservice S {\n'
      .. "  rpc A (stream stream) returns (stream stream);\n}\n", "" },
    { "bom.proto", '\239\187\191syntax = "proto3";\nmessage M {}\n', "" },
    { "bom_columns.proto", '\239\187\191syntax = "proto3"; message M { int32 x = 1 }\n',
      'bom_columns.proto:1:47: Expected ";".' },
    { "bom_inside.proto", 'syntax = "proto3";\n\239\187\191message M {}\n',
      "bom_inside.proto:2:1: Interpreting non ascii codepoint 239." },
    { "aggregate_hash.proto", 'syntax = "proto2";\n' .. OPTION_O
      .. "option (o) = {\n  # a comment\n  a: 1\n};\nmessage M { option (mo) = { a: 1 # b: 2\n  c: 3 }; }\n"
      .. "extend google.protobuf.MessageOptions { optional O mo = 50000; }\n", "" },
    -- positions: where protoc 3.21.12 places these errors
    { "map_label.proto", 'syntax = "proto3";\nmessage M {\n  repeated map<string, int32> m = 1;\n}\n',
      "map_label.proto:3:15: Field labels (required/optional/repeated) are not allowed on map fields." },
    { "enum_first.proto", 'syntax = "proto3";\nenum E {\n  A = 1;\n}\n',
      "enum_first.proto:3:7: The first enum value must be zero in proto3." },
    { "enum_same.proto", 'syntax = "proto2";\nenum E { A = 0; B = 0; }\n',
      'enum_same.proto:2:21: "B" uses the same enum value as "A". If this is intended, set '
      .. "'option allow_alias = true;' to the enum definition." },
    { "method_type.proto", 'syntax = "proto2";\nservice S { rpc A (M) returns (M); }\n',
      'method_type.proto:2:20: "M" is not defined.' },
    { "method_output.proto", 'syntax = "proto2";\nenum E { A = 0; }\nmessage M {}\n'
      .. "service S { rpc A (M) returns (E); }\n", 'method_output.proto:4:32: "E" is not a message type.' },
    { "extendee.proto", 'syntax = "proto2";\nextend Nope { optional int32 x = 6; }\n',
      'extendee.proto:2:8: "Nope" is not defined.' },
    { "range_order.proto", 'syntax = "proto2";\nmessage M {\n  extensions 10 to 5;\n}\n',
      "range_order.proto:3:14: Extension range end number must be greater than start number." },
    { "range_overlap.proto", 'syntax = "proto2";\nmessage M { extensions 1 to 10; extensions 5 to 20; }\n',
      "range_overlap.proto:2:24: Extension range 5 to 20 overlaps with already-defined range 1 to 10." },
    { "option_twice.proto", 'syntax = "proto2";\nmessage M { optional string s = 1 [ctype = CORD, ctype = CORD]; }\n',
      'option_twice.proto:2:50: Option "ctype" was already set.' },
    { "repeated_default.proto", 'syntax = "proto2";\nmessage M { repeated int32 a = 1 [default = 1]; }\n',
      "repeated_default.proto:2:45: Repeated fields can't have default values." },
    { "map_default.proto", 'syntax = "proto2";\nmessage M { map<string, int32> m = 1 [default = 1]; }\n',
      "map_default.proto:2:49: Repeated fields can't have default values." },
    { "map_in_oneof.proto", 'syntax = "proto2";\nmessage M { oneof o { map<string, int32> m = 1; } }\n',
      "map_in_oneof.proto:2:26: Map fields are not allowed in oneofs." },
    { "map_extension.proto", 'syntax = "proto2";\nextend M { map<string, int32> m = 1; }\n'
      .. "message M { extensions 1 to 5; }\n",
      "map_extension.proto:2:15: Map fields are not allowed to be extensions." },
    { "json_extension.proto", 'syntax = "proto2";\nmessage M { extensions 1 to max; }\n'
      .. 'extend M { optional int32 a = 1 [json_name = "x"]; }\n',
      "json_extension.proto:3:34: option json_name is not allowed on extension fields." },
    { "oneof_twice.proto", 'syntax = "proto3";\nmessage M { oneof o { int32 a = 1; } oneof o { int32 b = 2; } }\n',
      'oneof_twice.proto: "o" is already defined in "M".' },
    { "reserved_backwards.proto", 'syntax = "proto2";\nmessage M { reserved 5 to 1; }\n', "" },
    { "enum_reserved_backwards.proto", 'syntax = "proto2";\nenum E { A = 0; reserved 1 to 0; }\n',
      "enum_reserved_backwards.proto: Reserved range end number must be greater than start number." },
    { "reserved_number.proto", 'syntax = "proto2";\nmessage M { optional int32 a = 1; reserved 1; }\n',
      'reserved_number.proto: Field "a" uses reserved number 1.' },
    -- order: protoc reports syntax errors before what it finds building the
    -- file (standard options, then custom ones in build order, then what it
    -- validates last), and the tokenizer's before the parser's
    { "ident_decimal.proto", 'syntax = "proto3";\npackage a.b1.5;\n',
      "ident_decimal.proto:2:13: Need space between identifier and decimal point." },
    { "option_then_syntax.proto", 'syntax = "proto2";\nmessage M { repeated int32 a = 1 [packed = foo true]; }\n',
      'option_then_syntax.proto:2:48: Expected "]".' },
    { "unknown_then_syntax.proto", 'syntax = "proto3";\nmessage M { int32 a = 1 [oneof = true]; }\n'
      .. "service S { rpc A (M) (M); }\n", 'unknown_then_syntax.proto:3:23: Expected "returns".' },
    { "unknown_then_undefined.proto", 'syntax = "proto3";\nmessage M { int32 a = 1 [oneof = true]; N n = 2; }\n',
      'unknown_then_undefined.proto:2:41: "N" is not defined.' },
    { "unknown_then_alias.proto", 'syntax = "proto2";\nenum E { option required = true; A = 0; B = 0; }\n',
      'unknown_then_alias.proto:2:17: Option "required" unknown. Ensure that your proto definition '
      .. "file imports the proto which defines the option." },
    { "file_option_last.proto", 'syntax = "proto2";\n' .. DESCRIPTOR .. "option (nope) = 1;\n"
      .. "message M { option deprecated = 5; }\n",
      'file_option_last.proto:4:33: Value must be identifier for boolean option '
      .. '"google.protobuf.MessageOptions.deprecated".' },
    { "custom_before_std.proto", 'syntax = "proto2";\n' .. DESCRIPTOR .. "option java_package = 5;\n"
      .. "message M { option (nope) = 5; }\n",
      'custom_before_std.proto:4:20: Option "(nope)" unknown. Ensure that your proto definition file '
      .. "imports the proto which defines the option." },
    { "empty_option_name.proto", 'syntax = "proto3";\noption () = 1;\nmessage M { N n = 1; }\n',
      "empty_option_name.proto: Uninterpreted option is missing name or value." },
    { "proto3_group_case.proto", 'syntax = "proto3";\nmessage A { group x = 1 {} }\n',
      "proto3_group_case.proto:2:19: Group names must start with a capital letter." },
    { "proto3_group_number.proto", 'syntax = "proto3";\nmessage A { group X = 1 {} int32 y = 1; }\n',
      'proto3_group_number.proto:2:38: Field number 1 has already been used in "A" by field "x".' },
    { "map_no_label.proto", 'syntax = "proto2";\nmessage A { map }\n',
      'map_no_label.proto:2:17: Expected "required", "optional", or "repeated".' },
    { "enum_default_token.proto",
      'syntax = "proto2";\nenum E { A = 0; }\nmessage M { optional E e = 1 [default = 1]; }\n',
      "enum_default_token.proto:3:41: Default value for an enum field must be an identifier." },
    { "range_includes.proto", 'syntax = "proto2";\nmessage A {\n  extensions 7;\n  optional int32 a = 2;\n'
      .. "  extensions 1 to 5;\n}\n", 'range_includes.proto:5:14: Extension range 1 to 5 includes field "a" (2).' },
    { "aggregate_list_comma.proto", 'syntax = "proto2";\n' .. OPTION_O
      .. "message R { repeated int32 n = 1; }\nextend google.protobuf.FileOptions { optional R r = 50001; }\n"
      .. "option (r) = { n: [1, 2; };\n",
      'aggregate_list_comma.proto:7:14: Error while parsing option value for "r": Expected ",", found ";".' },
    -- names: protoc's limits on a package, none on other names (a name
    -- once stopped resolving past 1 KB, an option name past 16 parts)
    { "package_too_long.proto", 'syntax = "proto3";\npackage ' .. ("a."):rep(255) .. "bb;\nmessage A {}\n",
      "package_too_long.proto:2:1: Package name is too long" },
    { "package_too_deep.proto", 'syntax = "proto3";\n  package ' .. ("a."):rep(101) .. "a;\nmessage A {}\n",
      "package_too_deep.proto:2:3: Exceeds Maximum Package Depth" },
    { "package_at_limits.proto", 'syntax = "proto3";\npackage ' .. ("abcd."):rep(100) .. "abcd;\n"
      .. "message A {}\nmessage B { A a = 1; ." .. ("abcd."):rep(101) .. "A b = 2; }\n", "" },
    { "long_type_names.proto", 'syntax = "proto3";\npackage p;\nmessage ' .. ("M"):rep(1100) .. " {\n"
      .. "  message " .. ("N"):rep(1100) .. " { message B {} }\n  " .. ("N"):rep(1100) .. ".B b = 1;\n}\n", "" },
    { "long_option_name.proto", 'syntax = "proto2";\n' .. DESCRIPTOR .. "package p;\n"
      .. "message N { optional N n = 1; optional int32 x = 2; }\n"
      .. "extend google.protobuf.MessageOptions { optional N " .. ("e"):rep(600) .. " = 50000; }\n"
      .. "message A { option (" .. ("e"):rep(600) .. ")" .. (".n"):rep(20) .. ".x = 5; }\n"
      .. "message B { option (p." .. ("e"):rep(600) .. ") = { n { n { x: 1 } } }; }\n", "" },
    { "aggregate_deep.proto", 'syntax = "proto2";\n' .. DESCRIPTOR
      .. "message D { optional D d = 1; optional int32 a = 2; }\n"
      .. "extend google.protobuf.FileOptions { optional D deep = 50001; }\n"
      .. "option (deep) = { " .. ("d { "):rep(149) .. "a: 1" .. (" }"):rep(149) .. " };\n", "" },
  }

  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local function write(name, src)
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(src)
    f:close()
  end

  -- text format values in aggregates: protoc's TextFormat wording
  local function value_case(syntax, ty, value, verdict)
    local label = syntax == "proto2" and "optional " or ""
    local name = ("value_%s_%d.proto"):format(syntax, #cases + 1)
    cases[#cases + 1] = { name, ('syntax = "%s";\n%senum E { Z = 0; }\nmessage O { %s%s a = 1; }\n'
      .. "extend google.protobuf.FileOptions { %sO s = 50000; }\noption (s) = { a: %s };\n"):format(
      syntax, DESCRIPTOR, label, ty, label, value),
      verdict == "" and "" or name .. ':6:14: Error while parsing option value for "s": ' .. verdict }
  end
  value_case("proto3", "int32", '"x"', 'Expected integer, got: "x"')
  value_case("proto3", "uint32", "-1", "Expected integer, got: -")
  value_case("proto3", "int32", "-x", "Expected integer, got: x")
  value_case("proto3", "double", '"x"', 'Expected double, got: "x"')
  value_case("proto3", "bool", '"x"', 'Expected identifier, got: "x"')
  value_case("proto3", "E", "1.5", "Expected integer or identifier, got: 1.5")
  value_case("proto3", "string", "abc", "Expected string, got: abc")
  value_case("proto3", "int32", "-3000000000", "Integer out of range (3000000000)")
  value_case("proto3", "bool", "2", "Integer out of range (2)")
  value_case("proto3", "double", "99999999999999999999", "")
  value_case("proto3", "E", "5", "")
  value_case("proto2", "E", "-1", 'Unknown enumeration value of "-1" for field "a".')

  for _, c in ipairs(cases) do
    it((c[3] == "" and "accepts " or "rejects ") .. c[1], function()
      local files, err = pc.pool():load(c[2], { name = c[1] })
      assert.are.equal(c[3], files and "" or err)
      write(c[1], c[2])
      local text = protoc("-I " .. dir .. " -o /dev/null " .. dir .. "/" .. c[1])
      if text then
        local first = ""
        for line in text:gmatch("[^\n]+") do
          if not line:find("warning") then first = line break end
        end
        assert.are.equal(c[3], first)
      end
    end)
  end

  it("takes an extension's json_name that is its default however long the name, as protoc", function()
    local name = ("long_name_"):rep(40) -- its JSON name has 320 characters
    local src = ('syntax = "proto2";\nmessage M { extensions 1 to max; }\n'
      .. 'extend M { optional int32 %s = 1 [json_name = "%s"]; }\n'):format(name, "longName" .. ("LongName"):rep(39))
    local q = pc.pool()
    assert(q:load(src, { name = "long_extension.proto" }))
    local m = q:type("M") {}
    pc.set_extension(m, name, 5)
    assert.are.equal(5, pc.get_extension(m, name))
  end)

  it("refuses a descriptor set whose imports form a cycle, naming it as protoc", function()
    local set = pc.pool():type("google.protobuf.FileDescriptorSet")
    local function file(name, ...)
      return { name = name, syntax = "proto3", dependency = { ... },
               message_type = { { name = name:match("^%a+"):upper() } } }
    end
    for _, c in ipairs {
      { { file("a.proto", "a.proto") }, "a.proto: File recursively imports itself: a.proto -> a.proto" },
      { { file("a.proto", "b.proto"), file("b.proto", "a.proto") },
        "a.proto: File recursively imports itself: a.proto -> b.proto -> a.proto" },
      { { file("x.proto", "a.proto"), file("a.proto", "b.proto"), file("b.proto", "c.proto"),
          file("c.proto", "a.proto") },
        "a.proto: File recursively imports itself: a.proto -> b.proto -> c.proto -> a.proto" },
    } do
      local bytes = pc.encode(set{ file = c[1] })
      assert.are.same({ nil, c[2] }, { pc.pool():load_descriptor_set(bytes) })
      local f = assert(io.open(dir .. "/cycle.pb", "wb"))
      f:write(bytes)
      f:close()
      local text = protoc("--descriptor_set_in=" .. dir .. "/cycle.pb -o /dev/null " .. c[1][1].name)
      if text then assert.are.equal(c[2], text:match("[^\n]*")) end
    end
    -- a diamond is no cycle
    assert(pc.pool():load_descriptor_set(pc.encode(set{ file = { file("d.proto"), file("b.proto", "d.proto"),
      file("c.proto", "d.proto"), file("a.proto", "b.proto", "c.proto") } })))
  end)

  it("accepts an import chain 70 files deep", function()
    local n = 70
    for i = 1, n do
      write(("chain%d.proto"):format(i), ('syntax = "proto3";\n%smessage C%d {}\n'):format(
        i < n and ('import "chain%d.proto";\n'):format(i + 1) or "", i))
    end
    assert(pc.pool():load_file(dir .. "/chain1.proto", { import_paths = { dir } }))
    local text, ok = protoc("-I " .. dir .. " -o /dev/null " .. dir .. "/chain1.proto")
    if text then assert.is_true(ok) end
  end)

  it("decodes \\U past 10FFFF and UTF-16 surrogate pairs as protoc", function()
    local src = 'syntax = "proto2";\nmessage M {\n  optional string s = 1 [default = "\\U00110000"];\n'
      .. '  optional string t = 2 [default = "\\ud83d\\ude00"];\n}\n'
    local pool = pc.pool()
    assert(pool:load(src, { name = "escapes.proto" }))
    local fields = pool:file_descriptor("escapes.proto").message_type[1].field
    assert.are.equal("\\U00110000", fields[1].default_value)
    assert.are.equal("\240\159\152\128", fields[2].default_value)
    write("escapes.proto", src)
    if protoc("-I " .. dir .. " -o " .. dir .. "/escapes.pb " .. dir .. "/escapes.proto") then
      local f = assert(io.open(dir .. "/escapes.pb", "rb"))
      local set = pool:type("google.protobuf.FileDescriptorSet")
      local theirs = assert(pc.decode(set, f:read("a"))).file[1].message_type[1].field
      f:close()
      assert.are.equal(theirs[1].default_value, fields[1].default_value)
      assert.are.equal(theirs[2].default_value, fields[2].default_value)
    end
  end)

  teardown(function() os.execute("rm -rf " .. dir) end)
end)

-- Differential: hundreds of schemas a token or two away from valid ones,
-- each compiled by protoc and by protocall; the first error must be the same
-- text at the same line and column (or both accept). One difference is
-- deliberate: protoc names an undefined map key or value type without a
-- position ("x.proto: \"T\" is not defined."); protocall gives the field's.
describe("mutated schemas against protoc", function()
  local function run(base, seed, count)
    if not io.open("/usr/bin/protoc", "rb") or not io.open("/usr/bin/python3", "rb") then
      if os.getenv("CI") then error("protoc and python3 are required when CI is set") end
      return pending("protoc or /usr/bin/python3 not installed: mutated schemas not compared")
    end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("/usr/bin/python3 spec/tools/proto_mutants.py %s %d %d %s"):format(
      base, seed, count, dir)))
    local verdicts = {}
    for line in io.lines(dir .. "/verdicts.txt") do verdicts[#verdicts + 1] = line end
    assert.are.equal(count, #verdicts)
    local core = require "protocall.core"
    local differ = {}
    for i = 1, count do
      local f = assert(io.open(("%s/%d.proto"):format(dir, i), "rb"))
      local src = f:read("a")
      f:close()
      local files, err = core.parse_proto("x.proto", { ["x.proto"] = src })
      local ours = files and "OK" or err:match("[^\n]*")
      local theirs = verdicts[i]
      local unplaced = theirs:match('^x%.proto: (".*" is not defined%.)$')
      if ours ~= theirs and not (unplaced and ours:match("^x%.proto:%d+:%d+: (.*)$") == unplaced) then
        differ[#differ + 1] = ("%d.proto: protoc %q, protocall %q"):format(i, theirs, ours)
      end
    end
    os.execute("rm -rf " .. dir)
    assert.are.same({}, differ)
  end

  it("agrees on 150 mutants of a proto3 file", function()
    run("spec/fixtures/protos/mutants/proto3.proto", 1, 150)
  end)

  it("agrees on 150 mutants of a proto2 file with extensions, groups and custom options", function()
    run("spec/fixtures/protos/mutants/proto2.proto", 2, 150)
  end)
end)
