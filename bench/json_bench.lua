-- Proto3 JSON speed: pc.to_json and pc.from_json of otlp_traces and
-- test_all_types_proto3 (the corpus payloads) against the C++ library's
-- util::MessageToJsonString / JsonStringToMessage (generated code, built
-- by g++ in this same run from Debian's protoc and libprotobuf-dev) and
-- python3-protobuf's json_format (C++ backend). Every implementation
-- parses the same document: protocall's output, with float32 FLT_MAX
-- written 3.4028234e+38 (python3-protobuf refuses 3.4028235e+38).
--   build/release/protocall bench/json_bench.lua [--quick]
local H = require "bench.harness"
local sh, read = H.sh, H.read
local pc = require "protocall"

local CORPUS = "../shared/corpus"
local PROTOS = CORPUS .. "/protos"
local OUT = "build/bench-json"

local function write(path, s)
  local f = assert(io.open(path, "wb"), path)
  f:write(s)
  f:close()
end

local only
for i, a in ipairs(arg or {}) do if a == "--only" then only = arg[i + 1] end end

local CASES = {
  { name = "otlp_traces", set = "opentelemetry",
    type = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
    bin = CORPUS .. "/payloads/opentelemetry/otlp_traces.bin" },
  { name = "test_all_types_proto3", set = "protobuf", type = "protobuf_test_messages.proto3.TestAllTypesProto3",
    bin = CORPUS .. "/payloads/protobuf/test_all_types_proto3.bin" },
}

if not io.open(CASES[1].bin, "rb") then
  print("json_bench: corpus not found at " .. CORPUS .. "; skipped")
  return
end

for _, c in ipairs(CASES) do
  local pool = pc.pool()
  assert(pool:load_descriptor_set(read(CORPUS .. "/descriptors/" .. c.set .. ".pb")))
  c.T = assert(pool:type(c.type))
  c.bytes = read(c.bin)
  c.msg = assert(pc.decode(c.T, c.bytes))
  c.json = pc.to_json(c.msg):gsub("3%.4028235e%+38", "3.4028234e+38")
  c.json_file = OUT .. "/" .. c.name .. ".json"
end

local cpp, py = {}, {}
local function native(cmd, into)
  local p = assert(io.popen(cmd))
  for line in p:lines() do
    local name, to, from = line:match("^(%S+) (%S+) (%S+)")
    if name then into[name] = { to = tonumber(to), from = tonumber(from) } end
  end
  p:close()
end

if not only then
  sh("mkdir -p " .. OUT)
  for _, c in ipairs(CASES) do write(c.json_file, c.json) end
  local otel = PROTOS .. "/opentelemetry"
  local otlp_files = "opentelemetry/proto/common/v1/common.proto opentelemetry/proto/resource/v1/resource.proto "
    .. "opentelemetry/proto/trace/v1/trace.proto opentelemetry/proto/collector/trace/v1/trace_service.proto"
  sh(('P="$(pwd)" && cd %s && protoc -I . --cpp_out="$P/%s" %s'):format(otel, OUT, otlp_files))
  sh(("protoc -I %s/protobuf -I /usr/include --cpp_out=%s %s/protobuf/google/protobuf/test_messages_proto3.proto")
    :format(PROTOS, OUT, PROTOS))
  io.stderr:write("json_bench: compiling the C++ baseline (about half a minute)...\n")
  sh(("g++ -O2 -std=c++17 -I %s bench/json/json_cpp.cc $(find %s -name '*.pb.cc') -lprotobuf -o %s/json_cpp")
    :format(OUT, OUT, OUT))
  native(("%s/json_cpp %s %s %s %s"):format(OUT, CASES[1].bin, CASES[1].json_file, CASES[2].bin,
    CASES[2].json_file), cpp)
  for _, c in ipairs(CASES) do
    native(("/usr/bin/python3 bench/json/json_py.py %s/descriptors/%s.pb %s %s %s %s"):format(CORPUS, c.set, c.type,
      c.bin, c.json_file, c.name), py)
  end
end

local cases = {}
for _, c in ipairs(CASES) do
  local T, msg, json = c.T, c.msg, c.json
  assert(pc.from_json(T, json))
  cases[#cases + 1] = { name = "to_json " .. c.name, fn = function(n)
    local to_json = pc.to_json
    for _ = 1, n do to_json(msg) end
  end }
  cases[#cases + 1] = { name = "from_json " .. c.name, fn = function(n)
    local from_json = pc.from_json
    for _ = 1, n do from_json(T, json) end
  end }
end

local results = H.run {
  title = "proto3 JSON called from Lua (pc.to_json to a string, pc.from_json to a message)",
  baseline = { name = "pc.encode otlp_traces (wire)", fn = function(n)
    local encode, m = pc.encode, CASES[1].msg
    for _ = 1, n do encode(m) end
  end },
  cases = cases,
}
if only then return end

local rows = {}
for _, c in ipairs(CASES) do
  for _, op in ipairs { "to", "from" } do
    local ns = results[op .. "_json " .. c.name].ns
    rows[#rows + 1] = { name = ("%s_json %s"):format(op, c.name), value = #c.json / ns * 1e3, unit = "MB/s" }
    rows[#rows + 1] = { name = ("%s_json %s vs C++"):format(op, c.name), value = cpp[c.name][op] / ns,
      unit = "x", goal = ">= 1.0x", ok = cpp[c.name][op] / ns >= 1.0 }
    rows[#rows + 1] = { name = ("%s_json %s vs python"):format(op, c.name),
      value = py[c.name][op] / ns, unit = "x" }
  end
end
H.report("proto3 JSON against the C++ library and python3-protobuf (throughput ratios, same run)", rows)
