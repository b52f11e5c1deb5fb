-- Descriptors out: pc.file_descriptor(name) and
-- pool:file_descriptor(name) give a loaded file as a
-- google.protobuf.FileDescriptorProto message. Over the corpus: every file
-- of descriptors/<project>.pb, loaded from its .proto under
-- protos/<project>, encodes (deterministic) to protoc's own bytes for that
-- file (or, where protoc keeps custom options in source order, decodes
-- to an equal message). Skips visibly without the corpus, fails when env CI is set.
local pc = require "protocall"
local R = require "runtime"

local corpus = require "corpus"
local CORPUS = corpus.dir

local function read(path) return corpus.read(path:sub(#CORPUS + 2)) end

-- The files of a serialized FileDescriptorSet as {name, bytes} pairs, read
-- with string.unpack (so the test does not depend on the decoder under test).
local function varint(s, i)
  local v, scale = 0, 1
  repeat
    local b = s:byte(i)
    v = v + b % 128 * scale
    scale, i = scale * 128, i + 1
  until b < 0x80
  return v, i
end

local function set_files(bytes)
  local files, i = {}, 1
  while i <= #bytes do
    local tag, len
    tag, i = varint(bytes, i)
    assert(tag == 0x0a)
    len, i = varint(bytes, i)
    local file = bytes:sub(i, i + len - 1)
    i = i + len
    local ntag, j = varint(file, 1)
    assert(ntag == 0x0a)
    local nlen
    nlen, j = varint(file, j)
    files[#files + 1] = { file:sub(j, j + nlen - 1), file }
  end
  return files
end

describe("pc.file_descriptor", function()
  it("gives a loaded file as a FileDescriptorProto message", function()
    local pool = pc.pool()
    assert(pool:load([[
      syntax = "proto3";
      package fd;
      message Point { int32 x_pos = 1; repeated string tags = 2; optional double r = 3; }
      service Geo { rpc Near(Point) returns (stream Point); }
    ]], { name = "fd/point.proto" }))
    local m = assert(pool:file_descriptor("fd/point.proto"))
    assert.equal("google.protobuf.FileDescriptorProto", pc.type_of(m).full_name)
    assert.equal("fd/point.proto", m.name)
    assert.equal("fd", m.package)
    assert.equal("proto3", m.syntax)
    local point = m.message_type[1]
    assert.equal("Point", point.name)
    assert.equal("xPos", point.field[1].json_name)
    assert.equal(3, point.field[2].label) -- LABEL_REPEATED
    assert.is_true(point.field[3].proto3_optional)
    assert.equal("_r", point.oneof_decl[1].name)
    assert.equal(".fd.Point", m.service[1].method[1].input_type)
    assert.is_true(m.service[1].method[1].server_streaming)
    assert.is_false(pc.has(m.service[1].method[1], "client_streaming"))
    -- descriptor.proto was loaded into the pool on demand
    assert.is_not_nil(pool:type("google.protobuf.FileDescriptorProto"))
  end)

  it("works on the default pool and answers nil, err for a file not loaded", function()
    assert(pc.load('syntax = "proto2"; package fdd; message A { optional int32 a = 1 [default = 7]; }',
      { name = "fdd/a.proto" }))
    local m = assert(pc.file_descriptor("fdd/a.proto"))
    assert.equal("7", m.message_type[1].field[1].default_value)
    assert.is_false(pc.has(m, "syntax")) -- protoc omits "proto2"
    local none, err = pc.file_descriptor("fdd/none.proto")
    assert.is_nil(none)
    assert.equal("fdd/none.proto: no such file in the pool", err)
    assert.has_error(function() pc.file_descriptor(1) end,
      "bad argument #1 to 'file_descriptor' (string expected, got number)")
  end)

  it("describes Lua declarations as protoc would the same .proto", function()
    local pool = pc.pool()
    pool:message("ld.X", { { "a_b", "int32", 1 }, { "m", "map<string,int64>", 2 },
                           { "o", "double", 3, oneof = "k" } })
    local m = assert(pool:file_descriptor("lua:ld.X"))
    local x = m.message_type[1]
    assert.equal("aB", x.field[1].json_name)
    assert.equal(".ld.X.MEntry", x.field[2].type_name)
    assert.is_true(x.nested_type[1].options.map_entry) -- written though the declaration has no option bytes
    assert.equal("k", x.oneof_decl[1].name)
    -- the same message from .proto text describes the same message_type
    assert(pool:load('syntax = "proto3"; package ld2; message X { int32 a_b = 1; map<string, int64> m = 2; ' ..
      'oneof k { double o = 3; } }', { name = "ld2.proto" }))
    local p = assert(pool:file_descriptor("ld2.proto")).message_type[1]
    p.field[2].type_name = ".ld.X.MEntry"
    assert.equal(pc.encode(p), pc.encode(x))
  end)

  it("writes one record per piecewise assignment of an aggregate option, as protoc", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local src = table.concat({
      'syntax = "proto2";', "package pw;", 'import "google/protobuf/descriptor.proto";',
      "message Agg { optional int32 a = 1; optional string b = 2; }",
      "extend google.protobuf.FileOptions { optional Agg agg = 50000; }",
      "option (agg).a = 1;", 'option java_package = "x.y";', 'option (agg).b = "x";', "message M {}", "" }, "\n")
    local f = assert(io.open(dir .. "/pw.proto", "wb"))
    f:write(src)
    f:close()
    assert.is_true(R.execute("protoc -I " .. dir .. " -o " .. dir .. "/set.pb pw.proto"))
    local fh = assert(io.open(dir .. "/set.pb", "rb"))
    local protoc = set_files(fh:read("a"))[1][2]
    fh:close()
    os.execute("rm -rf " .. dir)
    local pool = pc.pool()
    assert(pool:load(src, { name = "pw.proto" }))
    local m = assert(pool:file_descriptor("pw.proto"))
    assert.are.equal(protoc, pc.encode(m))
    -- the custom option, read as an extension through the pool's own option type
    local opts = pc.decode(pool:type("google.protobuf.FileOptions"), pc.encode(m.options))
    assert.are.equal(1, pc.get_extension(opts, "pw.agg").a)
    assert.are.equal("x", pc.get_extension(opts, "pw.agg").b)
  end)

  it("serves a frozen pool without descriptor.proto from a private pool", function()
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; message Z { bytes b = 1; }', { name = "z.proto" }))
    pool:freeze()
    local m = assert(pool:file_descriptor("z.proto"))
    assert.equal("Z", m.message_type[1].name)
    assert.is_nil(pool:type("google.protobuf.FileDescriptorProto"))
  end)

  if not corpus.read("descriptors/wkt.pb") then
    return it("needs the corpus", function() corpus.skip(pending, "descriptor corpus comparison") end)
  end

  -- Files whose options carry custom options (extensions of *Options) that
  -- the same pool defines: protoc writes one option record per assignment
  -- (piecewise aggregate options as several records), in source order;
  -- pc.file_descriptor keeps them as unknown fields, so these encode to
  -- protoc's bytes as every other file does.
  local reordered = {}

  -- pc.encode and pc.decode keep the last type they met alive (the
  -- codec's one-entry caches), and with it that type's pool: go through
  -- them once more with a small type so the corpus pools are not kept for
  -- the specs that follow (the memory specs in message_spec.lua measure
  -- the heap).
  teardown(function()
    local Small = pc.pool():message("fd.Small", {})
    pc.encode(assert(pc.decode(Small, "")))
    collectgarbage()
  end)

  for _, project in ipairs { "wkt", "protobuf", "opentelemetry", "grpc", "googleapis" } do
    it("encodes to protoc's bytes for every file of " .. project .. ".pb", function()
      local root, wkt = CORPUS .. "/protos/" .. project, CORPUS .. "/protos/wkt"
      local pool = pc.pool()
      local files = set_files(assert(read(CORPUS .. "/descriptors/" .. project .. ".pb")))
      assert.is_true(#files > 0)
      local by_value, differ = {}, {}
      for _, f in ipairs(files) do
        local name, bytes = f[1], f[2]
        -- the sets hold the well-known types they import; those live in protos/wkt
        local dir = read(root .. "/" .. name) and root or wkt
        assert(pool:load_file(dir .. "/" .. name, { import_paths = { dir, wkt } }))
        local m = assert(pool:file_descriptor(name))
        if pc.encode(m, { deterministic = true }) ~= bytes then
          if pc.decode(pc.type_of(m), bytes) == m then
            by_value[#by_value + 1] = name
          else
            differ[#differ + 1] = name
          end
        end
      end
      assert.same({}, differ)
      assert.same(reordered[project] or {}, by_value)
    end)
  end
end)
