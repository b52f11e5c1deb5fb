--- Reading every field of a decoded message, one way for both libraries
-- the benches compare (bench/codec_bench.lua, bench/luajit/runtime_bench.lua):
-- a reading plan per type, the fields in declaration order with how to
-- walk each, so a protocall message, its `{table = true}` tables and
-- lua-protobuf's tables all cost the same walk.
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

--- `walk = W.walker(pairs_of)`: `walk(plan, m)` reads every field of `m`
-- (a message or a table) the plan names, maps through `pairs_of` (Lua 5.4's
-- `pairs`; `pc.pairs` under LuaJIT, whose pairs ignores `__pairs`).
function M.walker(pairs_of)
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
  return walk
end

return M
