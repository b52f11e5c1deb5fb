--- Message objects: the module functions on messages (pc.has, pc.clear,
-- pc.merge, pc.to_table, ...), `tostring(m)` and pc.pairs / pc.ipairs.
-- The work is in C (bindings/lua/lpc_message*.c, lpc_construct.c,
-- lpc_table.c); this file names it and formats `tostring(m)`.
local core = require "protocall.core"
local compat = require "protocall.compat"
local struct = compat.luajit and require "protocall.ffi.struct" -- pc.ffi structs are LuaJIT's

local type, ipairs, tostring, error, setmetatable, pcall = type, ipairs, tostring, error, setmetatable, pcall
local format, concat, sort = string.format, table.concat, table.sort
local Pool = core.Pool

local M = {}

--- present = pc.has(m, name): whether the field `name` (one with
-- presence) or a member of the oneof `name` is set. Raises "bad argument
-- #2 to 'has' (demo.M.a has no presence)" for a repeated, map or proto3
-- implicit-presence field, as Python's HasField refuses them.
M.has = core.has
--- pc.clear(m [, name]): clears the field `name`, every member of the
-- oneof `name`, or, without `name`, every field.
M.clear = core.clear
--- name = pc.which_oneof(m, oneof): the name of the oneof's member that
-- is set, nil when none is. Raises on a name that is no oneof of m's type.
M.which_oneof = core.which_oneof
--- T = pc.type_of(m): the message type of m; nil for a value that is not
-- a message.
M.type_of = core.type_of
--- copy = pc.clone(m): a deep copy sharing nothing with m.
M.clone = core.clone
--- pc.merge(dst, src): merges src into dst as protobuf merges (set
-- scalars and strings replace, messages merge, repeated fields append,
-- map entries replace by key, unknown fields append); src must be of
-- dst's type. Nothing of src is shared. A message merged into itself
-- raises ("bad argument #2 to 'merge' (a message cannot be merged into
-- itself: merge pc.clone(m))"; protobuf's C++ library refuses it too), as
-- does one merged into a message it holds ("t.Shape: a message cannot
-- contain itself: merge pc.clone(src)"): merge a copy, pc.clone(m).
M.merge = core.merge
--- v = pc.get_extension(m, "pkg.name"): the extension's value (its
-- default when unset; a container for a repeated one).
M.get_extension = core.get_extension
--- pc.set_extension(m, "pkg.name", v): sets the extension, with the
-- checks of a field write; nil clears it.
M.set_extension = core.set_extension

local fields_of = setmetatable({}, { __mode = "k" })
local function fields(T)
  local f = fields_of[T]
  if not f then
    f = Pool.fields(T)
    fields_of[T] = f
  end
  return f
end

local is_message, type_of, has = core.is_message, core.type_of, core.is_set

local function quote(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return format("\\%03d", c:byte())
  end) .. '"'
end

local show
-- A scalar as tostring(m) shows it.
local function show_value(v)
  if type(v) == "string" then return quote(v) end
  if v ~= v then return "nan" end -- not the C library's "-nan"
  if type(v) == "cdata" then return (tostring(v):gsub("U?LL$", "")) end -- LuaJIT's 64-bit integers
  return tostring(v)
end

local function is_map(info) return info.type:sub(1, 4) == "map<" end

