-- Wire codec speed: encode and decode of Point (3 x uint32), a
-- rich message (strings, bytes, packed ints, nested, map, enum),
-- otlp_traces.bin and test_all_types_proto3.bin, called from Lua and from
-- the C API, against the C++ library's generated code built in this same
-- run (Debian's protoc + libprotobuf-dev, compiled here by g++, never by
-- the main build).
--   build/release/protocall bench/codec_bench.lua [--callgrind] [--quick] [--rows OP]
-- --rows OP runs only the rows of one operation of the user's path
-- against lua-protobuf (OP: decode, encode, decode+read, table->encode,
-- decode->table), without the C and C++ baselines (not compiled).
-- With --callgrind, instruction counts per operation are also taken for
-- the Lua cases (harness), the C API and the C++ baseline (valgrind runs
-- of N and 2N operations; the difference over N).
-- The corpus (otlp_traces.bin, test_all_types_proto3.bin and the protos of
-- their types) is ../shared/corpus, or the folder PROTOCALL_BENCH_CORPUS
-- names. Without it the small message's rows against lua-protobuf still
-- run (bench.Named, declared in bench/codec/point.proto); the rows of the
-- two payloads and the C++ and C API baselines (built from the corpus's
-- protos) are skipped, saying so.
local H = require "bench.harness"
local sh, read = H.sh, H.read
local pc = require "protocall"

local CORPUS = os.getenv("PROTOCALL_BENCH_CORPUS") or "../shared/corpus"
local OTLP = CORPUS .. "/payloads/opentelemetry/otlp_traces.bin"
local TAT3 = CORPUS .. "/payloads/protobuf/test_all_types_proto3.bin"
local PROTOS = CORPUS .. "/protos"
local corpus_file = io.open(OTLP, "rb")
if corpus_file then corpus_file:close() end
local SKIPPED = not corpus_file and "corpus not found at " .. CORPUS

local function has(flag)
  for _, a in ipairs(arg or {}) do if a == flag then return true end end
  return false
end

-- The build directory for the baselines (kept between runs of the bench,
-- rebuilt every run: "built in the same run").
local OUT = "build/bench-codec"
-- The descriptor set of the bench's types (without the corpus: point.proto's).
local SET = OUT .. (SKIPPED and "/set_point.pb" or "/set.pb")

local only, row_op = nil, nil
for i, a in ipairs(arg or {}) do
  if a == "--only" then only = arg[i + 1] end
  if a == "--rows" then row_op = arg[i + 1] end
end
local ROW_OPS = { decode = true, encode = true, ["decode+read"] = true, ["table->encode"] = true,
                  ["decode->table"] = true }
if row_op and not ROW_OPS[row_op] then
  io.stderr:write(("codec_bench: --rows takes decode, encode, decode+read, table->encode or decode->table,"
                   .. " not %q\n"):format(row_op))
  os.exit(2)
end

if not only and SKIPPED then
  print(("codec_bench: %s (PROTOCALL_BENCH_CORPUS=DIR names it); only the small message's rows run")
    :format(SKIPPED))
  sh("mkdir -p " .. OUT)
  sh(("protoc -I bench/codec -o %s point.proto"):format(SET))
elseif not only then
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
  if not row_op then
    io.stderr:write("codec_bench: compiling the C++ baseline (about half a minute)...\n")
    sh(("g++ -O2 -std=c++17 -I %s bench/codec/codec_cpp.cc $(find %s -name '*.pb.cc') -lprotobuf -o %s/codec_cpp")
      :format(OUT, OUT, OUT))
    sh(("gcc -O2 -std=c11 -I core bench/codec/codec_c.c build/release/libprotocall_core.a -o %s/codec_c")
      :format(OUT))
  end
end

