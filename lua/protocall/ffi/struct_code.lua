--- LuaJIT only: the Lua source generated for each pc.ffi struct type
-- (ffi/struct.lua): its C declaration at the core's layout, and its
-- metatype's accessors and constructor, which the JIT compiles to loads
-- and stores.
local ffi = require "ffi"
local bit = require "bit"
local message_accessors = require "protocall.ffi.accessors"
local protect = require("protocall.core").protect

local format, concat, ipairs, pairs, pcall, select, rawget, rawequal, tostring, tonumber, type, assert =
  string.format, table.concat, ipairs, pairs, pcall, select, rawget, rawequal, tostring, tonumber, type, assert
local new, cast, typeof, istype = ffi.new, ffi.cast, ffi.typeof, ffi.istype
local voidp = typeof("void *")
local has_nkeys, nkeys = pcall(require, "table.nkeys") -- OpenResty's LuaJIT has it
if not has_nkeys then nkeys = nil end

local M = {}

--- The chunk name of this file, which ffi/struct.lua's errors skip as their own.
M.SOURCE = debug.getinfo(1, "S").short_src

local POSITIONAL = 60 -- P(v1, v2, ...): fields stored in line, the rest through C
local INDEX_GROUP = 4096 -- fields per generated __index function

-- The test a value must pass for the generated writer to store it, by
-- the layout's write kind (v is the value; 0: none, C stores it), as
-- message objects' FFI writers test it (ffi/accessors.lua).
local accepts = message_accessors.accepts

-- The environment of the generated code (`raise` added by accessors).
local function env_of(raise)
  return {
    NAN = 0 / 0, nan64 = message_accessors.nan64, nan32 = message_accessors.nan32,
    cast = cast, istype = istype, type = type, floor = math.floor,
    band = bit.band, bor = bit.bor, voidp = voidp,
    i64 = typeof("int64_t"), u64 = typeof("uint64_t"), new = new, pairs = pairs, pcall = pcall,
    raise = raise, tostring = tostring, nkeys = nkeys, select = select, rawget = rawget, rawequal = rawequal,
    typeof = typeof, tonumber = tonumber, dgetmetatable = debug.getmetatable,
  }
