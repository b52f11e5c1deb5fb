-- The corpus round trip: every binary payload of
-- ../shared/corpus/payloads/MANIFEST.tsv, decoded with its project's
-- descriptor set (loaded by pc.load_descriptor_set) and re-encoded in
-- deterministic mode, gives back the same bytes; golden_message, which
-- carries four members of one oneof, re-encodes as
-- golden_message_oneof_implemented. Skips visibly without the corpus,
-- fails when env CI is set.
local pc = require "protocall"

local corpus = require "corpus"
local CORPUS = corpus.dir

local function read(path) return corpus.read(path:sub(#CORPUS + 2)) end

local manifest = read(CORPUS .. "/payloads/MANIFEST.tsv")

describe("codec over the corpus", function()
  if not corpus.read("payloads/MANIFEST.tsv") then
    return it("needs the corpus", function() corpus.skip(pending, "corpus round trip") end)
  end

  local pools = {}
  local function pool_for(project)
    if not pools[project] then
      local p = pc.pool()
      local names = assert(p:load_descriptor_set(assert(read(CORPUS .. "/descriptors/" .. project .. ".pb"))))
      assert.is_true(#names > 0)
      pools[project] = p
    end
    return pools[project]
  end

  it("loads every descriptor set, files in order", function()
    local files = assert(pc.pool():load_descriptor_set(read(CORPUS .. "/descriptors/grpc.pb")))
    assert.are.equal(5, #files)
    assert.are.equal("examples/protos/helloworld.proto", files[1].name)
    assert.are.equal("helloworld", files[1].package)
    assert.are.equal("proto3", files[1].syntax)
    for _, project in ipairs { "wkt", "protobuf", "opentelemetry", "grpc", "googleapis" } do
      assert.is_not_nil(pool_for(project))
    end
  end)

  it("rejects a broken descriptor set with the offset", function()
    local ok, err = pc.pool():load_descriptor_set("\10\5abc")
    assert.is_nil(ok)
    assert.are.equal("descriptor set: protocall.desc.FileDescriptorSet.file: "
      .. "length runs past the end of the input at offset 1", err)
  end)

  local count = 0
  for line in manifest:gmatch("[^\n]+") do
    local file, _, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
    if format == "binary" then
      count = count + 1
      it("round-trips " .. file, function()
        local project = file:match("^([^/]+)/")
        local T = assert(pool_for(project):type(mtype), mtype)
        local bytes = assert(read(CORPUS .. "/payloads/" .. file))
        local want = bytes
        if file == "protobuf/golden_message" then
          want = assert(read(CORPUS .. "/payloads/protobuf/golden_message_oneof_implemented"))
        end
        local m = assert(pc.decode(T, bytes))
        local got = pc.encode(m, { deterministic = true })
        assert.are.equal(#want, #got)
        assert.is_true(want == got, file .. ": re-encoding differs")
      end)
    end
  end

  it("found the binary payloads", function()
    assert.is_true(count >= 49)
  end)
end)
