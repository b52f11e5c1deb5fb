-- Field reads and writes of {uint32 foo = 1; uint32 bar = 2; uint32 baz = 3}
-- under LuaJIT, against plain tables, in JIT-compiled loops over 64
-- instances (so no load is hoisted out of the loop):
--   make build-luajit && LUA_CPATH='build/luajit/?.so;;' luajit bench/luajit/fields_bench.lua [--quick]
-- (`make bench` runs it). Reads of plain scalar fields go through the FFI
-- reader lua/protocall/message.lua installs (a load the JIT compiles); the
-- row "through the C __index" calls the C function that reader falls back
-- to, as every read did before it; writes are the C __newindex.
assert(rawget(_G, "jit"), "bench/luajit/fields_bench.lua runs under luajit")
local H = require "bench.harness"
local pc = require "protocall"

local Three = pc.message("bench.Three", { { "foo", "uint32", 1 }, { "bar", "uint32", 2 }, { "baz", "uint32", 3 } })
local K = 64
local tables, messages, decoded = {}, {}, {}
for i = 1, K do
  tables[i] = { foo = i, bar = 2 * i, baz = 3 * i }
  messages[i] = Three { foo = i, bar = 2 * i, baz = 3 * i }
  decoded[i] = pc.decode(Three, pc.encode(messages[i]))
end

-- The C __index behind the FFI reader (its upvalue c_index).
local c_index
do
  local index = debug.getmetatable(messages[1]).__index
  for u = 1, math.huge do
    local name, v = debug.getupvalue(index, u)
    if name == nil then break end
    if name == "c_index" then c_index = v end
  end
  assert(c_index, "no FFI reader installed")
end

local function reads(list)
  return function(n)
    local s = 0
    for i = 1, n do s = s + list[i % K + 1].bar end
    return s
  end
end

local function writes(list)
  return function(n)
    for i = 1, n do list[i % K + 1].bar = i % 1000 end
  end
end

H.run {
  title = "LuaJIT: field reads and writes, 3 x uint32, JIT-compiled loops",
  baseline = { name = "plain table read", fn = reads(tables) },
  cases = {
    { name = "message read (FFI reader)", fn = reads(messages), goal = "<= 1.0x table read",
      check = function(ns, base) return ns <= base * 1.05 end },
    { name = "decoded message read (FFI reader)", fn = reads(decoded), goal = "<= 1.0x table read",
      check = function(ns, base) return ns <= base * 1.05 end },
    { name = "message read through the C __index", fn = function(n)
        local s = 0
        for i = 1, n do s = s + c_index(messages[i % K + 1], "bar") end
        return s
      end },
    { name = "plain table write", fn = writes(tables) },
    { name = "message write (C __newindex)", fn = writes(messages) },
  },
}
