-- The goal table of the message-object and connection work (its rows:
-- bench/goal_table.lua), as the last step of `make bench`: every row with its goal and "met" or "MISSED", from
-- the figures the benches measured in this run (H.record, appended to the
-- file PROTOCALL_BENCH_GOALS names), or "not measured" with the reason.
-- Ratios are the benches' own, each taken within one bench's run.
--   PROTOCALL_BENCH_GOALS=FILE make bench   (make bench sets it)
--   build/release/protocall bench/goals.lua FILE
local path = arg[1] or os.getenv("PROTOCALL_BENCH_GOALS")

local GOALS = require "bench.goal_table"

local values = {}
local f = path and io.open(path, "r")
if f then
  for line in f:lines() do
    local key, v = line:match("^([%w_]+)\t(%S+)$")
    if key and tonumber(v) then
      values[key] = values[key] or {}
      table.insert(values[key], tonumber(v))
    end
  end
  f:close()
end

local function num(x)
  if x >= 100 then return ("%.0f"):format(x) end
  if x >= 10 then return ("%.1f"):format(x) end
  return ("%.2f"):format(x)
end

print("\n## goal table (figures of this run; the issue's figure when filed beside them)")
print(("%-70s %-18s %-12s %-11s %s"):format("figure", "measured", "when filed", "goal", ""))
local met, missed, unmeasured = 0, 0, 0
for _, g in ipairs(GOALS) do
  local vs = values[g.key]
  local measured, verdict
  local goal = g.min and (">= %g %s"):format(g.min, g.unit) or ("<= %g %s"):format(g.max, g.unit)
  if not vs then
    unmeasured = unmeasured + 1
    measured, verdict = "-", "not measured: " .. g.from .. " recorded no figure in this run"
  else
    local lo, hi = math.huge, -math.huge
    for _, v in ipairs(vs) do lo, hi = math.min(lo, v), math.max(hi, v) end
    measured = (lo == hi and num(lo) or num(lo) .. "-" .. num(hi)) .. " " .. g.unit
    if (g.min and lo >= g.min) or (not g.min and hi <= g.max) then
      verdict = "met"
      met = met + 1
    else
      verdict = "MISSED"
      missed = missed + 1
    end
    if #vs < g.cases then verdict = verdict .. (" (%d of %d cases measured)"):format(#vs, g.cases) end
  end
  print(("%-70s %-18s %-12s %-11s %s"):format(g.figure, measured, g.was, goal, verdict))
end
print(("%d met, %d MISSED, %d not measured"):format(met, missed, unmeasured))
