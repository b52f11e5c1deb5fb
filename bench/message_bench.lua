-- Slotted messages: memory per instance, field reads, construction
-- and declaration, for {uint32 foo = 1; uint32 bar = 2; uint32 baz = 3}.
--   build/release/protocall bench/message_bench.lua [--quick] [--callgrind]
-- Memory figures run in child processes (one per case, so the process's
-- RSS is not muddied by another case's freed memory): the larger of the
-- collector's count and the RSS growth, divided by the instances kept.
-- Next to them, malloc's own count of bytes in use and held free (glibc):
-- when instances are made by T{...} in a loop, the argument tables die
-- between the kept blocks, and the RSS keeps the holes they leave at the
-- collector's peak (pause 200: the heap grows to about twice the live data
-- before a cycle frees them). That free space is reusable by the process
-- but is not returned to the system; the rows say which part is which.
-- Decoded trees: the collector does not count arena memory (allocated
-- through the state's allocator directly, paced by lpc_pacearena), so
-- their figure is the larger of collector + arena bytes and the RSS.
local H = require "bench.harness"
local pc = require "protocall"
local core = require "protocall.core"

local function uint32_fields(k)
  local names = { "foo", "bar", "baz" }
  local fields = {}
  for i = 1, k do fields[i] = { names[i] or ("f" .. i), "uint32", i } end
  return fields
end

local Three = pc.message("bench.Three", uint32_fields(3))

-- Child mode: `--mem CASE` keeps N instances and prints bytes per instance:
-- the larger of the collector's count and the RSS growth, then each of
-- them, then malloc's bytes in use and held free (glibc's mallinfo2,
-- chunk headers included; "-" elsewhere).
local MEM_N = 200000
local ARGS = { foo = 1, bar = 2, baz = 3 }
local mem_cases = {
  plain_table = function() return { foo = 1, bar = 2, baz = 3 } end,
  T3 = function()
    local m = Three()
    m.foo, m.bar, m.baz = 1, 2, 3
    return m
  end,
  T3_args = function() return Three(ARGS) end,
  T3_ctor = function() return Three { foo = 1, bar = 2, baz = 3 } end,
  T3_ctor_p100 = function() return Three { foo = 1, bar = 2, baz = 3 } end,
}
local mem_setup = { T3_ctor_p100 = function() collectgarbage("incremental", 100) end }
-- One uint64 field: a 16 B block (type word + slot), so a 48 B userdata, the
-- size of the goal; glibc's malloc hands any request of 41-56 B a 64 B chunk.
local One64 = pc.message("bench.One64", { { "foo", "uint64", 1 } })
mem_cases.one64 = function() return One64() end
for _, k in ipairs { 0, 3, 5, 10, 50 } do
  local T = pc.message("bench.F" .. k, uint32_fields(k))
  mem_cases["fields" .. k] = function() return T() end
end

local function heap()
  local used, free = core._heap_stats()
  return used or 0, free or 0
end

