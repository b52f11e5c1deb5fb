-- protocall under LuaJIT against Lua 5.4 and against lua-protobuf under
-- LuaJIT, in one run:
--   make build build-luajit &&
--     LUA_CPATH='build/luajit/?.so;;' luajit bench/luajit/runtime_bench.lua [--quick] [--callgrind]
-- (`make bench` runs it). Rows:
--   * the memory of one {uint32 x = 1; uint32 y = 2; uint32 z = 3}
--     instance, everything counted: collectgarbage("count") before and
--     after making N of them (held in a table made beforehand), over N; as
--     an FFI struct (pc.ffi, lua/protocall/ffi/struct.lua: the goal row) and as a
--     message object;
--   * construct + encode + decode of that message under LuaJIT (the goal
--     rows with pc.ffi's struct, P{...} and P(x, y, z); and with message
--     objects, T{...}),
--     under Lua 5.4 (T{...}: the same loop in a lua5.4 child process
--     loading build/release's module: `lua5.4 bench/luajit/runtime_bench.lua
--     --child-cycle`) and with lua-protobuf under LuaJIT; each figure the
--     median of 5 processes on both runtimes (`luajit ... --child-struct`),
--     as a process's heap and traces move it by some 20%;
--   * decode of otlp_traces.bin and reading every field, as plain tables
--     with {table = true} against lua-protobuf's decode, each pair
--     interleaved (H.measure_pair): read by bench/walk.lua's reader
--     (generated code reading each field by its constant name, as
--     application code does: the goal row), by its walker (one function
--     interpreting a plan, as a generic serializer does; LuaJIT spends
--     some 10 us of each walk in side exits of its recursive traces,
--     whichever library made the tables), and not read at all. Every
--     reader is compiled once per library, so neither runs traces recorded
--     on the other's tables. As message objects too, of otlp_traces.bin
--     and of test_all_types_proto3.bin (the goal table's row, its pair
--     interleaved). With --callgrind also instructions per decode + read,
--     with {table = true} and as message objects (H.instructions:
--     valgrind runs of this script's loop, n and 2n times; the difference
--     over n).
-- lua-protobuf is built by this bench from ../shared/peers/lua-protobuf
-- into build/bench-luajit (never into the product); the corpus is
-- ../shared/corpus, as bench/codec_bench.lua finds it. Either missing: its
-- rows are skipped, saying so.
local H = require "bench.harness"
local sh, read = H.sh, H.read
local pc = require "protocall"

local quick, child, child_otlp, child_struct, callgrind, only, iters = false, false, false, false, false, nil, nil
local args = arg or {}
local argn = 1
while args[argn] do
  local a = args[argn]
  if a == "--quick" then
    quick = true
  elseif a == "--child-cycle" then
    child = true
  elseif a == "--child-otlp" then
    child_otlp = true
  elseif a == "--child-struct" then
    child_struct = true
  elseif a == "--callgrind" then -- instructions per op of the otlp_traces rows
    callgrind = true
  elseif a == "--only" or a == "--iters" then -- H.instructions' child: one loop, n times
    if a == "--only" then only = args[argn + 1] else iters = tonumber(args[argn + 1]) end
    argn = argn + 1
  else
    error("runtime_bench.lua takes --quick and --callgrind (and --child-cycle, --child-otlp, --child-struct,"
      .. " --only NAME --iters N for its own child processes), not " .. a, 0)
  end
  argn = argn + 1
end

local Point = pc.message("bench.Point", { { "x", "uint32", 1 }, { "y", "uint32", 2 }, { "z", "uint32", 3 } })

-- construct + encode + decode, the same code on both runtimes: with
-- Point's messages, and under LuaJIT with its FFI struct.
local function cycle_of(T)
  return function(n)
    local encode, decode = pc.encode, pc.decode
    for i = 1, n do
      local m = T { x = i, y = i + 1, z = i + 2 }
      local d = decode(T, encode(m))
      if d.z ~= i + 2 then error("bad round trip") end
    end
  end
end
local cycle = cycle_of(Point)

if child then -- the Lua 5.4 process: prints ns per cycle
  io.write(string.format("%.3f\n", (H.measure(cycle, quick))))
  return
end
assert(rawget(_G, "jit"), "bench/luajit/runtime_bench.lua runs under luajit")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local OUT = "build/bench-luajit"
local CORPUS = "../shared/corpus"
local OTLP = CORPUS .. "/payloads/opentelemetry/otlp_traces.bin"
local OTEL = CORPUS .. "/protos/opentelemetry"
local OTLP_TYPE = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
local TAT3 = CORPUS .. "/payloads/protobuf/test_all_types_proto3.bin"
local TAT3_TYPE = "protobuf_test_messages.proto3.TestAllTypesProto3"
local PEER_SRC = "../shared/peers/lua-protobuf"
local have_corpus, have_peer = exists(OTLP) and exists(TAT3), exists(PEER_SRC .. "/pb.c")

-- The parent builds what its child processes load.
local parent = not (child_otlp or child_struct or only)
sh("mkdir -p " .. OUT)
-- One descriptor set for both libraries: bench.Point, and the OTLP types
-- when the corpus is there.
if parent then -- a child process loads the set its parent made
  if have_corpus then
    sh(("protoc -I bench/codec -I %s -I %s/protos/protobuf -I /usr/include --include_imports -o %s/set.pb "
        .. "point.proto opentelemetry/proto/collector/trace/v1/trace_service.proto "
        .. "google/protobuf/test_messages_proto3.proto"):format(OTEL, CORPUS, OUT))
  else
    sh(("protoc -I bench/codec -o %s/set.pb point.proto"):format(OUT))
  end
end
local pool = pc.pool()
assert(pool:load_descriptor_set(read(OUT .. "/set.pb")))

local pb
if have_peer then
  if parent then sh(("gcc -O2 -shared -fPIC -I/usr/include/luajit-2.1 %s/pb.c -o %s/pb.so"):format(PEER_SRC, OUT)) end
  package.cpath = OUT .. "/?.so;" .. package.cpath
  pb = require "pb"
  assert(pb.load(read(OUT .. "/set.pb")), "lua-protobuf: cannot load the descriptor set")
  pb.option "enum_as_value"
else
  print(("\nruntime_bench: lua-protobuf not found at %s; its rows are skipped"):format(PEER_SRC))
end

-- decode + read every field of otlp_traces: one reading plan per type (the
-- fields in declaration order, with how to read each), the same for both
-- libraries; with {table = true} and lua-protobuf, plain tables both. The
-- loops by how they read: "read" (W.reader), "walk" (W.walker), "none".
local T, bytes, W, plan, loops
if have_corpus then
  T = assert(pool:type(OTLP_TYPE))
  bytes = read(OTLP)
  W = require "bench.walk" -- every field read the same way for both libraries
  plan = W.plan_of(pool, T)
  -- n decodes of `decode(first, bytes, opts)`, each read `how`; compiled
  -- anew at each call, so each library's loop has traces of its own.
  local LOOP = "local decode, first, bytes, opts, read, plan = ... local c = 0\n"
    .. "return function(n) for _ = 1, n do %s end end"
  local BODY = { none = "decode(first, bytes, opts)", walk = "read(plan, decode(first, bytes, opts))",
                 read = "c = c + read(decode(first, bytes, opts))" }
  local function loop_of(how, decode, first, opts)
    local visit = how == "walk" and W.walker(pc.pairs) or W.reader(plan, pc.pairs)
    return assert(load(LOOP:format(BODY[how]), "=runtime_bench.loop"))(decode, first, bytes, opts, visit, plan)
  end
  local function ours(how) return loop_of(how, pc.decode, T, { table = true }) end
  local function peer(how) return loop_of(how, pb and pb.decode, OTLP_TYPE, nil) end
  loops = { table = ours("read"), peer = peer("read"), ours = ours, peer_of = peer,
            objects = loop_of("read", pc.decode, T, nil) }
  -- test_all_types_proto3, the goal row's second message: as message
  -- objects and with lua-protobuf, read by its own reader.
  local T3 = assert(pool:type(TAT3_TYPE))
  local plan3, bytes3 = W.plan_of(pool, T3), read(TAT3)
  local function loop3(decode, first, opts)
    return assert(load(LOOP:format(BODY.read), "=runtime_bench.loop"))(decode, first, bytes3, opts,
                                                                       W.reader(plan3, pc.pairs), plan3)
  end
  loops.objects_tat3, loops.peer_tat3 = loop3(pc.decode, T3, nil), loop3(pb and pb.decode, TAT3_TYPE, nil)
end
if only then -- a child under callgrind (H.instructions): the loop alone
  local loop = loops[only]
  loop(math.min(iters, 50)) -- traces and the name plan made before both counts
  loop(iters)
  return
end
if child_otlp then -- a process of the goal's pair: prints ns per decode + read, ours then lua-protobuf's
  io.write(string.format("%.3f %.3f\n", H.measure_pair(loops.ours("read"), loops.peer_of("read"), quick)))
  return
end

-- Each row starts from no compiled traces (jit.flush), so what one row
-- recorded does not make side exits in the next.
local function measure(fn)
  jit.flush()
  return (H.measure(fn, quick))
end

-- construct + encode + decode under LuaJIT: pc.ffi's struct by P{...} and
-- by P(x, y, z) (the field values in declaration order, as ffi.new takes
-- initializers: no table to build and check), the message object by
-- T{...}, and lua-protobuf's tables when it was built.
local Struct = pc.ffi(Point)
local function positional(n)
  local encode, decode = pc.encode, pc.decode
  for i = 1, n do
    local d = decode(Struct, encode(Struct(i, i + 1, i + 2)))
    if d.z ~= i + 2 then error("bad round trip") end
  end
end
local function peer_cycle(n)
  local encode, decode = pb.encode, pb.decode
  for i = 1, n do
    local d = decode("bench.Point", encode("bench.Point", { x = i, y = i + 1, z = i + 2 }))
    if d.z ~= i + 2 then error("bad round trip") end
  end
end
local CYCLES = { cycle_of(Struct), positional, cycle, pb and peer_cycle or nil }
if child_struct then -- a process of the cycle rows: prints ns per cycle of each of CYCLES
  local out = {}
  for k, fn in ipairs(CYCLES) do out[k] = string.format("%.3f", measure(fn)) end
  io.write(table.concat(out, " "), "\n")
  return
end

-- Memory of one instance: N made into a table that exists beforehand.
local function per_instance(make)
  local N = 100000
  local keep = {}
  for i = 1, N do keep[i] = false end
  collectgarbage()
  collectgarbage()
  local before = collectgarbage("count")
  for i = 1, N do keep[i] = make(i) end
  collectgarbage()
  collectgarbage()
  local size = (collectgarbage("count") - before) * 1024 / N
  assert(#keep == N)
  return size
end

local rows = {}
local function row(name, value, unit, goal, ok, key)
  rows[#rows + 1] = { name = name, value = value, unit = unit, goal = goal, ok = ok, key = key }
end

local struct_bytes = per_instance(function(i) return Struct { x = i, y = i, z = i } end)
row("bench.Point pc.ffi struct, all memory", struct_bytes, "B", "<= 32 B", struct_bytes <= 32)
row("bench.Point message object, all memory", per_instance(function(i) return Point { x = i, y = i, z = i } end), "B",
    nil, nil, "instance_luajit")
row("plain table {x=, y=, z=} (for scale)", per_instance(function(i) return { x = i, y = i, z = i } end), "B")

-- The figures each of PROCESSES child processes printed, a list of numbers
-- per process, or nil when a child failed. Each process compiles its own
-- traces and lays out its own heap, which moves a figure more from process
-- to process (some 20%) than from run to run within one.
local PROCESSES = quick and 1 or 5
local function children(command)
  local runs = {}
  for k = 1, PROCESSES do
    local p = io.popen(command .. (quick and " --quick" or ""))
    local out = p:read("*a")
    p:close()
    local figures = {}
    for v in out:gmatch("%S+") do
      if not tonumber(v) then return nil end
      figures[#figures + 1] = tonumber(v)
    end
    if #figures == 0 then return nil end
    runs[k] = figures
  end
  return runs
end
-- The k-th figure of each process, sorted; its median.
local function column(runs, k)
  local list = {}
  for i, r in ipairs(runs) do list[i] = r[k] end
  table.sort(list)
  return list
end
local function median(list) return list[math.floor((#list + 1) / 2)] end
-- "the median of 5 processes" (what of: "lua5.4 " or "").
local function median_of(n, what) return ("median of %d %sprocess%s"):format(n, what, n == 1 and "" or "es") end

local cycles = children(("%s bench/luajit/runtime_bench.lua --child-struct"):format(arg[-1] or "luajit"))
local jit_cycle = {} -- ns per cycle of each of CYCLES: the median of the processes
if cycles and #cycles[1] == #CYCLES then
  for k = 1, #CYCLES do jit_cycle[k] = median(column(cycles, k)) end
else
  cycles = nil
  print("\nruntime_bench: a --child-struct process failed; the cycle rows are this process's")
  for k, fn in ipairs(CYCLES) do jit_cycle[k] = measure(fn) end
end
local jit_ns, positional_ns, object_ns, peer_ns = jit_cycle[1], jit_cycle[2], jit_cycle[3], jit_cycle[4]
local of = cycles and " (" .. median_of(#cycles, "") .. ")" or ""
row("construct+encode+decode, LuaJIT pc.ffi struct P{...}" .. of, jit_ns, "ns")
if cycles then
  local list = column(cycles, 1)
  row("  the lowest and the highest of them", list[1], "ns", ("%.0f ns"):format(list[#list]))
end
row("construct+encode+decode, struct P(x, y, z)" .. of, positional_ns, "ns")
row("construct+encode+decode, LuaJIT message object" .. of, object_ns, "ns")

local lua54 = children("LUA_CPATH='build/release/?.so' lua5.4 bench/luajit/runtime_bench.lua --child-cycle")
local lua54_ns = lua54 and median(column(lua54, 1))
if lua54_ns then
  row("construct+encode+decode, Lua 5.4 (" .. median_of(#lua54, "lua5.4 ") .. ")", lua54_ns, "ns")
  row("LuaJIT struct / Lua 5.4", jit_ns / lua54_ns, "x", "<= 0.5x (2x faster)", jit_ns / lua54_ns <= 0.5)
  row("LuaJIT struct P(x, y, z) / Lua 5.4", positional_ns / lua54_ns, "x", "<= 0.5x (2x faster)",
      positional_ns / lua54_ns <= 0.5)
  row("LuaJIT message object / Lua 5.4", object_ns / lua54_ns, "x") -- informational
else
  print("\nruntime_bench: the lua5.4 child (build/release's module) failed; its row is skipped")
end
if pb then
  row("construct+encode+decode, lua-protobuf LuaJIT" .. of, peer_ns, "ns")
  -- Ours against lua-protobuf in the same process: the median of those ratios.
  local ratios = {}
  for i, r in ipairs(cycles or { jit_cycle }) do ratios[i] = r[1] / r[4] end
  table.sort(ratios)
  local struct_peer = median(ratios)
  row("protocall struct / lua-protobuf (LuaJIT)", struct_peer, "x", "<= 0.5x", struct_peer <= 0.5)
  row("protocall message object / lua-protobuf (LuaJIT)", object_ns / peer_ns, "x") -- informational
end

if have_corpus then
  local decode, reader = pc.decode, W.reader(plan, pc.pairs)
  local c = 0
  local ours = measure(function(n) for _ = 1, n do c = c + reader(decode(T, bytes)) end end)
  row("otlp_traces decode+read, protocall LuaJIT", ours / 1e3, "us")
  if pb then
    -- Each pair interleaved: both sides meet the same load (H.measure_pair).
    local function pair(how)
      jit.flush()
      return H.measure_pair(loops.ours(how), loops.peer_of(how), quick)
    end
    -- The goal's pair in PROCESSES processes of its own: the median of their ratios.
    local runs = children(("%s bench/luajit/runtime_bench.lua --child-otlp"):format(arg[-1] or "luajit"))
    local ratios = {}
    for k, r in ipairs(runs or {}) do ratios[k] = r[1] / r[2] end
    table.sort(ratios)
    local tables, peer = pair("read")
    row("otlp_traces decode{table}+read, protocall LuaJIT", tables / 1e3, "us")
    row("otlp_traces decode+read, lua-protobuf LuaJIT", peer / 1e3, "us")
    -- The goal is the plain tables' row: what lua-protobuf gives, read the same way. Message
    -- objects are read through the C API, which LuaJIT does not compile (informational).
    row("decode+read (message objects) / lua-protobuf", ours / peer, "x", nil, nil, "luajit_objects_read")
    jit.flush()
    local objects3, peer3 = H.measure_pair(loops.objects_tat3, loops.peer_tat3, quick)
    row("test_all_types_proto3 decode+read (message objects), protocall LuaJIT", objects3 / 1e3, "us")
    row("test_all_types_proto3 decode+read, lua-protobuf LuaJIT", peer3 / 1e3, "us")
    row("test_all_types_proto3 decode+read (message objects) / lua-protobuf", objects3 / peer3, "x", nil, nil,
        "luajit_objects_read")
    row("decode{table}+read / lua-protobuf, this process", tables / peer, "x")
    if #ratios > 0 then
      local m = median(ratios)
      row("decode{table}+read / lua-protobuf, " .. median_of(#ratios, ""), m, "x", "<= 0.5x", m <= 0.5)
      row("  the lowest and the highest of them", ratios[1], "x", ("%.3f x"):format(ratios[#ratios]))
    else
      print("\nruntime_bench: a --child-otlp process failed; the goal row is this process's")
      row("decode{table}+read / lua-protobuf", tables / peer, "x", "<= 0.5x", tables / peer <= 0.5)
    end
    local walked, peer_walked = pair("walk")
    row("decode{table}+walk / lua-protobuf (the walker)", walked / peer_walked, "x")
    local alone, peer_alone = pair("none")
    row("decode{table} / lua-protobuf decode (no reading)", alone / peer_alone, "x")
    if callgrind then -- instructions per decode + read: counts of n and 2n runs, differenced
      local ci, cp = H.instructions("table", 500), H.instructions("peer", 500)
      if ci and cp then
        row("otlp decode{table}+read, callgrind", ci / 1e3, "k instr")
        row("otlp lua-protobuf decode+read, callgrind", cp / 1e3, "k instr")
        row("decode{table}+read / lua-protobuf, callgrind", ci / cp, "x")
        local co = H.instructions("objects", 500)
        if co then
          row("otlp decode+read (message objects), callgrind", co / 1e3, "k instr")
          row("decode+read (message objects) / lua-protobuf, callgrind", co / cp, "x")
        end
        local co3, cp3 = H.instructions("objects_tat3", 100), H.instructions("peer_tat3", 100)
        if co3 and cp3 then
          row("test_all_types_proto3 decode+read (message objects), callgrind", co3 / 1e3, "k instr")
          row("test_all_types_proto3 lua-protobuf decode+read, callgrind", cp3 / 1e3, "k instr")
          row("test_all_types_proto3 decode+read (message objects) / lua-protobuf, callgrind", co3 / cp3, "x")
        end
      else
        print("\nruntime_bench: valgrind failed; the instruction rows are skipped")
      end
    end
  else
    local tables = measure(loops.table)
    row("otlp_traces decode{table}+read, protocall LuaJIT", tables / 1e3, "us")
  end
else
  print(("\nruntime_bench: corpus not found at %s; the otlp_traces rows are skipped"):format(CORPUS))
end

H.report("LuaJIT: memory, construct+encode+decode against Lua 5.4 and lua-protobuf, otlp_traces", rows)
