-- Slotted messages (issue 3): memory per instance, field reads, construction
-- and declaration, for {uint32 foo = 1; uint32 bar = 2; uint32 baz = 3}.
--   build/release/protocall bench/message_bench.lua [--quick] [--callgrind]
-- Memory figures run in child processes (one per case, so the process's
-- RSS is not muddied by another case's freed memory): the larger of the
-- collector's count and the RSS growth, divided by the instances kept.
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

-- Child mode: `--mem CASE` keeps N instances and prints bytes per instance.
local MEM_N = 200000
local mem_cases = {
  plain_table = function() return { foo = 1, bar = 2, baz = 3 } end,
  T3 = function()
    local m = Three()
    m.foo, m.bar, m.baz = 1, 2, 3
    return m
  end,
  T3_ctor = function() return Three { foo = 1, bar = 2, baz = 3 } end,
}
for _, k in ipairs { 0, 3, 5, 10, 50 } do
  local T = pc.message("bench.F" .. k, uint32_fields(k))
  mem_cases["fields" .. k] = function() return T() end
end

local function measure_mem(make)
  local keep = {}
  for i = 1, MEM_N do keep[i] = false end -- the list's own memory first
  collectgarbage()
  collectgarbage()
  local count0, rss0 = collectgarbage("count") * 1024, H.rss()
  for i = 1, MEM_N do keep[i] = make() end
  collectgarbage()
  collectgarbage()
  local count1, rss1 = collectgarbage("count") * 1024, H.rss()
  local gc = (count1 - count0) / MEM_N
  local rss = rss0 and (rss1 - rss0) / MEM_N or 0
  return math.max(gc, rss), gc, rss
end

for i = 1, #arg do
  if arg[i] == "--mem" then
    local bytes, gc, rss = measure_mem(mem_cases[arg[i + 1]])
    print(string.format("%.1f %.1f %.1f", bytes, gc, rss))
    return
  end
end

local function child_mem(case)
  local cmd = string.format("%s %s --mem %s", arg[-1] or "protocall", arg[0], case)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  local bytes, gc, rss = out:match("(%S+) (%S+) (%S+)")
  return tonumber(bytes), tonumber(gc), tonumber(rss)
end

local only = false
for i = 1, #arg do only = only or arg[i] == "--only" end

local rows = {}
local plain = not only and child_mem("plain_table")
if not only then
local t3, t3gc, t3rss = child_mem("T3")
rows[#rows + 1] = { name = "plain Lua table {foo,bar,baz}", value = plain, unit = "B", goal = "(for scale: ~152 B)" }
rows[#rows + 1] = { name = "bench.Three instance (T(), 3 writes)", value = t3, unit = "B", goal = "<= 64 B", ok = t3 <= 64 }
rows[#rows + 1] = { name = "  collector count / RSS growth", value = t3gc, unit = "/ " .. math.floor(t3rss) .. " B", goal = "" }
local c3, c3gc, c3rss = child_mem("T3_ctor")
rows[#rows + 1] = { name = "bench.Three instance (T{...})", value = c3, unit = "B", goal = "<= 64 B", ok = c3 <= 64 }
rows[#rows + 1] = { name = "  collector count / RSS growth", value = c3gc, unit = "/ " .. math.floor(c3rss) .. " B", goal = "(RSS: freed argument tables between kept blocks)" }
for _, k in ipairs { 0, 3, 5, 10, 50 } do
  local b = child_mem("fields" .. k)
  rows[#rows + 1] = { name = k .. " uint32 fields, unset", value = b, unit = "B",
                      goal = "seed: " .. ({ [0] = 208, [3] = 256, [5] = 272, [10] = 312, [50] = 632 })[k] .. " B" }
end
H.report("memory per live standalone instance (max of collector count and RSS)", rows)
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

local konst = core._bench_const_index()
local m = Three { foo = 1, bar = 2, baz = 3 }
local t = { foo = 1, bar = 2, baz = 3 }

run {
  title = "field read m.foo",
  baseline = {
    name = "trivial C __index returning a constant",
    fn = function(n)
      local u, x = konst
      for _ = 1, n do x = u.foo end
      return x
    end,
  },
  cases = {
    {
      name = "message field read",
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
      goal = "(for scale)",
      fn = function(n)
        local u, x = t
        for _ = 1, n do x = u.foo end
        return x
      end,
    },
    {
      name = "message field write m.foo = i",
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
    fn = function(n)
      local x
      for _ = 1, n do x = { foo = 1, bar = 2, baz = 3 } end
      return x
    end,
  },
  cases = {
    {
      name = "T{foo=1,bar=2,baz=3}",
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
