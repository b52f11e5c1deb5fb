-- The cached callable against a bare call: a million calls of a
-- callable wrapping `function() return 1 end` with Retry() and a timeout.
-- Run: build/release/protocall bench/callable_bench.lua [--callgrind]
local H = require "bench.harness"
local pc = require "protocall"
local core = require "protocall.core"

local function target() return 1 end

-- What a careful user writes by hand: a deadline from a monotonic clock and
-- a pcall per attempt, backoff on failure.
local function hand_written(fn, timeout, retryable)
  local clock, sleep = core.monotonic, core.sleep
  return function(request)
    local deadline = clock() + timeout
    local cap = 1
    while true do
      local ok, res = pcall(fn, request, deadline - clock())
      if ok then return res end
      if not retryable(res) then error(res, 0) end
      local s = cap * math.random()
      if clock() + s > deadline then error(res, 0) end
      sleep(s)
      cap = math.min(cap * 2, 60)
    end
  end
end

local retry = pc.Retry()
local callable = pc.wrap_method(target, { retry = retry, timeout = 10 })
local wrapped = hand_written(target, 10, pc.if_transient_error)
local opts = { retry = retry, timeout = 5 }
local md = { { "x-request-id", "42" } }

local results = H.run {
  title = "callable vs bare call (target returns 1; Retry() and timeout 10)",
  baseline = {
    name = "bare call",
    fn = function(n)
      local f = target
      for i = 1, n do f(i) end
    end,
  },
  cases = {
    {
      name = "hand-written Lua pcall retry wrapper",
      goal = "(for scale)",
      fn = function(n)
        local f = wrapped
        for i = 1, n do f(i) end
      end,
    },
    {
      name = "callable, fast path",
      goal = "<= bare + 60 ns",
      check = function(ns, base) return ns - base <= 60 end,
      fn = function(n)
        local f = callable
        for i = 1, n do f(i) end
      end,
    },
    {
      name = "callable, per-call options (one table)",
      goal = "<= fast path + 150 ns",
      fn = function(n)
        local f, o = callable, opts
        for i = 1, n do f(i, o) end
      end,
    },
    {
      name = "callable, per-call options (fresh table)",
      goal = "(table built per call)",
      fn = function(n)
        local f, r = callable, retry
        for i = 1, n do f(i, { retry = r, timeout = 5 }) end
      end,
    },
    {
      name = "callable, per-call metadata",
      goal = "(fresh merged list)",
      fn = function(n)
        local f, m = callable, md
        for i = 1, n do f(i, { metadata = m }) end
      end,
    },
    {
      name = "callable, new Retry each call (miss)",
      goal = "(cache miss)",
      fn = function(n)
        local f, R = callable, pc.Retry
        for i = 1, n do f(i, { retry = R() }) end
      end,
    },
  },
}

-- The child processes of --callgrind run one case and return nothing.
if results then
  local fast = results["callable, fast path"].ns
  local bare = results["bare call"].ns
  local with_opts = results["callable, per-call options (one table)"].ns

  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  local f = callable
  for i = 1, 1000000 do f(i) end
  local after = collectgarbage("count")
  collectgarbage("restart")

  H.report("callable: overheads and memory", {
    { name = "fast path - bare call", value = fast - bare, unit = "ns", goal = "<= 60 ns",
      ok = fast - bare <= 60 },
    { name = "per-call options - fast path", value = with_opts - fast, unit = "ns",
      goal = "<= 150 ns", ok = with_opts - fast <= 150 },
    { name = "GC memory before 1e6 fast-path calls", value = before, unit = "KiB" },
    { name = "GC memory after 1e6 fast-path calls", value = after, unit = "KiB",
      goal = "= before", ok = after == before },
    { name = "plan cache after the run (hits)", value = callable:cache_info().hits, unit = "" },
  })
end
