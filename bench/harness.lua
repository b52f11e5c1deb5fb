--- bench/harness.lua: the shared benchmark runner.
--
-- Usage (from the repository root, as `make bench` does):
--   build/release/protocall bench/x_bench.lua [--callgrind] [--quick]
--
--   local H = require "bench.harness"
--   H.run {
--     title = "what is measured",
--     baseline = { name = "bare call", fn = function(n) for _ = 1, n do f() end end },
--     cases = {
--       { name = "callable", fn = function(n) ... end,
--         goal = "<= bare + 60 ns",            -- text printed beside the figure
--         check = function(ns, base_ns) return ns - base_ns <= 60 end,  -- optional
--         key = "x" },  -- optional: the ratio is the figure `x` of bench/goals.lua
--     },
--   }
--
-- Each `fn(n)` performs the operation n times (set-up outside the loop, in
-- the closure). The harness finds n so that one run takes at least 50 ms,
-- runs once to warm up, then takes the best of 5 runs; it measures the
-- baseline in the same run and prints ns/op and the ratio to the baseline
-- next to the goal. Times are wall-clock (clock_gettime through os.clock is
-- not used: CPU time of a 2-core shared machine is no better).
--
-- With --callgrind every case (and the baseline) is also run in its own
-- process under `valgrind --tool=callgrind`, once with n and once with 2n
-- iterations; the difference of the two instruction totals divided by n is
-- the exact instruction count per operation, start-up excluded. These
-- counts do not drift with machine load, so they are what a regression
-- check compares.
--
-- H.report(rows) prints extra figures (memory, sizes) in the same table
-- shape: rows = { {name=, value=, unit=, goal=, ok=}, ... }.
local H = {}

local clock = os.clock
do
  -- A wall clock with sub-microsecond resolution when protocall.core has one.
  pcall(require, "protocall") -- in the protocall host this registers protocall.core
  local ok, core = pcall(require, "protocall.core")
  if ok and core.monotonic then clock = core.monotonic end
end

local MIN_TIME = 0.05
local RUNS = 5

local function parse_args()
  local opts = {}
  local i = 1
  while arg and arg[i] do
    local a = arg[i]
    if a == "--callgrind" then opts.callgrind = true
    elseif a == "--quick" then opts.quick = true
    elseif a == "--only" then opts.only = arg[i + 1]; i = i + 1
    elseif a == "--iters" then opts.iters = tonumber(arg[i + 1]); i = i + 1
    end
    i = i + 1
  end
  return opts
end

local function time_once(fn, n)
  collectgarbage()
  local t0 = clock()
  fn(n)
  return clock() - t0
end

-- The n for which one run of fn(n) takes MIN_TIME (a tenth with quick);
-- the runs that find it warm fn up.
local function find_n(fn, quick)
  local n = 1
  while true do
    local t = time_once(fn, n)
    if t >= (quick and MIN_TIME / 10 or MIN_TIME) or n >= 2 ^ 30 then return n end
    n = n * (t > 0 and math.max(2, math.min(10, math.ceil(MIN_TIME / t * 1.2))) or 10)
    n = math.floor(n)
  end
end

--- Nanoseconds per operation of fn: best of RUNS after a warm-up, with n
-- grown until one run takes MIN_TIME seconds. Returns ns, n.
function H.measure(fn, quick)
  local n = find_n(fn, quick)
  local best = math.huge
  for _ = 1, quick and 1 or RUNS do
    local t = time_once(fn, n)
    if t < best then best = t end
  end
  return best / n * 1e9, n
end

--- a_ns, b_ns = H.measure_pair(fa, fb, quick): H.measure of two functions
-- whose ratio is the figure, their runs interleaved (a, b, a, b, ...), so
-- both meet the same load on a shared machine; best of RUNS each.
function H.measure_pair(fa, fb, quick)
  local na, nb = find_n(fa, quick), find_n(fb, quick)
  local best_a, best_b = math.huge, math.huge
  for _ = 1, quick and 2 or RUNS do
    best_a = math.min(best_a, time_once(fa, na))
    best_b = math.min(best_b, time_once(fb, nb))
  end
  return best_a / na * 1e9, best_b / nb * 1e9
end

local function script_path()
  return arg and arg[0] or "?"
end

