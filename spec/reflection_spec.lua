-- Server reflection (grpc.reflection.v1 and v1alpha ServerReflection) and
-- the built-in services of pc.server, in process: every kind of request,
-- its errors, and file descriptors byte for byte equal to what protoc
-- writes for the same files (`protoc --include_imports --descriptor_set_out`;
-- skipped visibly without protoc, failing when env CI is set).
local pc = require "protocall"

local FILES = {
  ["refl/common.proto"] = [[
syntax = "proto2";
package refl;
message Base {
  optional int32 id = 1;
  extensions 100 to 199;
  enum Kind { KIND_A = 0; KIND_B = 1; }
}
]],
  ["refl/api.proto"] = [[
syntax = "proto3";
package refl;
import "refl/common.proto";
import "google/protobuf/timestamp.proto";
message Item {
  string name = 1;
  google.protobuf.Timestamp at = 2;
  oneof pick { int32 n = 3; string s = 4; }
  Base base = 5;
  message Inner { bool ok = 1; }
}
enum Color { RED = 0; GREEN = 1; }
service Shop {
  rpc Get(Item) returns (Item);
  rpc List(Item) returns (stream Item);
}
]],
  ["refl/ext.proto"] = [[
syntax = "proto2";
package refl.more;
import "refl/common.proto";
extend refl.Base { optional string note = 150; optional int32 weight = 120; }
message Holder { extend refl.Base { optional Holder holder = 101; } }
]],
}

local function write_tree()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir .. "/refl"))
  for name, src in pairs(FILES) do
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(src)
    f:close()
  end
  return dir
end

local DIR = write_tree()
local pool = pc.pool()
assert(pool:load_file("refl/api.proto", { import_paths = { DIR } }))
assert(pool:load_file("refl/ext.proto", { import_paths = { DIR } }))

local shop = { Get = function(item) return item end, List = function(item) return { item } end }
local server = pc.server({ ["refl.Shop"] = shop }, { pool = pool, reflection = true, health = true })
local transport = pc.inproc(server)

-- One reflection stream of `version` ("v1" or "v1alpha"): ask(request) -> response.
local function stream(version)
  local stub = pc.client("grpc.reflection." .. version .. ".ServerReflection", { pool = pool, transport = transport })
  local call = stub:ServerReflectionInfo()
  return function(req)
    call:send(req)
    return call:recv()
  end, call
end

-- The files of a serialized FileDescriptorSet as name -> bytes, read with
-- string.byte (independent of the decoder under test).
local function varint(s, i)
  local v, shift = 0, 0
  repeat
    local b = s:byte(i)
    v = v + (b % 128) * 2 ^ shift -- lengths and tags: exact in a double, on both runtimes
    shift, i = shift + 7, i + 1
  until b < 0x80
  return v, i
end

local function name_of(file)
  local tag, j = varint(file, 1)
  assert(tag == 0x0a)
  local n
  n, j = varint(file, j)
  return file:sub(j, j + n - 1)
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
    files[name_of(file)] = file
  end
  return files
end

local function have_protoc()
  return require("runtime").execute("command -v protoc > /dev/null 2>&1") == true
end

local function skip_protoc(pending_fn, what)
  if os.getenv("CI") then error("protoc missing (required when CI is set)", 2) end
  pending_fn("protoc not found: " .. what .. " skipped")
end

-- protoc's serialized files for `main` with its imports.
local function protoc_files(main)
  local out = DIR .. "/set.pb"
  assert.is_true(require("runtime").execute("protoc -I " .. DIR .. " --include_imports --descriptor_set_out="
    .. out .. " " .. main))
  local f = assert(io.open(out, "rb"))
  local bytes = f:read("a")
  f:close()
  return set_files(bytes)
end

local function names(resp)
  local t = {}
  for i, b in pc.ipairs(resp.file_descriptor_response.file_descriptor_proto) do t[i] = name_of(b) end
  return t
end

