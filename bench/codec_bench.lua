-- Wire codec speed: encode and decode of Point (3 x uint32), a
-- rich message (strings, bytes, packed ints, nested, map, enum),
-- otlp_traces.bin and test_all_types_proto3.bin, called from Lua and from
-- the C API, against the C++ library's generated code built in this same
-- run (Debian's protoc + libprotobuf-dev, compiled here by g++, never by
-- the main build).
--   build/release/protocall bench/codec_bench.lua [--callgrind] [--quick]
-- With --callgrind, instruction counts per operation are also taken for
-- the Lua cases (harness), the C API and the C++ baseline (valgrind runs
-- of N and 2N operations; the difference over N).
local H = require "bench.harness"
local pc = require "protocall"

local CORPUS = "../shared/corpus"
local OTLP = CORPUS .. "/payloads/opentelemetry/otlp_traces.bin"
local TAT3 = CORPUS .. "/payloads/protobuf/test_all_types_proto3.bin"
local PROTOS = CORPUS .. "/protos"

local function has(flag)
  for _, a in ipairs(arg or {}) do if a == flag then return true end end
  return false
end

local function sh(cmd)
  local ok = os.execute(cmd)
  if not ok then error("bench: command failed: " .. cmd) end
end

local function read(path)
  local f = assert(io.open(path, "rb"), path)
  local s = f:read("a")
  f:close()
  return s
end

-- The build directory for the baselines (kept between runs of the bench,
-- rebuilt every run: "built in the same run").
local OUT = "build/bench-codec"

local only = nil
for i, a in ipairs(arg or {}) do if a == "--only" then only = arg[i + 1] end end

if not only then
  if not io.open(OTLP, "rb") then
    print("codec_bench: corpus not found at " .. CORPUS .. "; skipped")
    return
  end
  sh("mkdir -p " .. OUT)
  local otel = PROTOS .. "/opentelemetry"
  local otlp_files = "opentelemetry/proto/common/v1/common.proto opentelemetry/proto/resource/v1/resource.proto "
    .. "opentelemetry/proto/trace/v1/trace.proto opentelemetry/proto/collector/trace/v1/trace_service.proto"
  sh(("protoc -I bench/codec --cpp_out=%s bench/codec/point.proto"):format(OUT))
  sh(('P="$(pwd)" && cd %s && protoc -I . --cpp_out="$P/%s" %s'):format(otel, OUT, otlp_files))
  sh(("protoc -I %s/protobuf -I /usr/include --cpp_out=%s %s/protobuf/google/protobuf/test_messages_proto3.proto")
    :format(PROTOS, OUT, PROTOS))
  sh(("protoc -I bench/codec -I %s -I %s/protobuf -I /usr/include --include_imports -o %s/set.pb point.proto "
    .. "opentelemetry/proto/collector/trace/v1/trace_service.proto google/protobuf/test_messages_proto3.proto")
    :format(otel, PROTOS, OUT))
  io.stderr:write("codec_bench: compiling the C++ baseline (about half a minute)...\n")
  sh(("g++ -O2 -std=c++17 -I %s bench/codec/codec_cpp.cc $(find %s -name '*.pb.cc') -lprotobuf -o %s/codec_cpp")
    :format(OUT, OUT, OUT))
  sh(("gcc -O2 -std=c11 -I core bench/codec/codec_c.c build/release/libprotocall_core.a -o %s/codec_c")
    :format(OUT))
end

