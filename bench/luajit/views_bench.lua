-- Issue 35, item 1 ("LuaJIT: message objects are FFI views"): what one view
-- of a sub-message, a container or an element costs under each design a
-- message object could take under LuaJIT, made and read in a compiled loop
-- as a user's reader reads:
--   make build-luajit &&
--     LUA_CPATH='build/luajit/?.so;;' luajit bench/luajit/views_bench.lua [--quick] [--callgrind]
-- (`make bench` runs it; it records no goal row). The designs:
--   (a) today's message objects: a decoded message's sub-messages,
--       containers and elements read through the C __index (the module);
--   (b) a cdata view `struct { char *p; uint32_t anchor; }` whose ctype has
--       a __gc metamethod (ffi.metatype): making a view adds one to its
--       anchor's count (FFI memory), __gc takes one off and, at zero, drops
--       the root from a Lua table of anchors, which is what keeps the root
--       (and its arena) alive while a view lives;
--   (c) the same cdata without the metatype __gc, `ffi.gc` on each view;
--   (d) a Lua table view `setmetatable({root, address}, MT)`, the address
--       a number: the root is kept by a plain reference. LuaJIT without
--       LUAJIT_ENABLE_LUA52COMPAT (OpenResty's build) ignores __len on a
--       table, so its containers hold their length as `n` and the reader
--       reads that, not `#c`. Also with its views escaping (the reader
--       stores each, so the JIT cannot sink them), and with identity kept
--       (each view keeps the children it made in a table of its own; or
--       every view of a root in one table by address);
--   (e) a cdata view with no lifetime at all (unsafe: the lower bound),
--       also with its views escaping.
-- (b)-(e) are prototypes of the designs, written here to be measured, not
-- product code: their views read the same values from C structs this
-- script fills (the decoded root is only their anchor). Today's views are
-- made once per slot, so `rawequal(m.x, m.x)`; of the prototypes only (d)
-- with identity kept does so, the others make a new view at each read.
-- Each operation decodes a vb.Root of K spans (pc.decode, the anchor) and
-- reads every span's name, start_time_unix_nano, first.time_unix_nano and
-- each of its events' time_unix_nano: VIEWS views (1 + K containers, K
-- span and K * E event elements, K sub-messages). A view's cost is the
-- operation's less the baseline's (the same decode, and the same values
-- read by raw FFI pointers, no view at all), over VIEWS. Rows:
--   * ns per view, the median of PROCESSES luajit processes (each compiles
--     its own traces and lays out its own heap);
--   * Lua heap bytes allocated per view (collectgarbage("count") around a
--     loop with the collector stopped): 0 when the JIT sank the view;
--   * with --callgrind, instructions per view (H.instructions: valgrind
--     runs of one loop, n and 2n times, differenced, the median of three
--     such counts; the loop ends with a full collection, so the finalizers
--     of its views run inside the count), and the share of the collector
--     and the finalizers: the same runs with the collector stopped (one
--     count), subtracted. Then each design projected onto the goal row
--     "LuaJIT: decode + read every field as message objects / lua-protobuf":
--     the row less 225 views (one decode and read of otlp_traces.bin makes
--     84 sub-message views, 42 containers and 99 element views) times what
--     a view saves against (a), with the row's and lua-protobuf's
--     instructions as doc/performance.md quotes them (`runtime_bench.lua
--     --callgrind` measures both); and (d) with identity whose containers
--     are (b)'s cdata, since a table's `#` ignores __len.
assert(rawget(_G, "jit"), "bench/luajit/views_bench.lua runs under luajit")
local H = require "bench.harness"
local pc = require "protocall"
local ffi = require "ffi"

local quick, callgrind, child_loop, only, iters = false, false, nil, nil, nil
local args = arg or {}
local argn = 1
while args[argn] do
  local a = args[argn]
  if a == "--quick" then
    quick = true
  elseif a == "--callgrind" then
    callgrind = true
  elseif a == "--child" then -- a timing process: prints ns per operation of one loop
    child_loop = args[argn + 1]
    argn = argn + 1
  elseif a == "--only" or a == "--iters" then -- H.instructions' child: one loop, n times
    if a == "--only" then only = args[argn + 1] else iters = tonumber(args[argn + 1]) end
    argn = argn + 1
  else
    error("views_bench.lua takes --quick and --callgrind (and --child NAME, --only NAME --iters N for its own"
      .. " child processes), not " .. a, 0)
  end
  argn = argn + 1
