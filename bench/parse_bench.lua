-- Loading the 11 OpenTelemetry .proto files (with their imports: the
-- built-in well-known types they use) from source text with the C parser
-- and resolver (goal under 0.4 ms; lua-protobuf's pure-Lua
-- protoc.lua takes about 3.7 ms). The texts are read once, outside the
-- timed loop. Baseline: a pure-Lua tokenizer pass over the same texts
-- (string.find per token), the least any pure-Lua parser has to do.
local H = require "bench.harness"
require "protocall"
local core = require "protocall.core"

local dir = "../shared/corpus/protos/opentelemetry"
local names, sources = {}, {}
do
  local p = io.popen("cd " .. dir .. " 2>/dev/null && find . -name '*.proto' | sort")
  for line in p:lines() do
    local name = line:gsub("^%./", "")
    local f = assert(io.open(dir .. "/" .. name, "rb"))
    sources[name] = f:read("a")
    f:close()
    names[#names + 1] = name
  end
  p:close()
end
if #names == 0 then
  print("parse_bench: corpus absent (" .. dir .. "): skipped")
  return
end
assert(#names == 11, "expected the 11 OpenTelemetry files")
assert(core.parse_proto(names, sources, true))

local texts = {}
for i, name in ipairs(names) do texts[i] = sources[name] end
-- The same files, imports first, as pc.load needs them when it reads no disk.
local ordered = {}
for _, f in ipairs(assert(core.parse_proto(names, sources))) do
  if sources[f.name] then ordered[#ordered + 1] = f.name end
end

local function tokenize(s)
  local pos, len, count = 1, #s, 0
  local find = string.find
  while pos <= len do
    local _, e = find(s, "^[%s]+", pos)
    if e then pos = e + 1 end
    if pos > len then break end
    local _, c = find(s, "^//[^\n]*", pos)
    if not c then _, c = find(s, "^[%a_][%w_]*", pos) end
    if not c then _, c = find(s, "^%d[%w.]*", pos) end
    if not c then _, c = find(s, '^"[^"\n]*"', pos) end
    if not c then c = pos end
    count = count + 1
    pos = c + 1
  end
  return count
end

H.run {
  title = "load the 11 OpenTelemetry .proto files from source",
  baseline = {
    name = "pure-Lua tokenizer pass (11 files)",
    callgrind_iters = 20, -- each operation is ~1 ms: the default 20000 would take hours
    fn = function(n)
      for _ = 1, n do
        for i = 1, #texts do tokenize(texts[i]) end
      end
    end,
  },
  cases = {
    {
      name = "core.parse_proto: parse + resolve",
      callgrind_iters = 20,
      goal = "< 0.4 ms (400000 ns)",
      check = function(ns) return ns < 400000 end,
      fn = function(n)
        for _ = 1, n do core.parse_proto(names, sources, true) end
      end,
    },
    {
      name = "pc.load of the 11 files into a new pool",
      callgrind_iters = 20,
      goal = "(what a user runs: + pool)",
      fn = function(n)
        local pc = require "protocall"
        for _ = 1, n do
          local pool = pc.pool()
          for _, name in ipairs(ordered) do
            assert(pool:load(sources[name], { name = name }))
          end
        end
      end,
    },
    {
      name = "core.parse_proto + Lua description tables",
      callgrind_iters = 20,
      goal = "(for scale)",
      fn = function(n)
        for _ = 1, n do core.parse_proto(names, sources) end
      end,
    },
  },
}
