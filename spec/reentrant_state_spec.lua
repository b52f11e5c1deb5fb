-- The codecs' per-state scratch (buffers, arenas, scratch messages) is
-- reused from call to call; a call that a finalizer or a debug hook makes
-- while another call of the same function still uses it must not change
-- what the outer call returns. Finalizers run when a call allocates (under
-- LuaJIT also inside lua_pushlstring, before it copies its bytes); "c"
-- hooks run on every function the outer call calls.
local pc = require "protocall"
local R = require "runtime"

-- The codec calls both the spec and its child process make: a chunk of
-- its own, run here and prepended to the child's script. Each codec
-- function: calls[name](x) calls it on a's or b's form (x: "a" or "b").
local SETUP = [==[
local pc = require "protocall"
local pool = pc.pool()
pool:enum("r.E", { ZERO = 0, ONE = 1, TWO = 2 })
local M = pool:message("r.M", {
  { "s", "string", 1 }, { "n", "int64", 2 }, { "l", "int32", 3, repeated = true }, { "e", "r.E", 4 },
})
local a = M { s = string.rep("a", 40), n = 1, l = { 1, 2, 3 }, e = "ONE" }
local b = M { s = string.rep("b", 300), n = 2, l = { 4, 5 }, e = "TWO" }
local wire_a, wire_b = pc.encode(a), pc.encode(b)
local json_a, json_b = pc.to_json(a), pc.to_json(b)
local calls = {
  ["pc.encode(m)"] = function(x) return pc.encode(x == "a" and a or b) end,
  ["pc.to_json(m)"] = function(x) return pc.to_json(x == "a" and a or b) end,
  ["pc.decode(T, bytes, {table = true})"] = function(x)
    local t = pc.decode(M, x == "a" and wire_a or wire_b, { table = true })
    return t.s .. "|" .. tostring(t.n) .. "|" .. table.concat(t.l, ",") .. "|" .. tostring(t.e)
  end,
  ["pc.json_to_wire(T, s)"] = function(x) return (pc.json_to_wire(M, x == "a" and json_a or json_b)) end,
  ["pc.wire_to_json(T, bytes)"] = function(x) return (pc.wire_to_json(M, x == "a" and wire_a or wire_b)) end,
}
]==]
local pool, calls = assert(load(SETUP .. "return pool, calls", "=setup"))()
local names = {}
for name in pairs(calls) do names[#names + 1] = name end
table.sort(names)

-- The finalizer stress, run by the spec below in a process of its own.
local STRESS = SETUP .. [==[
pcall(collectgarbage, "incremental") -- Lua 5.4's default is generational
collectgarbage("setpause", 100)
collectgarbage("setstepmul", 1000)
for name, run in pairs(calls) do
  local want, fired, wrong = run("a"), 0, 0
  local function fin()
    fired = fired + 1
    run("b")
  end
  for _ = 1, 5000 do
    for _ = 1, 2 do
      if newproxy then -- LuaJIT runs __gc for userdata alone
        getmetatable(newproxy(true)).__gc = fin
      else
        setmetatable({}, { __gc = fin })
      end
    end
    if run("a") ~= want then wrong = wrong + 1 end
  end
  io.write(name, ": fired ", fired, " wrong ", wrong, "\n")
end
]==]

-- The busy-mark case's script (LuaJIT), run in a process of its own: for
-- pc.encode and pc.to_json, the bytes a call adds with the collector
-- stopped (the fewest of five: the first may warm something), then a
-- finalizer raising until a call raises it, then the same count again.
local BUSY = SETUP .. [==[
local function bytes_per_call(run)
  local least = math.huge
  jit.off() -- (traces the JIT records would be counted memory)
  for _ = 1, 5 do
    collectgarbage()
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    run("b")
    least = math.min(least, (collectgarbage("count") - before) * 1024)
    collectgarbage("restart")
  end
  jit.on()
  return least
end
for _, name in ipairs { "pc.encode(m)", "pc.to_json(m)" } do
  local run = calls[name]
  local want = run("a")
  local normal = bytes_per_call(run)
  local armed, raised = true, false
  local function step() -- (all that allocates: the error comes in one of its collector steps)
    getmetatable(newproxy(true)).__gc = function()
      if armed then
        armed = false
        error("finalizer error")
      end
    end
    run("a") -- (the call's one collector step is its lua_pushlstring's)
    for _ = 1, 10 do local _ = {} end
  end
  for _ = 1, 100000 do
    local ok, err = pcall(step)
    if not ok then
      raised = tostring(err):find("finalizer error", 1, true) ~= nil
      break
    end
  end
  armed = false
  local same = run("a") == want and "yes" or "no"
  io.write(name, ": raised ", raised and "yes" or "no", " same ", same, " bytes ", normal, " then ",
    bytes_per_call(run), "\n")
end
]==]

-- Runs run() with a "c" hook calling nested() on the k-th call event, for
-- each k up to the number of events run() makes (the first call inside
-- run's codec call among them), and check(run's result, k) each time.
-- Returns the number of nested calls made and of call events.
local function each_hook_position(run, nested, check)
  local jit = rawget(_G, "jit")
  if jit then -- hooks do not fire in compiled code
    jit.flush()
    jit.off()
  end
  local events = 0
  debug.sethook(function() events = events + 1 end, "c")
  run()
  debug.sethook()
  local fired = 0
  for k = 1, events do
    local n = 0
    debug.sethook(function()
      n = n + 1
      if n == k then
        fired = fired + 1
        nested()
      end
    end, "c")
    local got = run()
    debug.sethook()
    check(got, k)
  end
  if jit then jit.on() end
  return fired, events
end

describe("codec scratch state", function()
  it("keeps each call's result when finalizers call the same function meanwhile", function()
    -- in a process of its own: a small heap, so that collections finish
    -- (and finalizers run) inside the codec calls
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(STRESS)
    f:close()
    -- LuaJIT with this module; else the protocall command (Lua 5.4 with
    -- the module built in: also the sanitizer build's)
    local run = R.luajit and "LUA_CPATH='" .. package.cpath .. "' luajit"
      or os.getenv("PROTOCALL_BIN") or "build/release/protocall"
    local out, ok = R.capture(run .. " " .. script .. " 2>&1")
    os.remove(script)
    assert.is_true(ok, out)
    local n = 0
    for name, fired, bad in out:gmatch("([^\n]-): fired (%d+) wrong (%d+)\n") do
      n = n + 1
      assert.is_true(tonumber(fired) > 100, name .. ": fired " .. fired)
      assert.are.equal("0", bad, name)
    end
    assert.are.equal(#names, n, out)
  end)

  it("keeps each call's result when a debug hook calls the same function meanwhile", function()
    for _, name in ipairs(names) do
      local run = calls[name]
      local want, other = run("a"), run("b")
      local fired, events = each_hook_position(function() return run("a") end, function()
        assert.are.equal(other, run("b"))
      end, function(got, k) assert.are.equal(want, got, name .. ": nested at call event " .. k) end)
      assert.are.equal(events, fired, name)
      assert.is_true(fired >= 2, name) -- the codec call and a call inside it at least
    end
  end)

  if R.luajit then
    it("takes the scratch back after an error left it marked busy", function()
      -- LuaJIT's lua_pushlstring runs finalizers before it copies, and a
      -- finalizer's error unwinds it: the busy mark stayed, and every later
      -- call made a scratch of its own (a CodecState or JsonState userdata:
      -- more memory per call than before the error). In a process of its
      -- own: a small heap, so that a collection finishes (and the finalizer
      -- runs) within the loop, and its error stays there.
      local script = os.tmpname()
      local f = assert(io.open(script, "w"))
      f:write(BUSY)
      f:close()
      local out, ok = R.capture("LUA_CPATH='" .. package.cpath .. "' luajit " .. script .. " 2>&1")
      os.remove(script)
      assert.is_true(ok, out)
      local n = 0
      local line = "([^\n]-): raised (%a+) same (%a+) bytes (%S+) then (%S+)\n"
      for name, raised, same, normal, after in out:gmatch(line) do
        n = n + 1
        assert.are.equal("yes", raised, name)
        assert.are.equal("yes", same, name)
        assert.are.equal(normal, after, name)
      end
      assert.are.equal(2, n, out)
    end)

    it("keeps an FFI struct's other fields when a hook writes another struct of its type meanwhile", function()
      -- p.e = "ONE" goes through the C __newindex on a scratch message
      -- (core.ffi_slow): a write to q made inside it must not land in p
      local P = pc.ffi(pool:message("r.P", { { "x", "uint32", 1 }, { "e", "r.E", 2 } }))
      local p, q = P(), P()
      local function run()
        p.x, p.e = 1, 0
        p.e = "ONE"
        return p.x .. "|" .. p.e
      end
      local fired = each_hook_position(run, function()
        q.x, q.e = 2, 0
        q.e = "TWO"
        q.x = 3
        assert.are.equal("3|2", q.x .. "|" .. q.e)
      end, function(got, k) assert.are.equal("1|1", got, "nested at call event " .. k) end)
      assert.is_true(fired >= 2)
    end)
  end
end)