-- Appends the text of `m` to `out` (one buffer for the whole tree, so a
-- deep message prints in time linear in its size).
local emit_message
local function emit(out, v)
  if is_message(v) then return emit_message(out, v) end
  out[#out + 1] = show_value(v)
end

emit_message = function(out, m)
  local T = type_of(m)
  out[#out + 1] = T.full_name .. "{"
  local sep = ""
  for _, info in ipairs(fields(T)) do
    local name = info.name
    if has(m, name) then
      out[#out + 1] = sep
      sep = ", "
      local v = m[name]
      if is_map(info) then
        local items = {}
        for k, x in compat.pairs(v) do
          -- an integer key in full: LuaJIT's tostring shows 2^47 + 1 as 1.4073748835533e+14
          local o = { "[", type(k) == "number" and format("%d", k) or show_value(k), "]=" }
          emit(o, x)
          items[#items + 1] = concat(o)
        end
        sort(items)
        out[#out + 1] = name .. "={" .. concat(items, ", ") .. "}"
      elseif info.label == "repeated" then
        out[#out + 1] = name .. "={"
        for i = 1, #v do
          if i > 1 then out[#out + 1] = ", " end
          emit(out, v[i])
        end
        out[#out + 1] = "}"
      else
        out[#out + 1] = name .. "="
        emit(out, v)
      end
    end
  end
  out[#out + 1] = "}"
end

show = function(m)
  local out = {}
  emit_message(out, m)
  return concat(out)
end
core.set_message_tostring(show)

local core_to_table = core.to_table
--- t = pc.to_table(m): plain tables of the set fields (nested messages
-- as tables, repeated fields as lists, maps as tables; enums as numbers;
-- extensions and unknown fields left out), made in one pass in C
-- (bindings/lua/lpc_table.c); pc.decode(T, bytes, {table = true}) gives
-- the same straight from bytes.
function M.to_table(m)
  if not is_message(m) then
    error("bad argument #1 to 'to_table' (message expected, got " .. type(m) .. ")", 2)
  end
  return core_to_table(m)
end

-- The name of type VT where type T is expected: "of another pool" added
-- when the two differ only in that (T{...}'s words, lpc_scalar.c).
local function other_name(VT, T)
  return VT.full_name == T.full_name and VT.full_name .. " of another pool" or VT.full_name
end

--- m | nil, err = coerce(T, value, what): `value` as a message of type
-- `T`: a message of that type as is, a plain table converted (T{...}'s
-- error on a bad field), under LuaJIT a pc.ffi struct of T copied into a
-- message. `err` begins with `what` ("demo.Router.Measure request: ...").
function M.coerce(T, value, what)
  if is_message(value) then
    local VT = type_of(value)
    if VT ~= T then return nil, format("%s: %s expected, got %s", what, T.full_name, other_name(VT, T)) end
    return value
  end
  if type(value) == "cdata" then
    local ok, m = pcall(struct.to_message, value)
    if ok then
      local S = type_of(m)
      if S == T then return m end
      return nil, format("%s: %s expected, got a struct of %s", what, T.full_name, other_name(S, T))
    end
  end
  if type(value) ~= "table" then
    return nil, format("%s: %s or a table expected, got %s", what, T.full_name, type(value))
  end
  local ok, m = core.protect(T, value)
  if not ok then return nil, format("%s: %s", what, tostring(m)) end
  return m
end

--- m = as_message(T, value, what, level): coerce, raising its error at
-- `level` (as error's; 0: no position).
function M.as_message(T, value, what, level)
  local m, err = M.coerce(T, value, what)
  if not m then error(err, level > 0 and level + 1 or 0) end
  return m
end

--- for k, v in pc.pairs(x) / for i, v in pc.ipairs(x): pairs and ipairs
-- for tables and for repeated and map containers alike. Under Lua 5.4
-- they are pairs and ipairs; LuaJIT's pairs and ipairs take tables only
-- (they ignore a userdata's __pairs, and ipairs reads raw), so code that
-- runs on both iterates containers through these. A message is not
-- iterable: pc.pairs(m) (and pairs(m) under Lua 5.4) raises "T is a
-- message, not iterable: pc.to_table(m) gives its fields as a table, ..."
M.pairs = compat.pairs
if compat.luajit then
  local function inext(c, i)
    i = i + 1
    local v = c[i]
    if v ~= nil then return i, v end
  end
  function M.ipairs(x)
    if type(x) == "table" then return ipairs(x) end
    return inext, x, 0
  end
else
  M.ipairs = ipairs
end

return M