--- total = H.callgrind(cmd): the instructions the shell command line `cmd`
-- executes under `valgrind --tool=callgrind` (its output discarded), or nil
-- when it fails.
function H.callgrind(cmd)
  local out = os.tmpname()
  local ok = os.execute(("valgrind --tool=callgrind --callgrind-out-file=%s %s >/dev/null 2>&1")
    :format(out, cmd))
  local total
  local f = io.open(out, "r")
  if f then
    for line in f:lines() do
      local v = line:match("^summary:%s+(%d+)") or line:match("^totals:%s+(%d+)")
      if v then total = tonumber(v) end
    end
    f:close()
  end
  os.remove(out)
  if ok ~= true and ok ~= 0 then return nil end -- Lua 5.4: true; LuaJIT: the exit status
  return total
end

local function callgrind_total(case, n)
  return H.callgrind(string.format("%s %s --only %q --iters %d", arg[-1] or "protocall", script_path(),
                                   case, n))
end

--- Instructions per operation of the case named `name` (see the header).
function H.instructions(name, n)
  local a = callgrind_total(name, n)
  local b = callgrind_total(name, 2 * n)
  if not a or not b or b <= a then return nil end -- a failed or empty child
  return (b - a) / n
end

local function fmt_num(x)
  if x == nil then return "-" end
  if x >= 100 then return string.format("%.0f", x) end
  if x >= 10 then return string.format("%.1f", x) end
  if x >= 1 or x == 0 then return string.format("%.2f", x) end
  return string.format("%.3f", x)
end