describe("server reflection", function()
  teardown(function() os.execute("rm -rf " .. DIR) end)

  for _, version in ipairs { "v1", "v1alpha" } do
    it(version .. " lists every service served, sorted, the built-in ones included", function()
      local ask = stream(version)
      local resp = ask { host = "h", list_services = "*" }
      local got = {}
      for i, s in pc.ipairs(resp.list_services_response.service) do got[i] = s.name end
      assert.are.same({ "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                        "grpc.reflection.v1alpha.ServerReflection", "refl.Shop" }, got)
      assert.are.equal("h", resp.valid_host)
      assert.are.equal("*", resp.original_request.list_services)
    end)
  end

  it("answers file_by_filename with the file and its imports, transitively, once each", function()
    local ask = stream("v1")
    assert.are.same({ "refl/api.proto", "refl/common.proto", "google/protobuf/timestamp.proto" },
      names(ask { file_by_filename = "refl/api.proto" }))
    assert.are.same({ "refl/ext.proto", "refl/common.proto" }, names(ask { file_by_filename = "refl/ext.proto" }))
  end)

  it("finds the file of every kind of symbol", function()
    local ask = stream("v1")
    for sym, file in pairs {
      ["refl.Item"] = "refl/api.proto", ["refl.Item.Inner"] = "refl/api.proto",
      ["refl.Item.name"] = "refl/api.proto", ["refl.Item.pick"] = "refl/api.proto",
      ["refl.Color"] = "refl/api.proto", ["refl.GREEN"] = "refl/api.proto",
      ["refl.Shop"] = "refl/api.proto", ["refl.Shop.List"] = "refl/api.proto",
      [".refl.Base"] = "refl/common.proto", ["refl.Base.Kind"] = "refl/common.proto",
      ["refl.Base.KIND_B"] = "refl/common.proto", ["refl.more.note"] = "refl/ext.proto",
      ["refl.more.Holder.holder"] = "refl/ext.proto", ["google.protobuf.Timestamp"] = "google/protobuf/timestamp.proto",
      ["grpc.health.v1.Health.Check"] = "grpc/health/v1/health.proto",
      ["grpc.reflection.v1alpha.ServerReflectionRequest"] = "grpc/reflection/v1alpha/reflection.proto",
    } do
      local resp = ask { file_containing_symbol = sym }
      assert(resp.file_descriptor_response, sym)
      assert.are.equal(file, names(resp)[1], sym)
    end
  end)

  it("answers extensions by containing type and number, and all numbers of a type", function()
    local ask = stream("v1")
    local resp = ask { file_containing_extension = { containing_type = "refl.Base", extension_number = 120 } }
    assert.are.same({ "refl/ext.proto", "refl/common.proto" }, names(resp))
    resp = ask { all_extension_numbers_of_type = "refl.Base" }
    assert.are.equal("refl.Base", resp.all_extension_numbers_response.base_type_name)
    assert.are.same({ 101, 120, 150 }, pc.to_table(resp.all_extension_numbers_response).extension_number)
    resp = ask { all_extension_numbers_of_type = "refl.Item" }
    assert.are.same({}, pc.to_table(resp.all_extension_numbers_response).extension_number or {})
  end)

  it("answers what the pool lacks with ErrorResponse NOT_FOUND and goes on", function()
    local ask, call = stream("v1alpha")
    for req, msg in pairs {
      [{ file_by_filename = "nope.proto" }] = "file not found: nope.proto",
      [{ file_containing_symbol = "refl.Nope" }] = "symbol not found: refl.Nope",
      [{ file_containing_extension = { containing_type = "refl.Base", extension_number = 199 } }] =
        "extension not found: refl.Base 199",
      [{ all_extension_numbers_of_type = "refl.Color" }] = "message type not found: refl.Color",
    } do
      local resp = ask(req)
      assert.are.equal(5, resp.error_response.error_code)
      assert.are.equal(msg, resp.error_response.error_message)
    end
    local resp = ask {}
    assert.are.equal(3, resp.error_response.error_code)
    assert.is_not_nil(ask { list_services = "" }.list_services_response)
    call:close_send()
    assert.is_nil(call:recv())
  end)

  it("serializes each file as protoc does, byte for byte", function()
    if not have_protoc() then return skip_protoc(pending, "the byte-for-byte comparison") end
    local ask = stream("v1")
    for _, main in ipairs { "refl/api.proto", "refl/ext.proto" } do
      local want = protoc_files(main)
      local resp = ask { file_by_filename = main }
      local n = 0
      for _, bytes in pc.ipairs(resp.file_descriptor_response.file_descriptor_proto) do
        local name = name_of(bytes)
        assert.are.equal(want[name], bytes, name)
        n = n + 1
      end
      local m = 0
      for _ in pairs(want) do m = m + 1 end
      assert.are.equal(m, n)
    end
  end)

  it("serves the built-in health and reflection files as protoc compiles their text", function()
    if not have_protoc() then return skip_protoc(pending, "the byte-for-byte comparison") end
    local ask = stream("v1")
    for _, name in ipairs { "grpc/health/v1/health.proto", "grpc/reflection/v1/reflection.proto",
                            "grpc/reflection/v1alpha/reflection.proto" } do
      -- the built-in text, written out and compiled by protoc
      local f = assert(io.open(DIR .. "/builtin.proto", "wb"))
      f:write(pc.builtin_source(name))
      f:close()
      local want = protoc_files("builtin.proto")["builtin.proto"]
      local got = ask { file_by_filename = name }.file_descriptor_response.file_descriptor_proto[1]
      -- the same bytes but for the name (field 1, the first record)
      local _, j = varint(got, 2)
      local _, k = varint(want, 2)
      assert.are.equal(want:sub(k + #"builtin.proto"), got:sub(j + #name), name)
    end
  end)
end)

describe("the built-in health and reflection files", function()
  local corpus = require "corpus"
  local ROOT = corpus.dir .. "/protos/grpc/src/proto"
  it("describe what grpc's own .proto files describe, byte for byte", function()
    if not corpus.read("protos/grpc/src/proto/grpc/health/v1/health.proto") then
      return corpus.skip(pending, "the comparison with grpc's files")
    end
    if not have_protoc() then return skip_protoc(pending, "the comparison with grpc's files") end
    local p = pc.pool()
    pc.server({}, { pool = p, health = true, reflection = true })
    for _, name in ipairs { "grpc/health/v1/health.proto", "grpc/reflection/v1/reflection.proto",
                            "grpc/reflection/v1alpha/reflection.proto" } do
      local out = os.tmpname()
      assert.is_true(require("runtime").execute("protoc -I " .. ROOT .. " --descriptor_set_out=" .. out .. " " .. name))
      local f = assert(io.open(out, "rb"))
      local want = set_files(f:read("a"))[name]
      f:close()
      os.remove(out)
      assert.are.equal(want, pc.encode(p:file_descriptor(name)), name)
    end
  end)
end)

describe("pc.server's built-in services", function()
  it("adds them to a pool that lacks them and refuses bad options", function()
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; package b; message M {} service S { rpc Do(M) returns (M); }',
      { name = "b.proto" }))
    assert.is_nil(p:service("grpc.health.v1.Health"))
    pc.server({ ["b.S"] = { Do = function(m) return m end } }, { pool = p, health = true, reflection = true })
    assert.is_not_nil(p:service("grpc.health.v1.Health"))
    assert.is_not_nil(p:service("grpc.reflection.v1alpha.ServerReflection"))
    assert.has_error(function() pc.server({}, { pool = p, health = 1 }) end,
      "pc.server: health: true or pc.health() expected, got number")
    assert.has_error(function() pc.server({}, { pool = p, reflection = "yes" }) end,
      "pc.server: reflection: true expected, got string")
    local frozen = pc.pool()
    frozen:freeze()
    local ok, err = pcall(pc.server, {}, { pool = frozen, reflection = true })
    assert.is_false(ok)
    assert.matches("pc.server: cannot add the built-in grpc/reflection/v1/reflection.proto to the pool", err, 1, true)
  end)

  it("lists services that reflection answers for (their files reachable by symbol)", function()
    local ask = stream("v1")
    local resp = ask { list_services = "" }
    for _, s in pc.ipairs(resp.list_services_response.service) do
      assert.is_not_nil(ask { file_containing_symbol = s.name }.file_descriptor_response, s.name)
    end
  end)
end)

describe("the reflection client against a hostile server", function()
  local reflection = require "protocall.rpc.reflection"
  local FDP = pc.type("google.protobuf.FileDescriptorProto")

  -- A reflection server whose files import what `imports(name)` lists:
  -- every file_by_filename is answered with a file of that name (up to
  -- `most` of them, then NOT_FOUND, so the unfixed client ends too);
  -- file_containing_symbol with "root.proto". `asked` counts the files.
  local function hostile(imports, most)
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; import "grpc/reflection/v1/reflection.proto";', { name = "hostile.proto" }))
    local s = { asked = 0 }
    local function answer(req)
      local name = req.file_by_filename
      if pc.which_oneof(req, "message_request") == "file_containing_symbol" then name = "root.proto" end
      s.asked = s.asked + 1
      if s.asked > most then
        return { error_response = { error_code = 5, error_message = "no more" } }
      end
      local fd = FDP { name = name, package = "evil", dependency = imports(name) }
      return { file_descriptor_response = { file_descriptor_proto = { pc.encode(fd) } } }
    end
    local srv = pc.server({ ["grpc.reflection.v1.ServerReflection"] = { ServerReflectionInfo = function(ctx)
      for req in function() return ctx:recv() end do ctx.send(answer(req)) end
    end } }, { pool = p })
    s.transport = pc.inproc(srv)
    return s
  end

  local function refused(s)
    local r = reflection.client(s.transport)
    local ok, err = pcall(r.symbol, "evil.Svc")
    r.close()
    assert.is_false(ok)
    return err
  end

  it("stops an import chain that does not end at its depth limit, naming the files", function()
    -- f1 imports f2, which imports f3, ...
    local s = hostile(function(name)
      local n = tonumber(name:match("^f(%d+)%.proto$")) or 0
      return { "f" .. (n + 1) .. ".proto" }
    end, 5000)
    local err = refused(s)
    assert.are.equal("RESOURCE_EXHAUSTED", err.code)
    assert.are.equal("reflection: the imports of root.proto are more than 100 files deep "
      .. "(f99.proto imports f100.proto)", err.message)
    assert.are.equal(100, s.asked)
  end)

  it("stops at its limit of files received", function()
    -- root.proto imports 3,000 files (none importing anything)
    local s = hostile(function(name)
      local deps = {}
      if name == "root.proto" then
        for i = 1, 3000 do deps[i] = "leaf" .. i .. ".proto" end
      end
      return deps
    end, 5000)
    local err = refused(s)
    assert.are.equal("RESOURCE_EXHAUSTED", err.code)
    assert.are.equal("reflection: more than 2000 files received (the last asked for leaf2000.proto)", err.message)
    assert.are.equal(2001, s.asked)
  end)
end)