local CASES = {
  { name = "point", type = "bench.Point" },
  { name = "rich", type = "bench.Rich" },
  { name = "otlp_traces", type = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest", file = OTLP },
  { name = "test_all_types_proto3", type = "protobuf_test_messages.proto3.TestAllTypesProto3", file = TAT3 },
}
-- The C++ and C API baselines and the Lua rows beside them: with the
-- corpus, and not with --rows.
local with_native = not SKIPPED and not row_op
if SKIPPED then CASES = { CASES[1], CASES[2] } end

-- Native figures: "case decode_ns encode_ns [bytes]" lines.
local function native(cmd)
  local res = {}
  local p = assert(io.popen(cmd))
  for line in p:lines() do
    local name, d, e, fresh = line:match("^(%S+) (%S+) (%S+) ?%S* ?(%S*)")
    if name then res[name] = { decode = tonumber(d), encode = tonumber(e), decode_fresh = tonumber(fresh) } end
  end
  p:close()
  return res
end

local cpp_cmd = ("%s/codec_cpp %s %s %s"):format(OUT, OUT, OTLP, TAT3)
local c_cmd = ("%s/codec_c %s/set.pb %s %s %s"):format(OUT, OUT, OUT, OTLP, TAT3)
local cpp, capi
if not only and with_native then
  cpp = native(cpp_cmd) -- also writes point.bin and rich.bin
  capi = native(c_cmd)
end

local pool = pc.pool()
assert(pool:load_descriptor_set(read(SET)))
for _, c in ipairs(CASES) do
  c.T = assert(pool:type(c.type))
  local path = c.file or (OUT .. "/" .. c.name .. ".bin")
  if c.file or io.open(path, "rb") then -- point.bin, rich.bin: written by the C++ baseline (not with --rows)
    c.bytes = read(path)
    c.msg = assert(pc.decode(c.T, c.bytes))
  end
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

-- The user's path against lua-protobuf (built by this bench from
-- ../shared/peers/lua-protobuf into OUT/peers, never linked into the
-- product): for otlp_traces, test_all_types_proto3 and a small message
-- with a string, decode then read every field, Lua table -> bytes, and
-- bytes -> plain Lua tables. Both libraries get the same tables (the
-- shape pc.to_table returns: enums as numbers, so lua-protobuf is set to
-- enum_as_value; its other options are its defaults).
local PEER_SRC = "../shared/peers/lua-protobuf"
local PEER_OUT = OUT .. "/peers"
local peer_present = io.open(PEER_SRC .. "/pb.c", "rb") ~= nil
if peer_present and not only then
  sh(("mkdir -p %s && gcc -O2 -shared -fPIC -I/usr/include/lua5.4 %s/pb.c -o %s/pb.so")
    :format(PEER_OUT, PEER_SRC, PEER_OUT))
end
local pb
if peer_present then
  package.cpath = PEER_OUT .. "/?.so;" .. package.cpath
  pb = require "pb"
  assert(pb.load(read(SET)), "lua-protobuf: cannot load the descriptor set")
  pb.option "enum_as_value"
end