-- Keeps n objects made by make(i); returns per object: collector count
-- growth, RSS growth, malloc in-use growth, malloc free growth, and the
-- sum of extra(obj) (memory outside the collector's count).
local function measure_kept(n, make, extra)
  local keep = {}
  for i = 1, n do keep[i] = false end -- the list's own memory first
  collectgarbage()
  collectgarbage()
  local count0, rss0 = collectgarbage("count") * 1024, H.rss() or 0
  local used0, free0 = heap()
  local outside = 0
  for i = 1, n do
    keep[i] = make(i)
    if extra then outside = outside + extra(keep[i]) end
  end
  collectgarbage()
  collectgarbage()
  local count1, rss1 = collectgarbage("count") * 1024, H.rss() or 0
  local used1, free1 = heap()
  return (count1 - count0) / n, (rss1 - rss0) / n, (used1 - used0) / n, (free1 - free0) / n, outside / n
end

-- Decoded trees (`--mem tree:NAME`): KEEP_TREES decodes of one corpus
-- payload kept alive, each from its own copy of the bytes.
local CORPUS = "../shared/corpus"
local TREES = {
  otlp = { payload = "payloads/opentelemetry/otlp_traces.bin", project = "opentelemetry",
           proto = "opentelemetry/proto/collector/trace/v1/trace_service.proto",
           type = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest" },
  tat3 = { payload = "payloads/protobuf/test_all_types_proto3.bin", project = "protobuf",
           proto = "google/protobuf/test_messages_proto3.proto",
           type = "protobuf_test_messages.proto3.TestAllTypesProto3" },
}
local KEEP_TREES = 500

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function measure_tree(name)
  local t = TREES[name]
  local bytes = read_file(CORPUS .. "/" .. t.payload)
  if not bytes then return nil end
  local dirs = { CORPUS .. "/protos/" .. t.project, CORPUS .. "/protos/wkt" }
  local pool = pc.pool()
  assert(pool:load_file(dirs[1] .. "/" .. t.proto, { import_paths = dirs }))
  local T = assert(pool:type(t.type))
  assert(pc.decode(T, bytes)) -- warm the codec's caches outside the count
  local gc, rss, used, free, arena = measure_kept(KEEP_TREES, function()
    return assert(pc.decode(T, bytes:sub(1)))
  end, core.arena_size)
  local per = 1 / #bytes
  return math.max(gc + arena, rss) * per, gc * per, rss * per, used * per, free * per, arena * per, #bytes
end

for i = 1, #arg do
  if arg[i] == "--mem" then
    local case = arg[i + 1]
    local tree = case:match("^tree:(.*)$")
    if tree then
      local all, gc, rss, used, free, arena, size = measure_tree(tree)
      if not all then print("absent") return end
      print(string.format("%.2f %.2f %.2f %.2f %.2f %.2f %d", all, gc, rss, used, free, arena, size))
      return
    end
    if mem_setup[case] then mem_setup[case]() end
    local gc, rss, used, free = measure_kept(MEM_N, mem_cases[case])
    print(string.format("%.1f %.1f %.1f %.1f %.1f", math.max(gc, rss), gc, rss, used, free))
    return
  end
end

local function child_mem(case)
  local cmd = string.format("%s %s --mem %s", arg[-1] or "protocall", arg[0], case)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  local v = {}
  for x in out:gmatch("%S+") do v[#v + 1] = tonumber(x) or x end
  return table.unpack(v)
end

local only = false
for i = 1, #arg do only = only or arg[i] == "--only" end

local function B(x) return string.format("%d", math.floor(x + 0.5)) end

if not only then
  local rows = {}
  local plain = child_mem("plain_table")
  rows[#rows + 1] = { name = "plain Lua table {foo,bar,baz}", value = plain, unit = "B", goal = "(for scale: ~152 B)" }
  local function instance(label, case, goal_note, key)
    local all, gc, rss, used, free = child_mem(case)
    rows[#rows + 1] = { name = label, value = all, unit = "B", goal = "<= 64 B", ok = all <= 64, key = key }
    rows[#rows + 1] = { name = "  collector/RSS/malloc used/malloc free", value = gc,
                        unit = "/ " .. B(rss) .. " / " .. B(used) .. " / " .. B(free) .. " B", goal = goal_note or "" }
  end
  instance("bench.Three instance (T(), 3 writes)", "T3")
  instance("bench.Three instance (T(args), one table)", "T3_args")
  instance("bench.Three instance (T{...} each time)", "T3_ctor",
    "(RSS: + freed argument tables)", "instance_lua54")
  instance("  the same, collector pause 100", "T3_ctor_p100", "(dead tables reused sooner)")
  do
    local all, gc, rss, used, free = child_mem("one64")
    rows[#rows + 1] = { name = "a 48 B userdata (bench.One64, 1 x uint64)", value = all, unit = "B",
                        goal = "(for scale: malloc's chunk)" }
    rows[#rows + 1] = { name = "  collector/RSS/malloc used/malloc free", value = gc,
                        unit = "/ " .. B(rss) .. " / " .. B(used) .. " / " .. B(free) .. " B", goal = "" }
  end
  for _, k in ipairs { 0, 3, 5, 10, 50 } do
    local b = child_mem("fields" .. k)
    rows[#rows + 1] = { name = k .. " uint32 fields, unset", value = b, unit = "B",
                        goal = "seed: " .. ({ [0] = 208, [3] = 256, [5] = 272, [10] = 312, [50] = 632 })[k] .. " B" }
  end
  H.report("memory per live standalone instance (max of collector count and RSS)", rows)

  local trows = {}
  for _, tree in ipairs { { "otlp", "otlp_traces.bin", "(lua-protobuf: 9.9x)" },
                          { "tat3", "test_all_types_proto3.bin", "(reported)" } } do
    local all, gc, rss, used, _, arena, size = child_mem("tree:" .. tree[1])
    if all == "absent" or all == nil then
      print(string.format("decoded-tree memory: %s not found under %s; skipped", tree[2], CORPUS))
    else
      trows[#trows + 1] = { name = tree[2] .. " (" .. size .. " B)", value = all, unit = "x", goal = tree[3] }
      trows[#trows + 1] = { name = "  collector/arena/RSS/malloc used", value = gc,
                            unit = string.format("/ %.2f / %.2f / %.2f x", arena, rss, used), goal = "" }
    end
  end
  if #trows > 0 then
    H.report("memory held by a decoded tree per payload byte (max of collector + arena and RSS; "
      .. KEEP_TREES .. " trees kept)", trows)
  end
end

-- With --only (the harness's callgrind children) run only the H.run
-- holding that case.
local only_name
for i = 1, #arg do if arg[i] == "--only" then only_name = arg[i + 1] end end
local function run(spec)
  if only_name then
    local found = spec.baseline.name == only_name
    for _, c in ipairs(spec.cases) do found = found or c.name == only_name end
    if not found then return end
  end
  return H.run(spec)
end

-- Instruction counts: each case runs in two processes (n and 2n
-- iterations); the start-up of two processes differs by up to ~1M
-- instructions (Lua's string hashes are seeded per process), so n is
-- large enough to keep that under ~2 instructions per operation.
local READ_ITERS, CTOR_ITERS = 500000, 100000

local konst = core._bench_const_index()
local m = Three { foo = 1, bar = 2, baz = 3 }
local t = { foo = 1, bar = 2, baz = 3 }

run {
  title = "field read m.foo",
  baseline = {
    name = "trivial C __index returning a constant",
    callgrind_iters = READ_ITERS,
    fn = function(n)
      local u, x = konst
      for _ = 1, n do x = u.foo end
      return x
    end,
  },
  cases = {
    {
      name = "message field read",
      callgrind_iters = READ_ITERS,
      goal = "<= 1.4x",
      check = function(ns, base) return ns / base <= 1.4 end,
      fn = function(n)
        local u, x = m
        for _ = 1, n do x = u.foo end
        return x
      end,
    },
    {
      name = "plain table read (for scale)",
      callgrind_iters = READ_ITERS,
      goal = "(for scale)",
      fn = function(n)
        local u, x = t
        for _ = 1, n do x = u.foo end
        return x
      end,
    },
    {
      name = "message field write m.foo = i",
      callgrind_iters = READ_ITERS,
      goal = "(reported)",
      fn = function(n)
        local u = m
        for i = 1, n do u.foo = i end
      end,
    },
  },
}

run {
  title = "construction",
  baseline = {
    name = "plain table {foo=1,bar=2,baz=3}",
    callgrind_iters = CTOR_ITERS,
    fn = function(n)
      local x
      for _ = 1, n do x = { foo = 1, bar = 2, baz = 3 } end
      return x
    end,
  },
  cases = {
    {
      name = "T{foo=1,bar=2,baz=3}",
      callgrind_iters = CTOR_ITERS,
      goal = "<= 2.5x",
      check = function(ns, base) return ns / base <= 2.5 end,
      fn = function(n)
        local T, x = Three
        for _ = 1, n do x = T { foo = 1, bar = 2, baz = 3 } end
        return x
      end,
    },
    {
      name = "T() and three writes",
      callgrind_iters = CTOR_ITERS,
      goal = "(reported)",
      fn = function(n)
        local T, x = Three
        for _ = 1, n do
          x = T()
          x.foo = 1
          x.bar = 2
          x.baz = 3
        end
        return x
      end,
    },
  },
}

local counter = 0
run {
  title = "declaring the 3-field type",
  baseline = {
    name = "making the field list (a Lua table)",
    fn = function(n)
      local x
      for _ = 1, n do x = { { "foo", "uint32", 1 }, { "bar", "uint32", 2 }, { "baz", "uint32", 3 } } end
      return x
    end,
  },
  cases = {
    {
      name = "pool:message(name, 3 fields)",
      goal = "<= 10 us (10000 ns)",
      check = function(ns) return ns <= 10000 end,
      fn = function(n)
        local pool = pc.pool()
        for _ = 1, n do
          counter = counter + 1
          pool:message("d.T" .. counter,
            { { "foo", "uint32", 1 }, { "bar", "uint32", 2 }, { "baz", "uint32", 3 } })
        end
      end,
    },
  },
}
