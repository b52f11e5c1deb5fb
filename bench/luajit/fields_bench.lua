-- Field reads and writes of {uint32 foo = 1; uint32 bar = 2; uint32 baz = 3}
-- under LuaJIT, against plain tables, in JIT-compiled loops over 64
-- instances (so no load is hoisted out of the loop):
--   make build-luajit && LUA_CPATH='build/luajit/?.so;;' luajit bench/luajit/fields_bench.lua [--quick] [--callgrind]
-- (`make bench` runs it). The goal rows are FFI structs (pc.ffi(Three),
-- lua/protocall/ffi/struct.lua): cdata with ffi.metatype accessors, a load or a
-- store the JIT compiles. Message objects' scalar fields go through the FFI
-- __index and __newindex lua/protocall/message.lua installs in front of
-- the C ones (a load or a store too, behind the userdata's metatable
-- check); the rows "through the C ..." call the C functions those fall
-- back to, as every access did before them.
assert(rawget(_G, "jit"), "bench/luajit/fields_bench.lua runs under luajit")
local H = require "bench.harness"
local pc = require "protocall"

local Three = pc.message("bench.Three", { { "foo", "uint32", 1 }, { "bar", "uint32", 2 }, { "baz", "uint32", 3 } })
local K = 64
local Struct = pc.ffi(Three)
local tables, messages, decoded, structs = {}, {}, {}, {}
for i = 1, K do
  structs[i] = Struct { foo = i, bar = 2 * i, baz = 3 * i }
  tables[i] = { foo = i, bar = 2 * i, baz = 3 * i }
  messages[i] = Three { foo = i, bar = 2 * i, baz = 3 * i }
  decoded[i] = pc.decode(Three, pc.encode(messages[i]))
end

-- The C __index and __newindex behind the FFI ones (their upvalue c_meta).
local function c_meta(key)
  local fn = debug.getmetatable(messages[1])[key]
  for u = 1, math.huge do
    local name, v = debug.getupvalue(fn, u)
    if name == nil then break end
    if name == "c_meta" then return v end
  end
  error("no FFI " .. key .. " installed")
end
local c_index, c_newindex = c_meta("__index"), c_meta("__newindex")

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

local function check(goal)
  return function(ns, base) return ns <= base * goal * 1.05 end
end

-- With --callgrind each case runs n and 2n times under valgrind: a read or a
-- write is a few instructions, so n must be large for them to outweigh the
-- JIT's own work, which differs a little between the two runs.
local function counted(spec)
  spec.baseline.callgrind_iters = 1000000
  for _, c in ipairs(spec.cases) do c.callgrind_iters = 1000000 end
  return spec
end

local results = H.run(counted {
  title = "LuaJIT: field reads, 3 x uint32, JIT-compiled loops",
  baseline = { name = "plain table read", fn = reads(tables) },
  cases = {
    { name = "pc.ffi struct read", fn = reads(structs), goal = "<= 1.0x table read", check = check(1.0) },
    { name = "message read (FFI __index)", fn = reads(messages), key = "luajit_scalar_read" },
    { name = "decoded message read (FFI __index)", fn = reads(decoded), key = "luajit_scalar_read" },
    { name = "message read through the C __index", fn = function(n)
        local s = 0
        for i = 1, n do s = s + c_index(messages[i % K + 1], "bar") end
        return s
      end },
  },
})
-- The read in a function the interpreter calls (its loop not compiled,
-- jit.off): a trace of its own that ends in a return, as in a handler a C
-- host calls, so nothing of the read is hoisted out of a loop. (get is
-- loaded for each list: a prototype of its own, whose trace no other
-- list's read shares.)
local function called(list)
  local get = load("return function(m) return m.bar end")()
  local function loop(n)
    local s = 0
    for i = 1, n do s = s + get(list[i % K + 1]) end
    return s
  end
  jit.off(loop)
  return loop
end
H.run(counted {
  title = "LuaJIT: field reads, 3 x uint32, in a function the interpreter calls",
  baseline = { name = "plain table read, called", fn = called(tables) },
  cases = {
    { name = "pc.ffi struct read, called", fn = called(structs) },
    { name = "message read (FFI __index), called", fn = called(messages) },
  },
})
H.run(counted {
  title = "LuaJIT: field writes, 3 x uint32, JIT-compiled loops",
  baseline = { name = "plain table write", fn = writes(tables) },
  cases = {
    { name = "pc.ffi struct write", fn = writes(structs), goal = "<= 1.5x table write", check = check(1.5) },
    { name = "message write (FFI __newindex)", fn = writes(messages) },
    { name = "decoded message write (FFI __newindex)", fn = writes(decoded) },
    { name = "message write through the C __newindex", fn = function(n)
        for i = 1, n do c_newindex(messages[i % K + 1], "bar", i % 1000) end
      end },
  },
})

-- Elements of repeated fields (the "protocall.Repeated" containers'
-- FFI __index, lua/protocall/ffi/accessors.lua) against a plain table's:
-- 64 uint32 and 64 string elements of a decoded message.
local List = pc.message("bench.List", { { "n", "uint32", 1, repeated = true }, { "s", "string", 2, repeated = true } })
local plain_n, plain_s = {}, {}
for i = 1, K do plain_n[i], plain_s[i] = i, "s" .. i end
local list = pc.decode(List, pc.encode(List { n = plain_n, s = plain_s }))
local list_n, list_s = list.n, list.s
local c_elem = debug.getmetatable(list_n).__index
for u = 1, math.huge do
  local name, v = debug.getupvalue(c_elem, u)
  assert(name, "no FFI __index installed on repeated containers")
  if name == "c_index" then c_elem = v break end
end
local function elems(c, get)
  return function(n)
    local s = 0
    for i = 1, n do s = s + #get(c, i % K + 1) end
    return s
  end
end
local function sum(c)
  return function(n)
    local s = 0
    for i = 1, n do s = s + c[i % K + 1] end
    return s
  end
end
H.run(counted {
  title = "LuaJIT: repeated element reads, JIT-compiled loops",
  baseline = { name = "plain table element read", fn = sum(plain_n) },
  cases = {
    { name = "repeated uint32 element read (FFI __index)", fn = sum(list_n) },
    { name = "repeated uint32 element through the C __index", fn = function(n)
        local s = 0
        for i = 1, n do s = s + c_elem(list_n, i % K + 1) end
        return s
      end },
    { name = "plain table string element read", fn = elems(plain_s, function(c, i) return c[i] end) },
    { name = "repeated string element read (FFI __index)", fn = elems(list_s, function(c, i) return c[i] end) },
    { name = "repeated string element through the C __index", fn = elems(list_s, c_elem) },
  },
})
return results