local CASES = {
  { name = "point", type = "bench.Point" },
  { name = "rich", type = "bench.Rich" },
  { name = "otlp_traces", type = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest", file = OTLP },
  { name = "test_all_types_proto3", type = "protobuf_test_messages.proto3.TestAllTypesProto3", file = TAT3 },
}

-- Native figures: "case decode_ns encode_ns [bytes]" lines.
local function native(cmd)
  local res = {}
  local p = assert(io.popen(cmd))
  for line in p:lines() do
    local name, d, e = line:match("^(%S+) (%S+) (%S+)")
    if name then res[name] = { decode = tonumber(d), encode = tonumber(e) } end
  end
  p:close()
  return res
end

local cpp_cmd = ("%s/codec_cpp %s %s %s"):format(OUT, OUT, OTLP, TAT3)
local c_cmd = ("%s/codec_c %s/set.pb %s %s %s"):format(OUT, OUT, OUT, OTLP, TAT3)
local cpp, capi
if not only then
  cpp = native(cpp_cmd) -- also writes point.bin and rich.bin
  capi = native(c_cmd)
end

local pool = pc.pool()
assert(pool:load_descriptor_set(read(OUT .. "/set.pb")))
for _, c in ipairs(CASES) do
  c.T = assert(pool:type(c.type))
  c.bytes = read(c.file or (OUT .. "/" .. c.name .. ".bin"))
  c.msg = assert(pc.decode(c.T, c.bytes))
end

-- Operations per callgrind run (the run is repeated with twice as many).
local CALLGRIND_ITERS = { point = 20000, rich = 2000, otlp_traces = 100, test_all_types_proto3 = 100 }

local spec_cases = {}
for _, c in ipairs(CASES) do
  local T, bytes, msg = c.T, c.bytes, c.msg
  spec_cases[#spec_cases + 1] = {
    name = "decode " .. c.name,
    callgrind_iters = CALLGRIND_ITERS[c.name],
    fn = function(n)
      local decode = pc.decode
      for _ = 1, n do decode(T, bytes) end
    end,
  }
  spec_cases[#spec_cases + 1] = {
    name = "encode " .. c.name,
    callgrind_iters = CALLGRIND_ITERS[c.name],
    fn = function(n)
      local encode = pc.encode
      for _ = 1, n do encode(msg) end
    end,
  }
end

local results = H.run {
  title = "wire codec called from Lua (pc.decode to a message, pc.encode to a string)",
  baseline = {
    name = "bare Lua call",
    fn = function(n)
      local f = function(x) return x end
      for i = 1, n do f(i) end
    end,
  },
  cases = spec_cases,
}
if only then return end

local function instr(cmd, case, op)
  local function total(n)
    local out = os.tmpname()
    local ok = os.execute(("valgrind --tool=callgrind --callgrind-out-file=%s %s %s %s %d >/dev/null 2>&1")
      :format(out, cmd, case, op, n))
    local t
    local f = io.open(out, "r")
    if f then
      for line in f:lines() do
        local v = line:match("^summary:%s+(%d+)") or line:match("^totals:%s+(%d+)")
        if v then t = tonumber(v) end
      end
      f:close()
    end
    os.remove(out)
    return ok and t or nil
  end
  local n = CALLGRIND_ITERS[case]
  local a, b = total(n), total(2 * n)
  return a and b and (b - a) / n or nil
end

local callgrind = has("--callgrind")
local rows = {}
for _, c in ipairs(CASES) do
  for _, op in ipairs { "decode", "encode" } do
    local lua_ns = results[op .. " " .. c.name].ns
    local cpp_ns, c_ns = cpp[c.name][op], capi[c.name][op]
    local mbs = #c.bytes / lua_ns * 1e3
    local row = {
      name = ("%s %s: Lua vs C++ throughput"):format(op, c.name),
      value = cpp_ns / lua_ns, unit = "x",
    }
    if c.name == "otlp_traces" or c.name == "test_all_types_proto3" then
      row.goal = ">= 0.7x"
      row.ok = cpp_ns / lua_ns >= 0.7
    end
    rows[#rows + 1] = row
    rows[#rows + 1] = { name = ("%s %s: Lua"):format(op, c.name), value = lua_ns, unit = "ns",
      goal = c.name == "point" and (op == "decode" and "<= 117 ns (350/3)" or "<= 75 ns (225/3)") or
        ("%.0f MB/s"):format(mbs),
      ok = nil }
    if c.name == "point" then rows[#rows].ok = lua_ns <= (op == "decode" and 350 / 3 or 225 / 3) end
    rows[#rows + 1] = { name = ("%s %s: C API"):format(op, c.name), value = c_ns, unit = "ns",
      goal = ("C++ %.1f ns"):format(cpp_ns) }
    if callgrind then
      rows[#rows + 1] = { name = ("%s %s: C API instr/op"):format(op, c.name),
        value = instr(c_cmd, c.name, op), unit = "instr" }
      rows[#rows + 1] = { name = ("%s %s: C++ instr/op"):format(op, c.name),
        value = instr(cpp_cmd, c.name, op), unit = "instr" }
    end
  end
end
H.report("wire codec against the C++ library (generated code, same run)", rows)
