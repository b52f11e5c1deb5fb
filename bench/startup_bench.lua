-- Start-up: what `require "protocall"` costs a stock lua5.4 (protocall.so from
-- build/release), beside a bare lua5.4, and what loading libcurl (with the
-- libraries it pulls in) costs on its own. The module opens OpenSSL
-- (protocall_tls.so) and RE2 (protocall_re2.so) on first use: two rows
-- measure that first use beside a bare require.
--   build/release/protocall bench/startup_bench.lua [--callgrind] [--quick] [--runs N]
-- Times are the best of N (20) runs of a fresh process, minus the bare one,
-- and for `require` also the median of the N runs, minus the bare median;
-- the processes of the rows take turns, so load drifts alike for each. With
-- --callgrind, instructions of each process, minus the bare one's.
local H = require "bench.harness"

local quick, callgrind, runs = false, false, 20
do
  local args, i = arg or {}, 1
  while args[i] do
    local a = args[i]
    if a == "--quick" then
      quick = true
    elseif a == "--callgrind" then
      callgrind = true
    elseif a == "--runs" and math.tointeger(tonumber(args[i + 1])) and tonumber(args[i + 1]) >= 1 then
      runs, i = math.tointeger(tonumber(args[i + 1])), i + 1
    else -- a misspelt flag would measure something else than asked, silently
      local what = a ~= "--runs" and "unknown flag '" .. a .. "'"
        or "--runs needs a whole number >= 1, got " .. (args[i + 1] and "'" .. args[i + 1] .. "'" or "nothing")
      io.stderr:write("startup_bench: ", what, " (flags: --quick, --callgrind, --runs N)\n")
      os.exit(2)
    end
    i = i + 1
  end
end
if quick then runs = 3 end

local SO = "build/release/protocall.so"
if not io.open(SO, "rb") then
  print("startup_bench: " .. SO .. " not built; skipped")
  return
end

local clock = os.clock
pcall(require, "protocall")
do
  local ok, core = pcall(require, "protocall.core")
  if ok and core.monotonic then clock = core.monotonic end
end

local function libcurl_path()
  local p = io.popen("ldd " .. SO .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out:match("libcurl[^%s]*%s+=>%s+(%S+)")
end
local CURL = libcurl_path()

local REQUIRE = ("package.cpath = %q; local pc = require 'protocall'; "):format("build/release/?.so")
local SNIPPETS = {
  bare = "",
  ["require \"protocall\""] = REQUIRE,
  ["load protocall.so (dynamic linking only)"] = ("assert(package.loadlib(%q, '*'))"):format(SO),
  -- beside `require` alone: the first pattern, and the first TLS setup (a
  -- listener's; the file is refused, after OpenSSL made its context)
  ["first pattern (opens protocall_re2.so)"] = REQUIRE .. "assert(require('protocall.core').regex('a+'))",
  ["first TLS setup (opens protocall_tls.so)"] = REQUIRE
    .. "assert(not pcall(pc.listen, pc.server({}), '127.0.0.1:0', { cert_file = '/etc/hostname' }))",
}
if CURL then SNIPPETS["load libcurl alone"] = ("assert(package.loadlib(%q, '*'))"):format(CURL) end
local BESIDE_REQUIRE = { ["first pattern (opens protocall_re2.so)"] = true,
                         ["first TLS setup (opens protocall_tls.so)"] = true }
local ORDER = { "require \"protocall\"", "load protocall.so (dynamic linking only)",
                "first pattern (opens protocall_re2.so)", "first TLS setup (opens protocall_tls.so)",
                "load libcurl alone" }

-- Every snippet `runs` times, taking turns: the sorted times (ms) of each.
local function run_times()
  local times = {}
  for _ = 1, runs do
    for name, code in pairs(SNIPPETS) do
      local cmd = ("lua5.4 -e %q >/dev/null 2>&1"):format(code)
      local t0 = clock()
      local ok = os.execute(cmd)
      local t = clock() - t0
      if not ok then error("startup_bench: failed: " .. cmd) end
      times[name] = times[name] or {}
      table.insert(times[name], t * 1e3)
    end
  end
  for _, t in pairs(times) do table.sort(t) end
  return times
end
local function median(t) return t[math.floor((#t + 1) / 2)] end

local function run_instr(code)
  return H.callgrind(("lua5.4 -e %q"):format(code))
end

local times = run_times()
local bare_ms = times.bare[1]
local bare_ir = callgrind and run_instr(SNIPPETS.bare) or nil
local require_ir = callgrind and run_instr(SNIPPETS["require \"protocall\""]) or nil
local rows = { { name = "bare lua5.4 process", value = bare_ms, unit = "ms", goal = "(subtracted below)" } }
for _, name in ipairs(ORDER) do
  local code = SNIPPETS[name]
  if code then
    local base_name = BESIDE_REQUIRE[name] and "require \"protocall\"" or "bare"
    local ms = times[name][1] - times[base_name][1]
    local row = { name = name, value = ms, unit = "ms", goal = BESIDE_REQUIRE[name] and "(beside require)" or nil }
    if name == "require \"protocall\"" then
      -- the goal is the median's: the best of a loaded machine's runs flatters
      local med = median(times[name]) - median(times.bare)
      row = { name = name .. ", median of " .. runs, value = med, unit = "ms", goal = "<= 2 ms", ok = med <= 2,
              key = "require_ms" }
      rows[#rows + 1] = row
      row = { name = name .. ", best of " .. runs, value = ms, unit = "ms" }
    end
    rows[#rows + 1] = row
    if callgrind then
      local ir = name == "require \"protocall\"" and require_ir or run_instr(code)
      local base_ir = BESIDE_REQUIRE[name] and require_ir or bare_ir
      local r = { name = name .. " instr", value = ir and base_ir and (ir - base_ir) / 1e6, unit = "M instr" }
      if name == "require \"protocall\"" and r.value then
        r.goal = "<= 5 M"
        r.ok = r.value <= 5
      end
      rows[#rows + 1] = r
    end
  end
end
if not CURL then rows[#rows + 1] = { name = "libcurl", value = nil, goal = "not linked (ldd finds none)" } end
H.report("start-up of a stock lua5.4 (beside a bare process)", rows)