end
-- The start of every generated chunk's first line: each name of the
-- environment as a local, so the functions the chunk returns read them as
-- upvalues never assigned, which the JIT takes as constants. (A global is
-- a lookup in the environment, with its guards, in every trace that does
-- not hoist it out of a loop: a function C or the interpreter calls, a
-- trace that ends in a return.) nkeys, when absent, is no name: the code
-- never uses it then.
local PRELUDE
do
  local names = {}
  for name in pairs(env_of(true)) do names[#names + 1] = name end
  table.sort(names)
  PRELUDE = "local " .. concat(names, ", ") .. " = " .. concat(names, ", ") .. " "
end

local WORDS = { double = "[2]", fixed64 = "[2]", sfixed64 = "[2]", float = "" }
--- decl, cases = declaration(layout, prefix): the struct declaration of
-- `layout` (core.ffi_layout; members named `prefix` .. field
-- number, presence bits `prefix .. "h"`, oneof cases `prefix .. "c" ..
-- i`; a oneof's members share a union), with every member at the
-- core's offset.
function M.declaration(layout, prefix)
  local items = {}
  if layout.presence > 0 then
    items[#items + 1] = { offset = 0, size = layout.presence,
                          decl = format("uint8_t %sh[%d];", prefix, layout.presence) }
  end
  local cases, unions = {}, {}
  for _, f in ipairs(layout.fields) do
    local member = format("%s %s%d;", f.ctype, prefix, f.number)
    -- a fixed-width value with its bits beside it (`prefix .. "w" ..
    -- number`: NaN-safe reads, and the Lua codec's bytes)
    local words = WORDS[f.type]
    if words then
      member = format("%s %s%d; uint32_t %sw%d%s;", f.ctype, prefix, f.number, prefix, f.number, words)
      if not f.oneof then member = "union { " .. member .. " };" end
    end
    if f.oneof then
      local u = unions[f.oneof]
      if not u then
        cases[#cases + 1] = f.oneof
        cases[f.oneof] = #cases
        items[#items + 1] = { offset = f.case_offset, size = 4,
                              decl = format("uint32_t %sc%d;", prefix, #cases) }
        u = { offset = f.offset, size = f.widest, members = {} }
        unions[f.oneof] = u
        items[#items + 1] = u
      end
      u.members[#u.members + 1] = member
    else
      items[#items + 1] = { offset = f.offset, size = f.size, decl = member }
    end
  end
  for _, u in pairs(unions) do u.decl = "union { " .. concat(u.members, " ") .. " };" end
  table.sort(items, function(a, b) return a.offset < b.offset end)
  local out, at = { "struct { " }, 0
  for i, item in ipairs(items) do
    if item.offset > at then out[#out + 1] = format("uint8_t %sp%d[%d]; ", prefix, i, item.offset - at) end
    out[#out + 1] = item.decl .. " "
    at = item.offset + item.size
  end
  if layout.size > at then out[#out + 1] = format("uint8_t %st[%d]; ", prefix, layout.size - at) end
  out[#out + 1] = "}"
  return concat(out), cases
end

-- The expression reading field `f` of p, and the test of its presence
-- (nil: always there).
local function read_expr(f, prefix, cases)
  local load = format("p.%s%d", prefix, f.number)
  if f.ctype == "uint8_t" then load = load .. " ~= 0" end
  -- A NaN reads as Lua's one NaN (LuaJIT's FFI load would keep its
  -- payload, whose bits can read as another type's tag and crash the VM).
  if f.ctype == "double" then
    load = format("(nan64(p.%sw%d[1], p.%sw%d[0]) and NAN or %s)", prefix, f.number, prefix, f.number, load)
  elseif f.ctype == "float" then
    load = format("(nan32(p.%sw%d) and NAN or %s)", prefix, f.number, load)
  end
  local present
  if f.oneof then
    present = format("p.%sc%d == %d", prefix, cases[f.oneof], f.number)
  elseif f.hasbit >= 0 then
    present = format("band(p.%sh[%d], %d) ~= 0", prefix, (f.hasbit - f.hasbit % 8) / 8,
                     bit.lshift(1, f.hasbit % 8))
  end
  return load, present
end

-- The statements storing v into field `f` of p, presence bit or oneof
-- case included. (A oneof's union keeps the bytes of a wider member set
-- before: every read of a member reads its own width, under its case.)
local function write_stmt(f, prefix, cases)
  local out = {}
  if f.oneof then
    out[#out + 1] = format("p.%sc%d = %d", prefix, cases[f.oneof], f.number)
  elseif f.hasbit >= 0 then
    local byte = (f.hasbit - f.hasbit % 8) / 8
    out[#out + 1] = format("p.%sh[%d] = bor(p.%sh[%d], %d)", prefix, byte, prefix, byte,
                           bit.lshift(1, f.hasbit % 8))
  end
  if f.ctype == "uint64_t" then out[#out + 1] = "if type(v) == 'number' and v < 0 then v = i64(v) end" end
  local value = f.ctype == "uint8_t" and "(v and 1 or 0)" or "v"
  out[#out + 1] = format("p.%s%d = %s", prefix, f.number, value)
  return concat(out, " ")
end

--- index, newindex, construct = accessors(T, layout, prefix, cases,
-- defaults, get, set, from, ct, rt): the metatype's __index, __newindex
-- and constructor for `layout` (defaults: the values an empty message
-- reads; get / set: the C metamethods' paths, core.ffi_slow; from: P(m) /
-- P(q); ct: the struct's ctype; rt: {raise =, body_of =, is_struct =} of
-- ffi/struct.lua).
function M.accessors(T, layout, prefix, cases, defaults, get, set, from, ct, rt)
  local raise, body_of, is_struct = rt.raise, rt.body_of, rt.is_struct
  local src = { PRELUDE .. "local D, get, set, from, is_struct, NAMES, too_many, body, CT, ID, CASE, twice = ..." }
  -- A NULL pointer to a struct goes to the C path, which raises (body).
  -- For a struct value the test is a constant (its ctype id is ID), so
  -- the JIT drops it and never takes the struct's address; no "$ *"
  -- pointer type is made (busted memoizes ffi.typeof by its first
  -- argument), and p is compared as a void * (p == nil would call __eq).
  local null = "if tonumber(typeof(p)) ~= ID and cast(voidp, p) == nil then return %s end"
  -- __index: one function per INDEX_GROUP fields, each passing what it
  -- does not name to the next (a function holds at most 65536 constants)
  local fields, groups = layout.fields, math.ceil(#layout.fields / INDEX_GROUP)
  for g = math.max(groups, 1), 1, -1 do
    src[#src + 1] = format("local index%d = function(p, k)", g)
    if g == 1 then src[#src + 1] = null:format("get(body(p), k)") end
    for i = (g - 1) * INDEX_GROUP + 1, math.min(g * INDEX_GROUP, #fields) do
      local f = fields[i]
      local load, present = read_expr(f, prefix, cases)
      if present then
        src[#src + 1] = format("if k == %q then if %s then return %s end return D[%d] end", f.name,
                               present, load, i)
      else
        src[#src + 1] = format("if k == %q then return %s end", f.name, load)
      end
    end
    src[#src + 1] = g < groups and format("return index%d(p, k) end", g + 1) or "return get(body(p), k) end"
  end
  src[#src + 1] = "local index = index1"
  -- The writer, twice: p.name = v (the C path by a tail call, so its
  -- errors name the caller's line) and P{...}'s (through slow, which
  -- names the line calling P).
  local function writer(name, fallback)
    src[#src + 1] = "local " .. name .. " = function(p, k, v)"
    if name == "newindex" then src[#src + 1] = null:format("set(body(p), k, v)") end
    for _, f in ipairs(layout.fields) do
      if accepts[f.write] then
        src[#src + 1] = format("if k == %q then if %s then %s return end return %s end", f.name,
                               accepts[f.write], write_stmt(f, prefix, cases), fallback)
      end
    end
    src[#src + 1] = "return " .. fallback .. " end"
  end
  writer("newindex", "set(body(p), k, v)")
  src[#src + 1] = [[local function slow(p, k, v)
    local ok, err = pcall(set, cast(voidp, p), k, v)
    if not ok then raise((tostring(err):gsub("^protocall%.ffi:%d+: ", ""))) end
  end]]
  writer("store", "slow(p, k, v)")
  -- P{...}'s store through pairs: a oneof member whose oneof already
  -- has one (set by another key of the same table: p is new) raises as
  -- T{...} does (twice).
  local has_oneof = next(cases) ~= nil
  if has_oneof then
    src[#src + 1] = [[local store_new = function(p, k, v, t)
      local c = CASE[k]
      if c ~= nil and p[c] ~= 0 then twice(t) end
      store(p, k, v)
    end]]
  else
    src[#src + 1] = "local store_new = store"
  end
  -- A proxy (no entries of its own, a metatable with an __index): its
  -- fields read through it in declaration order, as T{...} reads one.
  src[#src + 1] = [=[local from_proxy = function(p, t)
    local mt = dgetmetatable(t)
    if mt == nil or rawget(mt, "__index") == nil then return p end
    for i = 1, #NAMES do
      local v = t[NAMES[i]]
      if v ~= nil then store_new(p, NAMES[i], v, t) end
    end
    return p
  end]=]
  -- The constructor, P(t) / P(m) / P(q) / P(v1, v2, ...). P{...}
  -- (from_table): with OpenResty's table.nkeys, each field read by its
  -- constant key (raw, as T{...} reads) and stored in line or through
  -- C, and the table's keys counted (the JIT compiles all of it). A table
  -- with other keys, a value C refuses, or two members of a oneof, goes
  -- through pairs on a new struct: T{...}'s order, so the same error is
  -- raised. Without table.nkeys, pairs. Field values in
  -- declaration order: each stored in line (past POSITIONAL fields,
  -- through the C path).
  local function inline_store(f, v, fallback)
    local stmt = fallback or format("slow(p, %q, %s)", f.name, v)
    if accepts[f.write] then
      stmt = format("if %s then %s else %s end", accepts[f.write]:gsub("%f[%w]v%f[^%w]", v),
                    write_stmt(f, prefix, cases):gsub("%f[%w]v%f[^%w]", v), stmt)
    end
    return stmt
  end
  -- The table branch (p and t given; returns p): in construct, or, past
  -- 200 fields, a function of its own (past some 800, a branch within
  -- construct would outgrow the jumps of LuaJIT's bytecode).
  local branch = {}
  if nkeys then
    branch[#branch + 1] = "local n, v, redo = 0, nil, false"
    for _, f in ipairs(fields) do
      local again = f.oneof and format("if p.%sc%d ~= 0 then redo = true end ", prefix, cases[f.oneof]) or ""
      local through_c = format("if not pcall(set, cast(voidp, p), %q, v) then redo = true end", f.name)
      branch[#branch + 1] = format("v = rawget(t, %q) if v ~= nil then n = n + 1 %s%s end", f.name, again,
                                   inline_store(f, "v", through_c))
    end
    branch[#branch + 1] = "if n == nkeys(t) and not redo and (n > 0 or dgetmetatable(t) == nil) then return p end"
  end
  if nkeys and has_oneof then branch[#branch + 1] = "if n > 0 then p = new(CT) end" end
  branch[#branch + 1] = "local any = false for k, v in pairs(t) do any = true store_new(p, k, v, t) end"
  branch[#branch + 1] = "if not any then return from_proxy(p, t) end return p"
  local own_function = #fields > 200
  if own_function then src[#src + 1] = "local from_table = function(p, t) " .. concat(branch, "\n") .. " end" end
  local params = {}
  for i = 2, math.min(#fields, POSITIONAL) do params[#params + 1] = "a" .. i end
  params[#params + 1] = #fields > POSITIONAL and "..." or "extra"
  src[#src + 1] = format([[local construct = function(ct, t, %s)
    local p = new(ct)
    local tt = type(t)
    if tt == "table" then %s end
    if tt == "userdata" or (tt == "cdata" and (is_struct(t) or istype(CT, t))) then return from(p, t) end]],
                         concat(params, ", "), own_function and "return from_table(p, t)" or concat(branch, "\n"))
  if #fields == 0 then src[#src + 1] = "if not rawequal(t, nil) then too_many(0) end" end
  for i = 1, math.min(#fields, POSITIONAL) do
    local a = i == 1 and "t" or "a" .. i
    -- (rawequal: LuaJIT's NULL pointer == nil, but is a value to refuse)
    src[#src + 1] = format("if not rawequal(%s, nil) then %s end", a, inline_store(fields[i], a))
  end
  if #fields > POSITIONAL then
    src[#src + 1] = format([[for i = 1, select("#", ...) do
      local v = select(i, ...)
      if not rawequal(v, nil) then
        if NAMES[i + %d] == nil then too_many(%d) end
        slow(p, NAMES[i + %d], v)
      end
    end]], POSITIONAL, #fields, POSITIONAL)
  else
    src[#src + 1] = format("if not rawequal(extra, nil) then too_many(%d) end", #fields)
  end
  src[#src + 1] = "return p end"
  src[#src + 1] = "return index, newindex, construct"
  local chunk = assert(load(concat(src, "\n"), "=protocall.ffi", "t", env_of(raise)))
  local names = {}
  for i, f in ipairs(fields) do names[i] = f.name end
  local function too_many(n)
    raise(format("%s takes at most %d field values (its fields, in declaration order)", T.full_name, n))
  end
  -- The `void *` to what the accessors got: a struct, or a pointer or a
  -- reference to one. Raises for P itself (P.x: a ctype, whose member
  -- reads come back to the accessors) and for a NULL pointer.
  local function body(p) return body_of(T, p) end
  -- Field name -> its oneof's case member, and the error of a table
  -- naming two members of one oneof: T{...}'s.
  local case_of = {}
  for _, f in ipairs(fields) do
    if f.oneof then case_of[f.name] = format("%sc%d", prefix, cases[f.oneof]) end
  end
  local function twice(t)
    local ok, err = protect(T, t)
    raise(ok and format("%s: two members of one oneof given", T.full_name) or tostring(err))
  end
  return chunk(defaults, get, set, from, is_struct, names, too_many, body, ct, tonumber(ct), case_of, twice)
end

return M
