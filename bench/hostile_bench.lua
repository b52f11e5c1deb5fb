-- Inputs an attacker chooses, against protoc in the same run: wall time and
-- peak resident size of one process each (GNU time's %e and %M).
--   * a .proto whose package is 78 KB of dotted parts (both refuse it:
--     "Package name is too long"), through `protocall describe` and
--     `protoc -o /dev/null`;
--   * 5 MB of unknown groups nested 99 deep, printed without a schema by
--     `protocall decode -raw` and `protoc --decode_raw`.
--
--   build/release/protocall bench/hostile_bench.lua [--quick]
--
-- --quick: a tenth of each input (a check that everything works).
local H = require "bench.harness"

local quick = false
for _, a in ipairs(arg) do if a == "--quick" then quick = true end end
local BIN = arg[-1] or "build/release/protocall"
local SCALE = quick and 10 or 1

local dir = os.tmpname()
os.remove(dir)
H.sh("mkdir " .. dir)

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

--- seconds, kilobytes = run(cmd): one process's wall time and peak RSS;
-- its output is thrown away and its exit status ignored (both commands of
-- the package case fail on purpose).
local function run(cmd)
  local stats = dir .. "/time"
  os.execute("/usr/bin/time -f '%e %M' -o " .. stats .. " " .. cmd .. " > /dev/null 2>&1")
  local s, kb = H.read(stats):match("([%d.]+) (%d+)%s*$")
  if not s then error("bench: no figures from /usr/bin/time for: " .. cmd, 0) end
  return tonumber(s), tonumber(kb)
end

local rows = {}
local function case(name, ours, theirs)
  local s1, k1 = run(ours)
  local s2, k2 = run(theirs)
  rows[#rows + 1] = { name = name .. ": wall", unit = "s", values = { s1, s2 } }
  rows[#rows + 1] = { name = name .. ": peak RSS", unit = "MB", values = { k1 / 1024, k2 / 1024 } }
end

local parts = 78 * 1024 // 2 // SCALE
write(dir .. "/long.proto", 'syntax = "proto3";\npackage ' .. ("A."):rep(parts - 1) .. "A;\nmessage M { A a = 1; }\n")
case(("package of %d KB"):format(parts * 2 // 1024), BIN .. " describe -I " .. dir .. " -proto long.proto",
     "protoc -I " .. dir .. " -o /dev/null long.proto")

local deep = ("\11"):rep(99) .. ("\12"):rep(99) -- field 1, start group / end group
local bytes = deep:rep(5 * 1024 * 1024 // #deep // SCALE)
write(dir .. "/groups.bin", bytes)
case(("%.1f MB of groups 99 deep"):format(#bytes / 1048576), BIN .. " decode -raw " .. dir .. "/groups.bin",
     "protoc --decode_raw < " .. dir .. "/groups.bin")

H.sh("rm -r " .. dir)
H.table("hostile inputs: one process each, wall time and peak RSS (GNU time); load average " .. H.loadavg(),
        { "protocall", "protoc" }, rows, { { name = "protocall / protoc", num = 1, den = 2 } })
