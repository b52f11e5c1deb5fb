--- Text format out: pc.to_text(m), as the C++ library's TextFormat prints
-- (what `protoc --decode` shows): fields in field-number order, one per
-- line, nested messages in braces indented by two spaces, map entries
-- sorted by key, enums by name, strings C-escaped (bytes >= 0x80 as octal
-- unless opts.utf8), floats as SimpleFtoa/SimpleDtoa. Extensions and
-- unknown fields are not printed.
local M = {}

local type, ipairs, pairs, tostring, sort, concat = type, ipairs, pairs, tostring, table.sort, table.concat
local format, byte, rep = string.format, string.byte, string.rep
local pack, unpack = string.pack, string.unpack
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

function M.install(pc, core)
  local fields_of, type_of, has, is_message = pc.fields, pc.type_of, core.is_set, core.is_message

  local scalar = {
    double = dtoa, float = ftoa, bool = tostring,
    uint64 = function(v) return format("%u", v) end,
    fixed64 = function(v) return format("%u", v) end,
  }

  local print_message

  local function value_text(pool, info, v, out, indent, utf8)
    local t = info.type
    if t == "message" or t == "group" then
      out[#out + 1] = " {\n"
      print_message(v, out, indent + 1, utf8)
      out[#out + 1] = rep("  ", indent) .. "}\n"
      return
    end
    local s
    if t == "string" then s = '"' .. escape(v, utf8) .. '"'
    elseif t == "bytes" then s = '"' .. escape(v, false) .. '"'
    elseif t == "enum" then
      local E = pool:type(info.type_name)
      s = E and E[v] or tostring(v)
    else
      local f = scalar[t]
      s = f and f(v) or tostring(v)
    end
    out[#out + 1] = ": " .. s .. "\n"
  end

  -- Map keys in the C++ printer's order: false before true, uint64 and
  -- fixed64 unsigned, strings byte-wise.
  local function key_order(kinfo)
    local t = kinfo.type
    if t == "bool" then return function(a, b) return not a[1] and b[1] end end
    if t == "uint64" or t == "fixed64" then return function(a, b) return math.ult(a[1], b[1]) end end
    return function(a, b) return a[1] < b[1] end
  end

  print_message = function(m, out, indent, utf8)
    local T = type_of(m)
    local pool = T.pool
    local fields = {}
    for i, f in ipairs(fields_of(T)) do fields[i] = f end
    sort(fields, function(a, b) return a.number < b.number end)
    local pad = rep("  ", indent)
    for _, info in ipairs(fields) do
      local name = info.name
      if info.type == "group" then name = info.type_name:match("[^.]+$") end
      if has(m, info.name) then
        local v = m[info.name]
        if info.type:sub(1, 4) == "map<" then
          local entry = fields_of(pool:type(info.type_name))
          local kinfo, vinfo = entry[1], entry[2]
          if kinfo.number ~= 1 then kinfo, vinfo = vinfo, kinfo end
          local items = {}
          for k, x in pairs(v) do items[#items + 1] = { k, x } end
          sort(items, key_order(kinfo))
          for _, kv in ipairs(items) do
            out[#out + 1] = pad .. name .. " {\n"
            out[#out + 1] = pad .. "  key"
            value_text(pool, kinfo, kv[1], out, indent + 1, utf8)
            out[#out + 1] = pad .. "  value"
            value_text(pool, vinfo, kv[2], out, indent + 1, utf8)
            out[#out + 1] = pad .. "}\n"
          end
        elseif info.label == "repeated" then
          for i = 1, #v do
            out[#out + 1] = pad .. name
            value_text(pool, info, v[i], out, indent, utf8)
          end
        else
          out[#out + 1] = pad .. name
          value_text(pool, info, v, out, indent, utf8)
        end
      end
    end
  end

  --- text = pc.to_text(m [, {utf8 = true}]): the message in protobuf text
  -- format, as `protoc --decode` prints it (see the file's header); with
  -- utf8, string fields keep their UTF-8 bytes instead of octal escapes.
  -- Raises on a non-message.
  function pc.to_text(m, opts)
    if not is_message(m) then
      error("bad argument #1 to 'to_text' (message expected, got " .. type(m) .. ")", 2)
    end
    local out = {}
    print_message(m, out, 0, opts ~= nil and opts.utf8)
    return concat(out)
  end
end

return M
