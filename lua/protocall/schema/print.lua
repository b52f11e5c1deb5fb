--- Descriptors back to `.proto` source: the printer behind `protocall
-- describe` (lua/protocall/cli/schema.lua), from FileDescriptorProto
-- messages (pool:file_descriptor) or a server's reflection.
local core = require "protocall.core"
local message = require "protocall.message"
local to_text = require("protocall.text").to_text

local format, concat, sort, tostring, pairs = string.format, table.concat, table.sort, tostring, pairs
local find, sub = string.find, string.sub
local ipairs = message.ipairs -- repeated fields are containers
local has = core.has

local M = {}

--- fds = descriptors(pool, names): every file of the pool reachable from
-- the file names `names`, imports first, as FileDescriptorProto messages.
function M.descriptors(pool, names)
  local out, seen = {}, {}
  local function visit(name)
    if seen[name] then return end
    seen[name] = true
    local info = pool:file(name)
    for _, dep in ipairs(info and info.dependencies or {}) do visit(dep) end
    local fd = pool:file_descriptor(name)
    if fd then out[#out + 1] = fd end
  end
  for _, n in ipairs(names) do visit(n) end
  return out
end

local SCALAR = {
  [1] = "double", [2] = "float", [3] = "int64", [4] = "uint64", [5] = "int32", [6] = "fixed64",
  [7] = "fixed32", [8] = "bool", [9] = "string", [10] = "group", [11] = "message", [12] = "bytes",
  [13] = "uint32", [14] = "enum", [15] = "sfixed32", [16] = "sfixed64", [17] = "sint32", [18] = "sint64",
}
local LABEL = { [1] = "optional", [2] = "required", [3] = "repeated" }

local function field_type(f)
  if f.type == 11 or f.type == 14 or f.type == 10 then return f.type_name end
  return SCALAR[f.type]
end

-- The nested map-entry type of field f of message d, whose full name is
-- `scope` (".pkg.M"), or nil: matched by full name, as an entry of
-- another message with the same name is not this field's.
local function map_entry(d, scope, f)
  if f.label ~= 3 or f.type ~= 11 then return nil end
  for _, n in ipairs(d.nested_type) do
    if n.options and n.options.map_entry and f.type_name == scope .. "." .. n.name then return n end
  end
  return nil
end

-- A string as a quoted text-format literal, C-escaped as protoc writes it.
local ESCAPE = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ['"'] = '\\"', ["\\"] = "\\\\" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c) return ESCAPE[c] or format("\\%03o", c:byte()) end)
    .. '"'
end

