--- Reading every field of a decoded message, one way for both libraries
-- the benches compare (bench/codec_bench.lua, bench/luajit/runtime_bench.lua):
-- a reading plan per type, the fields in declaration order with how to
-- walk each, so a protocall message, its `{table = true}` tables and
-- lua-protobuf's tables all cost the same reading. Two readers:
--   * W.walker: one recursive function that interprets the plan, reading
--     each field by a name held in a variable (as a generic serializer
--     does);
--   * W.reader: Lua source generated from the plan, one function per type
--     reading each field by its constant name (as application code does,
--     `span.name`), which LuaJIT compiles to loads at known hash slots.
-- Each call of either compiles its code anew, so under LuaJIT the reader
-- of one library never runs the traces recorded on the other's values.
local M = {}

--- `plan = W.plan_of(pool, T)`: the reading plan of message type `T` of
-- `pool` (plans of the types it refers to included, each made once).
function M.plan_of(pool, T)
  local plans = {}
  local function plan_of(U)
    if plans[U] then return plans[U] end
    local plan = {}
    plans[U] = plan
    for _, f in ipairs(pool:fields(U)) do
      local e = { name = f.name, kind = "scalar" }
      local map_value = f.type:match("^map<[^,]+,%s*(.-)>$")
      if map_value then
        local V = pool:type(map_value)
        e.kind = type(V) == "userdata" and "mapmsg" or "map"
        if e.kind == "mapmsg" then e.sub = plan_of(V) end
      elseif f.type == "message" or f.type == "group" then
        e.kind = f.label == "repeated" and "repmsg" or "msg"
        e.sub = plan_of(assert(pool:type(f.type_name)))
      elseif f.label == "repeated" then
        e.kind = "rep"
      end
      plan[#plan + 1] = e
    end
    return plan
  end
  return plan_of(T)
end

local WALKER = [[
local pairs_of = ...
local function walk(plan, m)
  for i = 1, #plan do
    local e = plan[i]
    local v = m[e.name]
    if v ~= nil then
      local k = e.kind
      if k == "msg" then
        walk(e.sub, v)
      elseif k == "rep" then
        for j = 1, #v do local _ = v[j] end
      elseif k == "repmsg" then
        for j = 1, #v do walk(e.sub, v[j]) end
      elseif k == "map" then
        for _ in pairs_of(v) do end
      elseif k == "mapmsg" then
        for _, x in pairs_of(v) do walk(e.sub, x) end
      end
    end
  end
end
return walk]]

--- `walk = W.walker(pairs_of)`: `walk(plan, m)` reads every field of `m`
-- (a message or a table) the plan names, maps through `pairs_of` (Lua 5.4's
-- `pairs`; `pc.pairs` under LuaJIT, whose pairs ignores `__pairs`).
function M.walker(pairs_of)
  return assert(load(WALKER, "=bench.walk.walker"))(pairs_of)
end

--- `read = W.reader(plan, pairs_of)`: `read(m)` reads every field of `m`
-- that `plan` (W.plan_of) names, by constant keys, and returns how many of
-- the values it read were not nil (each read is used, so the JIT cannot
-- drop it as dead code). Maps through `pairs_of`, as for W.walker.
function M.reader(plan, pairs_of)
  local names, bodies = {}, {}
  local function name_of(p)
    if names[p] then return names[p] end
    local fn = "read" .. (#bodies + 1)
    names[p] = fn
    local out = { "function " .. fn .. "(m)", "local c = 0" }
    bodies[#bodies + 1] = out
    for _, e in ipairs(p) do
      local get = ("m[%q]"):format(e.name)
      local k = e.kind
      if k == "scalar" then
        out[#out + 1] = ("if %s ~= nil then c = c + 1 end"):format(get)
      else
        local each
        if k == "msg" then
          each = ("c = c + %s(v)"):format(name_of(e.sub))
        elseif k == "rep" then
          each = "for j = 1, #v do if v[j] ~= nil then c = c + 1 end end"
        elseif k == "repmsg" then
          each = ("for j = 1, #v do c = c + %s(v[j]) end"):format(name_of(e.sub))
        elseif k == "map" then
          each = "for _, x in pairs_of(v) do if x ~= nil then c = c + 1 end end"
        else -- mapmsg
          each = ("for _, x in pairs_of(v) do c = c + %s(x) end"):format(name_of(e.sub))
        end
        out[#out + 1] = ("do local v = %s if v ~= nil then %s end end"):format(get, each)
      end
    end
    out[#out + 1] = "return c end"
    return fn
  end
  local root = name_of(plan)
  assert(#bodies <= 180, "bench.walk: a reader holds at most 180 message types (one local each)")
  local fns = {}
  for i = 1, #bodies do fns[i] = "read" .. i end
  local src = { "local pairs_of = ...", "local " .. table.concat(fns, ", ") }
  for _, out in ipairs(bodies) do src[#src + 1] = table.concat(out, "\n") end
  src[#src + 1] = "return " .. root
  return assert(load(table.concat(src, "\n"), "=bench.walk.reader"))(pairs_of)
end

return M
