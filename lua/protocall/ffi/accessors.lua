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
local ffi = require "ffi"
local bit = require "bit"

local type, ipairs, setmetatable, assert, load, unpack = type, ipairs, setmetatable, assert, load, unpack

local M = {}

local CHAIN = 40
local env = {
  cast = ffi.cast, fill = ffi.fill, istype = ffi.istype, type = type, floor = math.floor,
  bor = bit.bor, band = bit.band, NAN = 0 / 0, charp = ffi.typeof("char *"), charpp = ffi.typeof("char **"),
  i64 = ffi.typeof("int64_t"), u64 = ffi.typeof("uint64_t"), fstring = ffi.string,
  PU64 = ffi.typeof("uint64_t *"), PSIZE = ffi.typeof("size_t *"), tonumber = tonumber,
  SV = ffi.typeof("struct { const char *data; size_t size; } *"), -- pc_StringView
  P1 = ffi.typeof("uint32_t *"), P2 = ffi.typeof("int32_t *"), P3 = ffi.typeof("int64_t *"),
  P4 = ffi.typeof("double *"), P5 = ffi.typeof("float *"), P6 = ffi.typeof("uint8_t *"),
  P7 = ffi.typeof("int32_t *"),
}
local ctype_of = { "P1", "P2", "P3", "P4", "P5", "P6", "P7" }
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
-- The first line of a Type's chunk and of the repeated elements' reader:
-- each name of env as a local, so the functions the chunk returns read
-- them as upvalues never assigned, which the JIT takes as constants. (A global is a lookup in
-- env, with its guards, in every trace that does not hoist it out of a
-- loop: a function C calls, a trace that ends in a return.)
local PRELUDE
do
  local names = {}
  for name in pairs(env) do names[#names + 1] = name end
  table.sort(names)
  PRELUDE = "local " .. table.concat(names, ", ") .. " = " .. table.concat(names, ", ") .. " "
end

local function base(view) return view and "cast(charpp, m)[0]" or "cast(charp, m)" end

-- The read of a field that is set (presence tested by read_code), from the
-- message's address `b` (an expression).
local function load_code(f, b)
  if f.read == 11 then -- a message: nil when its slot is NULL, else C makes (or finds) its view
    return string.format("if cast(charpp, %s + %d)[0] == nil then return nil end return c_meta(m, %q)",
                         b, f.offset, f.name)
  elseif f.read == 8 then -- a string or bytes slot: a copy of its bytes
    -- (not a tail call: a trace that began in this __index cannot return
    -- from ffi.string to the reader's frame, "NYI: return to lower frame",
    -- and its side exit ran in the interpreter)
    return string.format("local sv = cast(SV, %s + %d) local s = fstring(sv.data, sv.size) return s", b,
                         f.offset)
  elseif f.read == 9 or f.read == 10 then -- 64-bit: an int64_t / uint64_t cdata, as C makes
    return string.format("return cast(%s, %s + %d)[0]", f.read == 9 and "P3" or "PU64", b,
                         f.offset)
  end
  local value = string.format("cast(%s, %s + %d)[0]", ctype_of[f.read], b, f.offset)
  if f.read == 6 then value = value .. " ~= 0" end
  -- A double or float NaN reads as Lua's one NaN, as lua_pushnumber
  -- makes it: LuaJIT's FFI load keeps a NaN's payload, whose bits can
  -- read as another type's tag (NaN-boxing) and crash the VM.
  if f.read == 4 then
    return string.format("local w = cast(P1, %s + %d) if nan64(w[1], w[0]) then return NAN end return %s",
                         b, f.offset, value)
  elseif f.read == 5 then
    return string.format("if nan32(cast(P1, %s + %d)[0]) then return NAN end return %s", b,
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
local function read_code(f, view)
  local tests = {}
  if f.hasbit >= 0 then
    tests[#tests + 1] = string.format("band(cast(P6, b + %d)[0], %d) == 0", hasbit_of(f))
  end
  if f.case_offset ~= 0 then
    tests[#tests + 1] = string.format("cast(P1, b + %d)[0] ~= %d", f.case_offset, f.number)
  end
  if #tests == 0 then return load_code(f, base(view)) end
  -- (the zero in a local: i64(0) tail-called from a trace that began in
  -- this __index is a "return to lower frame" too)
  local unset = f.zero and "local z = " .. zero_of[f.read] .. " return z"
    or string.format("return c_meta(m, %q)", f.name)
  return string.format("local b = %s if %s then %s end %s", base(view), table.concat(tests, " or "), unset,
                       load_code(f, "b"))
end

local function write_code(f, view)
  local out = { "if " .. accepts[f.write] .. " then", "local b = " .. base(view) }
  if f.hasbit >= 0 then
    out[#out + 1] = string.format("local h = cast(P6, b + %d) h[0] = bor(h[0], %d)", hasbit_of(f))
  end
  if f.case_offset ~= 0 then
    out[#out + 1] = string.format("fill(b + %d, %d) cast(P1, b + %d)[0] = %d", f.offset, f.widest,
                                  f.case_offset, f.number)
  end
  local value = f.write == 6 and "(v and 1 or 0)" or "v"
  out[#out + 1] = string.format("cast(%s, b + %d)[0] = %s return end", ctype_of[f.write], f.offset,
                                value)
  return table.concat(out, " ")
end

-- The source of the __index (what = "read") or __newindex ("write")
-- of one instance metatable: a function expression, its C metamethod and
-- its table of fields past CHAIN the locals `c_meta` and `rest`.
local function source(fields, what, view)
  local code = what == "read" and read_code or write_code
  -- a self that is no userdata (a metamethod pulled out with the debug
  -- library) goes to the C one, which refuses it, rather than to ffi.cast
  local out = { what == "read" and "function(m, k) if type(m) ~= 'userdata' then return c_meta(m, k) end"
                  or "function(m, k, v) if type(m) ~= 'userdata' then return c_meta(m, k, v) end" }
  local n = 0
  for _, f in ipairs(fields) do
    if f[what] ~= 0 then
      n = n + 1
      if n <= CHAIN then
        out[#out + 1] = string.format("if k == %q then %s end", f.name, code(f, view))
      end
    end
  end
  if n > CHAIN then
    out[#out + 1] = what == "read" and "local r = rest[k] if r then return r(m) end"
                                    or "local w = rest[k] if w then return w(m, v, k) end"
  end
  out[#out + 1] = what == "read" and "return c_meta(m, k) end" or "return c_meta(m, k, v) end"
  return table.concat(out, "\n")
end

-- One function per field beyond CHAIN: function(m) (read) or
-- function(m, v, k) (write; k for the C fallback). Each is a chunk of its
-- own reading env's names as globals (no PRELUDE: its upvalues would be
-- made again for every such field).
local function rest_of(fields, what, view, c_meta)
  local code, rest, n = what == "read" and read_code or write_code, {}, 0
  for _, f in ipairs(fields) do
    if f[what] ~= 0 then
      n = n + 1
      if n > CHAIN then
        local args = what == "read" and "local c_meta = ... return function(m) "
                                     or "local c_meta = ... return function(m, v, k) "
        local tail = what == "read" and " end" or " return c_meta(m, k, v) end"
        rest[f.name] = assert(load(args .. code(f, view) .. tail, "=protocall.ffi", "t", env))(c_meta)
      end
    end
  end
  return rest
end

-- The C __index and __newindex of each Type's standalone messages
-- (by their metatable), for pc.ffi's structs (lua/protocall/ffi/struct.lua).
-- The four metamethods of a Type (its standalone and view metatables'
-- __index and __newindex) come from one chunk, so they share PRELUDE's
-- upvalues rather than each making its own.
local c_metas = setmetatable({}, { __mode = "k" })
local SLOTS = { { "read", "__index", false }, { "write", "__newindex", false },
                { "read", "__index", true }, { "write", "__newindex", true } }
core.set_reader(function(standalone_mt, view_mt, fields)
  c_metas[standalone_mt] = { standalone_mt.__index, standalone_mt.__newindex }
  local args, exprs = {}, {}
  for i, slot in ipairs(SLOTS) do
    local what, key, view = slot[1], slot[2], slot[3]
    local c_meta = (view and view_mt or standalone_mt)[key]
    args[2 * i - 1], args[2 * i] = c_meta, rest_of(fields, what, view, c_meta)
    exprs[i] = string.format("(function(c_meta, rest) return %s end)(c_meta%d, rest%d)",
                             source(fields, what, view), i, i)
  end
  local chunk = assert(load(PRELUDE .. "local c_meta1, rest1, c_meta2, rest2, c_meta3, rest3, c_meta4, rest4 = ...\n"
                              .. "return " .. table.concat(exprs, ",\n"), "=protocall.ffi", "t", env))
  standalone_mt.__index, standalone_mt.__newindex, view_mt.__index, view_mt.__newindex =
    chunk(unpack(args, 1, 8))
end)
-- Repeated containers' __index (the "protocall.Repeated" metatable's):
-- an element of a number, bool, enum, string or bytes field read by the
-- FFI from the array the field's slot points to now (loaded at each read,
-- so a list replaced or cleared since is never read); message elements,
-- extensions' containers and keys other than numbers go to the C __index,
-- as does a self that is no userdata (a metamethod pulled out with the
-- debug library). c[k] is nil for a k that is no integer in 1..#c, as C
-- answers. The container (its message object, the anchor) keeps the
-- memory alive while the read runs.
local L = core.container_layout()
L.field = L.field / ffi.sizeof("void *") -- the field's index among the container's pointers
local elem_source = [[
local c_index, L = ...
local FIELD, TYPE, OFFSET, ISEXT, DATA, SIZE = L.field, L.type, L.offset, L.is_extension, L.data, L.size
return function(c, k)
  if type(c) ~= 'userdata' or type(k) ~= 'number' then return c_index(c, k) end
  local p = cast(charpp, c)
  local f = p[FIELD]
  local t = cast(P2, f + TYPE)[0]
  if t == 11 or t == 10 or cast(P6, f + ISEXT)[0] ~= 0 then return c_index(c, k) end
  local arr = cast(charpp, p[0] + cast(P1, f + OFFSET)[0])[0]
  if arr == nil or k < 1 or k > tonumber(cast(PSIZE, arr + SIZE)[0]) or floor(k) ~= k then return nil end
  local data, i = cast(charpp, arr + DATA)[0], k - 1
  if t == 9 or t == 12 then
    local sv = cast(SV, data) + i
    local s = fstring(sv.data, sv.size)
    return s
  elseif t == 5 or t == 14 or t == 15 or t == 17 then
    return cast(P2, data)[i]
  elseif t == 7 or t == 13 then
    return cast(P1, data)[i]
  elseif t == 8 then
    return cast(P6, data)[i] ~= 0
  elseif t == 1 then
    local w = cast(P1, data) + 2 * i
    if nan64(w[1], w[0]) then return NAN end
    return cast(P4, data)[i]
  elseif t == 2 then
    if nan32(cast(P1, data)[i]) then return NAN end
    return cast(P5, data)[i]
  elseif t == 4 or t == 6 then
    local v = cast(PU64, data)[i]
    return v
  end
  local v = cast(P3, data)[i]
  return v
end]]
do
  local mt = debug.getregistry()["protocall.Repeated"]
  mt.__index = assert(load(PRELUDE .. elem_source, "=protocall.ffi", "t", env))(mt.__index, L)
end

--- c_index, c_newindex = c_metamethods(T): the C metamethods of T's
-- standalone messages (for pc.ffi's structs).
function M.c_metamethods(T)
  local c = c_metas[debug.getmetatable(T())]
  return c[1], c[2]
end

return M
