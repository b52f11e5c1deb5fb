-- Metamethods pulled out with the debug library (bindings/lua: lpc_check_self,
-- lpc_check_container, luaL_checkudata): __metatable hides them from
-- getmetatable, but debug.getmetatable hands them out, and a call with a
-- value of another kind must raise "bad argument #1 ..." rather than read
-- that value's memory. Every C function of every protocall metatable (the
-- message types', Repeated, Map, Type, Pool, Arena, channel, call, the
-- per-state codec states, ...) and of the method tables behind their
-- __index is called with nil, numbers, strings, tables, a file, a light
-- userdata, a coroutine, a function and the objects of every other kind.
-- The hot ones (a message's __index and __newindex, a container's __index,
-- a Type's __call) refuse any self that is no userdata, but take a
-- userdata as theirs without the metatable compare, which would cost a
-- third of a field read (5% of a small T{...}): they get no userdata here.
local pc = require "protocall"
local R = require "runtime"
local core = require "protocall.core"

local pool = pc.pool()
local T = pool:message("hm.T", { { "ids", "int32", 1, repeated = true }, { "labels", "map<string,int32>", 2 },
  { "sub", "hm.T", 3 }, { "n", "int32", 4 } })
local U = pool:message("hm.U", { { "a", "string", 1 } })

-- One object of each kind this state can make without a network.
local function samples()
  local m = T { ids = { 1 }, labels = { k = 1 }, sub = { n = 1 } }
  local list = { m, pc.decode(T, pc.encode(m)).sub, m.ids, m.labels, T, pool, U { a = "x" } }
  for _, make in ipairs { function() return core.regex("a") end, function() return pc.validator(pool) end } do
    local ok, v = pcall(make)
    if ok and v ~= nil then list[#list + 1] = v end
  end
  return list
end

-- The metatables: the samples', every protocall one the registry holds by
-- name, those of the registry's anonymous userdata (the table codec's
-- state), and those the Arena's __gc reaches by its upvalues (the Reaper's,
-- the Sweep's: debug.getupvalue reaches them).
local function metatables(objects)
  local list, seen = {}, {}
  local function add(mt)
    if type(mt) == "table" and not seen[mt] then
      seen[mt] = true
      list[#list + 1] = mt
    end
  end
  for _, o in ipairs(objects) do add(debug.getmetatable(o)) end
  for k, v in pairs(debug.getregistry()) do
    local name = type(v) == "table" and rawget(v, "__name")
    if type(name) == "string" and name:match("^protocall%.") then
      add(v)
    elseif type(v) == "userdata" and type(k) == "userdata" then
      local mt = debug.getmetatable(v)
      if mt and rawget(mt, "__name") == nil then add(mt) end
    end
  end
  local arena_gc = rawget(debug.getregistry()["protocall.Arena"], "__gc")
  for i = 1, math.huge do
    local name, v = debug.getupvalue(arena_gc, i)
    if name == nil then break end
    if type(v) == "userdata" then add(debug.getmetatable(v)) end
    if type(v) == "table" and type(rawget(v, "__gc")) == "function" then add(v) end
  end
  return list
end

local function is_hot(mt, key)
  local name = rawget(mt, "__name")
  if name == "protocall.Repeated" or name == "protocall.Map" then return key == "__index" end
  if name == "protocall.Type" then return key == "__call" end
  return rawget(mt, "__eq") ~= nil and (key == "__index" or key == "__newindex")
end

local function is_message_mt(mt) return type(rawget(mt, "__name")) == "string" and rawget(mt, "__eq") ~= nil end

-- Calls that may succeed: __eq compares anything (Lua 5.4 calls the
-- second operand's __eq with a foreign first), a message's __tostring
-- shows any message, and pool.fields takes a Type as well as (pool, Type).
-- With no argument at all, only __eq returns (false).
local function may_succeed(mt, key, self)
  if key == "__eq" then return true end
  if key == "__tostring" and is_message_mt(mt) then return core.is_message(self) end
  if key == "fields" and rawget(mt, "__name") == "protocall.Pool" then return rawequal(self, T) end
  return false
end

-- The debug library's replaced user values (the cases below): the error
-- they raise, and a user value read and written under either runtime
-- (LuaJIT's environment table, Lua 5.4's user values).
local REPLACED = "a message object's user values were replaced through the debug library"
local function raises_replaced(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok)
  assert.are.equal(REPLACED, (tostring(err):gsub("^[^:]*:%d+: ", "")))
end
local function uservalue(obj, n)
  if debug.getfenv then return debug.getfenv(obj)[n] end
  return (debug.getuservalue(obj, n))
end
local function set_uservalue(obj, n, value)
  if debug.getfenv then
    debug.getfenv(obj)[n] = value
  else
    debug.setuservalue(obj, value, n)
  end
end

describe("protocall metatables", function()
  it("raise on a foreign self in every metamethod and method, without a crash", function()
    local objects = samples()
    local foreign = { false, 0, 1.5, "s", true, {}, io.stdout, coroutine.create(print), print }
    if not R.luajit then foreign[#foreign + 1] = debug.upvalueid(samples, 1) end -- a light userdata
    local mts = metatables(objects)
    assert.is_true(#mts >= 10, "metatables found: " .. #mts)
    local calls, quiet = 0, {}
    for _, mt in ipairs(mts) do
      local fns = {}
      for k, v in pairs(mt) do
        if type(v) == "function" then fns[#fns + 1] = { k, v } end
        if k == "__index" and type(v) == "table" then
          for mk, mv in pairs(v) do
            if type(mv) == "function" then fns[#fns + 1] = { mk, mv } end
          end
        end
      end
      for _, kf in ipairs(fns) do
        local key, f = kf[1], kf[2]
        local selves = { { n = 0 } } -- no argument at all
        local hot = is_hot(mt, key)
        -- the Lua layer's methods (pool:load_file, ...) may take what they are given: called, not asked to raise
        local is_c = debug.getinfo(f, "S").what == "C"
        for i = 1, #foreign do
          if not (hot and type(foreign[i]) == "userdata") then selves[#selves + 1] = { n = 1, foreign[i] } end
        end
        for _, o in ipairs(objects) do
          if debug.getmetatable(o) ~= mt and not hot then selves[#selves + 1] = { n = 1, o } end
        end
        for _, s in ipairs(selves) do
          for _, rest in ipairs { {}, { 1 }, { "n" }, { 1, 2 } } do
            calls = calls + 1
            local ok, err
            if s.n == 0 then
              ok, err = pcall(f)
            else
              ok, err = pcall(f, s[1], rest[1], rest[2])
            end
            if ok and is_c and not may_succeed(mt, key, s[1]) then
              quiet[#quiet + 1] = tostring(rawget(mt, "__name")) .. " " .. tostring(key) .. "(" .. tostring(s[1]) .. ")"
            end
            assert(ok or type(err) == "string", "an error that is no string")
          end
        end
      end
    end
    assert.is_true(calls > 1000, "calls made: " .. calls)
    assert.are.same({}, quiet)
  end)

  it("name the function and what its self should be", function()
    local m = T { ids = { 1 }, labels = { k = 1 } }
    local mt, ids_mt, labels_mt = debug.getmetatable(m), debug.getmetatable(m.ids), debug.getmetatable(m.labels)
    local function raises(text, f, ...)
      local ok, err = pcall(f, ...)
      assert.is_false(ok)
      assert.are.equal(text, (tostring(err):gsub("^[^:]*:%d+: ", "")))
    end
    raises("bad argument #1 to '__index' (hm.T expected, got nil)", mt.__index, nil, "n")
    raises("bad argument #1 to '__newindex' (hm.T expected, got number)", mt.__newindex, 1, "n", 2)
    raises("bad argument #1 to '__index' (protocall.Repeated expected, got table)", ids_mt.__index, {}, 1)
    raises("bad argument #1 to '__len' (protocall.Repeated or protocall.Map expected, got hm.T)", ids_mt.__len, m)
    raises("bad argument #1 to '__index' (protocall.Map expected, got string)", labels_mt.__index, "k", "k")
    raises("bad argument #1 to '__call' (protocall.Type expected, got boolean)", debug.getmetatable(T).__call, true, {})
  end)

  it("a view or container whose user values the debug library replaced raises where it needs them", function()
    -- (debug.setfenv under LuaJIT, debug.setuservalue under Lua 5.4: the next
    -- sub-message read took the missing anchor's user values, a crash)
    local K = pool:message("hm.K", { { "sub", "hm.K", 1 }, { "kids", "hm.K", 2, repeated = true },
      { "n", "int32", 3 } })
    local function replace(obj, value)
      if debug.setfenv then
        debug.setfenv(obj, value)
      else
        debug.setuservalue(obj, value[1], 1)
      end
    end
    local bytes = pc.encode(K { sub = { sub = { n = 2 }, kids = { { n = 3 } } } })
    local function quiet(f, ...) -- raises or not; a string error, no crash
      local ok, err = pcall(f, ...)
      assert(ok or type(err) == "string")
    end
    local values = { {}, { 5 }, { "x" }, { true }, { io.stdout }, { K {} } }
    if debug.upvalueid then values[#values + 1] = { debug.upvalueid(raises_replaced, 1) } end -- a light userdata
    for _, value in ipairs(values) do
      local root = pc.decode(K, bytes)
      local v = root.sub
      replace(v, value)
      -- (reads take another full userdata as the anchor: no refs, no crash)
      local read = type(value[1]) == "userdata" and quiet or raises_replaced
      read(function() return v.sub end)
      local kid = v.kids[1] -- (its view keeps the anchor read; it raises where it uses it)
      raises_replaced(function() kid.sub = K {} end)
      raises_replaced(function() v.sub = K {} end)
      raises_replaced(pc.merge, v, K { sub = { n = 1 } })
      assert.is_true(rawequal(v, root.sub))
      root = pc.decode(K, bytes)
      local kids = root.sub.kids
      replace(kids, value)
      raises_replaced(function() return kids[1] end)
      assert.are.equal(bytes, pc.encode(root))
    end
  end)

  it("a container kept for a field replaced through the debug library raises where it is used", function()
    -- (a view's user value for a container, or a standalone message's refs
    -- entry for it, was taken as the field's container: a number, a file or
    -- another field's container crashed v.kids = {...} and pc.clear(v))
    local K = pool:message("hm.C", { { "sub", "hm.C", 1 }, { "kids", "hm.C", 2, repeated = true },
      { "n", "int32", 3 }, { "m", "map<string,hm.C>", 4 }, { "ids", "int32", 5, repeated = true } })
    local bytes = pc.encode(K { sub = { kids = { { n = 3 } }, m = { a = { n = 4 } }, ids = { 1 } } })
    local function index_of(obj, kept) -- the user value holding 'kept'
      for n = 1, 8 do
        if rawequal(uservalue(obj, n), kept) then return n end
      end
    end
    for _, field in ipairs({ "kids", "m", "ids" }) do
      local root = pc.decode(K, bytes)
      local v = root.sub
      local others = { 5, io.stdout, v[field == "m" and "kids" or "m"], pc.decode(K, bytes).sub[field] }
      local n = assert(index_of(v, v[field]))
      for _, value in ipairs(others) do
        set_uservalue(v, n, value)
        raises_replaced(function() v[field] = {} end)
        raises_replaced(pc.clear, v, field)
        assert.are.equal(bytes, pc.encode(root))
      end
      raises_replaced(pc.clear, v)
      assert.are.equal(bytes, pc.encode(root)) -- (the fields before it were cleared)
    end
    -- a standalone message keeps its containers in its refs (its user value 1)
    local r = K()
    local _ = r.kids
    local refs, key = uservalue(r, 1), nil
    for k, value in pairs(refs) do
      if rawequal(value, r.kids) then key = k end
    end
    refs[assert(key)] = io.stdout
    raises_replaced(function() r.kids = { { n = 2 } } end)
  end)

  it("a container whose message object the debug library replaced raises on a write", function()
    -- (its user value 1 was taken as a message object: c[k] = v crashed under Lua 5.4)
    local K = pool:message("hm.D", { { "sub", "hm.D", 1 }, { "kids", "hm.D", 2, repeated = true },
      { "n", "int32", 3 }, { "m", "map<string,hm.D>", 4 }, { "ids", "int32", 5, repeated = true } })
    local bytes = pc.encode(K { sub = { kids = { { n = 3 } }, m = { a = { n = 4 } }, ids = { 1 } } })
    for _, value in ipairs({ {}, 5, io.stdout, K {} }) do
      local root = pc.decode(K, bytes)
      local m, kids, ids = root.sub.m, root.sub.kids, root.sub.ids
      for _, c in ipairs({ m, kids, ids }) do set_uservalue(c, 1, value) end
      raises_replaced(function() m.z = K { n = 2 } end)
      raises_replaced(function() kids[2] = K { n = 2 } end)
      raises_replaced(function() ids[2] = 7 end)
      -- a table given to the field fills the container: its message object too
      raises_replaced(function() root.sub.kids = { K { n = 5 } } end)
      raises_replaced(function() root.sub.m = { y = K { n = 6 } } end)
      raises_replaced(function() root.sub.ids = { 8 } end)
      assert.are.equal(bytes, pc.encode(root))
    end
  end)
end)
