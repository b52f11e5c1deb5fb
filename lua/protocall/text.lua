--- Text format: pc.to_text(m) as the C++ library's TextFormat prints
-- (what `protoc --decode` shows): fields and extensions (`[pkg.ext]`) in
-- field-number order, one per line, nested messages in braces indented by
-- two spaces, map entries sorted by key, enums by name, strings C-escaped
-- (bytes >= 0x80 as octal unless opts.utf8), floats as SimpleFtoa /
-- SimpleDtoa, then the unknown fields as `protoc --decode_raw` prints them
-- (numbers only; a length-delimited value that parses as a message is
-- printed as one). Work is linear in the size of the message: what each
-- type needs is computed once per type and cached, unknown fields are
-- printed from their bytes as they are read (nothing built per field), and
-- the text is made a chunk at a time (the command writes each as it comes).
local core = require "protocall.core"

local M = {}

local type, ipairs, tostring, sort, concat = type, ipairs, tostring, table.sort, table.concat
local format, byte, char, rep, sub = string.format, string.byte, string.char, string.rep, string.sub
local compat = require "protocall.compat"
local pack, unpack, u64_decimal, u64_hex = compat.spack, compat.sunpack, compat.u64_decimal, compat.u64_hex
local huge = math.huge

local ESC = { [10] = "\\n", [13] = "\\r", [9] = "\\t", [34] = '\\"', [39] = "\\'", [92] = "\\\\" }

-- Each byte escape() rewrites, by its escape (a table: gsub looks each up,
-- with no call per byte); utf8 leaves bytes 128-255 out of the pattern.
local ESCAPED = {}
for b = 0, 255 do
  if b < 32 or b >= 127 or ESC[b] then ESCAPED[char(b)] = ESC[b] or format("\\%03o", b) end
end

-- The bytes of a string or bytes value escaped at a time.
local SLICE = 65536

local function escape(s, utf8)
  return (s:gsub(utf8 and "[%c\"'\\]" or "[%c\"'\\\127-\255]", ESCAPED))
end

local function special(x)
  if x ~= x then return "nan" end
  if x == huge then return "inf" end
  if x == -huge then return "-inf" end
end

-- SimpleDtoa: %.15g, or %.17g when that does not read back the same.
local function dtoa(x)
  local s = special(x)
  if s then return s end
  s = format("%.15g", x)
  if tonumber(s) ~= x then s = format("%.17g", x) end
  return s
end

-- SimpleFtoa: %.6g, or %.9g when that does not read back as the same float
-- (a subnormal never does there: strtof reports it out of range).
local FLT_MIN = 1.17549435082228750797e-38
local function ftoa(x)
  local s = special(x)
  if s then return s end
  s = format("%.6g", x)
  if unpack("f", pack("f", tonumber(s))) ~= x or (x ~= 0 and x < FLT_MIN and x > -FLT_MIN) then
    s = format("%.9g", x)
  end
  return s
end

-- One level of indentation: two spaces, or none while printing on one line
-- (so a deep message costs no indentation it would drop); the end of a
-- line: a newline, or a space on one line.
local unit, nl = "  ", "\n"
local pads = { ["  "] = {}, [""] = {} }
local function pad_of(indent)
  local p = pads[unit][indent]
  if not p then
    p = rep(unit, indent)
    pads[unit][indent] = p
  end
  return p
end

-- The printed pieces go to out.sink a chunk at a time.
local CHUNK = 4096
local function flush(out)
  out.sink(concat(out))
  for k = #out, 1, -1 do out[k] = nil end
end
local fields_of, type_of, has, is_message = core.Pool.fields, core.type_of, core.is_set, core.is_message
local get_extension, text_extensions, unknown_fields = core.get_extension, core.text_extensions,
  core.unknown_fields

local scalar = {
  double = dtoa, float = ftoa, bool = tostring,
  uint64 = u64_decimal,
  fixed64 = u64_decimal,
  -- string.format, not tostring: LuaJIT's int64_t cdata print as 1LL
  int64 = function(v) return format("%d", v) end,
  sint64 = function(v) return format("%d", v) end,
  sfixed64 = function(v) return format("%d", v) end,
}