-- The bytes a C-escaped literal `s` stands for, as protoc 3.21 reads a
-- bytes field's default (UnescapeCEscapeSequences): octal of up to three
-- digits, hex of any number of digits (the low 8 bits kept); an escape it
-- does not know (`\q`, a `\x` without a hex digit, a `\` at the end)
-- stands for nothing. (protoc keeps a bytes default C-escaped: read back,
-- it is quoted again, so a descriptor set whose default holds a raw quote
-- or line break prints as one literal.)
local UNESCAPE = { n = "\n", r = "\r", t = "\t", a = "\a", b = "\b", f = "\f", v = "\v",
  ["\\"] = "\\", ["?"] = "?", ["'"] = "'", ['"'] = '"' }
local function unescape(s)
  local out, i = {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    local oct, hex = s:match("^\\([0-7][0-7]?[0-7]?)", i), s:match("^\\[xX](%x+)", i)
    if c ~= "\\" then
      out[#out + 1], i = c, i + 1
    elseif oct then
      out[#out + 1], i = string.char(tonumber(oct, 8) % 256), i + 1 + #oct
    elseif hex then
      out[#out + 1], i = string.char(tonumber(hex:sub(-2), 16)), i + 2 + #hex
    else
      out[#out + 1], i = UNESCAPE[s:sub(i + 1, i + 1)], i + 2
    end
  end
  return concat(out)
end

-- The options that an *Options message `o` (of a descriptor read by
-- pool:file_descriptor, custom options still unknown fields) sets, as a
-- list of {name, value}: standard options by name, extensions as
-- "(.pkg.ext)", an option whose extension the pool lacks by its number
-- "(50000)"; values in text format, a message's on one line as
-- `{ get: "/v1" }`, an element of a repeated option each on its own.
local function options_of(o)
  local list = {}
  if o == nil then return list end
  -- read again with the pool's extensions (the *Options type is the pool's
  -- own): what does not read that way is printed as it is
  o = core.decode(core.type_of(o), core.encode(o)) or o
  local name, inner
  local text, at = to_text(o, { utf8 = true }), 1
  while at <= #text do
    -- one line at a time; a "name: value" line's value is cut from the
    -- text once (a megabytes-long option is copied no more than that)
    local eol = find(text, "\n", at, true) or #text + 1
    local colon = find(text, ": ", at, true)
    local line = (not colon or colon > eol) and sub(text, at, eol - 1)
    local value_at = not line and colon + 2
    line = line or sub(text, at, colon - 1)
    at = eol + 1
    if inner then
      if value_at then line = line .. ": " .. sub(text, value_at, eol - 1) end
      if line == "}" then
        list[#list + 1] = { name, #inner == 0 and "{ }" or "{ " .. concat(inner, " ") .. " }" }
        inner = nil
      else
        inner[#inner + 1] = line:match("^%s*(.-)$")
      end
    elseif line ~= "" then
      local value
      if value_at and not find(line, "%s") then
        name, value = line, sub(text, value_at, eol - 1)
      else
        name = line:match("^(%S+) {$")
        inner = {}
      end
      name = name:match("^%[(.*)%]$") and "(." .. name:sub(2, -2) .. ")" or name:match("^%d+$") and "(" .. name .. ")"
        or name
      if value then list[#list + 1] = { name, value } end
    end
  end
  return list
end

-- "[a = 1, (.b) = 2]" for a field or enum value's options `o` and its
-- other settings in `first` (a list of "k = v"); "" when there are none.
local function bracket(first, o)
  for _, kv in ipairs(options_of(o)) do first[#first + 1] = kv[1] .. " = " .. kv[2] end
  if #first == 0 then return "" end
  return " [" .. concat(first, ", ") .. "]"
end

-- "option k = v;" lines for the options `o` of a message, oneof, enum,
-- service or method, indented by `ind`.
local function option_lines(out, ind, o)
  for _, kv in ipairs(options_of(o)) do out[#out + 1] = format("%soption %s = %s;", ind, kv[1], kv[2]) end
end

-- A field's JSON name as protoc derives it (descriptor.cc ToJsonName):
-- each run of '_' dropped and the character after it upper-cased.
local function default_json_name(name)
  return (name:gsub("_+(.?)", string.upper))
end

-- A field's bracket: its default, its json_name when it is not the
-- derived one (protoc records it always), then its options.
local function field_options(f)
  local o = {}
  if has(f, "default_value") then
    local v = f.default_value
    -- (protoc keeps a bytes default C-escaped: read back, quoted again)
    o[#o + 1] = "default = " .. (f.type == 9 and quote(v) or f.type == 12 and quote(unescape(v)) or v)
  end
  if has(f, "json_name") and f.json_name ~= default_json_name(f.name) then
    o[#o + 1] = "json_name = " .. quote(f.json_name)
  end
  return bracket(o, f.options)
end

-- The type group field f declares among `nested`, the DescriptorProto
-- messages of the scope f is declared in (full name `scope`: ".pkg.M", a
-- file's ".pkg", "" without a package), as protoc's IsGroupLike reads a
-- group: f's type is that nested message, by full name, and f's name is
-- its name lower-cased; else nil (a group field of another type is
-- printed as a plain field, its type as a message of its own).
local function group_type(nested, scope, f)
  if f.type ~= 10 then return nil end
  for _, n in ipairs(nested or {}) do
    if f.type_name == scope .. "." .. n.name then return f.name == n.name:lower() and n or nil end
  end
  return nil
end

local print_body

-- Field f of message d (nil for an extension of a file), declared in the
-- scope whose full name is `scope` (d's), its group's body among `nested`
-- (d's nested types unless given) as protoc's source has it: "optional
-- group Name = 1 { ... }".
local function print_field(out, ind, d, f, syntax, scope, nested)
  local entry = d and map_entry(d, scope, f)
  if entry then
    local k, v = entry.field[1], entry.field[2]
    out[#out + 1] = format("%smap<%s, %s> %s = %d%s;", ind, field_type(k), field_type(v), f.name,
                           f.number, field_options(f))
    return
  end
  local label = LABEL[f.label]
  if syntax == "proto3" and label == "optional" and not f.proto3_optional then label = nil end
  if has(f, "oneof_index") and not f.proto3_optional then label = nil end
  label = label and label .. " " or ""
  local group = group_type(nested or d and d.nested_type, scope, f)
  if group then
    out[#out + 1] = format("%s%sgroup %s = %d%s {", ind, label, group.name, f.number, field_options(f))
    print_body(out, ind .. "  ", group, syntax, scope .. "." .. group.name)
    out[#out + 1] = ind .. "}"
    return
  end
  out[#out + 1] = format("%s%s%s %s = %d%s;", ind, label, field_type(f), f.name, f.number, field_options(f))
end

-- "extend .pkg.T { ... }" blocks for the extensions `exts` declared in
-- message d (nil: in the file, its types `nested`), whose full name is
-- `scope`, one block for each run of the same extendee.
local function print_extends(out, ind, d, exts, syntax, scope, nested)
  local open
  for _, f in ipairs(exts) do
    if f.extendee ~= open then
      if open then out[#out + 1] = ind .. "}" end
      open = f.extendee
      out[#out + 1] = ind .. "extend " .. open .. " {"
    end
    print_field(out, ind .. "  ", d, f, syntax, scope, nested)
  end
  if open then out[#out + 1] = ind .. "}" end
end

-- "reserved 2, 9 to 11, 20 to max;" and 'reserved "a", "b";' as protoc
-- prints them: `ranges` end past their last number (`inclusive`: at it,
-- an enum's), `max` the number printed as "max".
local function print_reserved(out, ind, ranges, names, inclusive, max)
  local list = {}
  for _, r in ipairs(ranges) do
    local last = inclusive and r["end"] or r["end"] - 1
    list[#list + 1] = r.start == last and tostring(r.start)
      or format("%d to %s", r.start, last == max and "max" or tostring(last))
  end
  if #list > 0 then out[#out + 1] = ind .. "reserved " .. concat(list, ", ") .. ";" end
  list = {}
  for _, n in ipairs(names) do list[#list + 1] = quote(n) end
  if #list > 0 then out[#out + 1] = ind .. "reserved " .. concat(list, ", ") .. ";" end
end

local function print_enum(out, ind, e)
  out[#out + 1] = ind .. "enum " .. e.name .. " {"
  option_lines(out, ind .. "  ", e.options)
  for _, v in ipairs(e.value) do
    out[#out + 1] = format("%s  %s = %d%s;", ind, v.name, v.number, bracket({}, v.options))
  end
  print_reserved(out, ind .. "  ", e.reserved_range, e.reserved_name, true, 2147483647)
  out[#out + 1] = ind .. "}"
end

-- Oneof number `idx` (0-based) of message d (full name `scope`) with its
-- fields.
local function print_oneof(out, ind, d, idx, syntax, scope)
  local oneof = d.oneof_decl[idx + 1]
  out[#out + 1] = ind .. "oneof " .. oneof.name .. " {"
  option_lines(out, ind .. "  ", oneof.options)
  for _, g in ipairs(d.field) do
    if has(g, "oneof_index") and g.oneof_index == idx and not g.proto3_optional then
      print_field(out, ind .. "  ", d, g, syntax, scope)
    end
  end
  out[#out + 1] = ind .. "}"
end

-- The proto3 `optional` field whose synthetic oneof is number `idx`
-- (0-based) of message d, or nil for a oneof of the source.
local function synthetic_field(d, idx)
  for _, g in ipairs(d.field) do
    if has(g, "oneof_index") and g.oneof_index == idx then return g.proto3_optional and g or nil end
  end
end

-- Message d, whose full name is `scope` (".pkg.M").
local function print_message(out, ind, d, syntax, scope)
  out[#out + 1] = ind .. "message " .. d.name .. " {"
  print_body(out, ind .. "  ", d, syntax, scope)
  out[#out + 1] = ind .. "}"
end

-- What is inside the braces of message d (full name `scope`), indented by
-- `inner`.
function print_body(out, inner, d, syntax, scope)
  option_lines(out, inner, d.options)
  local oneofs_done, groups = {}, {}
  for _, f in ipairs(d.field) do
    if has(f, "oneof_index") and not f.proto3_optional then
      local idx = f.oneof_index
      if not oneofs_done[idx] then
        oneofs_done[idx] = true
        print_oneof(out, inner, d, idx, syntax, scope)
      end
    else
      print_field(out, inner, d, f, syntax, scope)
    end
  end
  for _, list in ipairs { d.field, d.extension } do
    for _, f in ipairs(list) do
      local g = group_type(d.nested_type, scope, f)
      if g then groups[g] = true end
    end
  end
  for _, n in ipairs(d.nested_type) do
    if not (n.options and n.options.map_entry) and not groups[n] then
      print_message(out, inner, n, syntax, scope .. "." .. n.name)
    end
  end
  for _, e in ipairs(d.enum_type) do print_enum(out, inner, e) end
  for _, r in ipairs(d.extension_range) do
    local last = r["end"] == 536870912 and "max" or tostring(r["end"] - 1)
    out[#out + 1] = format("%sextensions %d to %s;", inner, r.start, last)
  end
  print_reserved(out, inner, d.reserved_range, d.reserved_name, false, 536870911)
  print_extends(out, inner, d, d.extension, syntax, scope)
end

-- A method as a line "rpc M ( .pkg.In ) returns ( .pkg.Out );", or with
-- options as a block of their lines, indented by `ind`.
local function print_method(out, ind, m)
  local head = format("%srpc %s ( %s%s ) returns ( %s%s )", ind, m.name, m.client_streaming and "stream " or "",
                      m.input_type, m.server_streaming and "stream " or "", m.output_type)
  local at = #out + 1
  option_lines(out, ind .. "  ", m.options)
  if #out < at then
    out[at] = head .. ";"
  else
    table.insert(out, at, head .. " {")
    out[#out + 1] = ind .. "}"
  end
end

local function print_service(out, s)
  out[#out + 1] = "service " .. s.name .. " {"
  option_lines(out, "  ", s.options)
  for _, m in ipairs(s.method) do print_method(out, "  ", m) end
  out[#out + 1] = "}"
end

--- syms = symbols(fds): every symbol of the files (FileDescriptorProto
-- messages): full name -> {kind = "message" | "field" | "extension" |
-- "oneof" | "enum" | "enum value" | "service" | "method", d = its
-- descriptor, ...}. An enum value is named both within its enum
-- (pkg.E.V) and as protoc scopes it, beside its enum (pkg.V). The type of
-- a message's group field (pkg.M.Item) and a map field's entry
-- (pkg.M.LabelsEntry) are that field, `type_of` saying which, as grpcurl
-- describes them.
function M.symbols(fds)
  local t, values = {}, {}
  local function walk_enum(prefix, e)
    t[prefix .. e.name] = { kind = "enum", d = e }
    for _, v in ipairs(e.value) do
      local s = { kind = "enum value", d = v }
      values[prefix .. e.name .. "." .. v.name], values[prefix .. v.name] = s, s
    end
  end
  local function walk_extensions(prefix, exts, d, syntax, scope, nested)
    for _, f in ipairs(exts) do
      t[prefix .. f.name] = { kind = "extension", d = f, parent = d, syntax = syntax, scope = scope, nested = nested }
    end
  end
  local function walk_message(prefix, d, syntax)
    local name = prefix .. d.name
    local scope = "." .. name
    t[name] = { kind = "message", d = d, syntax = syntax, scope = scope }
    for _, f in ipairs(d.field) do
      t[name .. "." .. f.name] = { kind = "field", d = f, parent = d, syntax = syntax, scope = scope }
    end
    for i, o in ipairs(d.oneof_decl) do
      t[name .. "." .. o.name] = { kind = "oneof", d = d, index = i - 1, syntax = syntax, scope = scope }
    end
    for _, n in ipairs(d.nested_type) do walk_message(name .. ".", n, syntax) end
    for _, e in ipairs(d.enum_type) do walk_enum(name .. ".", e) end
    walk_extensions(name .. ".", d.extension, d, syntax, scope)
    -- a group's type, or a map field's entry, stands for its field (grpcurl)
    for _, f in ipairs(d.field) do
      local n = group_type(d.nested_type, scope, f) or map_entry(d, scope, f)
      if n then
        t[name .. "." .. n.name] = { kind = "field", d = f, parent = d, syntax = syntax, scope = scope,
          type_of = f.type == 10 and "the type of a group field" or "the entry type for a map field" }
      end
    end
  end
  for _, fd in ipairs(fds) do
    local prefix = fd.package ~= "" and fd.package .. "." or ""
    local syntax = fd.syntax ~= "" and fd.syntax or "proto2"
    for _, d in ipairs(fd.message_type) do walk_message(prefix, d, syntax) end
    for _, e in ipairs(fd.enum_type) do walk_enum(prefix, e) end
    walk_extensions(prefix, fd.extension, nil, syntax, fd.package ~= "" and "." .. fd.package or "",
      fd.message_type)
    for _, s in ipairs(fd.service) do
      t[prefix .. s.name] = { kind = "service", d = s }
      for _, m in ipairs(s.method) do t[prefix .. s.name .. "." .. m.name] = { kind = "method", d = m } end
    end
  end
  for name, s in pairs(values) do t[name] = t[name] or s end
  return t
end

--- names = services_of(syms): the full names of the services among
-- `syms`, sorted.
function M.services_of(syms)
  local list = {}
  for name, s in pairs(syms) do
    if s.kind == "service" then list[#list + 1] = name end
  end
  sort(list)
  return list
end

-- What `protocall describe` calls each kind of symbol, as grpcurl does.
local WHAT = { message = "a message", field = "a field", extension = "an extension", oneof = "a one-of",
  enum = "an enum", ["enum value"] = "an enum value", service = "a service", method = "a method" }

--- text = describe(name, sym): symbol `name` (an entry of symbols) as
-- `protocall describe` prints it: "<name> is <a kind>:" and its .proto
-- source (an extension in its "extend" block, a group field with its
-- body; a group's type or a map's entry type as "the type of a group
-- field" or "the entry type for a map field" and that field; a proto3
-- `optional` field's synthetic oneof as "a synthetic one-of" and that
-- field).
function M.describe(name, s)
  local what = s.type_of
    or (s.kind == "field" or s.kind == "extension") and s.d.type == 10 and "a group field" or WHAT[s.kind]
  local out = { name .. " is " .. what .. ":" }
  if s.kind == "service" then print_service(out, s.d)
  elseif s.kind == "method" then print_method(out, "", s.d)
  elseif s.kind == "message" then print_message(out, "", s.d, s.syntax, s.scope)
  elseif s.kind == "enum" then print_enum(out, "", s.d)
  elseif s.kind == "enum value" then
    out[#out + 1] = format("%s = %d%s;", s.d.name, s.d.number, bracket({}, s.d.options))
  elseif s.kind == "oneof" then
    local optional = synthetic_field(s.d, s.index)
    if optional then
      -- a proto3 `optional` field's oneof: the source has the field alone
      out[1] = format("%s is a synthetic one-of, of proto3 optional field %s:", name, optional.name)
      print_field(out, "", s.d, optional, s.syntax, s.scope)
    else
      print_oneof(out, "", s.d, s.index, s.syntax, s.scope)
    end
  elseif s.kind == "extension" then print_extends(out, "", s.parent, { s.d }, s.syntax, s.scope, s.nested)
  else print_field(out, "", s.parent, s.d, s.syntax, s.scope) end
  out[#out + 1] = ""
  return concat(out, "\n")
end

return M
