--- Messages and Lua declarations (doc/guide.md "Schemas" and "Messages").
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

  --- T = pc.message(full_name, fields [, {syntax = "proto2", extensions =
  -- {{100, 199}, ...}}]): declares a message type (one synthetic file
  -- "lua:<full_name>"). Each field is {name, type, number} plus options
  -- `repeated = true`, `optional = true` (explicit presence), `oneof =
  -- "name"`, `packed =`, `json_name =`, `default =` and `required = true`
  -- (proto2); its type is a scalar keyword ("int32", "string", ...),
  -- "map<K,V>" or a message or enum's full name. Raises on a bad
  -- declaration or an unknown option, naming the type and field.
  --- Enum = pc.enum(full_name, {NAME = number, ...} [, {syntax = "proto2"}]):
  -- a table mapping names to numbers and numbers to names; proto2 enums are
  -- closed and need no 0 value.
  --- pc.extend(extendee, {{"pkg.name", type, number [, repeated=, default=]}, ...}):
  -- declares proto2 extensions (full names of one package) of a message
  -- declared with {syntax = "proto2", extensions = {{from, to}, ...}};
  -- reach them with pc.get_extension / pc.set_extension.
  --- pc.type(full_name) -> Type, Enum or nil.
  --- pc.fields(T) -> list of {name, number, type, type_name, label, oneof,
  -- json_name, packed, has_presence, default} in declaration order.
  --- pc.pool() -> a new independent Pool (methods: message, enum, type,
  -- fields, freeze, is_frozen, and what other modules add); pool:freeze()
  -- refuses further loads and declarations.
  function pc.pool() return core.pool_new() end

  --- present = pc.has(m, name): whether the field `name` (one with
  -- presence) or a member of the oneof `name` is set. Raises "bad argument
  -- #2 to 'has' (demo.M.a has no presence)" for a repeated, map or proto3
  -- implicit-presence field, as Python's HasField refuses them.
  pc.has = core.has
  --- pc.clear(m [, name]): clears the field `name`, every member of the
  -- oneof `name`, or, without `name`, every field.
  pc.clear = core.clear
  --- name = pc.which_oneof(m, oneof): the name of the oneof's member that
  -- is set, nil when none is. Raises on a name that is no oneof of m's type.
  pc.which_oneof = core.which_oneof
  --- T = pc.type_of(m): the message type of m; nil for a value that is not
  -- a message.
  pc.type_of = core.type_of
  --- copy = pc.clone(m): a deep copy sharing nothing with m.
  pc.clone = core.clone
  --- pc.merge(dst, src): merges src into dst as protobuf merges (set
  -- scalars and strings replace, messages merge, repeated fields append,
  -- map entries replace by key, unknown fields append); src must be of
  -- dst's type. Nothing of src is shared.
  pc.merge = core.merge
  --- v = pc.get_extension(m, "pkg.name"): the extension's value (its
  -- default when unset; a container for a repeated one).
  pc.get_extension = core.get_extension
  --- pc.set_extension(m, "pkg.name", v): sets the extension, with the
  -- checks of a field write; nil clears it.
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
  function pc.to_table(m)
    if not is_message(m) then
      error("bad argument #1 to 'to_table' (message expected, got " .. type(m) .. ")", 2)
    end
    return core_to_table(m)
  end

  -- LuaJIT: scalar fields read and written through the FFI, which the JIT
  -- compiles to loads and stores; a C __index or __newindex is a call the
  -- JIT cannot compile. Every Type made from here on gets, in front of the
  -- C metamethods, an __index and a __newindex generated for it
  -- (core.set_reader gives each field's slot layout): one `k == "name"`
  -- test per field, which the JIT folds away for a constant key, and the
  -- load or store (strings and bytes without presence: a copy of their
  -- bytes, ffi.string; 64-bit integers: the int64_t or uint64_t cdata the C
  -- __index gives). A store is made only of a value the C __newindex would
  -- store unchanged (an integer in the field's range, a number, a boolean,
  -- an open enum's number, 64-bit: an integral number within 2^53 or
  -- int64_t / uint64_t cdata), with the presence bit or oneof case set as
  -- pc_Message_Set sets them; anything else, and every other field, goes
  -- to the C metamethod by a tail call, so its errors name the caller's
  -- line. Past CHAIN fields the rest are found through a table.
  if compat.luajit then
    local ffi = require "ffi"
    local bit = require "bit"
    local CHAIN = 40
    local env = {
      cast = ffi.cast, fill = ffi.fill, istype = ffi.istype, type = type, floor = math.floor,
      bor = bit.bor, NAN = 0 / 0, charp = ffi.typeof("char *"), charpp = ffi.typeof("char **"),
      i64 = ffi.typeof("int64_t"), u64 = ffi.typeof("uint64_t"), fstring = ffi.string,
      PU64 = ffi.typeof("uint64_t *"),
      SV = ffi.typeof("struct { const char *data; size_t size; } *"), -- pc_StringView
      P = { ffi.typeof("uint32_t *"), ffi.typeof("int32_t *"), ffi.typeof("int64_t *"),
            ffi.typeof("double *"), ffi.typeof("float *"), ffi.typeof("uint8_t *"),
            ffi.typeof("int32_t *") },
    }
    local ctype_of = { "P[1]", "P[2]", "P[3]", "P[4]", "P[5]", "P[6]", "P[7]" }
    -- The test a value must pass to be stored by write kind (v is the value;
    -- lpc_ffi_write_kind's kinds), for the struct writers of ffi.lua too.
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
    core.ffi_accepts = accepts
    -- Whether the bits of a double (its high and low words) or a float
    -- are a NaN, for ffi.lua's struct readers too.
    local band = bit.band
    function env.nan64(hi, lo) return band(hi, 0x7FF00000) == 0x7FF00000 and (band(hi, 0xFFFFF) ~= 0 or lo ~= 0) end
    function env.nan32(w) return band(w, 0x7F800000) == 0x7F800000 and band(w, 0x7FFFFF) ~= 0 end
    core.ffi_nan64, core.ffi_nan32 = env.nan64, env.nan32

    local function base(view) return view and "cast(charpp, m)[0]" or "cast(charp, m)" end

    local function read_code(f, view)
      if f.read == 8 then -- a string or bytes slot: a copy of its bytes
        return string.format("local sv = cast(SV, %s + %d) return fstring(sv.data, sv.size)", base(view),
                             f.offset)
      elseif f.read == 9 or f.read == 10 then -- 64-bit: an int64_t / uint64_t cdata, as C makes
        return string.format("return cast(%s, %s + %d)[0]", f.read == 9 and "P[3]" or "PU64", base(view),
                             f.offset)
      end
      local load = string.format("cast(%s, %s + %d)[0]", ctype_of[f.read], base(view), f.offset)
      if f.read == 6 then load = load .. " ~= 0" end
      -- A double or float NaN reads as Lua's one NaN, as lua_pushnumber
      -- makes it: LuaJIT's FFI load keeps a NaN's payload, whose bits can
      -- read as another type's tag (NaN-boxing) and crash the VM.
      if f.read == 4 then
        return string.format("local w = cast(P[1], %s + %d) if nan64(w[1], w[0]) then return NAN end return %s",
                             base(view), f.offset, load)
      elseif f.read == 5 then
        return string.format("if nan32(cast(P[1], %s + %d)[0]) then return NAN end return %s", base(view),
                             f.offset, load)
      end
      return "return " .. load
    end

    local function write_code(f, view)
      local out = { "if " .. accepts[f.write] .. " then", "local b = " .. base(view) }
      if f.hasbit >= 0 then
        local byte = 8 + (f.hasbit - f.hasbit % 8) / 8
        out[#out + 1] = string.format("local h = cast(P[6], b + %d) h[0] = bor(h[0], %d)", byte,
                                      bit.lshift(1, f.hasbit % 8))
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
    local function source(fields, what, view)
      local code = what == "read" and read_code or write_code
      local out = { "local c_meta, rest = ...",
                    what == "read" and "return function(m, k)" or "return function(m, k, v)" }
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
    -- function(m, v, k) (write; k for the C fallback).
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
    -- (by their metatable), for pc.ffi's structs (lua/protocall/ffi.lua).
    local c_metas = setmetatable({}, { __mode = "k" })
    local function install(mt, fields, view)
      local c = { mt.__index, mt.__newindex }
      if not view then c_metas[mt] = c end
      for what, key in pairs { read = "__index", write = "__newindex" } do
        local c_meta = mt[key]
        local chunk = assert(load(source(fields, what, view), "=protocall.ffi", "t", env))
        mt[key] = chunk(c_meta, rest_of(fields, what, view, c_meta))
      end
    end
    core.set_reader(function(standalone_mt, view_mt, fields)
      install(standalone_mt, fields, false)
      install(view_mt, fields, true)
    end)
    --- c_index, c_newindex = pc._c_metamethods(T): the C metamethods of
    -- T's standalone messages (internal: pc.ffi).
    function pc._c_metamethods(T)
      local c = c_metas[debug.getmetatable(T())]
      return c[1], c[2]
    end
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
