-- core.parse_proto (internal): the C .proto parser and resolver from Lua.
-- The rule-by-rule error texts are pinned in core/compiler/parse_test.c
-- and the equality with protoc over the corpus in the proto_corpus test;
-- these specs pin the Lua entry point.
require "protocall"
local core = require "protocall.core"
local corpus = require "corpus"

local function corpus_dir()
  if not corpus.read("protos/opentelemetry/opentelemetry/proto/common/v1/common.proto") then return nil end
  return corpus.dir .. "/protos/opentelemetry"
end

describe("core.parse_proto", function()
  it("loads a built-in well-known type with its imports, imports first", function()
    local files = assert(core.parse_proto("google/protobuf/api.proto"))
    local names = {}
    for i, f in ipairs(files) do names[i] = f.name end
    assert.are.same({ "google/protobuf/source_context.proto", "google/protobuf/any.proto",
      "google/protobuf/type.proto", "google/protobuf/api.proto" }, names)
    local api = files[4]
    assert.are.equal("proto3", api.syntax)
    assert.are.equal("google.protobuf", api.package)
    local methods = api.message_type[1].field[2]
    assert.are.equal("methods", methods.name)
    assert.are.equal(".google.protobuf.Method", methods.type_name)
    assert.are.equal(11, methods.type)
    assert.are.equal(3, methods.label)
  end)

  it("resolves imports from the sources table and fills json_name", function()
    local files = assert(core.parse_proto("b.proto", {
      ["a.proto"] = 'syntax = "proto3"; package a; message A { int64 trace_id = 1; }',
      ["b.proto"] = 'syntax = "proto3"; import "a.proto"; message B { a.A a = 1; }',
    }))
    assert.are.equal(2, #files)
    assert.are.equal("traceId", files[1].message_type[1].field[1].json_name)
    assert.are.equal(".a.A", files[2].message_type[1].field[1].type_name)
  end)

  it("counts files without building tables when asked", function()
    assert.are.equal(2, core.parse_proto({ "google/protobuf/any.proto",
      "google/protobuf/empty.proto" }, nil, true))
  end)

  it("returns nil and file:line:column: message on an error", function()
    local files, err = core.parse_proto("x.proto", { ["x.proto"] = 'syntax = "proto3";\nmessage A { B b = 1; }' })
    assert.is_nil(files)
    assert.are.equal('x.proto:2:13: "B" is not defined.', err)
    files, err = core.parse_proto("missing.proto")
    assert.is_nil(files)
    assert.are.equal("missing.proto: File not found.", err)
  end)

  it("encodes custom options as protoc does", function()
    local files = assert(core.parse_proto("o.proto", { ["o.proto"] = [[
      syntax = "proto3";
      import "google/protobuf/descriptor.proto";
      message Rule { string get = 2; }
      extend google.protobuf.MethodOptions { Rule http = 72295728; }
      service S { rpc M (S2) returns (S2) { option (http) = { get: "/v1" }; } }
      message S2 {}
    ]] }))
    local m = files[2].service[1].method[1]
    assert.are.equal("\130\211\228\147\2\5\18\3/v1", m.options)
  end)

  it("loads the OpenTelemetry protos from the corpus", function()
    local dir = corpus_dir()
    if not dir then return corpus.skip(pending, "OpenTelemetry load") end
    local names, sources = {}, {}
    local p = io.popen("cd " .. dir .. " && find . -name '*.proto' | sort")
    for line in p:lines() do
      local name = line:gsub("^%./", "")
      local f = assert(io.open(dir .. "/" .. name, "rb"))
      sources[name] = f:read("a")
      f:close()
      names[#names + 1] = name
    end
    p:close()
    assert.are.equal(11, #names)
    assert.are.equal(11, core.parse_proto(names, sources, true))
  end)
end)
