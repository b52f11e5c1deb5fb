--- FFI struct messages: under LuaJIT, `P = pc.ffi(T)`
-- is an FFI struct type laid out as the body of T's messages (the core's
-- layout, bindings/lua/lpc_ffi.c), with `ffi.metatype` accessors the JIT
-- compiles to loads and stores. `P{...}` makes one (28 B for three
-- uint32 fields, against a message object's 72 B), `pc.encode(p)` and
-- `pc.decode(P, bytes)` run the core codec through the FFI
-- (bindings/luajit/protocall_ffi.h), and the other message functions take
-- a struct by way of a message copy. Types of numeric, bool and enum
-- fields only: strings, sub-messages, repeated fields and maps need the
-- memory a message object anchors, which an FFI struct cannot hold.
local compat = require "protocall.compat"

local type, error, setmetatable, pairs, ipairs, tostring, rawequal, pcall, select, tonumber =
  type, error, setmetatable, pairs, ipairs, tostring, rawequal, pcall, select, tonumber
local format = string.format

local M = {}


if not compat.luajit then
  -- P = pc.ffi(T): LuaJIT only; under Lua 5.4 raises.
  function M.ffi()
    error("pc.ffi needs LuaJIT's FFI (this is " .. _VERSION .. "; use the message type)", 2)
  end
  -- m = pc.to_message(p): LuaJIT only (there are no structs to convert).
  function M.to_message()
    error("pc.to_message takes pc.ffi structs, which need LuaJIT's FFI (this is " .. _VERSION .. ")", 2)
  end
  return M
end

local ffi = require "ffi"
local core = require "protocall.core"
local message_accessors = require "protocall.ffi.accessors"
local lua_codec = require "protocall.ffi.codec"
local code = require "protocall.ffi.struct_code"

local api_ptr, codec_ud, cdef = core.ffi_codec()
if not pcall(ffi.typeof, "pc_ffi_Api") then ffi.cdef(cdef) end
local api = ffi.cast("const pc_ffi_Api *", api_ptr)
local new, cast, typeof, istype, fstring = ffi.new, ffi.cast, ffi.typeof, ffi.istype, ffi.string
-- The codecs and their out-parameters, by depth: calls[0] for calls
-- made when none is under way, calls[d] for one made inside d others (a
-- finalizer or hook that LuaJIT runs when it boxes an FFI call's result
-- or makes the string of its bytes, before the outer call has copied
-- them out: it must neither overwrite the buffer and sizes that call
-- still reads nor free the buffer). A finalizer's error raised there
-- leaves `depth` one higher: later calls then take the next codec
-- (past the eighth, a new one each).
local calls, depth = {}, 0
local function nested() -- calls[depth], made on first use
  local x = calls[depth]
  if x == nil then
    local ud = select(2, core.ffi_codec())
    x = { ud = ud, c = cast("pc_ffi_Codec *", ud), size = new("size_t[1]"),
          uptr = new("const char *[1]"), usize = new("size_t[1]") }
    if depth < 8 then calls[depth] = x end
  end
  return x
end
-- calls[0], in upvalues: the JIT loads those faster
local codec, size_out = cast("pc_ffi_Codec *", codec_ud), new("size_t[1]")
local unknown_out, unknown_size = new("const char *[1]"), new("size_t[1]")
calls[0] = { ud = codec_ud, c = codec, size = size_out, uptr = unknown_out, usize = unknown_size }
local voidp = typeof("void *")
local anyp = typeof("const volatile void *") -- what any pointer to a struct converts to
local volatilep = typeof("volatile void *") -- what a pointer that takes writes converts to

-- Unknown fields of the structs that have them (their raw wire bytes),
-- keyed by the struct: a struct is only its fields.
local unknown = setmetatable({}, { __mode = "k" })
-- What each struct type is: by ctype id, {T =, P =, encode =, decode =}.
local infos = {}
-- Sets struct p's unknown fields (u: their bytes; nil or "" for none).
-- Its type is marked as having met some: from then on pc.encode looks
-- them up, through the core codec (lua/protocall/ffi/codec.lua's cannot).
local function keep_unknown(info, p, u)
  if u == "" then u = nil end
  unknown[p] = u
  if u then info.unknown = true end
end
local of_type = setmetatable({}, { __mode = "k" }) -- T -> P

local core_is_message, core_type_of = core.is_message, core.type_of


-- Raises msg naming the line of the first Lua function on the stack
-- outside this file and the generated accessors: the code that called
-- P, pc.encode, ... (C frames such as pcall's skipped).
local own = { [debug.getinfo(1, "S").short_src] = true, [code.SOURCE] = true, ["protocall.ffi"] = true }
local getinfo = debug.getinfo
local function raise(msg)
  local level = 2
  while true do
    local info = getinfo(level, "Sl")
    if info == nil then error(msg, 0) end
    if info.what ~= "C" and not own[info.short_src] then
      if info.currentline > 0 then error(info.short_src .. ":" .. info.currentline .. ": " .. msg, 0) end
      error(msg, 0)
    end
    level = level + 1
  end
end

-- Raises, naming the caller's line, what pc.encode or pc.decode (fname)
-- raises for the options table opts given as argument #n: the C codec's
-- check (bindings/lua/lpc_wire.c), so both take the same options.
local check_codec_options = core.check_codec_options
local function check_options(opts, fname, n)
  local ok, err = pcall(check_codec_options, opts, fname, n)
  if not ok then raise(err) end
end

-- A `void *` to struct p (or to what pointer p points to) for C to read
-- or write, naming T in its errors: P itself and ffi.typeof(p), ctypes
-- with the struct's (or the pointer's) ctype id, raise, as ffi.cast
-- would turn one into that number, not an address (ffi.new converts as
-- a C argument: a struct to its address, a ctype refused); so does a
-- NULL pointer. The accessors get P itself for P.x.
local function body_of(T, p)
  local ok, b = pcall(new, anyp, p) -- refuses P itself; takes const and volatile pointers
  if ok and b ~= nil then return cast(voidp, b) end
  raise(format("%s: struct expected, got %s", T.full_name, ok and "a NULL pointer" or "its type (a ctype)"))
end

-- The info of struct `p`, or nil when `p` is no struct of pc.ffi. The
-- struct type itself, P, has P's ctype id too, and so has ffi.typeof(p)
-- (of a pointer, the pointer's): ffi.cast turns such a ctype into
-- exactly that id, never a struct's address (a test the JIT compiles to
-- a compare; body_of's pcall would cost each pc.encode an allocation).
local indirect = {} -- other ctype ids: of P * or P & (an FFI array's element) -> info, else false
local function info_of(p)
  if type(p) ~= "cdata" then return nil end
  local id = tonumber(typeof(p))
  local info = infos[id]
  if info then
    if not rawequal(p, info.P) and cast(voidp, p) ~= cast(voidp, id) then return info end
    return nil
  end
  info = indirect[id]
  if info == nil then -- a ctype seen first: is it a pointer or reference to a struct type?
    info = false
    for _, i in pairs(infos) do
      if istype(i.P, p) then
        info = i
        break
      end
    end
    indirect[id] = info
  end
  if info then
    local at = cast(voidp, p)
    if at ~= nil and at ~= cast(voidp, id) then return info end
  end
  return nil
end

local function is_struct(x) return info_of(x) ~= nil end

-- What the generated accessors call back (ffi/struct_code.lua).
local runtime = { raise = raise, body_of = body_of, is_struct = is_struct }

-- The C __index and __newindex of T's messages: the generated FFI
-- accessors of message objects (lua/protocall/ffi/accessors.lua) keep them.
local c_meta = message_accessors.c_metamethods

local to_message
-- x as a message of info's type (a copy of a struct), or nil.
local function as_message(info, x)
  if info_of(x) == info then return pcall(new, anyp, x) and to_message(info, x) or nil end
  if core_is_message(x) and core_type_of(x) == info.T then return x end
  return nil
end

function to_message(info, p)
  local m = info.T()
  core.ffi_copy(info.T, m, body_of(info.T, p), false)
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
--     fields included) / P(q) (a copy of struct q) / P(v1, v2, ...) (the
--     fields' values in declaration order, nil leaving one unset, as
--     ffi.new takes initializers);
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
function M.ffi(T)
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
  local decl, cases = code.declaration(layout, prefix)
  local made, ct = pcall(typeof, decl)
  if not made then -- LuaJIT's "table overflow": its 65536 C type ids are used up
    error(format("pc.ffi: %s: LuaJIT cannot declare another C type (%s; a Lua state has 65536 "
                 .. "C type ids, and the struct types, with their fields, keep theirs)", T.full_name, ct), 2)
  end
  local empty = T()
  local defaults = {}
  for i, f in ipairs(layout.fields) do defaults[i] = empty[f.name] end
  local c_index, c_newindex = c_meta(T)
  local get, set = core.ffi_slow(T, c_index, c_newindex)
  local info = { T = T }
  local function from(p, x)
    local src = info_of(x)
    if src == info then
      ffi.copy(p, body_of(T, x), layout.size)
      keep_unknown(info, p, unknown[x])
    elseif core_is_message(x) and core_type_of(x) == T then
      core.ffi_copy(T, x, cast(voidp, p), true)
      keep_unknown(info, p, core.unknown_fields(x))
    else
      if type(x) == "cdata" and istype(ct, x) then body_of(T, x) end -- a NULL pointer: raises
      raise(format("bad argument #1 to '%s' (a table, field values, or a %s message or struct "
                   .. "expected, got %s)", T.full_name, T.full_name,
                   src and "another struct" or "userdata"))
    end
    return p
  end
  local index, newindex, construct = code.accessors(T, layout, prefix, cases, defaults, get, set, from, ct,
    runtime)
  -- The Lua codec (lua/protocall/ffi/codec.lua) for a type with fields:
  -- pc.encode(p) and pc.decode(P, bytes) try it first, the core codec
  -- below doing what it leaves (nil). Not while a struct of the type may
  -- hold unknown fields (info.unknown: then encode looks them up).
  if #layout.fields > 0 then
    info.lua_encode, info.lua_decode = lua_codec.generate(layout, prefix, cases, function() return new(ct) end)
  end
  local def, size = cast("const void *", layout.def), layout.size
  info.codec = codec_ud -- what `codec` points to lives as long as the types using it
  P = ffi.metatype(ct, {
    __index = index,
    __newindex = newindex,
    __new = construct,
    __tostring = function(p) return tostring(to_message(info, p)) end,
    __eq = function(a, b) -- a struct or a message of T on either side
      local ma, mb = as_message(info, a), as_message(info, b)
      return ma ~= nil and mb ~= nil and ma == mb
    end,
  })
  info.P = P
  function info.encode(p, opts)
    if opts ~= nil and type(opts) ~= "table" then
      raise("bad argument #2 to 'encode' (table expected, got " .. type(opts) .. ")")
    end
    if opts ~= nil then check_options(opts, "encode", 2) end
    local lua_encode = info.lua_encode
    if lua_encode and not info.unknown then
      local s = lua_encode(p, opts ~= nil and opts.partial)
      if s then return s end
    end
    return info.encode_core(p, opts)
  end
  -- The core encoder through the FFI (opts checked: nil or a table).
  function info.encode_core(p, opts)
    local u = unknown[p]
    local partial = opts ~= nil and opts.partial and 1 or 0
    local c, so = codec, size_out
    if depth ~= 0 then
      local x = nested()
      c, so = x.c, x.size
    end
    depth = depth + 1
    local s = api.encode(c, def, p, size, u, u and #u or 0, partial, so)
    if s == nil then
      local err = fstring(api.error(c))
      depth = depth - 1
      raise(err)
    end
    local bytes = fstring(s, so[0])
    depth = depth - 1
    return bytes
  end
  function info.decode(bytes, opts)
    if type(bytes) ~= "string" then
      raise("bad argument #2 to 'decode' (string expected, got " .. type(bytes) .. ")")
    end
    if opts ~= nil and type(opts) ~= "table" then
      raise("bad argument #3 to 'decode' (table expected, got " .. type(opts) .. ")")
    end
    if opts ~= nil then check_options(opts, "decode", 3) end -- max_depth too (a struct nests nothing)
    local lua_decode = info.lua_decode
    if lua_decode then
      local p = lua_decode(bytes, opts ~= nil and opts.partial)
      if p then return p end
    end
    local partial = opts ~= nil and opts.partial and 1 or 0
    local p = new(ct)
    local c, uo, us = codec, unknown_out, unknown_size
    if depth ~= 0 then
      local x = nested()
      c, uo, us = x.c, x.uptr, x.usize
    end
    depth = depth + 1
    local r = api.decode(c, def, bytes, #bytes, partial, p, size, uo, us)
    local err = r == 1 and fstring(api.error(c))
    if r == 0 and us[0] ~= 0 then keep_unknown(info, p, fstring(uo[0], us[0])) end
    depth = depth - 1
    if r == 2 then raise("not enough memory") end
    if r ~= 0 then return nil, err end
    return p
  end
  infos[tonumber(ct)] = info
  of_type[T] = P
  assert(ffi.sizeof(ct) >= size, "pc.ffi: struct smaller than the layout")
  return P
end

-- The info of P (a struct type pc.ffi returned, or ffi.typeof of one of
-- its structs: the same ctype), or nil.
local function info_of_ctype(P)
  if type(P) ~= "cdata" then return nil end
  local info = infos[tonumber(typeof(P))]
  if info and (rawequal(P, info.P) or not pcall(new, voidp, P)) then return info end
  return nil
end

--- m = pc.to_message(p): a message of p's type (pc.type_of(p)) holding
-- p's fields and unknown fields (a copy). Raises for a non-struct.
function M.to_message(p)
  local info = info_of(p)
  if not info then
    raise("bad argument #1 to 'to_message' (pc.ffi struct expected, got " .. type(p) .. ")")
  end
  return to_message(info, p)
end

--- encode_lua, decode_lua = lua_codec(P): the Lua codec of struct type P
-- (lua/protocall/ffi/codec.lua's encode and decode), or nil (for the specs).
function M.lua_codec(P)
  local info = info_of_ctype(P)
  if info then return info.lua_encode, info.lua_decode end
  return nil
end

-- Raises err, which C function fn raised for the function `name` when
-- called in core.protect here (so naming no position, and no function:
-- "to '?'"), as fn raises it for a message.
local protect = core.protect
local function reraise(name, err)
  raise((tostring(err):gsub("to '%?'", "to '" .. name .. "'", 1)))
end

-- The struct-aware versions of the public functions, by name: each takes
-- the message-only function `fn` (the core's) and returns one that also
-- takes pc.ffi structs.
local wrappers = {}

-- pc.encode(p [, opts]), pc.encode(P, table [, opts]) too.
function wrappers.encode(core_encode)
  return function(m, a, b)
    -- pc.encode(p): the Lua codec of p's type, when it has one, tested
    -- without touching p (no rawequal, no address), so the JIT can keep a
    -- struct made to be encoded out of memory. For P itself or
    -- ffi.typeof(p) (the same ctype id), its first member read raises
    -- (the accessors' "struct expected, got its type").
    if a == nil and type(m) == "cdata" then
      local info = infos[tonumber(typeof(m))]
      if info and info.lua_encode and not info.unknown then
        local s = info.lua_encode(m, false)
        if s then return s end
        return info.encode_core(m, nil) -- m is a struct: P itself raised above
      end
    end
    local info = info_of(m)
    if info then return info.encode(m, a) end
    info = info_of_ctype(m)
    if info then
      -- pc.encode(P): as the Lua codec's member read raises
      if a == nil then raise(format("%s: struct expected, got its type (a ctype)", info.T.full_name)) end
      if type(a) ~= "table" or (b ~= nil and type(b) ~= "table") then -- as pc.encode(T, table, opts)
        local n, x = type(a) ~= "table" and 2 or 3, type(a) ~= "table" and a or b
        raise(format("bad argument #%d to 'encode' (table expected, got %s)", n, type(x)))
      end
      if b ~= nil then check_options(b, "encode", 3) end
      return info.encode(info.P(a), b)
    end
    return core_encode(m, a, b)
  end
end

-- pc.decode(P, bytes [, opts]) gives a struct.
function wrappers.decode(core_decode)
  return function(T, bytes, opts)
    local info = info_of_ctype(T)
    if info then
      if opts ~= nil and type(opts) == "table" and opts.table then return core_decode(info.T, bytes, opts) end
      return info.decode(bytes, opts)
    end
    return core_decode(T, bytes, opts)
  end
end

-- Functions of a message (first argument) that read it: a struct goes
-- as a message copy.
local function reader(fn)
  return function(m, ...)
    local info = info_of(m)
    if info then return fn(to_message(info, m), ...) end
    return fn(m, ...)
  end
end
wrappers.has, wrappers.which_oneof, wrappers.to_table = reader, reader, reader
wrappers.to_json, wrappers.to_text, wrappers.is_initialized = reader, reader, reader

-- Functions that change it: through a message copy and back.
local function writer(fn, name)
  return function(m, ...)
    local info = info_of(m)
    local other = ... -- pc.merge(x, q): q may be a struct too
    local oinfo = name == "merge" and info_of(other)
    if not info then
      if oinfo then return fn(m, to_message(oinfo, other), select(2, ...)) end
      return fn(m, ...)
    end
    if oinfo and cast(voidp, m) == cast(voidp, other) then -- its unknown fields would append to themselves
      raise("bad argument #2 to 'merge' (a message cannot be merged into itself: merge pc.clone(m))")
    end
    if not pcall(new, volatilep, m) then -- a const pointer: LuaJIT refuses p.x = v there too
      raise(format("bad argument #1 to '%s' (%s: a pointer to const, which takes no write)", name,
                   info.T.full_name))
    end
    local copy = to_message(info, m)
    local ok, err
    if oinfo then
      ok, err = protect(fn, copy, to_message(oinfo, other), select(2, ...))
    else
      ok, err = protect(fn, copy, ...)
    end
    if not ok then reraise(name, err) end
    core.ffi_copy(info.T, copy, cast(voidp, m), true)
    keep_unknown(info, m, core.unknown_fields(copy))
  end
end
wrappers.clear, wrappers.merge = writer, writer

-- Parsers into a type: P gives a struct.
local function parser(fn, name)
  return function(T, ...)
    local info = info_of_ctype(T)
    if not info then return fn(T, ...) end
    local ok, m, err = protect(fn, info.T, ...)
    if not ok then reraise(name, m) end
    if m == nil then return nil, err end
    return info.P(m)
  end
end
wrappers.from_json, wrappers.from_text = parser, parser

-- pc.pairs(p) raises as for a message, naming the struct's type (LuaJIT's
-- own error names a ctype number)
function wrappers.pairs(msg_pairs)
  return function(m)
    local info = info_of(m)
    if info then raise(format("bad argument #1 to 'pairs' (table expected, got %s struct)", info.T.full_name)) end
    return msg_pairs(m)
  end
end

function wrappers.type_of(type_of)
  return function(m)
    local info = info_of(m)
    if info then return info.T end
    return type_of(m)
  end
end

function wrappers.clone(clone)
  return function(m)
    local info = info_of(m)
    if info then return info.P(m) end
    return clone(m)
  end
end

--- fn = wrap(name, fn): the public function `name` (one of encode, decode,
-- has, which_oneof, to_table, to_json, to_text, is_initialized, clear,
-- merge, from_json, from_text, pairs, type_of, clone) taking pc.ffi structs
-- as well as what the message-only `fn` takes (lua/protocall/init.lua
-- wraps the public table's with it).
function M.wrap(name, fn)
  return wrappers[name](fn, name)
end

return M
