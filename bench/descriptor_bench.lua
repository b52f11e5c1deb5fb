-- Descriptors out: a large loaded file
-- (google/pubsub/v1/pubsub.proto, 27 KB as a FileDescriptorProto) written
-- as protoc's bytes by the C writer (core/wire/descriptor_write.c), and as a
-- message with pool:file_descriptor (write, then decode into
-- descriptor.proto's types). Baseline: pc.decode of those same bytes into
-- a FileDescriptorProto, what a user would do with protoc's own output
-- (so file_descriptor's cost is about baseline + write).
local H = require "bench.harness"
local pc = require "protocall"
local core = require "protocall.core"

local root, wkt = "../shared/corpus/protos/googleapis", "../shared/corpus/protos/wkt"
local NAME = "google/pubsub/v1/pubsub.proto"
if not io.open(root .. "/" .. NAME, "rb") then
  print("descriptor_bench: corpus absent (" .. root .. "): skipped")
  return
end
local pool = pc.pool()
assert(pool:load_file(root .. "/" .. NAME, { import_paths = { root, wkt } }))
local bytes = core.file_descriptor_bytes(pool, NAME)
local FDP = pool:file_descriptor(NAME) and pool:type("google.protobuf.FileDescriptorProto")

H.run {
  title = "pool:file_descriptor(\"" .. NAME .. "\") (" .. #bytes .. " bytes)",
  baseline = { name = "pc.decode(FileDescriptorProto, protoc bytes)", fn = function(n)
    for _ = 1, n do pc.decode(FDP, bytes) end
  end },
  cases = {
    { name = "C writer only (bytes)", fn = function(n)
      for _ = 1, n do core.file_descriptor_bytes(pool, NAME) end
    end, goal = "< baseline", check = function(ns, base) return ns < base end },
    { name = "pool:file_descriptor (message)", fn = function(n)
      for _ = 1, n do pool:file_descriptor(NAME) end
    end, goal = "~ baseline + writer (<= 1.5x)", check = function(ns, base) return ns <= 1.5 * base end },
  },
}
