--- The wire codec of pc.ffi's structs in Lua (LuaJIT only), generated per
-- struct type so the JIT compiles an encode or a decode into the caller's
-- trace: no C call, and a struct that is made, encoded and dropped, or
-- decoded and only read, is never allocated (LuaJIT's allocation sinking).
--
-- It covers the common case exactly and leaves everything else to the core
-- codec (lua/protocall/ffi/struct.lua calls it when these return nil):
--   * encode(p, partial): bytes, in field number order, as the core
--     encoder writes them (core/wire/encode.c); nil for a negative or
--     >= 2^53 64-bit varint value, a required field missing without
--     `partial`, or another encode of the type run meanwhile (by a debug
--     hook or a finalizer: they share a buffer);
--   * decode(bytes, partial): a new struct; nil unless every field on the
--     wire is known, has its wire type, comes in ascending field number
--     order at most once, fits a varint of at most 7 bytes, and (closed
--     enums) is a known value, and the required fields are there without
--     `partial`. The core decoder then decodes the bytes again, with its
--     unknown fields, errors and last-one-wins rules.
-- Floats, doubles, fixed64 and sfixed64 move as their bits (the struct's
-- `w` words), never read as numbers, so a NaN keeps its payload as the
-- core keeps it. The decoder shares nothing between calls. A type past
-- LuaJIT's limits for one function gets no Lua codec (generate gives nil).
-- (M.generate's caller: lua/protocall/ffi/struct.lua.)
-- Encoding (protobuf's wire format): varints, ZigZag for sint32 / sint64,
-- little-endian fixed32 / fixed64, tags (field number << 3 | wire type) as
-- varints; int32 and enum values below zero as 10-byte varints.
local ffi = require "ffi"
local bit = require "bit"

local band, bor, rshift, tobit, bxor = bit.band, bit.bor, bit.rshift, bit.tobit, bit.bxor
local format, concat = string.format, table.concat

local M = {}


-- buf[n...]: the varint of v, a number in [0, 2^32); returns the next n.
local function w32(buf, n, v)
  if v < 0x80 then buf[n] = v return n + 1 end
  buf[n] = bor(band(v, 127), 128)
  if v < 0x4000 then buf[n + 1] = rshift(v, 7) return n + 2 end
  buf[n + 1] = bor(band(rshift(v, 7), 127), 128)
  if v < 0x200000 then buf[n + 2] = rshift(v, 14) return n + 3 end
  buf[n + 2] = bor(band(rshift(v, 14), 127), 128)
  if v < 0x10000000 then buf[n + 3] = rshift(v, 21) return n + 4 end
  buf[n + 3] = bor(band(rshift(v, 21), 127), 128)
  buf[n + 4] = rshift(v, 28)
  return n + 5
end

-- The same for v in [0, 2^53): its low 28 bits, then the rest.
local function w53(buf, n, v)
  if v < 0x100000000 then return w32(buf, n, v) end
  local lo = v % 0x10000000
  buf[n] = bor(band(lo, 127), 128)
  buf[n + 1] = bor(band(rshift(lo, 7), 127), 128)
  buf[n + 2] = bor(band(rshift(lo, 14), 127), 128)
  buf[n + 3] = bor(rshift(lo, 21), 128)
  return w32(buf, n + 4, (v - lo) / 0x10000000)
end

-- The 10-byte varint of v, an int32 below zero sign-extended to 64 bits.
local function wneg32(buf, n, v)
  local u = tobit(v)
  buf[n] = bor(band(u, 127), 128)
  buf[n + 1] = bor(band(rshift(u, 7), 127), 128)
  buf[n + 2] = bor(band(rshift(u, 14), 127), 128)
  buf[n + 3] = bor(band(rshift(u, 21), 127), 128)
  buf[n + 4] = bor(band(rshift(u, 28), 15), 0xF0)
  buf[n + 5], buf[n + 6], buf[n + 7], buf[n + 8], buf[n + 9] = 0xFF, 0xFF, 0xFF, 0xFF, 0x01
  return n + 10
end

-- The varint at s[i] (i < len), at most 7 bytes (below 2^49: exact as a
-- number): its value and the index past it, or -1 (longer or cut short).
-- Unrolled, as w32 is: a loop would be a trace of its own, and LuaJIT
-- sinks no allocation across a trace's end.
local function rv(s, i, len)
  local b = s[i]
  if b < 128 then return b, i + 1 end
  if i + 1 >= len then return -1, i end
  local v, c = b - 128, s[i + 1]
  if c < 128 then return v + c * 0x80, i + 2 end
  v = v + (c - 128) * 0x80
  if i + 2 >= len then return -1, i end
  c = s[i + 2]
  if c < 128 then return v + c * 0x4000, i + 3 end
  v = v + (c - 128) * 0x4000
  if i + 3 >= len then return -1, i end
  c = s[i + 3]
  if c < 128 then return v + c * 0x200000, i + 4 end
  v = v + (c - 128) * 0x200000
  if i + 4 >= len then return -1, i end
  c = s[i + 4]
  if c < 128 then return v + c * 0x10000000, i + 5 end
  v = v + (c - 128) * 0x10000000
  if i + 5 >= len then return -1, i end
  c = s[i + 5]
  if c < 128 then return v + c * 0x800000000, i + 6 end
  v = v + (c - 128) * 0x800000000
  if i + 6 >= len then return -1, i end
  c = s[i + 6]
  if c < 128 then return v + c * 0x40000000000, i + 7 end
  return -1, i
end

-- The types moved as two 32-bit words (the struct's `w` member).
local TWO_WORDS = { double = true, fixed64 = true, sfixed64 = true }

-- Code storing the 4 little-endian bytes of word w (a number or an int32)
-- at buf[n + at].
local function le32(w, at)
  return format("buf[n + %d] = band(%s, 255) buf[n + %d] = band(rshift(%s, 8), 255) "
                .. "buf[n + %d] = band(rshift(%s, 16), 255) buf[n + %d] = rshift(%s, 24)",
                at, w, at + 1, w, at + 2, w, at + 3, w)
end

-- Code reading the little-endian uint32 at s[i + at], as a number.
local function word(at)
  return format("s[i + %d] + s[i + %d] * 256 + s[i + %d] * 65536 + s[i + %d] * 16777216", at, at + 1, at + 2, at + 3)
end

local WIRE = { -- wire type by protobuf type
  int32 = 0, int64 = 0, uint32 = 0, uint64 = 0, sint32 = 0, sint64 = 0, bool = 0, enum = 0,
  fixed64 = 1, sfixed64 = 1, double = 1, fixed32 = 5, sfixed32 = 5, float = 5,
}

-- The bytes of the varint of n, as Lua numbers.
local function varint_bytes(n)
  local out = {}
  while n >= 128 do
    out[#out + 1] = n % 128 + 128
    n = (n - n % 128) / 128
  end
  out[#out + 1] = n
  return out
end

--- encode, decode = M.generate(layout, prefix, cases, new_struct): the
-- codec of a struct type, or nil when this machine is not little-endian or
-- the type is too large for one generated function.
-- layout: core.ffi_layout's table (fields with number, type, hasbit,
-- oneof, required, closed); prefix: the members' prefix; cases: oneof name
-- -> index of its case member; new_struct: a function returning a zeroed
-- struct.
function M.generate(layout, prefix, cases, new_struct)
  if not ffi.abi("le") then return nil end
  local fields = {}
  for _, f in ipairs(layout.fields) do fields[#fields + 1] = f end
  table.sort(fields, function(a, b) return a.number < b.number end)

  local function member(f) return format("p.%s%d", prefix, f.number) end
  local function hasbit(f)
    return format("p.%sh[%d]", prefix, (f.hasbit - f.hasbit % 8) / 8), bit.lshift(1, f.hasbit % 8)
  end
  -- The test that f is set in p (implicit presence: a value other than
  -- zero; for floats and doubles their bits, read as words, as
  -- core/wire/encode.c tests).
  local function present(f)
    if f.oneof then return format("p.%sc%d == %d", prefix, cases[f.oneof], f.number) end
    if f.hasbit >= 0 then
      local byte, mask = hasbit(f)
      return format("band(%s, %d) ~= 0", byte, mask)
    end
    return "v ~= 0"
  end

  -- The bytes are made in buf, one per struct type: an encode that a
  -- debug hook or a finalizer starts meanwhile (between any two
  -- instructions) may overwrite them, so each call counts itself in
  -- `calls` and gives up (nil: the core codec, which nests) when another
  -- ran before its string was made. Nothing else is shared; nothing is
  -- left set when a call raises.
  local enc = { "local w32, w53, wneg32, band, rshift, buf, tonumber, ffi_string = ...",
                "local calls = 0",
                "return function(p, partial)",
                "local call = calls + 1",
                "calls = call" }
  local required = {}
  for _, f in ipairs(fields) do
    if f.required then
      local byte, mask = hasbit(f)
      required[#required + 1] = format("band(%s, %d) == 0", byte, mask)
    end
  end
  if #required > 0 then
    enc[#enc + 1] = format("if not partial and (%s) then return nil end", concat(required, " or "))
  end
  enc[#enc + 1] = "local n = 0"
  local max = 0
  for _, f in ipairs(fields) do
    local wt = WIRE[f.type]
    local tag = {}
    for j, b in ipairs(varint_bytes(f.number * 8 + wt)) do tag[j] = format("buf[n + %d] = %d", j - 1, b) end
    local put_tag = concat(tag, " ") .. format(" n = n + %d", #tag)
    max = max + #tag + 10
    local put
    local load = member(f)
    local test = present(f)
    if TWO_WORDS[f.type] then -- never read as a number (a NaN's payload kept)
      load = format("p.%sw%d", prefix, f.number)
      if f.hasbit < 0 and not f.oneof then test = "v[0] ~= 0 or v[1] ~= 0" end
      put = le32("v[0]", 0) .. " " .. le32("v[1]", 4) .. " n = n + 8"
    elseif f.type == "float" then
      load = format("p.%sw%d", prefix, f.number)
      put = le32("v", 0) .. " n = n + 4"
    elseif f.type == "fixed32" or f.type == "sfixed32" then
      put = le32("v", 0) .. " n = n + 4"
    elseif f.type == "bool" then
      put = "buf[n] = v ~= 0 and 1 or 0 n = n + 1"
    elseif f.type == "uint32" then
      put = "n = w32(buf, n, v)"
    elseif f.type == "sint32" then
      put = "n = w32(buf, n, v >= 0 and 2 * v or -2 * v - 1)"
    elseif f.type == "int32" or f.type == "enum" then
      put = "if v >= 0 then n = w32(buf, n, v) else n = wneg32(buf, n, v) end"
    elseif f.type == "sint64" then
      put = "if v <= -4503599627370496LL or v >= 4503599627370496LL then return nil end "
            .. "v = tonumber(v) n = w53(buf, n, v >= 0 and 2 * v or -2 * v - 1)"
    else -- int64, uint64
      put = "if v < 0 or v >= 9007199254740992ULL then return nil end n = w53(buf, n, tonumber(v))"
    end
    enc[#enc + 1] = format("do local v = %s if %s then %s %s end end", load, test, put_tag, put)
  end
  enc[#enc + 1] = "local s = ffi_string(buf, n) if calls ~= call then return nil end return s end"
  local buf = ffi.new("uint8_t[?]", max + 1)
  -- A type past LuaJIT's limits for one function (a jump's range, 65536
  -- constants) has no Lua codec: the core codec does it all. (Every name
  -- the code uses is an upvalue, never assigned, which the JIT takes as a
  -- constant; the chunks have no globals: a global is a lookup, with its
  -- guards, in a trace that does not hoist it out of a loop.)
  local make = load(concat(enc, "\n"), "=protocall.ffi", "t", {})
  if not make then return nil end
  local encode = make(w32, w53, wneg32, band, rshift, buf, tonumber, ffi.string)

  local dec = { "local rv, band, bor, tobit, bxor, rshift, new_struct, u8p, CLOSED, cast = ...",
                "return function(bytes, partial)",
                "local s, len = cast(u8p, bytes), #bytes",
                "local p = new_struct()",
                "local i = 0" }
  for k, f in ipairs(fields) do
    local wt = WIRE[f.type]
    local tag = varint_bytes(f.number * 8 + wt)
    local test = {}
    for j, b in ipairs(tag) do test[j] = format("s[i + %d] == %d", j - 1, b) end
    local read
    local store = format("%s = v", member(f))
    if TWO_WORDS[f.type] then -- stored as its bits (a NaN's payload kept)
      read = format("if i + 8 > len then return nil end local lo, hi = %s, %s i = i + 8", word(0), word(4))
      store = format("p.%sw%d[0] = lo p.%sw%d[1] = hi", prefix, f.number, prefix, f.number)
    elseif f.type == "float" then
      read = format("if i + 4 > len then return nil end v = %s i = i + 4", word(0))
      store = format("p.%sw%d = v", prefix, f.number)
    elseif f.type == "fixed32" or f.type == "sfixed32" then
      read = format("if i + 4 > len then return nil end v = %s i = i + 4", word(0))
      if f.type == "sfixed32" then read = read .. " v = tobit(v)" end
    else
      read = "if i >= len then return nil end v, i = rv(s, i, len) if v < 0 then return nil end"
      if f.type == "bool" then
        read = read .. " v = v ~= 0 and 1 or 0"
      elseif f.type == "uint32" then
        read = read .. " v = v % 4294967296"
      elseif f.type == "int32" or f.type == "enum" then
        read = read .. " v = tobit(v)"
      elseif f.type == "sint32" then
        read = read .. " v = tobit(v) v = bxor(rshift(v, 1), -band(v, 1))"
      elseif f.type == "sint64" then
        read = read .. " if v % 2 == 0 then v = v / 2 else v = -(v + 1) / 2 end"
      end
      if f.closed then read = read .. format(" if not CLOSED[%d][v] then return nil end", k) end
    end
    local mark = ""
    if f.oneof then
      mark = format("p.%sc%d = %d", prefix, cases[f.oneof], f.number)
    elseif f.hasbit >= 0 then
      local byte, mask = hasbit(f)
      mark = format("%s = bor(%s, %d)", byte, byte, mask)
    end
    dec[#dec + 1] = format("if i + %d <= len and %s then local v i = i + %d %s %s %s end", #tag,
                           concat(test, " and "), #tag, read, mark, store)
  end
  dec[#dec + 1] = "if i ~= len then return nil end"
  local closed = {}
  for k, f in ipairs(fields) do closed[k] = f.closed end
  if #required > 0 then
    dec[#dec + 1] = format("if not partial and (%s) then return nil end", concat(required, " or "))
  end
  dec[#dec + 1] = "return p end"
  make = load(concat(dec, "\n"), "=protocall.ffi", "t", {})
  if not make then return nil end
  return encode, make(rv, band, bor, tobit, bxor, rshift, new_struct, ffi.typeof("const uint8_t *"), closed, ffi.cast)
end

return M
