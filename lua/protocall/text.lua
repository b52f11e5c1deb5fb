--- Text format: pc.to_text(m) as the C++ library's TextFormat prints
-- (what `protoc --decode` shows): fields and extensions (`[pkg.ext]`) in
-- field-number order, one per line, nested messages in braces indented by
-- two spaces, map entries sorted by key, enums by name, strings C-escaped
-- (bytes >= 0x80 as octal unless opts.utf8), floats as SimpleFtoa /
-- SimpleDtoa, then the unknown fields as `protoc --decode_raw` prints them
-- (numbers only; a length-delimited value that parses as a message is
-- printed as one). Work is linear in the size of the message: what each
-- type needs is computed once per type and cached.
local core = require "protocall.core"

local M = {}

local type, ipairs, tostring, sort, concat = type, ipairs, tostring, table.sort, table.concat
local format, byte, rep = string.format, string.byte, string.rep
local compat = require "protocall.compat"
local pack, unpack, u64_decimal, u64_hex = compat.spack, compat.sunpack, compat.u64_decimal, compat.u64_hex
local huge = math.huge

local ESC = { [10] = "\\n", [13] = "\\r", [9] = "\\t", [34] = '\\"', [39] = "\\'", [92] = "\\\\" }

local function escape(s, utf8)
  return (s:gsub("[%c\"'\\\127-\255]", function(c)
    local b = byte(c)
    if ESC[b] then return ESC[b] end
    if utf8 and b >= 128 then return c end
    return format("\\%03o", b)
  end))
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
-- (so a deep message costs no indentation it would drop).
local unit = "  "
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
    out[#out + 1] = " {\n"
    print_message(v, out, indent + 1, utf8)
    out[#out + 1] = rep(unit, indent) .. "}\n"
    return
  end
  local s
  if t == "string" then s = '"' .. escape(v, utf8) .. '"'
  elseif t == "bytes" then s = '"' .. escape(v, false) .. '"'
  elseif t == "enum" then s = p.enum[v] or tostring(v)
  else
    local f = scalar[t]
    s = f and f(v) or tostring(v)
  end
  out[#out + 1] = ": " .. s .. "\n"
end

local function print_field(p, v, out, indent, utf8)
  local pad = rep(unit, indent)
  local name = p.name
  if p.map then
    local items = {}
    for k, x in compat.pairs(v) do items[#items + 1] = { k, x } end
    sort(items, p.order)
    for _, kv in ipairs(items) do
      out[#out + 1] = pad .. name .. " {\n"
      out[#out + 1] = pad .. unit .. "key"
      value_text(p.key, kv[1], out, indent + 1, utf8)
      out[#out + 1] = pad .. unit .. "value"
      value_text(p.value, kv[2], out, indent + 1, utf8)
      out[#out + 1] = pad .. "}\n"
    end
  elseif p.repeated then
    for i = 1, #v do
      out[#out + 1] = pad .. name
      value_text(p, v[i], out, indent, utf8)
    end
  else
    out[#out + 1] = pad .. name
    value_text(p, v, out, indent, utf8)
  end
end

-- Unknown fields, as the C++ library's UnknownFieldSet parses them: a
-- list of {number, wire type, value} from s[i..j], or nil when the bytes
-- are not a message. 'group' is the number of the group being read.
local varint, low32, rshift, band, fixed64 = compat.varint, compat.low32, compat.rshift, compat.band,
  compat.fixed64
local function parse_unknown(s, i, j, depth, group)
  local list = {}
  while i <= j do
    local tag
    tag, i = varint(s, i, j)
    if not tag then return nil end
    tag = low32(tag) -- a tag is a varint32: longer ones keep their low bits
    local num, wt = rshift(tag, 3), band(tag, 7)
    if num == 0 then return nil end
    local v
    if wt == 0 then
      v, i = varint(s, i, j)
      if not v then return nil end
    elseif wt == 1 or wt == 5 then
      local n = wt == 1 and 8 or 4
      if i + n - 1 > j then return nil end
      if n == 8 then
        v = fixed64(s, i)
      else
        local b1, b2, b3, b4 = byte(s, i, i + 3)
        v = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
      end
      i = i + n
    elseif wt == 2 then
      local len
      len, i = varint(s, i, j)
      if not len or len < 0 or len > j - i + 1 then return nil end
      v = s:sub(i, i + len - 1)
      i = i + len
    elseif wt == 3 then
      if depth <= 0 then return nil end
      v, i = parse_unknown(s, i, j, depth - 1, num)
      if not v then return nil end
    elseif wt == 4 then
      if group == num then return list, i end
      return nil
    else
      return nil
    end
    list[#list + 1] = { num, wt, v }
  end
  if group then return nil end
  return list, i
end

-- TextFormat's recursion budget for unknown length-delimited values.
local UNKNOWN_BUDGET = 10
local function print_unknown(list, out, indent, budget)
  local pad = rep(unit, indent)
  for _, f in ipairs(list) do
    local num, wt, v = f[1], f[2], f[3]
    if wt == 0 then
      out[#out + 1] = pad .. num .. ": " .. u64_decimal(v) .. "\n"
    elseif wt == 1 then
      out[#out + 1] = pad .. num .. ": 0x" .. u64_hex(v, 16) .. "\n"
    elseif wt == 5 then
      out[#out + 1] = pad .. num .. ": " .. format("0x%08x", v) .. "\n"
    elseif wt == 3 then
      out[#out + 1] = pad .. num .. " {\n"
      print_unknown(v, out, indent + 1, budget - 1)
      out[#out + 1] = pad .. "}\n"
    else
      local sub = #v > 0 and budget > 0 and parse_unknown(v, 1, #v, 100)
      if sub then
        out[#out + 1] = pad .. num .. " {\n"
        print_unknown(sub, out, indent + 1, budget - 1)
        out[#out + 1] = pad .. "}\n"
      else
        out[#out + 1] = pad .. num .. ': "' .. escape(v, false) .. '"\n'
      end
    end
  end
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
  end
  for k = e, #exts do
    local x = exts[k]
    print_field(prepare(T.pool, x, "[" .. x.name .. "]"), get_extension(m, x.name), out, indent, utf8)
  end
  local raw = unknown_fields(m)
  if raw ~= "" then
    local list = parse_unknown(raw, 1, #raw, 100)
    if list then print_unknown(list, out, indent, UNKNOWN_BUDGET) end
  end
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
  local out = {}
  local one_line = opts ~= nil and opts.one_line
  if one_line then unit = "" end
  local ok, err = pcall(print_message, m, out, 0, opts ~= nil and opts.utf8)
  unit = "  "
  if not ok then error(err, 0) end
  local text = concat(out)
  if one_line then -- strings hold no raw newline: each is escaped
    text = text:gsub("\n", " "):gsub(" $", "")
  end
  return text
end

--- m | nil, err = pc.from_text(T, s [, {max_depth = 100, pool = p}]): a
-- new message of type T from protobuf text format, parsed as `protoc
-- --encode` parses it (core/text/text.h states the grammar): field names
-- (groups by their type's name), [pkg.ext] extensions, expanded Any
-- ([type.googleapis.com/pkg.T] { ... }), { } or < >, lists [a, b],
-- adjacent strings concatenated with every C escape, inf / nan, enums by
-- name or number, # comments; a non-repeated field given twice and two
-- members of one oneof are refused, as protoc refuses them. Bad input
-- returns nil and "line:col: what" (both from 1). `pool` is where
-- extensions and Any types are found (default T's pool). Raises on bad
-- arguments.
M.from_text = core.from_text

return M
