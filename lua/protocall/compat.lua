--- What Lua 5.4 and LuaJIT 2.1 spell differently, behind one set of names,
-- so every file of lua/protocall parses and runs on both (Lua 5.1 syntax:
-- no bit operators, no `//`, no `<close>`). A helper of the other modules,
-- not a concern of its own: it has no `install`.
--
-- Under Lua 5.4 each name is the 5.4 function itself (or a one-line chunk
-- of 5.4 operators); under LuaJIT the equivalent from `bit` and `ffi`.
-- 64-bit values (`varint`, `fixed64`) are Lua integers under 5.4; under
-- LuaJIT numbers below 2^53 and int64_t / uint64_t cdata beyond, which
-- `u64_decimal` and `u64_hex` print alike.
local M = {}

--- Whether this is LuaJIT (true) or Lua 5.4 (false).
M.luajit = rawget(_G, "jit") ~= nil

local floor, byte = math.floor, string.byte

if not M.luajit then
  --- math.type, math.tointeger, math.ult, table.pack, table.unpack,
  -- string.pack, string.unpack and coroutine.close of Lua 5.4.
  M.mtype, M.tointeger, M.ult = math.type, math.tointeger, math.ult
  M.pack, M.unpack = table.pack, table.unpack
  M.spack, M.sunpack = string.pack, string.unpack
  M.co_close = coroutine.close
  M.pairs = pairs
  local ops = [[
    local byte = string.byte
    local function varint(s, i, j)
      local v, shift = 0, 0
      for k = i, math.min(j, i + 9) do
        local b = byte(s, k)
        v = v | ((b & 0x7f) << shift)
        if b < 0x80 then return v, k + 1 end
        shift = shift + 7
      end
    end
    return function(a, b) return a ~ b end, varint,
      function(v) return v & 0xffffffff end,
      function(v, n) return v >> n end, function(v, m) return v & m end,
      function(s, i) return string.unpack("<i8", s, i) end,
      function(v) return string.format("%u", v) end,
      function(v, width) return string.format("%0" .. width .. "x", v) end
  ]]
  --- bxor(a, b): a ~ b. varint(s, i, j) -> value, next index (nil past j
  -- or after 10 bytes): the base-128 varint at s[i..]. low32(v): v's low 32
  -- bits. rshift(v, n), band(v, m). fixed64(s, i): the little-endian 8
  -- bytes at s[i]. u64_decimal(v): v as an unsigned decimal. u64_hex(v,
  -- width): v in lower-case hex, zero-padded to width digits.
  -- Compiled when one of them is first read (text.lua and ring_hash.lua
  -- use them, both loaded on first use), so `require "protocall"` does not
  -- run Lua's parser.
  local OPS = { bxor = true, varint = true, low32 = true, rshift = true, band = true, fixed64 = true,
                u64_decimal = true, u64_hex = true }
  setmetatable(M, { __index = function(t, name)
    if not OPS[name] then return nil end
    setmetatable(t, nil)
    t.bxor, t.varint, t.low32, t.rshift, t.band, t.fixed64, t.u64_decimal, t.u64_hex = load(ops)()
    return t[name]
  end })
else
  local bit, ffi = require "bit", require "ffi"
  local tobit = bit.tobit
  local two32 = 4294967296

  function M.mtype(x)
    if type(x) ~= "number" then return nil end
    if x == floor(x) and x >= -2 ^ 63 and x < 2 ^ 63 then return "integer" end
    return "float"
  end
  function M.tointeger(x)
    if type(x) == "number" and x == floor(x) and x >= -2 ^ 63 and x < 2 ^ 63 then return x end
    return nil
  end
  function M.ult(a, b)
    return ffi.cast("uint64_t", a) < ffi.cast("uint64_t", b)
  end
  function M.pack(...) return { n = select("#", ...), ... } end
  M.unpack = unpack
  function M.co_close(co)
    -- LuaJIT has no to-be-closed variables: a suspended coroutine is
    -- dropped unfinished, as coroutine.close would leave it.
    return coroutine.status(co) ~= "running"
  end
  -- string.pack / string.unpack for the one format used: a float ("f").
  local float = ffi.typeof("float[1]")
  function M.spack(fmt, x)
    assert(fmt == "f", "protocall.compat: only the format 'f'")
    local f = float(x)
    return ffi.string(f, 4)
  end
  function M.sunpack(fmt, s)
    assert(fmt == "f", "protocall.compat: only the format 'f'")
    local f = float()
    ffi.copy(f, s, 4)
    return tonumber(f[0])
  end
  -- 32-bit operands, results in 0 .. 2^32-1 as under Lua 5.4.
  function M.bxor(a, b) return tobit(bit.bxor(a, b)) % two32 end
  local u64 = ffi.typeof("uint64_t")
  local lshift, bor = bit.lshift, bit.bor
  function M.varint(s, i, j)
    local v, shift = u64(0), 0
    for k = i, math.min(j, i + 9) do
      local b = byte(s, k)
      v = bor(v, lshift(u64(b % 128), shift))
      if b < 0x80 then
        if v < 2 ^ 53 then return tonumber(v), k + 1 end
        return v, k + 1
      end
      shift = shift + 7
    end
  end
  function M.low32(v) return tonumber(bit.band(u64(v), 0xffffffff)) end
  function M.rshift(v, n) return tonumber(bit.rshift(u64(v), n)) end
  function M.band(v, m) return tonumber(bit.band(u64(v), m)) end
  local i64p = ffi.typeof("int64_t *") -- unqualified: string.format takes int64_t, not const
  function M.fixed64(s, i)
    return ffi.cast(i64p, ffi.cast("const char *", s) + (i - 1))[0]
  end
  -- LuaJIT's string.format takes 64-bit cdata for %d, %u and %x.
  function M.u64_decimal(v) return string.format("%u", v) end
  function M.u64_hex(v, width) return string.format("%0" .. width .. "x", v) end
  --- pairs(v): pairs that honours a userdata's __pairs (LuaJIT's does
  -- not), for the message containers. Raises "bad argument #1 to 'pairs'
  -- (table expected, got number)" itself: LuaJIT's pairs, reached by a
  -- tail call, names no function ('?') when pc.pairs is called from C
  -- (a pcall).
  local getmetatable, error = debug.getmetatable, error
  function M.pairs(v)
    if type(v) ~= "table" then
      local mt = getmetatable(v)
      if mt and mt.__pairs then return mt.__pairs(v) end
      error("bad argument #1 to 'pairs' (table expected, got " .. type(v) .. ")", 2)
    end
    return pairs(v)
  end
end

--- hash32(s): the 32-bit FNV-1a hash of string s (0 .. 2^32-1), alike on
-- both runtimes: the multiplication by 16777619 = 2^24 + 403 is split so
-- every step stays within 2^53.
function M.hash32(s)
  local h, bxor = 2166136261, M.bxor
  for i = 1, #s do
    h = bxor(h, byte(s, i))
    h = ((h % 256) * 16777216 + h * 403) % 4294967296
  end
  return h
end

return M
