-- Start-up: what `require "protocall"` costs a stock lua5.4 (protocall.so from
-- build/release), beside a bare lua5.4, and what loading libcurl (with the
-- libraries it pulls in) costs on its own.
--   build/release/protocall bench/startup_bench.lua [--callgrind] [--quick]
-- Times are the best of 20 runs of a fresh process, minus the bare one; with
-- --callgrind, instructions of each process, minus the bare one's.
local H = require "bench.harness"

local quick, callgrind = false, false
for _, a in ipairs(arg or {}) do
  if a == "--quick" then quick = true end
  if a == "--callgrind" then callgrind = true end
end

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

local SNIPPETS = {
  bare = "",
  ["require \"protocall\""] = ("package.cpath = %q; require 'protocall'"):format("build/release/?.so"),
  ["load protocall.so (dynamic linking only)"] = ("assert(package.loadlib(%q, '*'))"):format(SO),
}
if CURL then SNIPPETS["load libcurl alone"] = ("assert(package.loadlib(%q, '*'))"):format(CURL) end

local function run_time(code)
  local cmd = ("lua5.4 -e %q >/dev/null 2>&1"):format(code)
  local best = math.huge
  for _ = 1, quick and 3 or 20 do
    local t0 = clock()
    local ok = os.execute(cmd)
    local t = clock() - t0
    if not ok then error("startup_bench: failed: " .. cmd) end
    if t < best then best = t end
  end
  return best * 1e3
end

local function run_instr(code)
  return H.callgrind(("lua5.4 -e %q"):format(code))
end

local bare_ms = run_time(SNIPPETS.bare)
local bare_ir = callgrind and run_instr(SNIPPETS.bare) or nil
local rows = { { name = "bare lua5.4 process", value = bare_ms, unit = "ms", goal = "(subtracted below)" } }
for _, name in ipairs { "require \"protocall\"", "load protocall.so (dynamic linking only)", "load libcurl alone" } do
  local code = SNIPPETS[name]
  if code then
    local ms = run_time(code) - bare_ms
    local row = { name = name, value = ms, unit = "ms" }
    if name == "require \"protocall\"" then
      row.goal = "<= 2 ms"
      row.ok = ms <= 2
      row.key = "require_ms"
    end
    rows[#rows + 1] = row
    if callgrind then
      local ir = run_instr(code)
      local r = { name = name .. " instr", value = ir and bare_ir and (ir - bare_ir) / 1e6, unit = "M instr" }
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