-- Map keys in the C++ printer's order: false before true, uint64 and
-- fixed64 unsigned, strings byte-wise.
local function key_order(kinfo)
  local t = kinfo.type
  if t == "bool" then return function(a, b) return not a[1] and b[1] end end
  if t == "uint64" or t == "fixed64" then return function(a, b) return compat.ult(a[1], b[1]) end end
  return function(a, b) return a[1] < b[1] end
end

-- Per type (weak keys): its fields sorted by number, each with what the
-- printer needs: the printed name, the enum's table, a map's entry infos.
local layouts = setmetatable({}, { __mode = "k" })
local function prepare(pool, info, name)
  local p = { field = info.name, name = name, type = info.type, repeated = info.label == "repeated" }
  local t = info.type
  if t == "enum" then p.enum = pool:type(info.type_name) or {} end
  if t:sub(1, 4) == "map<" then
    local entry = fields_of(pool:type(info.type_name))
    local k, v = entry[1], entry[2]
    if k.number ~= 1 then k, v = v, k end
    p.map, p.key, p.value = true, prepare(pool, k, "key"), prepare(pool, v, "value")
    p.order = key_order(k)
  end
  return p
end
local function layout_of(T)
  local l = layouts[T]
  if l then return l end
  local pool = T.pool
  local infos = {}
  for i, f in ipairs(fields_of(T)) do infos[i] = f end
  sort(infos, function(a, b) return a.number < b.number end)
  l = {}
  for i, info in ipairs(infos) do
    local name = info.name
    if info.type == "group" then name = info.type_name:match("[^.]+$") end
    l[i] = prepare(pool, info, name)
    l[i].number = info.number
  end
  layouts[T] = l
  return l
end

local print_message