local Named = assert(pool:type("bench.Named"))
local USER_CASES = {}
for _, c in ipairs(CASES) do -- the corpus's payloads
  if c.file then
    USER_CASES[#USER_CASES + 1] = { name = c.name, T = c.T, type = c.type, bytes = c.bytes, iters = 100 }
  end
end
USER_CASES[#USER_CASES + 1] = { name = "small", T = Named, type = "bench.Named",
  bytes = pc.encode(Named { name = "checkout-service", id = 42 }), iters = 20000 }

-- Every field read the same way for both libraries (bench/walk.lua).
local W = require "bench.walk"
local walk = W.walker(pairs)
local function plan_of(T) return W.plan_of(pool, T) end

local user_cases = {}
for _, c in ipairs(USER_CASES) do
  local T, bytes, name, plan = c.T, c.bytes, c.type, plan_of(c.T)
  local tbl = pc.to_table(pc.decode(T, bytes))
  local function add(op, fn, peer_fn)
    if row_op and op ~= row_op then return end
    user_cases[#user_cases + 1] = { name = op .. " " .. c.name, callgrind_iters = c.iters, fn = fn }
    if pb then
      user_cases[#user_cases + 1] = { name = "lua-protobuf " .. op .. " " .. c.name, callgrind_iters = c.iters,
        fn = peer_fn }
    end
  end
  add("decode", function(n)
    local decode = pc.decode
    for _ = 1, n do decode(T, bytes) end
  end, function(n)
    local decode = pb.decode
    for _ = 1, n do decode(name, bytes) end
  end)
  local msg = pc.decode(T, bytes)
  add("encode", function(n)
    local encode = pc.encode
    for _ = 1, n do encode(msg) end
  end, function(n)
    local encode = pb.encode
    for _ = 1, n do encode(name, tbl) end
  end)
  add("decode+read", function(n)
    local decode = pc.decode
    for _ = 1, n do walk(plan, decode(T, bytes)) end
  end, function(n)
    local decode = pb.decode
    for _ = 1, n do walk(plan, decode(name, bytes)) end
  end)
  if not row_op then
    user_cases[#user_cases + 1] = { name = "decode{table}+read " .. c.name, callgrind_iters = c.iters,
      fn = function(n)
        local decode, opts = pc.decode, { table = true }
        for _ = 1, n do walk(plan, decode(T, bytes, opts)) end
      end }
    user_cases[#user_cases + 1] = { name = "T{...}->encode " .. c.name, callgrind_iters = c.iters,
      fn = function(n)
        local encode = pc.encode
        for _ = 1, n do encode(T(tbl)) end
      end }
  end
  add("table->encode", function(n)
    local encode = pc.encode
    for _ = 1, n do encode(T, tbl) end
  end, function(n)
    local encode = pb.encode
    for _ = 1, n do encode(name, tbl) end
  end)
  add("decode->table", function(n)
    local decode = pc.decode
    local opts = { table = true }
    for _ = 1, n do decode(T, bytes, opts) end
  end, function(n)
    local decode = pb.decode
    for _ = 1, n do decode(name, bytes) end
  end)
end

if only then -- a child of --callgrind running one of the user's-path cases
  local iters = 1000
  for i, a in ipairs(arg) do if a == "--iters" then iters = tonumber(arg[i + 1]) end end
  for _, c in ipairs(user_cases) do
    if c.name == only then c.fn(iters) return end
  end
end

-- (A child of --callgrind runs the baseline here: only = "bare Lua call".)
local results = (with_native or only) and H.run {
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
  local function total(n) return H.callgrind(("%s %s %s %d"):format(cmd, case, op, n)) end
  local n = CALLGRIND_ITERS[case]
  local a, b = total(n), total(2 * n)
  return a and b and (b - a) / n or nil
end

local callgrind = has("--callgrind")
local rows = {}
for _, c in ipairs(with_native and CASES or {}) do
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
    local fresh_ns = op == "decode" and cpp[c.name].decode_fresh
    if fresh_ns then -- the C++ library on a new Arena per message, as a server decodes requests
      rows[#rows + 1] = { name = ("decode %s: Lua vs C++ with a fresh arena"):format(c.name),
        value = fresh_ns / lua_ns, unit = "x", goal = ("C++ %.1f ns"):format(fresh_ns) }
    end
    if callgrind then
      local c_instr, cpp_instr = instr(c_cmd, c.name, op), instr(cpp_cmd, c.name, op)
      rows[#rows + 1] = { name = ("%s %s: C API instr/op"):format(op, c.name),
        value = c_instr, unit = "instr" }
      rows[#rows + 1] = { name = ("%s %s: C++ instr/op"):format(op, c.name),
        value = cpp_instr, unit = "instr" }
      if c_instr and cpp_instr and (c.name == "otlp_traces" or c.name == "test_all_types_proto3") then
        rows[#rows + 1] = { name = ("%s %s: C++ / C API instructions"):format(op, c.name),
          value = cpp_instr / c_instr, unit = "x", goal = ">= 1.0x", ok = cpp_instr / c_instr >= 1.0 }
      end
      if fresh_ns then
        rows[#rows + 1] = { name = ("decode %s: C++ fresh arena instr/op"):format(c.name),
          value = instr(cpp_cmd, c.name, "decode_fresh"), unit = "instr" }
      end
    end
  end
end
if with_native then H.report("wire codec against the C++ library (generated code, same run)", rows) end
if SKIPPED and not row_op then
  print(("\n## wire codec against the C++ library: skipped (%s: the C++ and C API baselines are built from its "
    .. "protos)"):format(SKIPPED))
end

local user = H.run {
  title = "the user's path against lua-protobuf (same tables, same walk)",
  baseline = {
    name = "bare Lua call",
    fn = function(n)
      local f = function(x) return x end
      for i = 1, n do f(i) end
    end,
  },
  cases = user_cases,
}
local function say_skipped()
  if not SKIPPED then return end
  print(("\ncodec_bench: the otlp_traces and test_all_types_proto3 rows are skipped (%s)"):format(SKIPPED))
end
if not pb then
  print(("\ncodec_bench: lua-protobuf not found at %s; its rows are skipped"):format(PEER_SRC))
  say_skipped()
  return
end
-- Goals: instructions against lua-protobuf when --callgrind gives them,
-- else wall-clock time. The rows that are rows of the goal table `make
-- bench` ends with (those with a key: decode+read, table->encode and
-- T{...}->encode of otlp_traces and test_all_types_proto3) take their goals
-- from bench/goal_table.lua, the table bench/goals.lua prints; the others
-- keep the codec bench's own (GOALS).
local TABLE_GOALS = {}
for _, g in ipairs(require "bench.goal_table") do TABLE_GOALS[g.key] = g.max end
local GOALS = {
  ["decode+read"] = { small = 0.7 }, ["table->encode"] = { small = 0.7 }, ["decode->table"] = 0.8,
  decode = { small = 0.5 }, encode = { small = 0.5 }, ["T{...}->encode"] = { small = 1.5 },
}
-- The goal of row op, case c_name and key (nil: none), its text.
local function goal_of(op, c_name, key)
  if key then return TABLE_GOALS[key], ("<= %gx (goal table)"):format(TABLE_GOALS[key]) end
  local goal = GOALS[op]
  if type(goal) == "table" then goal = goal[c_name] end
  return goal, goal and ("<= %gx"):format(goal) or ""
end
local ratio_rows = {}
for _, c in ipairs(USER_CASES) do
  local ops = row_op and { row_op } or { "decode", "encode", "decode+read", "table->encode", "decode->table" }
  for _, op in ipairs(ops) do
    local a, b = user[op .. " " .. c.name], user["lua-protobuf " .. op .. " " .. c.name]
    local by_instr = a.instructions and b.instructions
    local ratio = by_instr and a.instructions / b.instructions or a.ns / b.ns
    local key = c.name ~= "small" and (op == "decode+read" and "lua54_objects_read"
      or op == "table->encode" and "table_encode") or nil
    local goal, goal_text = goal_of(op, c.name, key)
    ratio_rows[#ratio_rows + 1] = {
      name = ("%s %s / lua-protobuf"):format(op, c.name),
      value = ratio, unit = by_instr and "x instr" or "x time", goal = goal_text, key = key,
    }
    if goal then ratio_rows[#ratio_rows].ok = ratio <= goal end
  end
  -- Informational: the same walk over pc.decode(T, bytes, {table = true}),
  -- and building T{...} then encoding against the direct table encode.
  if not row_op then
    local a, b = user["decode{table}+read " .. c.name], user["lua-protobuf decode+read " .. c.name]
    local by_instr = a.instructions and b.instructions
    ratio_rows[#ratio_rows + 1] = {
      name = ("decode{table}+read %s / lua-protobuf decode+read"):format(c.name),
      value = by_instr and a.instructions / b.instructions or a.ns / b.ns, unit = by_instr and "x instr" or "x time",
    }
    local t, d = user["T{...}->encode " .. c.name], user["table->encode " .. c.name]
    by_instr = t.instructions and d.instructions
    local key = c.name ~= "small" and "tctor_encode" or nil
    local goal, goal_text = goal_of("T{...}->encode", c.name, key)
    local ratio = by_instr and t.instructions / d.instructions or t.ns / d.ns
    ratio_rows[#ratio_rows + 1] = {
      name = ("T{...}->encode %s / table->encode"):format(c.name),
      value = ratio, unit = by_instr and "x instr" or "x time", goal = goal_text, key = key, ok = ratio <= goal,
    }
  end
end
H.report("the user's path: protocall against lua-protobuf", ratio_rows)
say_skipped()
