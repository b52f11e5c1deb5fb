-- Sums every suite of `make test` into one closing line:
--   N passed, N failed[, N skipped]
-- Usage: lua5.4 .ci/summary.lua BUILD_DIR...
-- Each BUILD_DIR holds ctest's JUnit report (ctest.xml) and, when its ctest
-- run has the busted entry, busted's TAP report (busted.tap). C tests count
-- once each; the ctest entry that wraps busted is not counted, its specs are. A suite whose report is missing
-- counts as one failure, so a crash can never read as a pass.
local passed, failed, skipped = 0, 0, 0
local skips = {} -- "build: test: reason", printed above the closing line
local fails = {} -- "build: test", printed last above the closing line, so a log's tail names them
local per_build = {} -- "build/luajit 560/0/13": each build's share, one line above the closing one

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

for _, dir in ipairs(arg) do
  local p0, f0, s0 = passed, failed, skipped
  local xml = read(dir .. "/ctest.xml")
  if not xml then
    io.stderr:write(dir .. "/ctest.xml: missing (ctest did not finish)\n")
    failed = failed + 1
    fails[#fails + 1] = dir .. ": ctest did not finish (no ctest.xml)"
  else
    for attrs, body in xml:gmatch("<testcase(.-)>(.-)</testcase>") do
      local name = attrs:match('name="([^"]*)"')
      local status = attrs:match('status="([^"]*)"')
      if name ~= "busted" then
        if status == "run" and not body:find("<failure") then
          passed = passed + 1
        elseif status == "notrun" or status == "disabled" then
          skipped = skipped + 1
          local why = body:match("(SKIPPED:[^\n<]*)") or body:match('<skipped message="([^"]*)"') or status
          skips[#skips + 1] = dir .. ": " .. name .. ": " .. why
        else
          failed = failed + 1
          fails[#fails + 1] = dir .. ": " .. name
        end
      end
    end
  end
  local tap = read(dir .. "/busted.tap")
  local planned = tap and tap:match("\n1%.%.(%d+)") or (tap and tap:match("^1%.%.(%d+)"))
  -- a build dir without the busted suite (build/fuzz) has no TAP report
  local has_busted = xml == nil or xml:find('<testcase[^>]-name="busted"') ~= nil
  if not planned and has_busted then
    io.stderr:write(dir .. "/busted.tap: no TAP plan (busted did not finish)\n")
    failed = failed + 1
    fails[#fails + 1] = dir .. ": busted did not finish (no TAP plan)"
  end
  local diag = 0 -- diagnostic lines still to keep under the last "not ok"
  for line in (tap or ""):gmatch("[^\n]+") do
    if diag > 0 and line:match("^#") then
      fails[#fails] = fails[#fails] .. "\n    " .. line:sub(1, 300)
      diag = diag - 1
    elseif line:match("^ok %d+ %- .*# SKIP") or line:match("^ok %d+ %- # SKIP") then
      diag = 0
      skipped = skipped + 1
      skips[#skips + 1] = dir .. ": " .. line:gsub("^ok %d+ %- ", "")
    elseif line:match("^ok %d+") then
      diag = 0
      passed = passed + 1
    elseif line:match("^not ok %d+") then
      failed = failed + 1
      fails[#fails + 1] = dir .. ": " .. line:gsub("^not ok %d+ %- ", "")
      diag = 6
    end
  end
  per_build[#per_build + 1] = string.format("%s %d/%d/%d", dir, passed - p0, failed - f0, skipped - s0)
end

for _, s in ipairs(skips) do print("skipped: " .. s) end
for _, s in ipairs(fails) do print("failed: " .. s) end
print("per build (passed/failed/skipped): " .. table.concat(per_build, "; "))
local line = string.format("%d passed, %d failed", passed, failed)
if skipped > 0 then line = line .. string.format(", %d skipped", skipped) end
print(line)
os.exit(failed == 0 and passed > 0)