local function value_text(p, v, out, indent, utf8)
  local t = p.type
  if t == "message" or t == "group" then
    out[#out + 1] = " {" .. nl
    print_message(v, out, indent + 1, utf8)
    out[#out + 1] = pad_of(indent) .. "}" .. nl
    return
  end
  local s
  if t == "string" or t == "bytes" then
    -- escaped in slices, each its own piece: a string of megabytes makes
    -- no escaped copy whole (nor the buffer gsub grows to make one)
    local u = t == "string" and utf8
    out[#out + 1] = ': "'
    if #v <= SLICE then
      out[#out + 1] = escape(v, u)
    else
      for i = 1, #v, SLICE do out[#out + 1] = escape(sub(v, i, i + SLICE - 1), u) end
    end
    out[#out + 1] = '"' .. nl
    return
  elseif t == "enum" then s = p.enum[v] or tostring(v)
  else
    local f = scalar[t]
    s = f and f(v) or tostring(v)
  end
  out[#out + 1] = ": " .. s .. nl
end

local function print_field(p, v, out, indent, utf8)
  local pad = pad_of(indent)
  local name = p.name
  if p.map then
    local items = {}
    for k, x in compat.pairs(v) do items[#items + 1] = { k, x } end
    sort(items, p.order)
    for _, kv in ipairs(items) do
      out[#out + 1] = pad .. name .. " {" .. nl
      out[#out + 1] = pad .. unit .. "key"
      value_text(p.key, kv[1], out, indent + 1, utf8)
      out[#out + 1] = pad .. unit .. "value"
      value_text(p.value, kv[2], out, indent + 1, utf8)
      out[#out + 1] = pad .. "}" .. nl
      if #out >= CHUNK then flush(out) end
    end
  elseif p.repeated then
    for i = 1, #v do
      out[#out + 1] = pad .. name
      value_text(p, v[i], out, indent, utf8)
      if #out >= CHUNK then flush(out) end
    end
  else
    out[#out + 1] = pad .. name
    value_text(p, v, out, indent, utf8)
  end
end

-- Unknown fields, as the C++ library's UnknownFieldSet parses them, read
-- from the bytes as they are printed: nothing is built per field (a list
-- of them once cost some 100 bytes per byte of nested groups).
local low32, fixed64, floor = compat.low32, compat.fixed64, math.floor

-- compat.varint, with the values below 2^49 read as plain numbers (LuaJIT's
-- compat.varint makes 64-bit cdata for every varint).
local wide_varint = compat.varint
local function varint(s, i, j)
  local v, mul = 0, 1
  for k = i, i + 6 do
    local b = k <= j and byte(s, k)
    if not b then return nil end
    v = v + (b % 128) * mul
    if b < 128 then return v, k + 1 end
    mul = mul * 128
  end
  return wide_varint(s, i, j)
end

-- The tag at s[i] (j the last byte): number, wire type, next index; nil
-- when there is none.
local function read_tag(s, i, j)
  local tag
  tag, i = varint(s, i, j)
  if not tag then return nil end
  if tag < 0 or tag >= 0x100000000 then tag = low32(tag) end -- a varint32: longer ones keep their low bits
  return floor(tag / 8), tag % 8, i
end

-- The index past the unknown fields of s[i..j] (past the end tag of group
-- number 'group' when given), or nil when the bytes are not a message;
-- groups nest 'depth' deep at most.
local function scan(s, i, j, depth, group)
  while i <= j do
    local num, wt
    num, wt, i = read_tag(s, i, j)
    if not num or num == 0 then return nil end
    if wt == 0 then
      local v
      v, i = varint(s, i, j)
      if not v then return nil end
    elseif wt == 1 or wt == 5 then
      i = i + (wt == 1 and 8 or 4)
      if i - 1 > j then return nil end
    elseif wt == 2 then
      local len
      len, i = varint(s, i, j)
      if not len or len < 0 or len > j - i + 1 then return nil end
      i = i + len
    elseif wt == 3 then
      if depth <= 0 then return nil end
      i = scan(s, i, j, depth - 1, num)
      if not i then return nil end
    elseif wt == 4 then
      if group == num then return i end
      return nil
    else
      return nil
    end
  end
  if group then return nil end
  return i
end

-- TextFormat's recursion budget for unknown length-delimited values.
local UNKNOWN_BUDGET = 10
-- Prints the unknown fields of s[i..j], which scan() accepted (up to the
-- end tag of the group being printed, if any); returns the index past them.
local function print_unknown(s, i, j, out, indent, budget)
  local pad = pad_of(indent)
  while i <= j do
    local num, wt, v
    num, wt, i = read_tag(s, i, j)
    if wt == 4 then return i end
    local n = #out -- a line's pieces go out as they are (no line string made)
    if wt == 0 then
      v, i = varint(s, i, j)
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = pad, num, ": ", u64_decimal(v)
    elseif wt == 1 then
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = pad, num, ": 0x", u64_hex(fixed64(s, i), 16)
      i = i + 8
    elseif wt == 5 then
      local b1, b2, b3, b4 = byte(s, i, i + 3)
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = pad, num, ": ",
        format("0x%08x", b1 + b2 * 256 + b3 * 65536 + b4 * 16777216)
      i = i + 4
    else
      local e -- the last byte of the group or of the length-delimited value
      if wt == 2 then
        local len
        len, i = varint(s, i, j)
        e = i + len - 1
      end
      if wt == 3 or (e >= i and budget > 0 and scan(s, i, e, 100)) then
        out[n + 1], out[n + 2], out[n + 3], out[n + 4] = pad, num, " {", nl
        if wt == 3 then
          i = print_unknown(s, i, j, out, indent + 1, budget - 1)
        else
          print_unknown(s, i, e, out, indent + 1, budget - 1)
          i = e + 1
        end
        n = #out
        out[n + 1], out[n + 2] = pad, "}"
      else
        out[n + 1], out[n + 2], out[n + 3], out[n + 4] = pad, num, ': "', escape(s:sub(i, e), false)
        out[n + 5] = '"'
        i = e + 1
      end
    end
    out[#out + 1] = nl
    if #out >= CHUNK then flush(out) end
  end
  return i
end

print_message = function(m, out, indent, utf8)
  local T = type_of(m)
  local l = layout_of(T)
  local exts = text_extensions(m)
  local e = 1
  for _, p in ipairs(l) do
    while exts[e] and exts[e].number < p.number do
      local x = exts[e]
      print_field(prepare(T.pool, x, "[" .. x.name .. "]"), get_extension(m, x.name), out, indent, utf8)
      e = e + 1
    end
    if has(m, p.field) then print_field(p, m[p.field], out, indent, utf8) end
    if #out >= CHUNK then flush(out) end
  end
  for k = e, #exts do
    local x = exts[k]
    print_field(prepare(T.pool, x, "[" .. x.name .. "]"), get_extension(m, x.name), out, indent, utf8)
  end
  local raw = unknown_fields(m)
  if raw ~= "" and scan(raw, 1, #raw, 100) then print_unknown(raw, 1, #raw, out, indent, UNKNOWN_BUDGET) end
end

-- Prints m to sink(piece) a chunk at a time (to_text's options as
-- booleans); with one_line the text ends with a space.
local function print_to(m, sink, utf8, one_line)
  local out = { sink = sink }
  if one_line then unit, nl = "", " " end
  local ok, err = pcall(print_message, m, out, 0, utf8)
  unit, nl = "  ", "\n"
  if not ok then error(err, 0) end
  flush(out)
end

--- text = pc.to_text(m [, {utf8 = true, one_line = true}]): the message
-- in protobuf text format, as `protoc --decode` prints it (see the file's
-- header); with utf8, string fields keep their UTF-8 bytes instead of
-- octal escapes; with one_line, everything on one line with single spaces
-- (`name: "x" points { x: 1 }`, as the C++ library's ShortDebugString and
-- python's as_one_line print it). Raises on a non-message and on an
-- option other than these two.
function M.to_text(m, opts)
  if not is_message(m) then
    error("bad argument #1 to 'to_text' (message expected, got " .. type(m) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'to_text' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k in next, opts or {} do -- its raw keys, as the C functions check theirs
    if k ~= "utf8" and k ~= "one_line" then
      error("bad argument #2 to 'to_text' (unknown option '" .. tostring(k) .. "')", 2)
    end
  end
  local chunks = {}
  local one_line = opts ~= nil and opts.one_line
  print_to(m, function(s) chunks[#chunks + 1] = s end, opts ~= nil and opts.utf8, one_line)
  local text = #chunks == 1 and chunks[1] or concat(chunks) -- (one chunk: not copied again)
  if one_line and text:sub(-1) == " " then text = text:sub(1, -2) end
  return text
end

-- write_text(m, write): pc.to_text(m)'s text handed to write(piece) a
-- chunk at a time (the command prints a large message without holding its
-- text).
function M.write_text(m, write)
  print_to(m, write, false, false)
end

--- m | nil, err = pc.from_text(T, s [, {max_depth = 100, pool = p}]): a
-- new message of type T from protobuf text format, parsed as `protoc
-- --encode` parses it (core/text/text.h states the grammar): field names
-- (groups by their type's name), [pkg.ext] extensions, expanded Any
-- ([type.googleapis.com/pkg.T] { ... }), { } or < >, lists [a, b],
-- adjacent strings concatenated with every C escape, inf / nan, enums by
-- name or number, # comments; a non-repeated field given twice and two
-- members of one oneof are refused, as protoc refuses them, and a UTF-16
-- surrogate in a \u escape, paired or not, as the specification says
-- (protoc 3.21 joins a pair), and escapes that make a proto3 string that
-- is not UTF-8, as python's text_format refuses them. Bad input
-- returns nil and "line:col: what" (both from 1), past `max_depth` "2:8:
-- messages nested deeper than 2 (max_depth)". `pool` is where
-- extensions and Any types are found (default T's pool). Raises on bad
-- arguments.
M.from_text = core.from_text

return M
