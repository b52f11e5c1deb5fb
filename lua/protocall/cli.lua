--- The `protocall` command's subcommands: decode, encode, describe, list,
-- call and help. bindings/cli/main.c runs `M.main(args)` when the first
-- argument names one (and no file of that name exists); its result is the
-- exit status: 0 done, 1 a failure (one line on stderr), 2 a usage error
-- (the usage on stderr), 64 + the gRPC status code when a call fails.
-- Flags are grpcurl's and protoc's spellings: one dash, `-flag value` or
-- `-flag=value`; repeatable flags collect in order.
local pc = require "protocall"

local M = {}

local stdout, stderr = io.stdout, io.stderr
local terminal = false -- stderr is a terminal: progress lines (M.main's env)
local concat, format, sort = table.concat, string.format, table.sort

-- -- Flags -------------------------------------------------------------------

-- Kinds: "bool", "string", "list" (repeatable string), "number".
local SCHEMA_FLAGS = {
  I = "list", ["import-path"] = "list", proto = "list", protoset = "list",
}

local COMMANDS = {}

local function with_schema(flags)
  for k, v in pairs(SCHEMA_FLAGS) do flags[k] = v end
  return flags
end

-- What list and describe take to reach a server's reflection service.
local CONNECT_FLAGS = { plaintext = "bool", cacert = "string", cert = "string", key = "string",
  servername = "string", insecure = "bool", ["connect-timeout"] = "number", H = "list",
  ["max-time"] = "number" }

local function with_connect(flags)
  for k, v in pairs(CONNECT_FLAGS) do flags[k] = v end
  return flags
end

COMMANDS.decode = {
  summary = "binary messages to text format or JSON",
  flags = with_schema { format = "string", raw = "bool", ["length-delimited"] = "bool",
                        ["emit-defaults"] = "bool" },
  usage = "protocall decode [schema flags] [-format text|json] [-length-delimited] TYPE [FILE]\n" ..
          "       protocall decode -raw [-length-delimited] [FILE]",
  about = "Reads binary messages (FILE or standard input) and prints them as text (as\n" ..
          "`protoc --decode` does) or JSON; -raw prints without a schema, field numbers\n" ..
          "only (as `protoc --decode_raw`). -length-delimited reads a stream of\n" ..
          "varint-prefixed messages.",
  example = "protocall decode -I examples -proto route.proto demo.Route < route.bin",
}

COMMANDS.encode = {
  summary = "text format or JSON to binary messages",
  flags = with_schema { format = "string", ["length-delimited"] = "bool" },
  usage = "protocall encode [schema flags] [-format text|json] [-length-delimited] TYPE [FILE]",
  about = "Reads a message as text format (as `protoc --encode` takes it) or JSON (FILE or\n" ..
          "standard input) and writes its binary encoding to standard output. With\n" ..
          "-format json -length-delimited, every JSON document of the input becomes one\n" ..
          "varint-prefixed message.",
  example = "protocall encode -I examples -proto route.proto demo.Route < route.txt > route.bin",
}

COMMANDS.describe = {
  summary = "a service, method, message, enum or field as .proto source",
  flags = with_schema(with_connect {}),
  usage = "protocall describe [schema flags] [SYMBOL]\n" ..
          "       protocall describe [-plaintext | TLS flags as call's] [-H 'key: value']... TARGET [SYMBOL]",
  about = "Prints the definition of a service, method, message, enum or field as .proto\n" ..
          "source; with no SYMBOL, every service of the loaded files. Without schema\n" ..
          "flags the definitions come from TARGET's server reflection service.",
  example = "protocall describe -I examples -proto route.proto demo.Router\n" ..
            "  protocall describe -plaintext 127.0.0.1:50051 demo.Route",
}

COMMANDS.list = {
  summary = "the services of the loaded files or a server, or a service's methods",
  flags = with_schema(with_connect {}),
  usage = "protocall list [schema flags] [SERVICE]\n" ..
          "       protocall list [-plaintext | TLS flags as call's] [-H 'key: value']... TARGET [SERVICE]",
  about = "Lists the services of the loaded files, or the methods of SERVICE. Without\n" ..
          "schema flags it asks TARGET's server reflection service.",
  example = "protocall list -I examples -proto route.proto\n" ..
            "  protocall list -plaintext 127.0.0.1:50051 demo.Router",
}

COMMANDS.call = {
  summary = "a gRPC call of any shape, JSON in and out",
  flags = with_schema {
    d = "string", H = "list", ["max-time"] = "number", ["retry-attempts"] = "number",
    gzip = "bool", plaintext = "bool", cacert = "string", format = "string",
    ["emit-defaults"] = "bool", v = "bool", cert = "string", key = "string",
    servername = "string", insecure = "bool", retry = "string", ["connect-timeout"] = "number",
  },
  usage = "protocall call [schema flags] [-d JSON|@|@FILE] [-H 'key: value']... [-max-time S]\n" ..
          "       [-connect-timeout S] [-retry-attempts N | -retry JSON] [-gzip] [-format json|text]\n" ..
          "       [-emit-defaults]\n" ..
          "       [-plaintext | [-cacert FILE | -insecure] [-cert FILE -key FILE] [-servername NAME]]\n" ..
          "       [-v] TARGET pkg.Service/Method",
  about = "Calls a method over gRPC, any call shape (TARGET is host:port; TLS unless\n" ..
          "-plaintext). The request is JSON from -d (@ reads standard input, @FILE a file;\n" ..
          "none: an empty message); a client or bidirectional stream sends every JSON\n" ..
          "document of it (concatenated or one per line). Each response is printed as it\n" ..
          "arrives. Without schema flags the schema comes from TARGET's server\n" ..
          "reflection service. Exits 0 on OK, otherwise 64 + the status code, with\n" ..
          "`ERROR: code = ..., message = ...` on stderr. TLS: -cacert verifies the server\n" ..
          "against FILE (default: the system store), -cert/-key give a client certificate,\n" ..
          "-servername the name to verify and send, -insecure skips verification (test\n" ..
          "servers only). -retry takes a service config retryPolicy ({\"maxAttempts\": 3,\n" ..
          "\"initialBackoff\": \"0.1s\", ...}) or a whole service config. -v prints the\n" ..
          "response headers, trailers and timing to stderr. -connect-timeout bounds\n" ..
          "connecting (and the TLS handshake): UNAVAILABLE past it.",
  example = "protocall call -plaintext -I examples -proto route.proto -retry-attempts 3 -d '{\"name\": \"r\"}' \\\n" ..
            "    127.0.0.1:50051 demo.Router/Measure",
}

COMMANDS.run = {
  summary = "runs a Lua script with the module built in (always a script)",
  flags = {},
  usage = "protocall run SCRIPT [args]",
  about = "Runs SCRIPT with `arg` set as lua5.4 sets it, even when SCRIPT has the name of a\n" ..
          "command (a command name wins only when no file of that name exists).",
  example = "protocall run examples/quickstart.lua",
}

COMMANDS.help = {
  summary = "the commands, or one command's flags and an example",
  flags = {},
  usage = "protocall help [COMMAND]",
  about = "Prints the commands, or the usage of one.",
  example = "protocall help decode",
}

local ORDER = { "call", "list", "describe", "decode", "encode", "run", "help" }

local SCHEMA_USAGE = "schema flags: -I DIR (repeatable; default .), -proto FILE (repeatable),\n" ..
                     "              -protoset FILE (a FileDescriptorSet, repeatable)"

local function command_help(name)
  local c = COMMANDS[name]
  local lines = { "usage: " .. c.usage, "", c.about }
  if c.flags.proto then lines[#lines + 1] = "\n" .. SCHEMA_USAGE end
  lines[#lines + 1] = "\nexample:\n  " .. c.example
  return concat(lines, "\n") .. "\n"
end

local function general_help()
  local lines = { "usage: protocall COMMAND [flags] [args]", "       protocall run SCRIPT [args]",
                  "       protocall [-e stat] [-l mod] [-v] [SCRIPT [args]]", "", "commands:" }
  for _, name in ipairs(ORDER) do
    lines[#lines + 1] = format("  %-9s %s", name, COMMANDS[name].summary)
  end
  lines[#lines + 1] = "\n`protocall help COMMAND` shows a command's flags and an example."
  return concat(lines, "\n") .. "\n"
end

-- A usage error: raised as a table so main can print the usage and exit 2.
local Usage = {}
local function usage_error(cmd, msg) error(setmetatable({ cmd = cmd, msg = msg }, Usage), 0) end

-- A failure: one line on stderr, exit `status` (1 unless given).
local Failure = {}
local function fail(msg, status) error(setmetatable({ msg = msg, status = status or 1 }, Failure), 0) end

local function parse(cmd, args, first)
  local spec = COMMANDS[cmd].flags
  local flags, rest = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do rest[#rest + 1] = args[j] end
      break
    end
    local name, value = a:match("^%-%-?([%w][%w%-]*)=(.*)$")
    if not name and spec.I and a:match("^%-I.") then name, value = "I", a:sub(3) end -- protoc's -Idir
    if not name then name = a:match("^%-%-?([%w][%w%-]*)$") end
    if name and a ~= "-" then
      local kind = spec[name]
      if kind == nil then usage_error(cmd, "unknown flag " .. a) end
      if kind == "bool" then
        if value ~= nil then usage_error(cmd, "flag -" .. name .. " takes no value") end
        flags[name] = true
      else
        if value == nil then
          i = i + 1
          value = args[i]
          if value == nil then usage_error(cmd, "flag -" .. name .. " needs a value") end
        end
        if kind == "list" then
          flags[name] = flags[name] or {}
          flags[name][#flags[name] + 1] = value
        elseif kind == "number" then
          local n = tonumber(value)
          if n == nil or n < 0 then usage_error(cmd, "flag -" .. name .. ": a number >= 0 expected, got '" .. value .. "'") end
          flags[name] = n
        else
          flags[name] = value
        end
      end
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  return flags, rest
end

-- -- Input and schemas --------------------------------------------------------

local function read_input(path)
  if path == nil or path == "-" then return io.stdin:read("a") or "" end
  local f, why = io.open(path, "rb")
  if not f then fail(why) end
  local s, rerr = f:read("a")
  f:close()
  if not s then fail(path .. ": " .. tostring(rerr)) end
  return s
end

-- A pool with the files of -proto (found through -I, as protoc finds them)
-- and the sets of -protoset; the list of the files named.
local function load_schemas(flags)
  local pool = pc.pool()
  local paths = {}
  for _, d in ipairs(flags.I or {}) do paths[#paths + 1] = d end
  for _, d in ipairs(flags["import-path"] or {}) do paths[#paths + 1] = d end
  if #paths == 0 then paths[1] = "." end
  local names = {}
  for _, set in ipairs(flags.protoset or {}) do
    local files, err = pool:load_descriptor_set(read_input(set))
    if not files then fail(set .. ": " .. tostring(err)) end
    for _, f in ipairs(files) do names[#names + 1] = f.name end
  end
  for _, proto in ipairs(flags.proto or {}) do
    local path
    for _, dir in ipairs(paths) do
      local candidate = dir .. "/" .. proto
      local f = io.open(candidate, "rb")
      if f then
        f:close()
        path = candidate
        break
      end
    end
    if not path then fail(proto .. ": File not found.") end
    local file, err = pool:load_file(path, { import_paths = paths, name = proto })
    if not file then fail(err) end
    names[#names + 1] = file.name
  end
  return pool, names
end

local function has_schema(flags)
  return flags.proto ~= nil or flags.protoset ~= nil
end

local function need_schema(cmd, flags)
  if not flags.proto and not flags.protoset then
    usage_error(cmd, "no schema: give -proto FILE or -protoset FILE")
  end
end

local function message_type(pool, name)
  local T = pool:type(name)
  if not T or not T.full_name then fail(name .. ": no such message type in the loaded files") end
  return T
end

-- Splits a stream of varint-prefixed messages.
local function split_delimited(bytes)
  local out, pos = {}, 1
  while pos <= #bytes do
    local len, scale, start = 0, 1, pos
    repeat
      local b = bytes:byte(pos)
      if b == nil then fail(format("truncated length prefix at offset %d", start - 1)) end
      if scale > 2 ^ 28 then fail(format("length prefix over 5 bytes at offset %d", start - 1)) end
      len = len + b % 128 * scale
      scale = scale * 128
      pos = pos + 1
    until b < 0x80
    if pos + len - 1 > #bytes then
      fail(format("message at offset %d runs past the end of the input (%d bytes announced)", start - 1, len))
    end
    out[#out + 1] = bytes:sub(pos, pos + len - 1)
    pos = pos + len
  end
  return out
end

local function varint(n)
  local t = {}
  repeat
    local b = n % 128
    n = math.floor(n / 128)
    t[#t + 1] = string.char(n > 0 and b + 128 or b)
  until n == 0
  return concat(t)
end

local function check_format(cmd, flags, allowed)
  local f = flags.format or allowed[1]
  for _, a in ipairs(allowed) do
    if f == a then return f end
  end
  usage_error(cmd, "-format must be " .. concat(allowed, " or ") .. ", got '" .. f .. "'")
end

local function render(m, fmt, flags)
  if fmt == "json" then
    local ok, text = pcall(pc.to_json, m, { emit_defaults = flags["emit-defaults"] or nil, indent = 2 })
    if not ok then fail((tostring(text):gsub("^[^:\n]*:%d+: ", ""))) end
    return text .. "\n"
  end
  return pc.to_text(m)
end

-- -- decode / encode ----------------------------------------------------------

function COMMANDS.decode.run(flags, args)
  local fmt = check_format("decode", flags, { "text", "json" })
  local T, file
  if flags.raw then
    if #args > 1 then usage_error("decode", "-raw takes no TYPE, at most FILE") end
    if flags.proto or flags.protoset then usage_error("decode", "-raw takes no schema") end
    if fmt ~= "text" then usage_error("decode", "-raw prints text format only") end
    T, file = pc.type("google.protobuf.Empty"), args[1]
  else
    if #args < 1 then usage_error("decode", "TYPE expected") end
    if #args > 2 then usage_error("decode", "too many arguments: TYPE [FILE]") end
    need_schema("decode", flags)
    T, file = message_type(load_schemas(flags), args[1]), args[2]
  end
  local bytes = read_input(file)
  local parts = flags["length-delimited"] and split_delimited(bytes) or { bytes }
  for i, b in ipairs(parts) do
    local m, err = pc.decode(T, b)
    if not m then
      fail((file or "<stdin>") .. (#parts > 1 and format(" (message %d)", i) or "") .. ": " .. err)
    end
    if i > 1 and fmt == "text" then stdout:write("\n") end
    stdout:write(render(m, fmt, flags))
  end
  return 0
end

-- The JSON documents of a stream (concatenated or one per line).
local function json_documents(s)
  local docs, depth, start, i, n = {}, 0, nil, 1, #s
  while i <= n do
    local c = s:sub(i, i)
    if c == '"' then
      local j = i + 1
      while j <= n do
        local d = s:sub(j, j)
        if d == "\\" then j = j + 1 elseif d == '"' then break end
        j = j + 1
      end
      i = j
    elseif c == "{" or c == "[" then
      if depth == 0 then start = i end
      depth = depth + 1
    elseif c == "}" or c == "]" then
      depth = depth - 1
      if depth == 0 then docs[#docs + 1] = s:sub(start, i) end
      if depth < 0 then fail(format("unbalanced '%s' at offset %d", c, i - 1)) end
    elseif depth == 0 and not c:match("%s") then
      fail(format("JSON object expected at offset %d", i - 1))
    end
    i = i + 1
  end
  if depth ~= 0 then fail("the last JSON document is not closed") end
  return docs
end

function COMMANDS.encode.run(flags, args)
  local fmt = check_format("encode", flags, { "text", "json" })
  if #args < 1 then usage_error("encode", "TYPE expected") end
  if #args > 2 then usage_error("encode", "too many arguments: TYPE [FILE]") end
  need_schema("encode", flags)
  local T = message_type(load_schemas(flags), args[1])
  local input = read_input(args[2])
  local docs = { input }
  if flags["length-delimited"] then
    if fmt ~= "json" then usage_error("encode", "-length-delimited reads JSON documents (-format json)") end
    docs = json_documents(input)
  end
  local out = {}
  for i, doc in ipairs(docs) do
    local m, err
    if fmt == "json" then m, err = pc.from_json(T, doc) else m, err = pc.from_text(T, doc) end
    if not m then fail((args[2] or "<stdin>") .. (#docs > 1 and format(" (document %d)", i) or "") .. ": " .. err) end
    local bytes = pc.encode(m)
    out[#out + 1] = flags["length-delimited"] and varint(#bytes) .. bytes or bytes
  end
  stdout:write(concat(out))
  return 0
end

-- -- describe / list: .proto source from the loaded descriptors ----------------

-- Every file of the pool reachable from 'names', imports first, as
-- FileDescriptorProto messages.
local function descriptors(pool, names)
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

-- The nested map-entry type named by field f of message d, or nil.
local function map_entry(d, f)
  if f.label ~= 3 or f.type ~= 11 then return nil end
  for _, n in ipairs(d.nested_type) do
    if n.options and n.options.map_entry and f.type_name:sub(-#n.name - 1) == "." .. n.name then
      return n
    end
  end
  return nil
end

local function field_options(f)
  local o = {}
  if f.options then
    if pc.has(f.options, "packed") then o[#o + 1] = "packed = " .. tostring(f.options.packed) end
    if f.options.deprecated then o[#o + 1] = "deprecated = true" end
  end
  if pc.has(f, "default_value") then
    local v = f.default_value
    o[#o + 1] = "default = " .. ((f.type == 9 or f.type == 12) and format("%q", v) or v)
  end
  if #o == 0 then return "" end
  return " [" .. concat(o, ", ") .. "]"
end

local print_message

local function print_field(out, ind, d, f, syntax)
  local entry = map_entry(d, f)
  if entry then
    local k, v = entry.field[1], entry.field[2]
    out[#out + 1] = format("%smap<%s, %s> %s = %d%s;", ind, field_type(k), field_type(v), f.name,
                           f.number, field_options(f))
    return
  end
  local label = LABEL[f.label]
  if syntax == "proto3" and label == "optional" and not f.proto3_optional then label = nil end
  if pc.has(f, "oneof_index") and not f.proto3_optional then label = nil end
  out[#out + 1] = format("%s%s%s %s = %d%s;", ind, label and label .. " " or "", field_type(f), f.name,
                         f.number, field_options(f))
end

local function print_enum(out, ind, e)
  out[#out + 1] = ind .. "enum " .. e.name .. " {"
  for _, v in ipairs(e.value) do out[#out + 1] = format("%s  %s = %d;", ind, v.name, v.number) end
  out[#out + 1] = ind .. "}"
end

function print_message(out, ind, d, syntax)
  out[#out + 1] = ind .. "message " .. d.name .. " {"
  local inner = ind .. "  "
  local oneofs_done = {}
  for _, f in ipairs(d.field) do
    if pc.has(f, "oneof_index") and not f.proto3_optional then
      local idx = f.oneof_index
      if not oneofs_done[idx] then
        oneofs_done[idx] = true
        out[#out + 1] = inner .. "oneof " .. d.oneof_decl[idx + 1].name .. " {"
        for _, g in ipairs(d.field) do
          if pc.has(g, "oneof_index") and g.oneof_index == idx and not g.proto3_optional then
            print_field(out, inner .. "  ", d, g, syntax)
          end
        end
        out[#out + 1] = inner .. "}"
      end
    else
      print_field(out, inner, d, f, syntax)
    end
  end
  for _, n in ipairs(d.nested_type) do
    if not (n.options and n.options.map_entry) then print_message(out, inner, n, syntax) end
  end
  for _, e in ipairs(d.enum_type) do print_enum(out, inner, e) end
  for _, r in ipairs(d.extension_range) do
    out[#out + 1] = format("%sextensions %d to %s;", inner, r.start, r["end"] == 536870912 and "max" or tostring(r["end"] - 1))
  end
  out[#out + 1] = ind .. "}"
end

local function method_line(m)
  return format("rpc %s ( %s%s ) returns ( %s%s );", m.name, m.client_streaming and "stream " or "",
                m.input_type, m.server_streaming and "stream " or "", m.output_type)
end

local function print_service(out, s)
  out[#out + 1] = "service " .. s.name .. " {"
  for _, m in ipairs(s.method) do out[#out + 1] = "  " .. method_line(m) end
  out[#out + 1] = "}"
end

-- Every symbol of the files: full name -> {kind, descriptor, syntax}.
local function symbols(fds)
  local t = {}
  local function walk_message(prefix, d, syntax)
    local name = prefix .. d.name
    t[name] = { kind = "message", d = d, syntax = syntax }
    for _, f in ipairs(d.field) do t[name .. "." .. f.name] = { kind = "field", d = f, parent = d, syntax = syntax } end
    for _, n in ipairs(d.nested_type) do walk_message(name .. ".", n, syntax) end
    for _, e in ipairs(d.enum_type) do t[name .. "." .. e.name] = { kind = "enum", d = e } end
  end
  for _, fd in ipairs(fds) do
    local prefix = fd.package ~= "" and fd.package .. "." or ""
    local syntax = fd.syntax ~= "" and fd.syntax or "proto2"
    for _, d in ipairs(fd.message_type) do walk_message(prefix, d, syntax) end
    for _, e in ipairs(fd.enum_type) do t[prefix .. e.name] = { kind = "enum", d = e } end
    for _, s in ipairs(fd.service) do
      t[prefix .. s.name] = { kind = "service", d = s }
      for _, m in ipairs(s.method) do t[prefix .. s.name .. "." .. m.name] = { kind = "method", d = m } end
    end
  end
  return t
end

local function services_of(syms)
  local list = {}
  for name, s in pairs(syms) do
    if s.kind == "service" then list[#list + 1] = name end
  end
  sort(list)
  return list
end

local function describe_one(name, s)
  local out = { name .. (s.kind == "enum" and " is an " or " is a ") .. s.kind .. ":" }
  if s.kind == "service" then print_service(out, s.d)
  elseif s.kind == "method" then out[#out + 1] = method_line(s.d)
  elseif s.kind == "message" then print_message(out, "", s.d, s.syntax)
  elseif s.kind == "enum" then print_enum(out, "", s.d)
  else print_field(out, "", s.parent, s.d, s.syntax) end
  return concat(out, "\n") .. "\n"
end

-- list and describe by server reflection (below the call section).
local list_by_reflection, describe_by_reflection

function COMMANDS.describe.run(flags, args)
  if not has_schema(flags) and #args > 0 then return describe_by_reflection(flags, args) end
  if #args > 1 then usage_error("describe", "at most one SYMBOL") end
  need_schema("describe", flags)
  local syms = symbols(descriptors(load_schemas(flags)))
  if args[1] == nil then
    for _, name in ipairs(services_of(syms)) do stdout:write(describe_one(name, syms[name])) end
    return 0
  end
  local name = args[1]:gsub("^%.", "")
  local s = syms[name]
  if not s then fail("Symbol not found: " .. name) end
  stdout:write(describe_one(name, s))
  return 0
end

function COMMANDS.list.run(flags, args)
  if not has_schema(flags) and #args > 0 then return list_by_reflection(flags, args) end
  if #args > 1 then usage_error("list", "at most one SERVICE") end
  need_schema("list", flags)
  local syms = symbols(descriptors(load_schemas(flags)))
  if args[1] == nil then
    for _, name in ipairs(services_of(syms)) do stdout:write(name, "\n") end
    return 0
  end
  local s = syms[args[1]]
  if not s or s.kind ~= "service" then fail("Service not found: " .. args[1]) end
  for _, m in ipairs(s.d.method) do stdout:write(args[1], ".", m.name, "\n") end
  return 0
end

-- -- call ---------------------------------------------------------------------

-- Base64 (standard or URL-safe, padded or not) to bytes, or nil: read by
-- the JSON codec's own base64 reader, as a google.protobuf.BytesValue.
local function base64_decode(s)
  if s:find('[%c"\\]') then return nil end
  local v = pc.from_json(pc.type("google.protobuf.BytesValue"), '"' .. s .. '"')
  return v and v.value
end

local function metadata_of(flags)
  local md = {}
  for _, h in ipairs(flags.H or {}) do
    local k, v = h:match("^%s*([^:]+):%s?(.*)$")
    if not k then usage_error("call", "-H '" .. h .. "': 'key: value' expected") end
    k = k:lower():gsub("%s+$", "")
    if k:sub(-4) == "-bin" then
      v = base64_decode(v)
      if not v then fail("-H '" .. h .. "': the value of a -bin key must be base64") end
    end
    md[#md + 1] = { k, v }
  end
  return md
end

-- Metadata pairs as grpcurl prints them ("key: value", -bin values in
-- base64), or "(empty)".
local function print_pairs(title, pairs_list)
  stderr:write(title, "\n")
  if pairs_list == nil or #pairs_list == 0 then stderr:write("(empty)\n") end
  for _, kv in ipairs(pairs_list or {}) do
    local v = kv[2]
    if kv[1]:sub(-4) == "-bin" then
      v = pc.to_json(pc.type("google.protobuf.BytesValue") { value = v }):sub(2, -2)
    end
    stderr:write(kv[1], ": ", v, "\n")
  end
end

-- `transport` seen through: every call records where its response headers
-- and trailers are (for -v).
local function recording(transport, seen)
  return {
    unary = function(_, path, request, settings)
      local s = {}
      for k, v in pairs(settings or {}) do s[k] = v end
      s.with_metadata = true
      local bytes, md = transport:unary(path, request, s)
      seen.md = md
      return bytes
    end,
    server_stream = function(_, path, request, settings)
      local iter, state, ctl, call = transport:server_stream(path, request, settings)
      seen.md = nil
      seen.raw = call
      return iter, state, ctl, call
    end,
    stream = function(_, path, settings)
      local call = transport:stream(path, settings)
      seen.md = nil
      seen.call = call
      return call
    end,
  }
end

-- The headers and trailers of the call `seen` recorded, or of the error.
local function seen_metadata(seen, err)
  if getmetatable(err) == pc.RetryError then err = err.cause end
  if getmetatable(err) == pc.Error and (err.headers or err.metadata) then
    return { headers = err.headers, trailers = err.metadata }
  end
  if seen.md then return seen.md end
  if seen.raw then return seen.raw:metadata() end
  if seen.call then return { headers = seen.call:headers(), trailers = seen.call:trailers() } end
  return {}
end

-- A -retry value: a retryPolicy object, or a whole service config (with
-- "methodConfig"), as the JSON text pc.client takes.
local function retry_config(json)
  if json:find('"methodConfig"', 1, true) then return json end
  return '{"methodConfig": [{"name": [{}], "retryPolicy": ' .. json .. "}]}"
end

local function print_error(err)
  if getmetatable(err) == pc.RetryError then err = err.cause end
  if getmetatable(err) == pc.Error then
    stderr:write(format("ERROR: code = %s, message = %s\n", err.code, err.message or ""))
    for _, d in ipairs(err.details or {}) do
      local ok, text = pcall(pc.to_text, d)
      stderr:write("  details: ", ok and text:gsub("\n$", "") or tostring(d), "\n")
    end
    return 64 + (pc.codes[err.code] or 2)
  end
  stderr:write("ERROR: ", tostring(err), "\n")
  return 64 + 2
end

-- The pc.grpc transport to TARGET with the connection flags.
local function connect(flags, target, cmd)
  local url = (flags.plaintext and "http://" or "https://") .. target:gsub("^dns:///", "")
  if target:match("^https?://") then url = target end
  if flags.plaintext and (flags.cacert or flags.cert or flags.key or flags.servername or flags.insecure) then
    usage_error(cmd, "-plaintext takes no TLS flag (-cacert, -cert, -key, -servername, -insecure)")
  end
  if flags.insecure and flags.cacert then usage_error(cmd, "-insecure and -cacert exclude each other") end
  if (flags.cert == nil) ~= (flags.key == nil) then usage_error(cmd, "-cert and -key go together") end
  local transport_opts = { ca_file = flags.cacert, compression = flags.gzip and "gzip" or nil,
    cert_file = flags.cert, key_file = flags.key, server_name = flags.servername,
    insecure = flags.insecure or nil }
  local ct = flags["connect-timeout"]
  if ct ~= nil then
    if not (ct > 0 and ct < math.huge) then
      usage_error(cmd, "-connect-timeout: a positive number of seconds expected, got " .. tostring(ct))
    end
    transport_opts.connect_timeout = ct
  end
  local ok, transport = pcall(pc.grpc, url, transport_opts)
  if not ok then fail((tostring(transport):gsub("^[^:\n]*:%d+: ", ""))) end
  return transport
end

local reflection_pool -- (below) a pool of the server's files defining a symbol

function COMMANDS.call.run(flags, args)
  local fmt = check_format("call", flags, { "json", "text" })
  if #args ~= 2 then usage_error("call", "TARGET and pkg.Service/Method expected") end
  local target, method = args[1], args[2]
  local service, name = method:match("^/?([%w_.]+)[/.]([%w_]+)$")
  if not service then usage_error("call", "method '" .. method .. "': pkg.Service/Method expected") end
  local pool, transport
  if has_schema(flags) then
    pool = load_schemas(flags)
  else
    transport = connect(flags, target, "call")
    local status
    pool, status = reflection_pool(flags, transport, service)
    if not pool then return status end
  end
  local info = pool:service(service)
  if not info then fail("Service not found: " .. service) end
  local m = info.methods[name]
  if not m then fail(service .. " has no method '" .. name .. "'") end
  local data = flags.d
  if data == "@" then data = read_input(nil)
  elseif data and data:sub(1, 1) == "@" then data = read_input(data:sub(2)) end
  -- A client stream sends every JSON document of the data (concatenated or
  -- one per line); the other shapes take one.
  local requests = {}
  for i, doc in ipairs(m.client_streaming and json_documents(data or "") or { data or "{}" }) do
    local request, err = pc.from_json(m.input, doc)
    if not request then fail("request" .. (m.client_streaming and format(" %d", i) or "") .. ": " .. err) end
    requests[i] = request
  end
  local request = requests[1]
  transport = transport or connect(flags, target, "call")
  local seen = {}
  if flags.v then transport = recording(transport, seen) end
  local opts = { transport = transport, pool = pool, metadata = metadata_of(flags) }
  if flags["max-time"] and flags["max-time"] > 0 then opts.timeout = flags["max-time"] end -- 0: no limit
  local attempts = flags["retry-attempts"]
  if attempts and (attempts ~= math.floor(attempts) or attempts < 1) then
    usage_error("call", "-retry-attempts: a whole number >= 1 expected, got " .. tostring(attempts))
  end
  if attempts and attempts > 1 then opts.retry = pc.Retry { max_attempts = math.floor(attempts) } end
  if flags.retry then
    if attempts then usage_error("call", "-retry and -retry-attempts exclude each other") end
    opts.service_config = retry_config(flags.retry)
  end
  local okS, stub = pcall(pc.client, service, opts)
  if not okS then -- bad metadata from -H, say: one line, without the Lua position
    local msg = tostring(stub):gsub("^[^:\n]*:%d+: ", ""):gsub("^pc%.client: ", "")
    if flags.retry and not flags.retry:find('"methodConfig"', 1, true) then
      msg = msg:gsub("^service_config: methodConfig%[0%]%.retryPolicy%.?", "-retry: ")
        :gsub("^service_config: JSON: ", "-retry: JSON: ")
    end
    fail(msg)
  end
  local started = pc.now()
  local count = 0
  local function show(r)
    count = count + 1
    if terminal then stderr:write("\r\27[K") end -- the progress line off before the response
    if count > 1 and fmt == "text" then stdout:write("\n") end -- as decode -length-delimited
    stdout:write(render(r, fmt, flags))
    stdout:flush()
    if terminal then stderr:write(format("\r%d received, %.1f s ", count, pc.now() - started)) end
  end
  local okc, cerr = pcall(function()
    if m.client_streaming and not m.server_streaming then
      local call = stub[name](stub)
      for _, r in ipairs(requests) do call:send(r) end
      show(call:close_and_recv())
    elseif m.client_streaming then -- bidirectional: one task sends while another prints
      local call = stub[name](stub)
      local failure
      pc.spawn(function()
        local ok, e = pcall(function()
          for _, r in ipairs(requests) do call:send(r) end
          call:close_send()
        end)
        if not ok and failure == nil then failure = e end
      end)
      pc.spawn(function()
        local ok, e = pcall(function()
          for r in function() return call:recv() end do show(r) end
        end)
        if not ok then failure = e end
      end)
      pc.run()
      if failure ~= nil then error(failure, 0) end
      if terminal then stderr:write("\r\27[K") end
    elseif m.server_streaming then
      for r in stub[name](stub, request) do show(r) end
      if terminal then stderr:write("\r\27[K") end
    else
      stdout:write(render(stub[name](stub, request), fmt, flags))
      count = 1
    end
  end)
  if flags.v then
    local md = seen_metadata(seen, not okc and cerr or nil)
    print_pairs("Response headers received:", md.headers)
    stderr:write("\n")
    print_pairs("Response trailers received:", md.trailers)
    stderr:write(format("%d response message%s in %.3f s\n", count, count == 1 and "" or "s", pc.now() - started))
  end
  if not okc then return print_error(cerr) end
  return 0
end

-- -- server reflection --------------------------------------------------------

local REFLECTION = { "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection" }

-- A client of TARGET's server reflection service (grpc.reflection.v1, or
-- v1alpha when the server answers v1 UNIMPLEMENTED), one stream for all
-- its questions, loading the files it answers into a fresh pool:
-- r.services() -> sorted names, r.symbol(name) loads the file defining
-- `name` with its imports, r.close(). Failures raise pc.Error (an
-- ErrorResponse as its code and message).
local function reflection_client(flags, transport)
  local rpool = pc.pool()
  for _, v in ipairs { "v1", "v1alpha" } do
    assert(pc._load_builtin(rpool, "grpc/reflection/" .. v .. "/reflection.proto"))
  end
  local FDP = pc.type("google.protobuf.FileDescriptorProto")
  local r = { pool = pc.pool() }
  local files = {} -- name -> {bytes =, fd =} as received
  local version, call, answered = 1, nil, false
  local opts = { transport = transport, pool = rpool, metadata = metadata_of(flags) }
  if flags["max-time"] and flags["max-time"] > 0 then opts.timeout = flags["max-time"] end

  local function exchange(req)
    if not call then call = pc.client(REFLECTION[version], opts):ServerReflectionInfo() end
    call:send(req)
    local resp = call:recv()
    if resp == nil then
      error(pc.Error { code = "INTERNAL", message = "the reflection stream ended without an answer" }, 0)
    end
    return resp
  end

  local function ask(req)
    local ok, resp = pcall(exchange, req)
    if not ok and not answered and version == 1 and getmetatable(resp) == pc.Error
        and resp.code == "UNIMPLEMENTED" then
      call:close()
      version, call = 2, nil
      ok, resp = pcall(exchange, req)
      if not ok and getmetatable(resp) == pc.Error and resp.code == "UNIMPLEMENTED" then
        resp.message = "the server has no reflection service (" .. tostring(resp.message)
          .. "): give -proto FILE or -protoset FILE"
      end
    end
    if not ok then error(resp, 0) end
    answered = true
    local kind = pc.which_oneof(resp, "message_response")
    if kind == "error_response" then
      local e = resp.error_response
      error(pc.Error { code = pc.codes[e.error_code] or "UNKNOWN", message = e.error_message, reflection = true }, 0)
    end
    return resp, kind
  end

  -- The files of an answer, kept by name; the name of the first.
  local function keep(resp, kind, what)
    if kind ~= "file_descriptor_response" then
      error(pc.Error { code = "INTERNAL", message = "reflection answered " .. tostring(kind) .. " for " .. what }, 0)
    end
    local first
    for _, bytes in ipairs(resp.file_descriptor_response.file_descriptor_proto) do
      local fd, err = pc.decode(FDP, bytes)
      if not fd then error(pc.Error { code = "INTERNAL", message = "reflection: a file descriptor failed to decode: " .. err }, 0) end
      first = first or fd.name
      if not files[fd.name] then files[fd.name] = { bytes = bytes, fd = fd } end
    end
    if not first then error(pc.Error { code = "INTERNAL", message = "reflection sent no file for " .. what }, 0) end
    return first
  end

  -- Adds file `name` to the pool after its imports; an import the server
  -- did not send is asked for by name (a well-known type the server lacks
  -- comes built in).
  local adding = {}
  local function add(name)
    if r.pool:file(name) or adding[name] then return end
    adding[name] = true
    local f = files[name]
    if not f and pc.builtin_source(name) then return end
    if not f then
      local resp, kind = ask { file_by_filename = name }
      keep(resp, kind, name)
      f = files[name]
      if not f then error(pc.Error { code = "INTERNAL", message = "reflection sent another file for " .. name }, 0) end
    end
    for _, dep in ipairs(f.fd.dependency) do add(dep) end
    local ok, err = r.pool:load_descriptor_set("\x0a" .. varint(#f.bytes) .. f.bytes)
    if not ok then error(pc.Error { code = "INTERNAL", message = "reflection: " .. name .. ": " .. tostring(err) }, 0) end
  end

  function r.services()
    local resp, kind = ask { list_services = "" }
    if kind ~= "list_services_response" then
      error(pc.Error { code = "INTERNAL", message = "reflection answered " .. tostring(kind) .. " for list_services" }, 0)
    end
    local names = {}
    for i, s in ipairs(resp.list_services_response.service) do names[i] = s.name end
    sort(names)
    return names
  end

  function r.symbol(name)
    local resp, kind = ask { file_containing_symbol = name }
    add(keep(resp, kind, name))
  end

  function r.close()
    if call then call:close() end
  end
  return r
end

-- Runs fn(r) with a reflection client of TARGET; returns fn's result, or
-- on failure nil and the exit status (a symbol the server lacks: one line,
-- `missing` .. the symbol, status 1; other failures as a call's).
local function with_reflection(flags, transport, fn, missing)
  local r = reflection_client(flags, transport)
  local ok, res = pcall(fn, r)
  r.close()
  if ok then return res end
  if getmetatable(res) == pc.Error and res.reflection and res.code == "NOT_FOUND" and missing then
    stderr:write(missing, "\n")
    return nil, 1
  end
  if getmetatable(res) == Failure or getmetatable(res) == Usage then error(res, 0) end
  return nil, print_error(res)
end

function reflection_pool(flags, transport, service)
  return with_reflection(flags, transport, function(r)
    r.symbol(service)
    return r.pool
  end, "protocall call: Service not found: " .. service)
end

function list_by_reflection(flags, args)
  if #args > 2 then usage_error("list", "TARGET [SERVICE] expected") end
  local transport = connect(flags, args[1], "list")
  local service = args[2]
  local lines, status = with_reflection(flags, transport, function(r)
    if service == nil then return r.services() end
    r.symbol(service)
    local info = r.pool:service(service)
    if not info then fail("Service not found: " .. service) end
    local out = {}
    for i, m in ipairs(info.methods) do out[i] = service .. "." .. m.name end
    return out
  end, service and "protocall list: Service not found: " .. service)
  if not lines then return status end
  for _, l in ipairs(lines) do stdout:write(l, "\n") end
  return 0
end

function describe_by_reflection(flags, args)
  if #args > 2 then usage_error("describe", "TARGET [SYMBOL] expected") end
  local transport = connect(flags, args[1], "describe")
  local want = args[2] and args[2]:gsub("^%.", "")
  local text, status = with_reflection(flags, transport, function(r)
    local names = want and { want } or r.services()
    for _, n in ipairs(names) do r.symbol(n) end
    local syms = symbols(descriptors(r.pool, r.pool:files()))
    local out = {}
    for _, n in ipairs(names) do
      local s = syms[n]
      if not s then fail("Symbol not found: " .. n) end
      out[#out + 1] = describe_one(n, s)
    end
    return concat(out)
  end, want and "protocall describe: Symbol not found: " .. want)
  if not text then return status end
  stdout:write(text)
  return 0
end

-- -- help and main ------------------------------------------------------------

function COMMANDS.help.run(_, args)
  if #args == 0 then
    stdout:write(general_help())
    return 0
  end
  if #args > 1 or not COMMANDS[args[1]] then usage_error("help", "unknown command '" .. tostring(args[1]) .. "'") end
  stdout:write(command_help(args[1]))
  return 0
end

--- status = M.main(args [, env]): runs the subcommand args[1] with
-- args[2..] and returns the exit status (see the top of this file). `env`
-- tells what the process sees: `stderr_is_terminal` (progress of streams on
-- stderr; nothing is shown when stderr is not a terminal).
function M.main(args, env)
  terminal = env ~= nil and env.stderr_is_terminal == true
  local cmd = args[1]
  if cmd == "--help" or cmd == "-h" then cmd = "help" end
  local c = COMMANDS[cmd]
  if not c then
    stderr:write("protocall: unknown command '", tostring(cmd), "'\n", general_help())
    return 2
  end
  local ok, status = pcall(function()
    local flags, rest = parse(cmd, args, 2)
    return c.run(flags, rest)
  end)
  if ok then return status end
  local mt = getmetatable(status)
  if mt == Usage then
    stderr:write("protocall ", status.cmd, ": ", status.msg, "\n", command_help(status.cmd))
    return 2
  end
  if mt == Failure then
    stderr:write("protocall ", cmd, ": ", status.msg, "\n")
    return status.status
  end
  error(status, 0)
end

return M