end

-- The schema and the message every operation decodes.
local K, E = 8, 2 -- spans, events per span
local VIEWS = 1 + K + K + K + K * E
pc.message("vb.Event", { { "time_unix_nano", "fixed64", 1 }, { "n", "uint32", 2 } })
pc.message("vb.Span", { { "name", "string", 1 }, { "start_time_unix_nano", "fixed64", 2 },
                        { "first", "vb.Event", 3 }, { "events", "vb.Event", 4, repeated = true } })
local Root = pc.message("vb.Root", { { "spans", "vb.Span", 1, repeated = true } })
local spans = {}
for i = 1, K do
  local events = {}
  for j = 1, E do events[j] = { time_unix_nano = 1000 * i + j, n = j } end
  spans[i] = { name = "span-" .. i, start_time_unix_nano = 1e6 * i, first = { time_unix_nano = i, n = i },
               events = events }
end
local bytes = pc.encode(Root, { spans = spans })

-- The same values in C structs, which the prototypes' views read.
ffi.cdef [[
typedef struct { uint64_t time_unix_nano; uint32_t n; } vb_event;
typedef struct {
  const char *name; size_t name_len; uint64_t start_time_unix_nano;
  vb_event *first; vb_event *events; size_t nevents;
} vb_span;
typedef struct { vb_span *spans; size_t nspans; } vb_root;
]]
local cast, fstring, tonumber, setmetatable = ffi.cast, ffi.string, tonumber, setmetatable
local charp, uintptr = ffi.typeof("char *"), ffi.typeof("uintptr_t")
local RootP, SpanP, EventP = ffi.typeof("vb_root *"), ffi.typeof("vb_span *"), ffi.typeof("vb_event *")
local mem = ffi.new("vb_root")
local held = { ffi.new("vb_span[?]", K) } -- what mem points to
mem.spans, mem.nspans = held[1], K
for i = 1, K do
  local s, v = mem.spans[i - 1], spans[i]
  local first, events = ffi.new("vb_event[1]"), ffi.new("vb_event[?]", E)
  held[#held + 1] = first
  held[#held + 1] = events
  s.name, s.name_len, s.start_time_unix_nano = v.name, #v.name, v.start_time_unix_nano
  first[0].time_unix_nano, first[0].n = v.first.time_unix_nano, v.first.n
  for j = 1, E do events[j - 1].time_unix_nano, events[j - 1].n = v.events[j].time_unix_nano, j end
  s.first, s.events, s.nevents = first, events, E
end

-- The reader: the same code for every design, compiled anew for each (so
-- no design runs the traces recorded on another's views). spans_of(root)
-- is the root's `spans`; LEN the length of a container. Escaping, it also
-- stores every view it reads into `keep` (a slot per kind, overwritten), so
-- the JIT cannot sink them, as when a reader hands its views on.
local READER = [[
local decode, Root, bytes, spans_of, keep = ...
local tonumber = tonumber
return function(n)
  local sum = 0
  for _ = 1, n do
    local spans = spans_of(decode(Root, bytes))
    KEEP(1, spans)
    for i = 1, LEN(spans) do
      local s = spans[i]
      local first, events = s.first, s.events
      KEEP(2, s) KEEP(3, first) KEEP(4, events)
      sum = sum + #s.name + tonumber(s.start_time_unix_nano) + tonumber(first.time_unix_nano)
      for j = 1, LEN(events) do
        local e = events[j]
        KEEP(5, e)
        sum = sum + tonumber(e.time_unix_nano)
      end
    end
  end
  return sum
end]]
local function reader(spans_of, len, escaping)
  local source = READER:gsub("LEN%((%w+)%)", function(c) return len:format(c) end)
    :gsub("KEEP%((%d), (%w+)%)", escaping and "keep[%1] = %2" or "")
  return assert(load(source, "=views_bench.reader"))(pc.decode, Root, bytes, spans_of, {})
end

-- The baseline: the same decode, and the same values read by raw pointers.
local function baseline(n)
  local decode, sum = pc.decode, 0
  for _ = 1, n do
    decode(Root, bytes)
    local r = cast(RootP, mem)
    for i = 0, tonumber(r.nspans) - 1 do
      local s = r.spans + i
      sum = sum + #fstring(s.name, s.name_len) + tonumber(s.start_time_unix_nano)
        + tonumber(s.first.time_unix_nano)
      for j = 0, tonumber(s.nevents) - 1 do sum = sum + tonumber(s.events[j].time_unix_nano) end
    end
  end
  return sum
end

-- The accessors of the prototypes' four kinds of view, for a design given
-- as make(kind_metatable, is_container) -> new(address, anchor[, length]),
-- address(view) and anchor(view), and the same two of containers (caddress,
-- canchor): a new view of a kind, where a view points, what keeps it.
-- Nothing is tail-called: a trace that began in a metamethod cannot return
-- from a call to the reader's frame ("NYI: return to lower frame"), as
-- lua/protocall/ffi/accessors.lua notes.
-- find(view, key) and keep(view, key, child), and cfind and ckeep of
-- containers, when given: a child view is kept by its parent, and the next
-- read of its key finds it (identity).
local function accessors(make, address, anchor, caddress, canchor, find, keep, cfind, ckeep)
  local none = function() end
  caddress, canchor = caddress or address, canchor or anchor
  find, keep, cfind, ckeep = find or none, keep or none, cfind or none, ckeep or none
  local event_mt, events_mt, span_mt, spans_mt = {}, {}, {}, {}
  local new_event = make(event_mt, false)
  local new_events = make(events_mt, true)
  local new_span = make(span_mt, false)
  local new_spans = make(spans_mt, true)
  function event_mt.__index(v, k)
    local e = cast(EventP, address(v))
    if k == "time_unix_nano" then
      local t = e.time_unix_nano
      return t
    end
    if k == "n" then return e.n end
  end
  function events_mt.__len(v)
    local n = tonumber(cast(SpanP, caddress(v)).nevents)
    return n
  end
  function events_mt.__index(v, i) -- the container points to its span
    local s = cast(SpanP, caddress(v))
    if i >= 1 and i <= tonumber(s.nevents) then
      local e = cfind(v, i)
      if e then return e end
      e = new_event(cast(charp, s.events + (i - 1)), canchor(v))
      ckeep(v, i, e)
      return e
    end
  end
  function span_mt.__index(v, k)
    local s = cast(SpanP, address(v))
    if k == "name" then
      local name = fstring(s.name, s.name_len)
      return name
    end
    if k == "start_time_unix_nano" then
      local t = s.start_time_unix_nano
      return t
    end
    if k == "first" then
      local e = find(v, k)
      if e then return e end
      e = new_event(cast(charp, s.first), anchor(v))
      keep(v, k, e)
      return e
    end
    if k == "events" then
      local c = find(v, k)
      if c then return c end
      c = new_events(address(v), anchor(v), tonumber(s.nevents))
      keep(v, k, c)
      return c
    end
  end
  function spans_mt.__len(v)
    local n = tonumber(cast(RootP, caddress(v)).nspans)
    return n
  end
  function spans_mt.__index(v, i)
    local r = cast(RootP, caddress(v))
    if i >= 1 and i <= tonumber(r.nspans) then
      local s = cfind(v, i)
      if s then return s end
      s = new_span(cast(charp, r.spans + (i - 1)), canchor(v))
      ckeep(v, i, s)
      return s
    end
  end
  return new_spans
end

-- A copy of fn with prototypes of its own, its upvalues shared with fn's:
-- the JIT records traces per prototype, so each design's views get traces
-- of their own, as each reader does (a trace recorded on one design's
-- closures would side-exit on the next design's).
local function fresh(fn)
  local copy = assert(load(string.dump(fn), "=views_bench.design"))
  for i = 1, math.huge do
    if not debug.getupvalue(fn, i) then break end
    debug.upvaluejoin(copy, i, fn, i)
  end
  return copy
end

local VIEW = "struct { char *p; uint32_t anchor; }"

-- (b) and (c): cdata views counted per anchor. An anchor is a slot: its
-- count of live views in FFI memory, its root in `anchors` while the
-- count is above zero (a slot freed at zero is taken again).
local SLOTS = 65536
local function counted(lifetime)
  local counts = ffi.new("uint32_t[?]", SLOTS)
  local anchors, slot_of, free, top = {}, setmetatable({}, { __mode = "k" }), {}, 0
  local function release(v)
    local a = v.anchor
    local c = counts[a] - 1
    counts[a] = c
    if c == 0 then
      slot_of[anchors[a]], anchors[a] = nil, false
      free[#free + 1] = a
    end
  end
  local function make(mt)
    if lifetime == "metatype" then mt.__gc = release end
    local ct = ffi.metatype(ffi.typeof(VIEW), mt)
    if lifetime == "metatype" then
      return function(p, a)
        counts[a] = counts[a] + 1
        local v = ct(p, a)
        return v
      end
    end
    local gc = ffi.gc
    return function(p, a)
      counts[a] = counts[a] + 1
      local v = gc(ct(p, a), release)
      return v
    end
  end
  local new_spans = fresh(accessors)(make, function(v) return v.p end, function(v) return v.anchor end)
  local function spans_of(root)
    local a = slot_of[root]
    if not a then
      a = free[#free]
      if a then free[#free] = nil else a, top = top, top + 1 end
      assert(a < SLOTS, "views_bench: out of anchor slots")
      slot_of[root], anchors[a] = a, root
    end
    local c = new_spans(cast(charp, mem), a)
    return c
  end
  -- live: the roots still anchored
  return spans_of, function()
    local live = 0
    for _, root in pairs(anchors) do if root then live = live + 1 end end
    return live
  end
end

-- (d): a table {root, address as a number}; a container's keys 1..n are
-- its elements (read by __index), so it is {r = root, a = address, n =
-- length}. With identity, a view keeps the children it made in a table of
-- its own (at [3], a container's at k), made at its first child, and the
-- root's container is kept in a weak-keyed table by root: a second read
-- finds them. (Kept in the view's own table, a key would no longer reach
-- __newindex, and writes would miss the message.)
local function table_design(identity)
  local tnew = require "table.new"
  local function make(mt, container)
    if container then -- (table constructors, which the JIT can sink)
      return function(p, root, len)
        local v = setmetatable({ r = root, a = tonumber(cast(uintptr, p)), n = len, k = false }, mt)
        return v
      end
    end
    return function(p, root)
      local v = setmetatable({ root, tonumber(cast(uintptr, p)), false }, mt)
      return v
    end
  end
  local find, keep, cfind, ckeep
  if identity then
    function find(v, k)
      local kept = v[3]
      if kept then return kept[k] end
    end
    function keep(v, k, child)
      local kept = v[3]
      if not kept then
        kept = tnew(0, 2)
        v[3] = kept
      end
      kept[k] = child
    end
    function cfind(c, i)
      local kept = c.k
      if kept then return kept[i] end
    end
    function ckeep(c, i, child)
      local kept = c.k
      if not kept then
        kept = tnew(c.n, 0)
        c.k = kept
      end
      kept[i] = child
    end
  end
  local new_spans = fresh(accessors)(make, function(v) return cast(charp, v[2]) end, function(v) return v[1] end,
                                     function(v) return cast(charp, v.a) end, function(v) return v.r end,
                                     find, keep, cfind, ckeep)
  if not identity then
    return function(root)
      local c = new_spans(cast(charp, mem), root, K)
      return c
    end
  end
  local kept = setmetatable({}, { __mode = "k" })
  return function(root)
    local c = kept[root]
    if not c then
      c = new_spans(cast(charp, mem), root, K)
      kept[root] = c
    end
    return c
  end
end

-- (d) with identity kept per root: every view of a root in one table by
-- its address (a container's by minus its span's), which holds the root at
-- [0]; a view is {that table, address}. The table and the views in it are
-- kept by each view of the root, so they live as long as any of them
-- does; by root it is found in a table of weak keys and values.
local function table_root_design()
  local function make(mt, container)
    if container then
      return function(p, views, len)
        local key = -tonumber(cast(uintptr, p))
        local v = views[key]
        if v then return v end
        v = setmetatable({ r = views, a = -key, n = len }, mt)
        views[key] = v
        return v
      end
    end
    return function(p, views)
      local key = tonumber(cast(uintptr, p))
      local v = views[key]
      if v then return v end
      v = setmetatable({ views, key }, mt)
      views[key] = v
      return v
    end
  end
  local new_spans = fresh(accessors)(make, function(v) return cast(charp, v[2]) end, function(v) return v[1] end,
                                     function(v) return cast(charp, v.a) end, function(v) return v.r end)
  local by_root = setmetatable({}, { __mode = "kv" })
  return function(root)
    local views = by_root[root]
    if not views then
      views = { [0] = root }
      by_root[root] = views
    end
    local c = new_spans(cast(charp, mem), views, K)
    return c
  end
end

-- (e): a cdata view and nothing else.
local function bare_design()
  local new_spans = fresh(accessors)(function(mt)
    local ct = ffi.metatype(ffi.typeof(VIEW), mt)
    return function(p)
      local v = ct(p, 0)
      return v
    end
  end, function(v) return v.p end, function(v) return v.anchor end)
  return function()
    local c = new_spans(cast(charp, mem))
    return c
  end
end

local metatype_spans, metatype_live = fresh(counted)("metatype")
local gc_spans, gc_live = fresh(counted)("ffi.gc")
-- The loops, in the order of their rows; live() (the designs that anchor)
-- the roots their views still keep.
local LOOPS = {
  { name = "base", title = "baseline: raw pointers, no view", fn = baseline },
  { name = "a", title = "(a) today's views (C __index)", fn = reader(function(root) return root.spans end, "#%s") },
  { name = "b", title = "(b) cdata, metatype __gc, counted anchor", fn = reader(metatype_spans, "#%s"),
    live = metatype_live },
  { name = "c", title = "(c) cdata, ffi.gc per view, counted anchor", fn = reader(gc_spans, "#%s"), live = gc_live },
  { name = "d", title = "(d) table {root, address}", fn = reader(fresh(table_design)(false), "%s.n") },
  { name = "desc", title = "(d) table, views escaping", fn = reader(fresh(table_design)(false), "%s.n", true) },
  { name = "did", title = "(d) table, identity kept", fn = reader(fresh(table_design)(true), "%s.n") },
  { name = "droot", title = "(d) table, identity kept per root", fn = reader(fresh(table_root_design)(), "%s.n") },
  { name = "e", title = "(e) cdata, no lifetime (unsafe)", fn = reader(fresh(bare_design)(), "#%s") },
  { name = "eesc", title = "(e) cdata, no lifetime, views escaping", fn = reader(fresh(bare_design)(), "#%s", true) },
}
local by_name = {}
for _, l in ipairs(LOOPS) do by_name[l.name] = l end

-- One run of a loop as it is measured: n operations, then a full
-- collection, so the finalizers of its views run inside the run.
local function measured(fn)
  return function(n)
    fn(n)
    collectgarbage()
  end
end

if only then -- a child under callgrind (H.instructions): "NAME" or "NAME nogc", the loop alone
  local name, nogc = only:match("^(%w+)( ?n?o?g?c?)$")
  local fn = assert(by_name[name], "views_bench: no loop " .. only).fn
  fn(200) -- traces recorded before both counts
  collectgarbage()
  collectgarbage()
  if nogc == " nogc" then
    collectgarbage("stop")
    fn(iters)
  else
    measured(fn)(iters)
  end
  os.exit(0) -- no lua_close: what is left is not freed in the count
end

if child_loop then -- a timing process: ns per operation of one loop (the collector's work included)
  local loop = assert(by_name[child_loop], "views_bench: no loop " .. child_loop)
  io.write(string.format("%.3f\n", (H.measure(loop.fn, quick))))
  return
end

-- Every loop reads the same values.
do
  local want = baseline(2)
  for _, l in ipairs(LOOPS) do
    assert(l.fn(2) == want, "views_bench: " .. l.title .. " read other values")
  end
end

-- (d) with identity: a second read gives the same view, as today's do.
do
  local spans_of = fresh(table_design)(true)
  local root = pc.decode(Root, bytes)
  local s = spans_of(root)[2]
  assert(rawequal(spans_of(root)[2], s) and rawequal(s.first, s.first) and rawequal(s.events[1], s.events[1]),
         "views_bench: (d) with identity made a second view")
  spans_of = fresh(table_root_design)()
  s = spans_of(root)[2]
  assert(rawequal(spans_of(root)[2], s) and rawequal(s.first, s.first) and rawequal(s.events[1], s.events[1])
         and not rawequal(s.events, s.first), "views_bench: (d) with identity per root made a second view")
end

-- The anchors drop their roots once the views are collected.
for _, l in ipairs(LOOPS) do
  if l.live then
    l.fn(100)
    collectgarbage()
    collectgarbage()
    collectgarbage()
    assert(l.live() == 0, "views_bench: " .. l.title .. " keeps " .. l.live() .. " roots after collection")
  end
end

-- Lua heap allocated per operation, the collector stopped.
local function allocated(fn)
  local n = 200
  fn(n)
  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  fn(n)
  local after = collectgarbage("count")
  collectgarbage("restart")
  collectgarbage()
  return (after - before) * 1024 / n
end

-- Each loop in processes of its own (what one design leaves, such as the
-- table of cdata finalizers (b) and (c) grow, would weigh on the next), the
-- loops taking turns.
local PROCESSES = quick and 1 or 5
local runs = {}
for k = 1, PROCESSES do
  local figures = {}
  for i, l in ipairs(LOOPS) do
    local p = io.popen(("%s bench/luajit/views_bench.lua --child %s%s"):format(arg[-1] or "luajit", l.name,
                                                                              quick and " --quick" or ""))
    local out = p:read("*a")
    p:close()
    figures[i] = tonumber(out:match("^%S+"))
    assert(figures[i], "views_bench: a --child process failed: " .. out)
  end
  runs[k] = figures
end
local function median_ns(k)
  local list = {}
  for i, r in ipairs(runs) do list[i] = r[k] end
  table.sort(list)
  return list[math.floor((#list + 1) / 2)]
end

-- Per view: what an operation costs beyond the baseline's, over VIEWS.
local rows = {}
local function row(name, value, unit, goal)
  rows[#rows + 1] = { name = name, value = value, unit = unit, goal = goal }
end
local base_ns, base_bytes = median_ns(1), allocated(baseline)
row(("baseline, one operation (decode, %d values read; median of %d processes)"):format(3 * K + K * E, PROCESSES),
    base_ns, "ns")
local instr -- with --callgrind: per loop, {all = instructions a view, gc = the collector's share}
if callgrind then
  local N = quick and 200 or 1000
  -- the median of three counts (one with --quick): a loop's figure moves by
  -- some 100 instructions a view from process to process with LuaJIT's
  -- trace layout and the collector's pacing
  local function instructions(name)
    local list = {}
    for i = 1, quick and 1 or 3 do
      list[i] = H.instructions(name, N)
      if not list[i] then return nil end
    end
    table.sort(list)
    return list[math.floor((#list + 1) / 2)]
  end
  local base_on, base_off = instructions("base"), H.instructions("base nogc", N)
  instr = base_on and base_off and {}
  for _, l in ipairs(instr and LOOPS or {}) do
    if l.name ~= "base" then
      local on, off = instructions(l.name), H.instructions(l.name .. " nogc", N)
      if not (on and off) then
        instr = nil
        break
      end
      instr[l.name] = { all = (on - base_on) / VIEWS, gc = ((on - off) - (base_on - base_off)) / VIEWS }
    end
  end
  if instr then
    row("baseline, one operation, callgrind", base_on, "instr")
  else
    print("\nviews_bench: a valgrind run failed (or counted less for 2n than for n); the instruction rows are skipped")
  end
end
for k, l in ipairs(LOOPS) do
  if l.name ~= "base" then
    row(l.title .. ", per view", (median_ns(k) - base_ns) / VIEWS, "ns")
    row("  Lua heap allocated per view", (allocated(l.fn) - base_bytes) / VIEWS, "B")
    local c = instr and instr[l.name]
    if c then
      row("  instructions per view, callgrind", c.all, "instr")
      row("  of which the collector's and finalizers'", c.gc, "instr")
    end
  end
end
H.report(("LuaJIT: one view, each design (%d views an operation)"):format(VIEWS), rows)

if instr then
  -- doc/performance.md's figures of the goal row (runtime_bench.lua --callgrind):
  -- instructions a decode and read of otlp_traces.bin as message objects, lua-protobuf's;
  -- the views it makes: sub-messages and elements, containers.
  local ROW, PEER, MESSAGES, CONTAINERS = 720e3, 690e3, 84 + 99, 42
  local projected = {}
  local function project(title, message_view, container_view)
    local v = ROW - MESSAGES * (instr.a.all - message_view) - CONTAINERS * (instr.a.all - container_view)
    projected[#projected + 1] = { name = title, value = v / PEER, unit = "x", goal = ("%.0f K instr"):format(v / 1e3) }
  end
  for _, l in ipairs(LOOPS) do
    if instr[l.name] then project(l.title, instr[l.name].all, instr[l.name].all) end
  end
  -- a table's # ignores __len under LuaJIT: (d)'s containers would be another kind
  project("(d) with identity, its containers (b)'s", instr.did.all, instr.b.all)
  H.report(("projected onto the goal row (%.0f K - %d views x the saving; lua-protobuf %.0f K; goal <= 0.5x)")
    :format(ROW / 1e3, MESSAGES + CONTAINERS, PEER / 1e3), projected)
end
