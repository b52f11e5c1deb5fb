-- The harness's seed benchmark: what a Lua-level wrapper costs over a bare
-- call. Every call-policy figure is later read against this floor.
local H = require "bench.harness"

local function target(x) return x end
local function wrap(fn) return function(x) return fn(x) end end
local wrapped = wrap(target)

H.run {
  title = "bare Lua call vs a Lua closure wrapper",
  baseline = {
    name = "bare call",
    fn = function(n)
      local f = target
      for i = 1, n do f(i) end
    end,
  },
  cases = {
    {
      name = "closure wrapper",
      goal = "(for scale)",
      fn = function(n)
        local f = wrapped
        for i = 1, n do f(i) end
      end,
    },
  },
}
