--- FFI struct messages (README "LuaJIT"): under LuaJIT, `P = pc.ffi(T)`
-- is an FFI struct type laid out as the body of T's messages (the core's
-- layout, bindings/lua/lpc_ffi.c), with `ffi.metatype` accessors the JIT
-- compiles to loads and stores. `P{...}` makes one (28 B for three
-- uint32 fields, against a message object's 72 B), `pc.encode(p)` and
-- `pc.decode(P, bytes)` run the core codec through the FFI
-- (bindings/luajit/protocall_ffi.h), and the other message functions take
-- a struct by way of a message copy. Types of numeric, bool and enum
-- fields only: strings, sub-messages, repeated fields and maps need the
-- memory a message object anchors, which an FFI struct cannot hold.
local M = {}

local compat = require "protocall.compat"
local type, error, setmetatable, pairs, tostring, rawequal = type, error, setmetatable, pairs, tostring, rawequal
local format, concat = string.format, table.concat

function M.install(pc, core)
  if not compat.luajit then
    --- P = pc.ffi(T): LuaJIT only; under Lua 5.4 raises.
    function pc.ffi()
      error("pc.ffi needs LuaJIT's FFI (this is " .. _VERSION .. "; use the message type)", 2)
    end
    return
  end
  local ffi = require "ffi"
  local bit = require "bit"
  local api_ptr, codec_ud, cdef = core.ffi_codec()
  if not pcall(ffi.typeof, "pc_ffi_Api") then ffi.cdef(cdef) end
  local api = ffi.cast("const pc_ffi_Api *", api_ptr)
  local codec = ffi.cast("pc_ffi_Codec *", codec_ud)
  local size_out = ffi.new("size_t[1]")
  local unknown_out, unknown_size = ffi.new("const char *[1]"), ffi.new("size_t[1]")
  local new, cast, typeof, istype, fstring = ffi.new, ffi.cast, ffi.typeof, ffi.istype, ffi.string
  local voidp = typeof("void *")
  local tonumber = tonumber
  local has_nkeys, nkeys = pcall(require, "table.nkeys") -- OpenResty's LuaJIT has it
  if not has_nkeys then nkeys = nil end

  -- Unknown fields of the structs that have them (their raw wire bytes),
  -- keyed by the struct: a struct is only its fields.
  local unknown = setmetatable({}, { __mode = "k" })
  -- What each struct type is: by ctype id, {T =, P =, encode =, decode =}.
  local infos = {}
  local of_type = setmetatable({}, { __mode = "k" }) -- T -> P

  local core_encode, core_decode = pc.encode, pc.decode
  local core_is_message, core_type_of = core.is_message, pc.type_of

  -- The info of struct `p`, or nil when `p` is no struct of pc.ffi (the
  -- struct type itself, P, has P's ctype id too).
  local function info_of(p)
    if type(p) ~= "cdata" then return nil end
    local info = infos[tonumber(typeof(p))]
    if info and not rawequal(p, info.P) then return info end
    return nil
  end

  -- The test a value must pass for the generated writer to store it, by
  -- the layout's write kind (v is the value); others go to C.
  local accepts = {
    u32 = "type(v) == 'number' and v >= 0 and v <= 4294967295 and floor(v) == v",
    i32 = "type(v) == 'number' and v >= -2147483648 and v <= 2147483647 and floor(v) == v",
    enum = "type(v) == 'number' and v >= -2147483648 and v <= 2147483647 and floor(v) == v",
    i64 = "(type(v) == 'number' and v >= -9007199254740992 and v <= 9007199254740992 and floor(v) == v)"
      .. " or istype(i64, v) or istype(u64, v)",
    f32 = "type(v) == 'number'",
    f64 = "type(v) == 'number'",
    bool = "v == true or v == false",
  }
  accepts.u64 = accepts.i64

  local env = {
    cast = cast, istype = istype, type = type, floor = math.floor,
    band = bit.band, bor = bit.bor, voidp = voidp,
    i64 = typeof("int64_t"), u64 = typeof("uint64_t"), new = new, pairs = pairs, pcall = pcall,
    error = error, tostring = tostring, nkeys = nkeys,
  }

  -- The struct declaration of `layout` (members named `prefix` .. field
  -- number, presence bits `prefix .. "h"`, oneof cases `prefix .. "c" ..
  -- i`; a oneof's members share a union), with every member at the
  -- core's offset.
  local function declaration(layout, prefix)
    local items = {}
    if layout.presence > 0 then
      items[#items + 1] = { offset = 0, size = layout.presence,
                            decl = format("uint8_t %sh[%d];", prefix, layout.presence) }
    end
    local cases, unions = {}, {}
    for _, f in ipairs(layout.fields) do
      local member = format("%s %s%d;", f.ctype, prefix, f.number)
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
    if f.write == "u64" then out[#out + 1] = "if type(v) == 'number' and v < 0 then v = i64(v) end" end
    local value = f.write == "bool" and "(v and 1 or 0)" or "v"
    out[#out + 1] = format("p.%s%d = %s", prefix, f.number, value)
    return concat(out, " ")
  end

  -- The metatype's __index, __newindex and constructor for `layout`
  -- (defaults: the values an empty message reads; get / set: the C
  -- metamethods' paths, core.ffi_slow; from: P(m) / P(q)).
  local function accessors(layout, prefix, cases, defaults, get, set, from)
    local src = { "local D, get, set, from = ...", "local index = function(p, k)" }
    for i, f in ipairs(layout.fields) do
      local load, present = read_expr(f, prefix, cases)
      if present then
        src[#src + 1] = format("if k == %q then if %s then return %s end return D[%d] end", f.name,
                               present, load, i)
      else
        src[#src + 1] = format("if k == %q then return %s end", f.name, load)
      end
    end
    src[#src + 1] = "return get(cast(voidp, p), k) end"
    -- The writer, twice: p.name = v (the C path by a tail call, so its
    -- errors name the caller's line) and P{...}'s (through slow, which
    -- names the line calling P).
    local function writer(name, fallback)
      src[#src + 1] = "local " .. name .. " = function(p, k, v)"
      for _, f in ipairs(layout.fields) do
        if accepts[f.write] then
          src[#src + 1] = format("if k == %q then if %s then %s return end return %s end", f.name,
                                 accepts[f.write], write_stmt(f, prefix, cases), fallback)
        end
      end
      src[#src + 1] = "return " .. fallback .. " end"
    end
    writer("newindex", "set(cast(voidp, p), k, v)")
    src[#src + 1] = [[local function slow(p, k, v)
      local ok, err = pcall(set, cast(voidp, p), k, v)
      if not ok then error(tostring(err):gsub("^protocall%.ffi:%d+: ", ""), 4) end
    end]]
    writer("store", "slow(p, k, v)")
    -- P{...}: with OpenResty's table.nkeys, each field read by its
    -- constant key and stored in line, and the table's keys counted (the
    -- JIT compiles all of it); a table with other keys goes through pairs
    -- to raise for the first it finds. Without it, pairs.
    src[#src + 1] = [[local construct = function(ct, t)
      local p = new(ct)
      if t == nil then return p end
      if type(t) ~= "table" then return from(p, t) end]]
    if nkeys then
      src[#src + 1] = "local n, v = 0"
      for _, f in ipairs(layout.fields) do
        local stmt = format("slow(p, %q, v)", f.name)
        if accepts[f.write] then
          stmt = format("if %s then %s else %s end", accepts[f.write], write_stmt(f, prefix, cases), stmt)
        end
        src[#src + 1] = format("v = t[%q] if v ~= nil then n = n + 1 %s end", f.name, stmt)
      end
      src[#src + 1] = "if n == nkeys(t) then return p end"
    end
    src[#src + 1] = [[for k, v in pairs(t) do store(p, k, v) end
      return p
    end]]
    src[#src + 1] = "return index, newindex, construct"
    local chunk = assert(load(concat(src, "\n"), "=protocall.ffi", "t", env))
    return chunk(defaults, get, set, from)
  end

  -- The C __index and __newindex of T's messages: the generated FFI
  -- accessors of message objects (lua/protocall/message.lua) keep them.
  local c_meta = pc._c_metamethods

  local function to_message(info, p)
    local m = info.T()
    core.ffi_copy(info.T, m, cast(voidp, p), false)
    local u = unknown[p]
    if u then core.add_unknown_fields(m, u) end
    return m
  end

  --- P = pc.ffi(T): the FFI struct type of message type T (the same P for
  -- the same T). Raises under Lua 5.4, and for a type with a string,
  -- bytes, message, repeated or map field, or extension ranges ("demo.M.name
  -- is a string field; an FFI struct holds only numbers, bools and enums
  -- (use the message type)"). A struct p of P:
  --   P{x = 1, ...} / P() / P(m) (a copy of message m of type T, unknown
  --     fields included) / P(q) (a copy of struct q);
  --   p.name, p.name = v: the values, defaults and errors of T's messages
  --     (int64 fields as cdata, enums as numbers, names taken on write);
  --   pc.encode(p [, {partial = true}]), pc.decode(P, bytes [, {partial =
  --     true}]) (nil, reason on bad input, as pc.decode), pc.from_json(P,
  --     s), pc.from_text(P, s);
  --   pc.to_message(p): a message of T with p's fields and unknown fields;
  --   pc.has, pc.which_oneof, pc.clear, pc.merge, pc.type_of, pc.clone,
  --   pc.to_table, pc.to_json, pc.to_text, pc.is_initialized, tostring(p),
  --   p == q: as for T's messages.
  -- Its members (named `_` and the field number, or with more `_` when a
  -- field name starts with `_`) are the raw slots: writing them skips the
  -- checks and the presence bits. Unknown fields live beside the struct
  -- (keyed by it), so ffi.copy of a struct copies its fields only.
  function pc.ffi(T)
    local P = of_type[T]
    if P then return P end
    local is_type, layout, why = pcall(core.ffi_layout, T)
    if not is_type then
      error("bad argument #1 to 'ffi' (protocall.Type expected, got " .. type(T) .. ")", 2)
    end
    if not layout then error("pc.ffi: " .. why, 2) end
    local prefix = "_"
    for _, f in ipairs(layout.fields) do
      while f.name:sub(1, #prefix) == prefix do prefix = prefix .. "_" end
    end
    local decl, cases = declaration(layout, prefix)
    local ct = typeof(decl)
    local empty = T()
    local defaults = {}
    for i, f in ipairs(layout.fields) do defaults[i] = empty[f.name] end
    local c_index, c_newindex = c_meta(T)
    local get, set = core.ffi_slow(T, c_index, c_newindex)
    local info = { T = T }
    local function from(p, x)
      local src = info_of(x)
      if src == info then
        ffi.copy(p, x, layout.size)
        unknown[p] = unknown[x]
      elseif core_is_message(x) and core_type_of(x) == T then
        core.ffi_copy(T, x, cast(voidp, p), true)
        local u = core.unknown_fields(x)
        if u ~= "" then unknown[p] = u end
      else
        error(format("bad argument #1 to '%s' (table, %s message or struct expected, got %s)",
                     T.full_name, T.full_name, src and "another struct" or type(x)), 3)
      end
      return p
    end
    local index, newindex, construct = accessors(layout, prefix, cases, defaults, get, set, from)
    local def, size = cast("const void *", layout.def), layout.size
    info.codec = codec_ud -- what `codec` points to lives as long as the types using it
    P = ffi.metatype(ct, {
      __index = index,
      __newindex = newindex,
      __new = construct,
      __tostring = function(p) return tostring(to_message(info, p)) end,
      __eq = function(a, b)
        return info_of(a) == info and info_of(b) == info and to_message(info, a) == to_message(info, b)
      end,
    })
    info.P = P
    function info.encode(p, opts)
      local u = unknown[p]
      local partial = opts ~= nil and opts.partial and 1 or 0
      local s = api.encode(codec, def, p, size, u, u and #u or 0, partial, size_out)
      if s == nil then error(fstring(api.error(codec)), 3) end
      return fstring(s, size_out[0])
    end
    function info.decode(bytes, opts)
      if type(bytes) ~= "string" then
        error("bad argument #2 to 'decode' (string expected, got " .. type(bytes) .. ")", 3)
      end
      local partial = opts ~= nil and opts.partial and 1 or 0
      local p = new(ct)
      local r = api.decode(codec, def, bytes, #bytes, partial, p, size, unknown_out, unknown_size)
      if r ~= 0 then
        if r == 2 then error("not enough memory", 3) end
        return nil, fstring(api.error(codec))
      end
      if unknown_size[0] ~= 0 then unknown[p] = fstring(unknown_out[0], unknown_size[0]) end
      return p
    end
    infos[tonumber(ct)] = info
    of_type[T] = P
    assert(ffi.sizeof(ct) >= size, "pc.ffi: struct smaller than the layout")
    return P
  end

  -- The info of P (a struct type pc.ffi returned), or nil.
  local function info_of_ctype(P)
    if type(P) ~= "cdata" then return nil end
    local info = infos[tonumber(typeof(P))]
    if info and rawequal(P, info.P) then return info end
    return nil
  end

  --- m = pc.to_message(p): a message of p's type (pc.type_of(p)) holding
  -- p's fields and unknown fields (a copy). Raises for a non-struct.
  function pc.to_message(p)
    local info = info_of(p)
    if not info then
      error("bad argument #1 to 'to_message' (pc.ffi struct expected, got " .. type(p) .. ")", 2)
    end
    return to_message(info, p)
  end

  function pc.encode(m, a, b)
    local info = info_of(m)
    if info then return info.encode(m, a) end
    info = info_of_ctype(m)
    if info then return info.encode(info.P(a), b) end
    return core_encode(m, a, b)
  end

  function pc.decode(T, bytes, opts)
    local info = info_of_ctype(T)
    if info then
      if opts ~= nil and type(opts) == "table" and opts.table then return core_decode(info.T, bytes, opts) end
      return info.decode(bytes, opts)
    end
    return core_decode(T, bytes, opts)
  end

  -- Functions of a message (first argument) that read it: a struct goes
  -- as a message copy.
  for _, name in ipairs { "has", "which_oneof", "to_table", "to_json", "to_text", "is_initialized" } do
    local fn = pc[name]
    pc[name] = function(m, ...)
      local info = info_of(m)
      if info then return fn(to_message(info, m), ...) end
      return fn(m, ...)
    end
  end
  -- Functions that change it: through a message copy and back.
  for _, name in ipairs { "clear", "merge" } do
    local fn = pc[name]
    pc[name] = function(m, ...)
      local info = info_of(m)
      if not info then return fn(m, ...) end
      local copy = to_message(info, m)
      local other = ... -- pc.merge(p, q): q may be a struct too
      local oinfo = info_of(other)
      if oinfo then fn(copy, to_message(oinfo, other), select(2, ...)) else fn(copy, ...) end
      core.ffi_copy(info.T, copy, cast(voidp, m), true)
      local u = core.unknown_fields(copy)
      unknown[m] = u ~= "" and u or nil
    end
  end
  -- Parsers into a type: P gives a struct.
  for _, name in ipairs { "from_json", "from_text" } do
    local fn = pc[name]
    pc[name] = function(T, ...)
      local info = info_of_ctype(T)
      if not info then return fn(T, ...) end
      local m, err = fn(info.T, ...)
      if m == nil then return nil, err end
      return info.P(m)
    end
  end
  function pc.type_of(m)
    local info = info_of(m)
    if info then return info.T end
    return core_type_of(m)
  end
  local clone = pc.clone
  function pc.clone(m)
    local info = info_of(m)
    if info then return info.P(m) end
    return clone(m)
  end
end

return M
