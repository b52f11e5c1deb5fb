--- LuaJIT only: the accessors of message objects. Scalar fields are read
-- and written through the FFI, which the JIT compiles to loads and stores;
-- a C __index or __newindex is a call the JIT cannot compile.
-- Once this module is loaded (lua/protocall/schema/init.lua requires it
-- first), every Type made gets, in front of the C metamethods, an __index
-- and a __newindex generated for it
-- (core.set_reader gives each field's slot layout): one `k == "name"`
-- test per field, which the JIT folds away for a constant key, and the
-- load or store (strings and bytes: a copy of their bytes, ffi.string;
-- 64-bit integers: the int64_t or uint64_t cdata the C __index gives).
-- Every singular scalar, enum, string and bytes field is read so, with
-- presence too: its presence bit or oneof case is tested, and an unset
-- field reads as its zero value, or through C when its default is
-- another; an unset sub-message reads as nil, a set one through C (so
-- do repeated and map fields and extensions). A store
-- is made only of a value the C __newindex would store unchanged (an
-- integer in the field's range, a number, a boolean, an open enum's
-- number, 64-bit: an integral number within 2^53 or int64_t / uint64_t
-- cdata), with the presence bit or oneof case set as
-- pc_Message_Set sets them; anything else, and every other field, goes
-- to the C metamethod by a tail call, so its errors name the caller's
-- line. Past CHAIN fields the rest are found through a table.
local core = require "protocall.core"
local compat = require "protocall.compat"
local ffi = require "ffi"
local bit = require "bit"

local type, ipairs, setmetatable, assert, load = type, ipairs, setmetatable, assert, load

local M = {}

local CHAIN = 40
local env = {
  cast = ffi.cast, fill = ffi.fill, istype = ffi.istype, type = type, floor = math.floor,
  bor = bit.bor, band = bit.band, NAN = 0 / 0, charp = ffi.typeof("char *"), charpp = ffi.typeof("char **"),
  i64 = ffi.typeof("int64_t"), u64 = ffi.typeof("uint64_t"), fstring = ffi.string,
  PU64 = ffi.typeof("uint64_t *"),
  SV = ffi.typeof("struct { const char *data; size_t size; } *"), -- pc_StringView
  P = { ffi.typeof("uint32_t *"), ffi.typeof("int32_t *"), ffi.typeof("int64_t *"),
        ffi.typeof("double *"), ffi.typeof("float *"), ffi.typeof("uint8_t *"),
        ffi.typeof("int32_t *") },
}
local ctype_of = { "P[1]", "P[2]", "P[3]", "P[4]", "P[5]", "P[6]", "P[7]" }
-- The test a value must pass to be stored by write kind (v is the value;
-- lpc_ffi_write_kind's kinds), for the struct writers of ffi/struct.lua too.
local accepts = {
  "type(v) == 'number' and v >= 0 and v <= 4294967295 and floor(v) == v",
  "type(v) == 'number' and v >= -2147483648 and v <= 2147483647 and floor(v) == v",
  "(type(v) == 'number' and v >= -9007199254740992 and v <= 9007199254740992 and floor(v) == v)"
    .. " or istype(i64, v) or istype(u64, v)",
  "type(v) == 'number'",
  "type(v) == 'number'",
  "v == true or v == false",
  "type(v) == 'number' and v >= -2147483648 and v <= 2147483647 and floor(v) == v",
}
M.accepts = accepts
-- Whether the bits of a double (its high and low words) or a float
-- are a NaN, for ffi/struct.lua's struct readers too.
local band = bit.band
function env.nan64(hi, lo) return band(hi, 0x7FF00000) == 0x7FF00000 and (band(hi, 0xFFFFF) ~= 0 or lo ~= 0) end
function env.nan32(w) return band(w, 0x7F800000) == 0x7F800000 and band(w, 0x7FFFFF) ~= 0 end
M.nan64, M.nan32 = env.nan64, env.nan32

-- The kinds of message object an accessor serves: "standalone" (a
-- userdata holding the message), "view" (a userdata holding its address)
-- and "cdata" (a pointer cdata to the message, a view made here).
local function base(kind)
  if kind == "view" then return "cast(charpp, m)[0]" end
  return "cast(charp, m)"
end

-- The call of the C metamethod with `args` (after m): a cdata view goes
-- to C as a userdata view of the same message (U).
local function c_call(kind, args)
  return (kind == "cdata" and "c_meta(U(m), " or "c_meta(m, ") .. args .. ")"
end

-- The read of a set sub-message (its slot's pointer `p` not NULL): the
-- view made here, a pointer cdata anchored (keep) by the userdata view
-- it descends from, when that view's anchor is an Arena into which no
-- message object was stored by reference (its box's foreign flag: a slot
-- may then point to another object's memory, which C knows); else C.
-- Each read makes a new view (two views of one message are == but not
-- rawequal: remembering them by address cost more than making them).
local function submessage_code(f, kind, p)
  local holder = kind == "cdata" and "keep[m]" or "m"
  return string.format("local h = %s local bx = cast(UDV, h).box "
    .. "if bx ~= nil and bx.foreign == 0 then local VT = vts[D[%q]] "
    .. "if VT then local v = cast(VT, %s) keep[v] = h return v end end "
    .. "return %s", holder, f.name, p, c_call(kind, string.format("%q", f.name)))
end

-- The read of a field that is set (presence tested by read_code), from the
-- message's address `b` (an expression).
local function load_code(f, b, kind)
  if f.read == 12 then -- a repeated message field: a view of its slot, or C's container
    if kind == "standalone" then return string.format("return c_meta(m, %q)", f.name) end
    return string.format("local s = %s + %d local a = tonumber(cast(UPTR, s)) local v = views[a] "
      .. "if v then return v end local h = %s if cast(UDV, h).box ~= nil then "
      .. "v = LT[%q](s) views[a] = v keep[v] = h return v end return %s", b, f.offset,
      kind == "cdata" and "keep[m]" or "m", f.name, c_call(kind, string.format("%q", f.name)))
  end
  if f.read == 11 then -- a message: nil when its slot is NULL, else its view
    if kind == "standalone" then -- C makes (or finds) the view
      return string.format("if cast(charpp, %s + %d)[0] == nil then return nil end return c_meta(m, %q)",
                           b, f.offset, f.name)
    end
    return string.format("local p = cast(charpp, %s + %d)[0] if p == nil then return nil end %s", b,
                         f.offset, submessage_code(f, kind, "p"))
  elseif f.read == 8 then -- a string or bytes slot: a copy of its bytes
    return string.format("local sv = cast(SV, %s + %d) return fstring(sv.data, sv.size)", b,
                         f.offset)
  elseif f.read == 9 or f.read == 10 then -- 64-bit: an int64_t / uint64_t cdata, as C makes
    return string.format("return cast(%s, %s + %d)[0]", f.read == 9 and "P[3]" or "PU64", b,
                         f.offset)
  end
  local value = string.format("cast(%s, %s + %d)[0]", ctype_of[f.read], b, f.offset)
  if f.read == 6 then value = value .. " ~= 0" end
  -- A double or float NaN reads as Lua's one NaN, as lua_pushnumber
  -- makes it: LuaJIT's FFI load keeps a NaN's payload, whose bits can
  -- read as another type's tag (NaN-boxing) and crash the VM.
  if f.read == 4 then
    return string.format("local w = cast(P[1], %s + %d) if nan64(w[1], w[0]) then return NAN end return %s",
                         b, f.offset, value)
  elseif f.read == 5 then
    return string.format("if nan32(cast(P[1], %s + %d)[0]) then return NAN end return %s", b,
                         f.offset, value)
  end
  return "return " .. value
end

-- What an unset field reads as when it is all zero bits (f.zero), as the
-- C __index pushes it.
local zero_of = { "0", "0", nil, "0", "0", "false", nil, '""', "i64(0)", "u64(0)", "nil" }

-- The byte (from the message's address) and the mask of f's presence bit.
local function hasbit_of(f)
  return 8 + (f.hasbit - f.hasbit % 8) / 8, bit.lshift(1, f.hasbit % 8)
end

-- A field with presence (a presence bit, a oneof case) is loaded when set;
-- unset, it reads as its zero value or, with another default, through the
-- C __index (a tail call, naming the field).
local function read_code(f, kind)
  local tests = {}
  if f.hasbit >= 0 then
    tests[#tests + 1] = string.format("band(cast(P[6], b + %d)[0], %d) == 0", hasbit_of(f))
  end
  if f.case_offset ~= 0 then
    tests[#tests + 1] = string.format("cast(P[1], b + %d)[0] ~= %d", f.case_offset, f.number)
  end
  if #tests == 0 then return load_code(f, base(kind), kind) end
  local unset = f.zero and "return " .. zero_of[f.read] or "return " .. c_call(kind, string.format("%q", f.name))
  return string.format("local b = %s if %s then %s end %s", base(kind), table.concat(tests, " or "), unset,
                       load_code(f, "b", kind))
end

local function write_code(f, kind)
  local out = { "if " .. accepts[f.write] .. " then", "local b = " .. base(kind) }
  if f.hasbit >= 0 then
    out[#out + 1] = string.format("local h = cast(P[6], b + %d) h[0] = bor(h[0], %d)", hasbit_of(f))
  end
  if f.case_offset ~= 0 then
    out[#out + 1] = string.format("fill(b + %d, %d) cast(P[1], b + %d)[0] = %d", f.offset, f.widest,
                                  f.case_offset, f.number)
  end
  local value = f.write == 6 and "(v and 1 or 0)" or "v"
  out[#out + 1] = string.format("cast(%s, b + %d)[0] = %s return end", ctype_of[f.write], f.offset,
                                value)
  return table.concat(out, " ")
end

-- The source of the __index (what = "read") or __newindex ("write")
-- of one instance metatable.
local function source(fields, what, kind)
  local code = what == "read" and read_code or write_code
  local out = { "local c_meta, rest, D, LT = ...",
                what == "read" and "return function(m, k)" or "return function(m, k, v)" }
  local n = 0
  for _, f in ipairs(fields) do
    if f[what] ~= 0 then
      n = n + 1
      if n <= CHAIN then
        out[#out + 1] = string.format("if k == %q then %s end", f.name, code(f, kind))
      end
    end
  end
  if n > CHAIN then
    out[#out + 1] = what == "read" and "local r = rest[k] if r then return r(m) end"
                                    or "local w = rest[k] if w then return w(m, v, k) end"
  end
  out[#out + 1] = "return " .. c_call(kind, what == "read" and "k" or "k, v") .. " end"
  return table.concat(out, "\n")
end

-- One function per field beyond CHAIN: function(m) (read) or
-- function(m, v, k) (write; k for the C fallback).
local function rest_of(fields, what, kind, c_meta, D, LT)
  local code, rest, n = what == "read" and read_code or write_code, {}, 0
  for _, f in ipairs(fields) do
    if f[what] ~= 0 then
      n = n + 1
      if n > CHAIN then
        local args = what == "read" and "local c_meta, _, D, LT = ... return function(m) "
                                     or "local c_meta, _, D, LT = ... return function(m, v, k) "
        local tail = what == "read" and " end" or " return " .. c_call(kind, "k, v") .. " end"
        rest[f.name] = assert(load(args .. code(f, kind) .. tail, "=protocall.ffi", "t", env))(c_meta, nil, D, LT)
      end
    end
  end
  return rest
end

-- The C __index and __newindex of each Type's standalone messages
-- (by their metatable), for pc.ffi's structs (lua/protocall/ffi/struct.lua).
local c_metas = setmetatable({}, { __mode = "k" })

-- Cdata views (LuaJIT's message objects made without C): a pointer to
-- an empty struct type of their own per message type (so no member name
-- can hide a field), whose metatype has the generated accessors. keep
-- maps each to the userdata view it descends from, which keeps the
-- memory alive (a weak-keyed table: gone with the cdata).
local keep = setmetatable({}, { __mode = "k" })
local views = setmetatable({}, { __mode = "v" })
env.views, env.UPTR, env.tonumber = views, ffi.typeof("uintptr_t"), tonumber
local vts = {}
env.keep, env.vts = keep, vts
-- The box of an Arena and the payload of a userdata view
-- (bindings/lua/lpc_message.h: lpc_ArenaBox, lpc_View).
local BOX = ffi.typeof("struct { void *arena; size_t reported; int foreign; }")
env.UDV = ffi.typeof("struct { char *msg; $ *box; } *", BOX)
local view_ud = core.view_ud
local cast, charp, UDV = ffi.cast, env.charp, env.UDV
-- The userdata view of the cdata view m, for the C functions: made once
-- per cdata view, it then anchors m in keep (it holds the same anchor
-- and box as what did), so the reads C serves (maps, scalar lists)
-- share one.
local function U(m)
  local h = keep[m]
  if cast(UDV, h).msg == cast(charp, m) then return h end
  local u = view_ud(h, m)
  keep[m] = u
  return u
end
env.U = U

-- Loads the generated __index (what = "read") or __newindex ("write")
-- of the objects of `kind` in front of c_meta, the C metamethod.
local function generate(fields, what, kind, c_meta, D, LT)
  local chunk = assert(load(source(fields, what, kind), "=protocall.ffi", "t", env))
  return chunk(c_meta, rest_of(fields, what, kind, c_meta, D, LT), D, LT)
end

local function install(mt, fields, kind, D, LT)
  local c = { mt.__index, mt.__newindex }
  if kind == "standalone" then c_metas[mt] = c end
  mt.__index = generate(fields, "read", kind, c[1], D, LT)
  mt.__newindex = generate(fields, "write", kind, c[2], D, LT)
  return c
end

-- A new ctype with the metatable mt (ffi.metatype): a pointer to an
-- incomplete struct of its own (message views: no member can hide a
-- field, and an index by number raises instead of reading beside the
-- message), or with `member`, a struct holding one pointer of that name
-- (list views, indexed by number). Each declaration's text is new (a
-- number kept for the Lua state in its registry): busted under LuaJIT
-- memoizes the ffi functions by it.
local function new_view_type(mt, member)
  local reg = debug.getregistry()
  local n = (reg["protocall.view_types"] or 0) + 1
  reg["protocall.view_types"] = n
  if member then
    return ffi.metatype(ffi.typeof("struct { char *" .. member .. "; /* " .. n .. " */ }"), mt)
  end
  local name = "struct protocall_view_" .. n
  ffi.cdef(name .. ";")
  ffi.metatype(name, mt)
  return ffi.typeof(name .. " *")
end
-- What lpc_cdata_to_ud hands the C functions in place of a cdata view, by
-- its ctype's number: the userdata view or container.
local to_ud = {}
core.set_view_hook(function(x)
  local f = to_ud[tonumber(ffi.typeof(x))]
  if f then return f(x) end
end)

-- Repeated message fields of views in an Arena's memory read as list
-- views: a struct cdata holding the address of the field's slot (a
-- pc_Array *), with #,
-- indexing (elements: views made here as for sub-messages, or by C) and
-- pc.pairs / pc.ipairs; writes, and every call into C, go to the field's
-- C container (C(c), the view's C __index on the field).
local Array = ffi.typeof("struct { char **data; size_t size, cap; } **")
local floor = math.floor
local registry = debug.getregistry()
local function list_type(f, c_index)
  local rep = registry["protocall.Repeated"]
  local r_index, r_newindex = rep.__index, rep.__newindex
  local offset, name, elem = f.offset, f.name, f.message
  local function C(c)
    return c_index(view_ud(keep[c], c._pc_slot - offset), name)
  end
  local function inext(c, i)
    i = i + 1
    local v = c[i]
    if v ~= nil then return i, v end
  end
  local LT = new_view_type({
    __index = function(c, i)
      local arr = cast(Array, c._pc_slot)[0]
      if arr == nil or type(i) ~= "number" or i < 1 or i > tonumber(arr.size) or floor(i) ~= i then
        return nil
      end
      local h = keep[c]
      if cast(UDV, h).box.foreign == 0 then
        local VT = vts[elem]
        if VT then
          local v = cast(VT, arr.data[i - 1])
          keep[v] = h
          return v
        end
      end
      return r_index(C(c), i)
    end,
    __newindex = function(c, i, v) return r_newindex(C(c), i, v) end,
    __len = function(c)
      local arr = cast(Array, c._pc_slot)[0]
      return arr == nil and 0 or tonumber(arr.size)
    end,
    __tostring = function(c) return tostring(C(c)) end,
  }, "_pc_slot")
  local id = tonumber(LT)
  to_ud[id] = C
  compat.cdata_pairs[id] = function(c) return inext, c, 0 end
  return LT
end

-- The metatype of the cdata views of a type: the accessors, and the C
-- __eq and __tostring of its userdata views, reached through U.
local function metatype(fields, c, c_mt, D, LT)
  local eq, tostr = c_mt.__eq, c_mt.__tostring
  local VT = new_view_type {
    __index = generate(fields, "read", "cdata", c[1], D, LT),
    __newindex = generate(fields, "write", "cdata", c[2], D, LT),
    __eq = function(a, b)
      if keep[a] then a = U(a) end
      if keep[b] then b = U(b) end
      return eq(a, b)
    end,
    __tostring = function(m) return tostr(U(m)) end,
  }
  to_ud[tonumber(VT)] = U
  return VT
end

core.set_reader(function(standalone_mt, view_mt, fields, def)
  local D = {}
  for _, f in ipairs(fields) do
    if f.message then D[f.name] = f.message end
  end
  local LT = {}
  install(standalone_mt, fields, "standalone", D, LT)
  local c = install(view_mt, fields, "view", D, LT)
  for _, f in ipairs(fields) do
    if f.read == 12 then LT[f.name] = list_type(f, c[1]) end
  end
  vts[def] = metatype(fields, c, view_mt, D, LT)
end)
--- ud = userdata_view(m): the userdata view of the message the cdata
-- view m shows (what the C functions are handed in its place; for specs).
M.userdata_view = U

--- c_index, c_newindex = c_metamethods(T): the C metamethods of T's
-- standalone messages (for pc.ffi's structs).
function M.c_metamethods(T)
  local c = c_metas[debug.getmetatable(T())]
  return c[1], c[2]
end

return M
