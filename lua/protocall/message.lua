--- Messages and Lua declarations (README "Schemas" and "Messages").
-- The work is in C (bindings/lua/lpc_schema.c, lpc_message.c,
-- lpc_table.c); this file names it in the module and adds `tostring(m)`,
-- which only formats.
local M = {}

local type, pairs, ipairs, tostring = type, pairs, ipairs, tostring
local format, concat, sort = string.format, table.concat, table.sort
local compat = require "protocall.compat"

function M.install(pc, core)
  local Pool = core.Pool
  local first = core.pool_new()
  local Pool_mt = getmetatable(first)

  --- pc.set_default_pool(pool): makes `pool` (a protocall.Pool: pc.pool(),
  -- or a host's pool, protocall_setdefaultpool) the one pc.type,
  -- pc.message, pc.enum, pc.extend, pc.fields and every function taking
  -- `pool =` use by default in this state. Functions copied into locals
  -- before the call keep the pool they had. Raises on a non-Pool.
  local function set_default_pool(pool)
    if type(pool) ~= "userdata" or getmetatable(pool) ~= Pool_mt then
      error("bad argument #1 to 'set_default_pool' (protocall.Pool expected, got "
        .. type(pool) .. ")", 2)
    end
    local fns = core.pool_functions(pool)
    --- The pool `pc.*` works on; other protocall modules add pool methods
    -- to `core.Pool` and read this field at each call (internal).
    pc._default_pool = pool
    pc.message, pc.enum, pc.extend, pc.type, pc.fields =
      fns.message, fns.enum, fns.extend, fns.type, fns.fields
  end
  pc.set_default_pool = set_default_pool
  set_default_pool(first)

  --- T = pc.message(full_name, fields [, {syntax = "proto2"}]): declares a
  -- message type (one synthetic file "lua:<full_name>"); raises on a bad
  -- declaration, naming the type and field.
  --- Enum = pc.enum(full_name, {NAME = number, ...} [, {syntax = "proto2"}]):
  -- a table mapping names to numbers and numbers to names.
  --- pc.extend(extendee, {{"pkg.name", type, number [, repeated=, default=]}, ...}):
  -- declares proto2 extensions of a message declared with
  -- {syntax = "proto2", extensions = {{from, to}, ...}}; reach them with
  -- pc.get_extension / pc.set_extension.
  --- pc.type(full_name) -> Type, Enum or nil.
  --- pc.fields(T) -> list of {name, number, type, type_name, label, oneof,
  -- json_name, packed, has_presence, default} in declaration order.
  --- pc.pool() -> a new independent Pool (methods: message, enum, type,
  -- fields, freeze, is_frozen, and what other modules add).
  function pc.pool() return core.pool_new() end

  pc.has = core.has
  pc.clear = core.clear
  pc.which_oneof = core.which_oneof
  pc.type_of = core.type_of
  pc.clone = core.clone
  pc.merge = core.merge
  pc.get_extension = core.get_extension
  pc.set_extension = core.set_extension

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
            local o = { "[", show_value(k), "]=" }
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
  function pc.to_table(m)
    if not is_message(m) then
      error("bad argument #1 to 'to_table' (message expected, got " .. type(m) .. ")", 2)
    end
    return core_to_table(m)
  end

  -- LuaJIT: plain scalar fields read through the FFI, which the JIT
  -- compiles to a load; a C __index is a call the JIT cannot compile.
  -- Every Type made from here on gets an __index that reads those fields
  -- (core.set_reader: field name -> slot offset * 8 + kind) and hands the
  -- rest to the C one, by a tail call, so its errors name the caller's line.
  if compat.luajit then
    local ffi = require "ffi"
    local cast, charp, charpp = ffi.cast, ffi.typeof("char *"), ffi.typeof("char **")
    local ptr = { ffi.typeof("uint32_t *"), ffi.typeof("int32_t *"), false, ffi.typeof("double *"),
                  ffi.typeof("float *"), ffi.typeof("uint8_t *") }
    -- One reader per field: a standalone message's slots are its own
    -- memory; a view holds the pc_Message pointer.
    local function reader(kind, off, view)
      local p = ptr[kind]
      if kind == 6 then
        if view then return function(m) return cast(p, cast(charpp, m)[0] + off)[0] ~= 0 end end
        return function(m) return cast(p, cast(charp, m) + off)[0] ~= 0 end
      end
      if view then return function(m) return cast(p, cast(charpp, m)[0] + off)[0] end end
      return function(m) return cast(p, cast(charp, m) + off)[0] end
    end
    local function install_reads(mt, reads, view)
      local readers, c_index = {}, mt.__index
      for name, code in pairs(reads) do
        local kind = code % 8
        readers[name] = reader(kind, (code - kind) / 8, view)
      end
      mt.__index = function(m, k)
        local r = readers[k]
        if r then return r(m) end
        return c_index(m, k)
      end
    end
    core.set_reader(function(standalone_mt, view_mt, reads)
      install_reads(standalone_mt, reads, false)
      install_reads(view_mt, reads, true)
    end)
  end

  --- for k, v in pc.pairs(x) / for i, v in pc.ipairs(x): pairs and ipairs
  -- for tables and for repeated and map containers alike. Under Lua 5.4
  -- they are pairs and ipairs; LuaJIT's pairs and ipairs take tables only
  -- (they ignore a userdata's __pairs, and ipairs reads raw), so code that
  -- runs on both iterates containers through these.
  pc.pairs = compat.pairs
  if compat.luajit then
    local function inext(c, i)
      i = i + 1
      local v = c[i]
      if v ~= nil then return i, v end
    end
    function pc.ipairs(x)
      if type(x) == "table" then return ipairs(x) end
      return inext, x, 0
    end
  else
    pc.ipairs = ipairs
  end
end

return M