--- Runs a benchmark table (see the header) and prints its figures.
function H.run(spec)
  local opts = parse_args()
  local all = { spec.baseline }
  for _, c in ipairs(spec.cases) do all[#all + 1] = c end
  if opts.only then -- child process of --callgrind: run one case, print nothing
    for _, c in ipairs(all) do
      if c.name == opts.only then
        c.fn(opts.iters or 1000)
        os.exit(0)
      end
    end
    return {} -- a later H.run of the script has it
  end
  print(string.format("\n## %s", spec.title))
  local w = 44 -- the name column: as wide as the longest name
  for _, c in ipairs(all) do w = math.max(w, #c.name) end
  print(string.format("%-" .. w .. "s %12s %8s  %-26s %s", "case", "ns/op", "ratio", "goal",
    opts.callgrind and "instr/op" or ""))
  local base_ns = H.measure(spec.baseline.fn, opts.quick)
  local results = {}
  for i, c in ipairs(all) do
    local ns = i == 1 and base_ns or H.measure(c.fn, opts.quick)
    local verdict = ""
    if c.check then verdict = c.check(ns, base_ns) and "  ok" or "  MISSED" end
    local ir = opts.callgrind and H.instructions(c.name, c.callgrind_iters or 20000) or nil
    print(string.format("%-" .. w .. "s %12s %8s  %-26s %s%s", c.name, fmt_num(ns),
      fmt_num(ns / base_ns) .. "x", (c.goal or (i == 1 and "(baseline)" or "")) , ir and fmt_num(ir) or "", verdict))
    results[c.name] = { ns = ns, ratio = ns / base_ns, instructions = ir }
    if c.key then H.record(c.key, ns / base_ns) end
  end
  return results
end

--- H.record(key, value): keeps a figure of the goal table that
-- bench/goals.lua prints at the end of `make bench` (its GOALS name the
-- keys), appending it to the file named by PROTOCALL_BENCH_GOALS; nothing
-- without that variable. A key recorded several times (one per case) is
-- shown as the range of its values.
function H.record(key, value)
  local path = os.getenv("PROTOCALL_BENCH_GOALS")
  if not path or path == "" or type(value) ~= "number" then return end
  local f = io.open(path, "a")
  if not f then return end
  f:write(("%s\t%.17g\n"):format(key, value))
  f:close()
end

--- Prints extra figures: rows = { {name=, value=, unit=, goal=, ok=}, ... };
-- a row with `key =` is also kept for the goal table (H.record).
function H.report(title, rows)
  print(string.format("\n## %s", title))
  local w = 44
  for _, r in ipairs(rows) do w = math.max(w, #r.name) end
  print(string.format("%-" .. w .. "s %16s  %-26s", "figure", "value", "goal"))
  for _, r in ipairs(rows) do
    local verdict = r.ok == nil and "" or (r.ok and "  ok" or "  MISSED")
    print(string.format("%-" .. w .. "s %16s  %-26s%s", r.name, fmt_num(r.value) .. " " .. (r.unit or ""),
                        r.goal or "", verdict))
    if r.key then H.record(r.key, r.value) end
  end
end

--- The load average of the machine, "1-min 5-min 15-min" (Linux /proc), or "?".
function H.loadavg()
  local f = io.open("/proc/loadavg", "r")
  if not f then return "?" end
  local a, b, c = f:read("*l"):match("^(%S+) (%S+) (%S+)")
  f:close()
  return a .. " " .. b .. " " .. c
end

--- pid, ppid = H.ids(): this process's id and its parent's, as strings
-- ("PID (name) state PPID ..." of /proc/self/stat; Linux).
function H.ids()
  local f = io.open("/proc/self/stat")
  local text = f:read("a")
  f:close()
  return text:match("^(%d+) .*%) %S+ (%d+)")
end

--- H.serve(listener): the server process of a bench that runs itself as
-- one (bench/server_bench.lua, bench/validate_bench.lua with --serve):
-- prints "PORT PID" (what spec.grpc_helper.spawn_command reads), then
-- serves the pc.listen listener until the bench kills it; should the bench
-- itself die first, the server sees its parent change and exits (and after
-- 600 s in any case).
function H.serve(l)
  local pc = require "protocall"
  local pid, parent = H.ids()
  print(l.port .. " " .. pid)
  io.stdout:flush()
  local started = pc.now()
  pc.spawn(function()
    while select(2, H.ids()) == parent and pc.now() - started < 600 do pc.sleep(0.5) end
    os.exit(0)
  end)
  pc.spawn(function() l:serve() end)
  pc.run()
end

--- CPU seconds (user + system, all its threads) the process `pid` has used
-- so far, from /proc/PID/stat (clock ticks of 1/100 s, Linux's USER_HZ).
function H.proc_cpu(pid)
  local f = assert(io.open("/proc/" .. pid .. "/stat", "r"))
  local text = f:read("*a")
  f:close()
  local fields = {}
  for w in text:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = w end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- utime, stime
end

--- rate, total, cpu = H.child(command): runs the shell command line of a
-- bench client (bench/grpc_cpp/echo_client, bench/grpc_py/echo.py client),
-- which prints "RATE TOTAL CPU" (per second; calls or messages the server
-- handled; the client's CPU seconds per 10,000 of them). Raises an error
-- naming the command when it prints something else.
function H.child(command)
  local f = io.popen(command)
  local line = f:read("*l")
  f:close()
  local rate, total, cpu = (line or ""):match("^([%d.]+) (%d+) ([%d.]+)$")
  if not rate then error("no figures from: " .. command, 0) end
  return tonumber(rate), tonumber(total), tonumber(cpu)
end

--- Prints a table of figures with one column per subject and ratio
-- columns: H.table(title, {"protocall", "python3-grpcio", "C++"}, rows,
-- ratios) with rows = { {name=, unit=, values = {a, b, c}}, ... } (nil: not
-- measured) and ratios = { {name="protocall / C++", num=1, den=3}, ... }.
function H.table(title, columns, rows, ratios)
  print(string.format("\n## %s", title))
  local head = { string.format("%-46s", "figure") }
  for _, c in ipairs(columns) do head[#head + 1] = string.format("%16s", c) end
  for _, r in ipairs(ratios or {}) do head[#head + 1] = string.format("%16s", r.name) end
  print(table.concat(head, " "))
  for _, row in ipairs(rows) do
    local line = { string.format("%-46s", row.name .. (row.unit and " (" .. row.unit .. ")" or "")) }
    for i = 1, #columns do line[#line + 1] = string.format("%16s", fmt_num(row.values[i])) end
    for _, r in ipairs(ratios or {}) do
      local a, b = row.values[r.num], row.values[r.den]
      line[#line + 1] = string.format("%16s", (a and b and b ~= 0) and fmt_num(a / b) .. "x" or "-")
    end
    print(table.concat(line, " "))
  end
end

--- Resident set size of this process in bytes (Linux /proc), or nil.
function H.rss()
  local f = io.open("/proc/self/statm", "r")
  if not f then return nil end
  local _, resident = f:read("n", "n")
  f:close()
  return resident and resident * 4096 or nil
end

--- H.sh(cmd): runs the shell command line `cmd`, raising when it fails
-- (under Lua 5.4 and LuaJIT alike: their os.execute results differ).
function H.sh(cmd)
  local status = os.execute(cmd)
  if status ~= 0 and status ~= true then error("bench: command failed: " .. cmd) end
end

--- s = H.read(path): the whole file at `path` (binary), raising naming it
-- when it cannot be opened.
function H.read(path)
  local f = assert(io.open(path, "rb"), path)
  local s = f:read("*a")
  f:close()
  return s
end

return H
