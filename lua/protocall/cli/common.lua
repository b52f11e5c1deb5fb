--- What the commands of `protocall` (lua/protocall/cli/) share: flags,
-- usage errors and failures, reading input and schemas, printing
-- messages, connecting to a target and asking its reflection service.
local pc = require "protocall"
local reflection = require "protocall.rpc.reflection"
local text_format = require "protocall.text"
local shown = require("protocall.http.template").shown

local error, pairs, ipairs, tostring, tonumber, pcall, getmetatable, setmetatable =
  error, pairs, ipairs, tostring, tonumber, pcall, getmetatable, setmetatable
local concat, format, huge = table.concat, string.format, math.huge
local metadata_problem, file_kind = require("protocall.core").metadata_problem, require("protocall.core").file_kind
local show, seconds_problem = require("protocall.internal").show, require("protocall.internal").seconds_problem

local M = {}

M.stdout, M.stderr = io.stdout, io.stderr
local stderr = M.stderr

-- Kinds: "bool", "string", "list" (repeatable string), "number".
local SCHEMA_FLAGS = {
  I = "list", ["import-path"] = "list", proto = "list", protoset = "list",
}

--- flags = with_schema(flags): `flags` (a command's flag kinds) with the
-- schema flags (-I, -import-path, -proto, -protoset) added.
function M.with_schema(flags)
  for k, v in pairs(SCHEMA_FLAGS) do flags[k] = v end
  return flags
end

-- What list and describe take to reach a server's reflection service.
local CONNECT_FLAGS = { plaintext = "bool", cacert = "string", cert = "string", key = "string",
  servername = "string", insecure = "bool", ["connect-timeout"] = "number", H = "list",
  ["max-time"] = "number" }

--- flags = with_connect(flags): `flags` with the flags that reach a
-- server's reflection service added.
function M.with_connect(flags)
  for k, v in pairs(CONNECT_FLAGS) do flags[k] = v end
  return flags
end

-- A usage error: raised as a table so main can print the usage and exit 2.
local Usage = {}
M.Usage = Usage
--- usage_error(cmd, msg): raises the usage error `msg` of command `cmd`.
local function usage_error(cmd, msg) error(setmetatable({ cmd = cmd, msg = msg }, Usage), 0) end
M.usage_error = usage_error

-- A failure: one line on stderr, exit `status` (1 unless given).
local Failure = {}
M.Failure = Failure
--- fail(msg [, status]): raises the failure `msg` (exit status 1 unless given).
local function fail(msg, status) error(setmetatable({ msg = msg, status = status or 1 }, Failure), 0) end
M.fail = fail

--- msg = listen_error(err, names): pc.listen's error `err` as a command
-- says it: without "pc.listen: ", and a TLS file's option named by its
-- flag (`names`: option -> flag, {cert_file = "-listen-cert", ...}):
-- "-listen-cert '/x.pem': cannot be read: No such file or directory".
function M.listen_error(err, names)
  local msg = tostring(err):gsub("^pc%.listen: ", "")
  msg = msg:gsub("^([%w_]+) '", function(o) return names[o] and names[o] .. " '" end)
  return (msg:gsub(" of cert_file$", function() return names.cert_file and " of " .. names.cert_file end))
end

-- name, value = flag_of(a, spec): the flag's name the argument `a` is
-- (-name, --name, -name=value, --name=value, protoc's -Idir when `spec`
-- has -I) and its value given with it (nil: none), or nil.
local function flag_of(a, spec)
  local name, value = a:match("^%-%-?([%w][%w%-]*)=(.*)$")
  if not name and spec.I and a:match("^%-I.") then name, value = "I", a:sub(3) end -- protoc's -Idir
  if not name then name = a:match("^%-%-?([%w][%w%-]*)$") end
  return name, value
end

--- flags, rest = parse(cmd, spec, args, first): the flags of command `cmd`
-- (kinds `spec`) in args[first..], and the other arguments in order. A
-- string or list flag's value that is the next argument is refused when
-- that argument is one of the command's flags ("-header -plaintext":
-- -plaintext is no header name); a number flag takes it and refuses it
-- as no number.
function M.parse(cmd, spec, args, first)
  local flags, rest = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do rest[#rest + 1] = args[j] end
      break
    end
    local name, value = flag_of(a, spec)
    if name and a ~= "-" then
      local kind = spec[name]
      if kind == nil and (name == "h" or name == "help") then -- grpcurl's -help: the usage, exit 0
        error(setmetatable({ cmd = cmd, help = true }, Usage), 0)
      end
      if kind == nil then usage_error(cmd, "unknown flag " .. a) end
      if kind == "bool" then
        if value ~= nil then usage_error(cmd, "flag -" .. name .. " takes no value") end
        flags[name] = true
      else
        if value == nil then
          i = i + 1
          value = args[i]
          if value == nil then usage_error(cmd, "flag -" .. name .. " needs a value") end
          local next_flag = kind ~= "number" and flag_of(value, spec)
          if next_flag and (spec[next_flag] or next_flag == "h" or next_flag == "help") then
            usage_error(cmd, "flag -" .. name .. " needs a value (got the flag " .. value .. ")")
          end
        end
        if kind == "list" then
          flags[name] = flags[name] or {}
          flags[name][#flags[name] + 1] = value
        elseif kind == "number" then
          local n = tonumber(value)
          if n == nil or not (n >= 0 and n < huge) then -- NaN and inf too (1e400 reads as inf)
            usage_error(cmd, "flag -" .. name .. ": a finite number >= 0 expected, got '" .. value .. "'")
          end
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

--- why = io_reason(path, err): io's error text about file `path` without
-- its "path: " prefix ("No such file or directory").
local function io_reason(path, err)
  local why = tostring(err)
  if why:sub(1, #path + 2) == path .. ": " then return why:sub(#path + 3) end
  return why
end
M.io_reason = io_reason

--- s = read_input(path [, flag]): the bytes of file `path`, or of standard
-- input for nil or "-". Fails saying why ("x.json: No such file or
-- directory"); with `flag`, naming it as the TLS flags do ("-rules
-- 'x.json': cannot be read: No such file or directory").
local function read_input(path, flag)
  if path == nil or path == "-" then return io.stdin:read("a") or "" end
  local f, why = io.open(path, "rb")
  local s
  if f then
    s, why = f:read("a")
    f:close()
  end
  if s then return s end
  why = io_reason(path, why)
  fail(flag and format("%s '%s': cannot be read: %s", flag, path, why) or path .. ": " .. why)
end

M.read_input = read_input

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A path's parts without "." and empty ones, as protoc canonicalizes
-- paths, and whether it is absolute.
local function path_parts(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part ~= "." then parts[#parts + 1] = part end
  end
  return parts, path:sub(1, 1) == "/"
end

-- The import name of a -proto file given by its path on disk, as protoc
-- maps one: the rest of the path after the first import path that is a
-- prefix of it (both absolute or both relative). Fails as protoc does
-- when none is, or when an earlier import path holds another file of
-- that name.
local function import_name(proto, paths)
  local parts, absolute = path_parts(proto)
  for i, dir in ipairs(paths) do
    local prefix, dir_absolute = path_parts(dir)
    local inside = dir_absolute == absolute and #prefix < #parts
    for k = 1, inside and #prefix or 0 do inside = inside and prefix[k] == parts[k] end
    local name = inside and concat(parts, "/", #prefix + 1)
    if name and not ("/" .. name .. "/"):find("/../", 1, true) then
      for j = 1, i - 1 do
        local shadow = paths[j] .. "/" .. name
        if exists(shadow) then
          fail(format('%s: Input is shadowed in the -I paths by "%s".  Either use the latter file as your input '
            .. "or reorder the -I paths so that the former file's location comes first.", proto, shadow))
        end
      end
      return name
    end
  end
  fail(proto .. ": File does not reside within any path specified using -I (or -import-path); an -I must be "
    .. "an exact prefix of its path (both absolute or both relative).")
end

-- Whether `bytes` look like .proto source: text (no control bytes but
-- whitespace in its first 4 KiB) with a word only .proto source starts
-- a statement with.
local function proto_text(bytes)
  local head = bytes:sub(1, 4096)
  if head:find("[%z\1-\8\14-\31\127]") then return false end
  for _, word in ipairs { "syntax", "edition", "package", "import", "message", "enum", "service", "option" } do
    if head:find("%f[%w_]" .. word .. "%f[^%w_]") then return true end
  end
  return false
end

--- pool, names = load_schemas(flags): a pool with the files of -proto
-- (found through -I, as protoc finds them, else a built-in file of that
-- import name, pc.builtin_source, as protoc has its own include folder,
-- else a file on disk by that path within an -I path, named by the rest
-- of its path as protoc names it) and the sets of -protoset; the list of
-- the files named.
function M.load_schemas(flags)
  local pool = pc.pool()
  local paths = {}
  for _, d in ipairs(flags.I or {}) do paths[#paths + 1] = d end
  for _, d in ipairs(flags["import-path"] or {}) do paths[#paths + 1] = d end
  if #paths == 0 then paths[1] = "." end
  local names = {}
  for _, set in ipairs(flags.protoset or {}) do
    local bytes = read_input(set)
    local files, err = pool:load_descriptor_set(bytes)
    if not files then
      err = tostring(err)
      local why = err:match("^descriptor set: (.*)$")
      if why then -- bytes that do not read as one (the codec's own copy of descriptor.proto named as protoc's)
        why = why:gsub("^protocall%.desc%.FileDescriptorSet ", ""):gsub("protocall%.desc%.", "google.protobuf.")
        err = "not a binary FileDescriptorSet (" .. why .. ")"
          .. (proto_text(bytes) and "; .proto source? give it with -proto" or "")
      end
      fail(set .. ": " .. err)
    end
    for _, f in ipairs(files) do names[#names + 1] = f.name end
  end
  for _, proto in ipairs(flags.proto or {}) do
    local path
    for _, dir in ipairs(paths) do
      if exists(dir .. "/" .. proto) then
        path = dir .. "/" .. proto
        break
      end
    end
    local file, err
    if path then
      file, err = pool:load_file(path, { import_paths = paths, name = proto })
    elseif pc.builtin_source(proto) then -- protoc finds it in its own include folder
      file, err = pool:load_file(proto)
    elseif exists(proto) then
      file, err = pool:load_file(proto, { import_paths = paths, name = import_name(proto, paths) })
    else
      fail(proto .. ": File not found.")
    end
    if not file then fail(err) end
    names[#names + 1] = file.name
  end
  return pool, names
end

--- m = parse_message(T, fmt, input, where [, hint [, strip [, opts]]]):
-- `input` read as a message of type T in `fmt` ("binary", "json" or
-- "text"); fails with "where: why" when it does not parse. With `hint` (a
-- command whose -format names its input), binary input that starts as
-- JSON or text fails with a hint of -format. `strip`: a type name left out
-- of why (a type the user did not give). `opts`: pc.decode's options.
function M.parse_message(T, fmt, input, where, hint, strip, opts)
  local m, err
  if fmt == "binary" then
    m, err = pc.decode(T, input, opts)
  elseif fmt == "json" then
    m, err = pc.from_json(T, input)
  else
    m, err = pc.from_text(T, input)
  end
  if not m then
    -- binary input that reads as JSON or text was most likely meant as such
    hint = hint and fmt == "binary" and input:match("^%s*[{%a]") and " (JSON or text? give -format json or text)"
    -- ("T field 1: why" or, for the whole input, "T: why")
    if strip and err:sub(1, #strip + 1) == strip .. " " then
      err = err:sub(#strip + 2)
    elseif strip and err:sub(1, #strip + 2) == strip .. ": " then
      err = err:sub(#strip + 3)
    end
    fail(where .. ": " .. err .. (hint or ""))
  end
  return m
end

function M.has_schema(flags)
  return flags.proto ~= nil or flags.protoset ~= nil
end

function M.need_schema(cmd, flags)
  if not flags.proto and not flags.protoset then
    usage_error(cmd, "no schema: give -proto FILE or -protoset FILE")
  end
end

function M.message_type(pool, name)
  local T = pool:type(name)
  if not T or not T.full_name then fail(name .. ": no such message type in the loaded files") end
  return T
end

--- list = split_delimited(bytes): a stream of varint-prefixed messages split.
function M.split_delimited(bytes)
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

--- bytes = varint(n): n as a base-128 varint.
function M.varint(n)
  local t = {}
  repeat
    local b = n % 128
    n = math.floor(n / 128)
    t[#t + 1] = string.char(n > 0 and b + 128 or b)
  until n == 0
  return concat(t)
end

--- fmt = check_format(cmd, flags, allowed): the -format flag, one of
-- `allowed` (the first by default); -emit-defaults with another than json
-- is a usage error.
function M.check_format(cmd, flags, allowed)
  local f = flags.format or allowed[1]
  for _, a in ipairs(allowed) do
    if f == a then
      -- (protobuf's text format prints the fields that are set: no defaults)
      if flags["emit-defaults"] and f ~= "json" then
        usage_error(cmd, "-emit-defaults is for JSON output (-format json): text format prints set fields only")
      end
      return f
    end
  end
  usage_error(cmd, "-format must be " .. concat(allowed, " or ") .. ", got '" .. f .. "'")
end

--- write_message(m, fmt, flags, file): message m to file as "json"
-- (indented) or text, the text a chunk at a time (a large message is not
-- held as text).
function M.write_message(m, fmt, flags, file)
  if fmt == "json" then
    local ok, json = pcall(pc.to_json, m, { emit_defaults = flags["emit-defaults"] or nil, indent = 2 })
    if not ok then fail(tostring(json)) end
    file:write(json, "\n")
    return
  end
  text_format.write_text(m, function(s) file:write(s) end)
end

--- split = json_splitter([max, over]): the JSON documents of a stream
-- (concatenated or one per line) as it arrives: split(chunk) returns the
-- list of the documents `chunk` completes (maybe none), keeping an
-- incomplete one for the next chunk; split(nil) ends the stream and
-- returns the last one. A document is an object or array, or a bare value
-- too (a string, number, true, false or null: the JSON form of a wrapper
-- type such as google.protobuf.StringValue). Fails, naming the offset in
-- the whole stream, on what no JSON document starts with, a '}' or ']'
-- that closes nothing, and at the end on a string or document left open;
-- with `max`, calls over(offset), which raises, once a document (whole or
-- still open) holds more than `max` bytes, so one endless document is not
-- kept whole.
function M.json_splitter(max, over)
  local start = 0       -- the offset of the open document
  local held = 0        -- the bytes of `parts`
  local depth = 0       -- the nesting of the open object or array
  local in_string = false
  local escaped = false -- the chunk ended in a string's backslash
  local in_word = false -- a bare number or literal (its end not seen yet)
  local opened = 0      -- the offset of the open string or bare word
  local parts = {}      -- the earlier chunks' pieces of the open document
  local base = 0        -- the offset of the chunk's first byte
  local ended = false
  return function(s)
    if ended then error("json_splitter: the stream has ended", 2) end
    local docs, final = {}, s == nil
    s = s or ""
    local i, n, from = 1, #s, 1 -- from: where the open document's piece starts in s
    local function done(last) -- the document ends at s[last]
      parts[#parts + 1] = s:sub(from, last)
      docs[#docs + 1] = concat(parts)
      parts, held = {}, 0
      if max and #docs[#docs] > max then over(start) end
    end
    while i <= n do
      if in_string then
        if escaped then
          escaped, i = false, i + 1
        else
          local j = s:find('["\\]', i)
          if j == nil then break end
          if s:byte(j) == 92 then -- a backslash: the next byte is escaped
            if j == n then escaped = true end
            i = j + 2
          else
            in_string, i = false, j + 1
            if depth == 0 then done(j) end
          end
        end
      elseif in_word then
        local _, j = s:find("^[^%s{}%[%]\"]*", i)
        if j == n then break end -- it may go on in the next chunk
        in_word = false
        parts[#parts + 1] = s:sub(from, j)
        local word = concat(parts)
        parts, held = {}, 0
        if max and #word > max then over(start) end
        if not (word == "true" or word == "false" or word == "null" or word:match("^%-?%d[%d.eE+%-]*$")) then
          fail(format("JSON value expected at offset %d", opened))
        end
        docs[#docs + 1] = word
        i = j + 1
      elseif depth > 0 then
        local j = s:find("[{}%[%]\"]", i)
        if j == nil then break end
        local c = s:byte(j)
        if c == 34 then -- '"'
          in_string, opened = true, base + j - 1
        elseif c == 123 or c == 91 then -- '{' '['
          depth = depth + 1
        else
          depth = depth - 1
          if depth == 0 then done(j) end
        end
        i = j + 1
      else
        local j = s:find("%S", i)
        if j == nil then break end
        local c = s:sub(j, j)
        from, start = j, base + j - 1
        if c == '"' then
          in_string, opened = true, base + j - 1
        elseif c == "{" or c == "[" then
          depth = 1
        elseif c == "}" or c == "]" then
          fail(format("unbalanced '%s' at offset %d", c, base + j - 1))
        else
          in_word, opened = true, base + j - 1
        end
        i = j + 1
      end
    end
    if in_string or in_word or depth > 0 then
      parts[#parts + 1] = s:sub(from)
      held = held + (n - from + 1)
      if max and held > max then over(start) end
    end
    base = base + n
    if final then
      ended = true
      if in_string then fail(format("the string at offset %d is not closed", opened)) end
      if depth > 0 then fail("the last JSON document is not closed") end
      if in_word then
        in_word = false
        local word = concat(parts)
        if not (word == "true" or word == "false" or word == "null" or word:match("^%-?%d[%d.eE+%-]*$")) then
          fail(format("JSON value expected at offset %d", opened))
        end
        docs[#docs + 1] = word
      end
    end
    return docs
  end
end

--- docs = json_documents(s): the JSON documents of `s` whole (json_splitter).
function M.json_documents(s)
  local split = M.json_splitter()
  local docs = split(s)
  for _, d in ipairs(split(nil)) do docs[#docs + 1] = d end
  return docs
end

-- Base64 (standard or URL-safe, padded or not) to bytes, or nil: read by
-- the JSON codec's own base64 reader, as a google.protobuf.BytesValue.
local function base64_decode(s)
  if s:find('[%c"\\]') then return nil end
  local v = pc.from_json(pc.type("google.protobuf.BytesValue"), '"' .. s .. '"')
  return v and v.value
end

--- md = metadata_of(flags, cmd): the -H flags as {key, value} pairs; a
-- flag that is not 'key: value' or whose key gRPC metadata cannot carry
-- is a usage error of command `cmd`.
function M.metadata_of(flags, cmd)
  local md = {}
  for _, h in ipairs(flags.H or {}) do
    local k, v = h:match("^%s*([^:]+):%s?(.*)$")
    h = h:gsub("%c", "?") -- (as quoted in the errors: no terminal escapes)
    if not k then usage_error(cmd, "-H '" .. h .. "': 'key: value' expected") end
    k = k:lower():gsub("%s+$", "")
    local problem = metadata_problem { { k, "" } }
    if problem then usage_error(cmd, "-H '" .. h .. "': " .. problem) end
    if k:sub(-4) == "-bin" then
      v = base64_decode(v)
      if not v then usage_error(cmd, "-H '" .. h .. "': the value of a -bin key must be base64") end
    end
    problem = metadata_problem { { k, v } }
    if problem then usage_error(cmd, "-H '" .. h .. "': " .. problem) end
    md[#md + 1] = { k, v }
  end
  return md
end

--- text = backoff_hint(text, instead): a channel's reconnection backoff
-- hint in `text` with its "; a transport with wait_for_ready waits for it)"
-- (an option of pc.grpc the commands do not set) replaced by `instead`.
function M.backoff_hint(text, instead)
  return (text:gsub("; a transport with wait_for_ready waits for it%)$", instead))
end

-- The client's TLS options as the flags that gave them, for a failure
-- the TLS setup reports at the first connection (core/net/tls.c).
local TLS_FLAGS = { ca_file = "-cacert", cert_file = "-cert", key_file = "-key" }

--- line | nil = plaintext_hint(message [, flags]): the hint for a TLS
-- handshake a plaintext server answered (OpenSSL's "wrong version number"
-- in the failure's `message`) when `flags` (a command's) has no -plaintext.
function M.plaintext_hint(message, flags)
  if not (flags and flags.plaintext) and type(message) == "string"
    and message:find("wrong version number", 1, true) then
    return "hint: the server answered TLS with plaintext: if it serves h2c, add -plaintext"
  end
end

--- status = print_error(err [, flags]): prints a call's failure as grpcurl
-- does and returns the exit status, 64 + the status code. With the
-- command's flags: a TLS handshake answered by a plaintext server (OpenSSL's
-- "wrong version number") without -plaintext, and one closed before its
-- HTTP/2 SETTINGS or answered with other bytes (nghttp2's "unexpected data
-- while we expected SETTINGS frame": an HTTP/1.1-only server's 400) under
-- -protocol connect or grpcweb without -http1, get a hint line; a TLS
-- file's option in the message is named by its flag ("-cacert 'ca.pem': not
-- a PEM certificate bundle").
function M.print_error(err, flags)
  if getmetatable(err) == pc.RetryError then err = err.cause end
  if getmetatable(err) == pc.Error then
    local message = type(err.message) == "string" and M.backoff_hint(err.message, ")") or err.message or ""
    if flags and type(message) == "string" then -- a TLS file's option as its flag
      message = message:gsub("^([%w_]+) '", function(o) return TLS_FLAGS[o] and flags[TLS_FLAGS[o]:sub(2)]
        and TLS_FLAGS[o] .. " '" end):gsub(" of cert_file$", flags.cert and " of -cert" or "%0")
    end
    stderr:write(format("ERROR: code = %s, message = %s\n", err.code, message))
    local hint = flags and M.plaintext_hint(err.message, flags)
    if hint then stderr:write("  ", hint, "\n") end
    if flags and (flags.protocol == "connect" or flags.protocol == "grpcweb") and not flags.http1
      and type(err.message) == "string" then
      local how = err.message:find("connection closed by the peer before its HTTP/2 SETTINGS", 1, true)
          and "closed the connection after"
        or err.message:find("unexpected data while we expected SETTINGS frame", 1, true)
          and "answered something other than HTTP/2 to"
      if how then
        stderr:write("  hint: the server " .. how .. " the HTTP/2 preface: if it serves HTTP/1.1 only, add -http1\n")
      end
    end
    for _, d in ipairs(err.details or {}) do
      local ok, text = pcall(pc.to_text, d)
      text = ok and text:gsub("\n$", "") or tostring(d)
      if text:find("\n", 1, true) then -- a block under "details:", every line indented
        stderr:write("  details:\n", (text:gsub("[^\n]+", "    %0")), "\n")
      else
        stderr:write("  details: ", text, "\n")
      end
    end
    return 64 + (pc.codes[err.code] or 2)
  end
  stderr:write("ERROR: ", tostring(err), "\n")
  return 64 + 2
end

-- The target spellings pc.grpc takes as they are, all h2c: dns: names
-- (resolved by c-ares, SRV too), ipv4:/ipv6: lists, Unix sockets and
-- xds: names (their endpoints are h2c, transport/xds.lua).
local H2C_SCHEMES = { "dns", "ipv4", "ipv6", "unix", "unix-abstract", "xds" }
local SCHEMES = "http://, https://, dns:, ipv4:, ipv6:, unix:, unix-abstract: or xds:"

--- no_fifo(flag, path): fails, naming `flag`, when the file `path` of a
-- TLS flag is a FIFO (named pipe): opening one waits for a writer, however
-- long, and a TLS file is loaded by its path, a client's after
-- check_tls_file has read it, which a pipe's bytes cannot serve ("-cacert
-- 'ca': cannot be read: a FIFO (named pipe), not a regular file").
function M.no_fifo(flag, path)
  if path ~= nil and file_kind(path) == "fifo" then
    fail(flag .. " '" .. path .. "': cannot be read: a FIFO (named pipe), not a regular file")
  end
end

--- check_tls_file(flag, path, not_pem): fails, naming `flag`, when the
-- file `path` of a TLS flag cannot be read (missing, a directory: "-cacert
-- 'ca': cannot be read: Is a directory", as core/net/tls.c words it) or
-- holds no PEM block in its first 16 MiB (`not_pem`; a device such as
-- /dev/zero is not read on and on), before anything connects: pc.grpc
-- sets TLS up at its first connection.
local function check_tls_file(flag, path, not_pem)
  if path == nil then return end
  local where = flag .. " '" .. path .. "': "
  M.no_fifo(flag, path)
  local f, why = io.open(path, "rb")
  local found, total, tail = false, 0, ""
  while f and not found and total < 16777216 do
    local chunk, err = f:read(65536)
    if not chunk then -- the end (err nil), or a read that failed
      why = err
      break
    end
    local s = tail .. chunk
    found = s:find("-----BEGIN ", 1, true) ~= nil
    tail, total = s:sub(-10), total + #chunk
  end
  if f then f:close() end
  if why then
    fail(where .. "cannot be read: " .. io_reason(path, why))
  end
  if not found then fail(where .. not_pem) end
end

--- transport = connect(flags, target, cmd): the pc.grpc transport to
-- TARGET (the gateway's UPSTREAM) with the connection flags: host:port as
-- http:// (-plaintext) or https://, a URL or one of H2C_SCHEMES as it is,
-- its scheme in any case (URI schemes are case-insensitive: HTTP://,
-- Unix:); another scheme (a name before "://", "foo:///bar") fails naming
-- TARGET as given, and so does a name before ":/" ("localhost:/x"), which
-- is no host:port either ("http:/x": its '//' missing), and a host without a port under -plaintext
-- ("TARGET 'localhost': a port is needed (host:port)"; TLS's is 443).
function M.connect(flags, target, cmd)
  local url = (flags.plaintext and "http://" or "https://") .. target
  local scheme = target:match("^([%a][%w+.-]*):")
  local name = scheme and scheme:lower()
  local h2c = false
  for _, known in ipairs(H2C_SCHEMES) do h2c = h2c or name == known end
  local word = cmd == "gateway" and "UPSTREAM" or "TARGET"
  local quoted = shown(target) -- (its first 80 bytes: a huge TARGET makes a short line)
  if (name == "http" or name == "https") and target:find("^[^:]*:/") and not target:find("^[^:]*://") then
    fail(word .. " '" .. quoted .. "': '" .. scheme .. ":' takes '//' (" .. name .. "://host:port)")
  elseif (name == "http" or name == "https") and target:find("^[^:]*://") or h2c then
    if h2c and not flags.plaintext then
      usage_error(cmd, "a " .. name .. ": " .. word .. " is h2c: give -plaintext (for TLS, https://host:port)")
    end
    url = name .. target:sub(#scheme + 1)
  elseif scheme and target:find("^[^:]*://") then
    fail(word .. " '" .. quoted .. "': unknown scheme '" .. scheme .. ":' (host:port, " .. SCHEMES .. " expected)")
  elseif scheme and target:find("^[^:]*:/") then -- not host:port
    fail(word .. " '" .. quoted .. "': '" .. shown(target:sub(#scheme + 2)) .. "' is no port, and '"
      .. scheme .. ":' no scheme (host:port, " .. SCHEMES .. " expected)")
  elseif flags.plaintext and (not target:find(":", 1, true) or target:find("^%[.*%]$")) then
    -- a host alone ("[::1]" too): h2c has no default port (TLS takes 443)
    fail(word .. " '" .. quoted .. "': a port is needed (host:port)")
  end
  if flags.plaintext and (flags.cacert or flags.cert or flags.key or flags.servername or flags.insecure) then
    usage_error(cmd, "-plaintext takes no TLS flag (-cacert, -cert, -key, -servername, -insecure)")
  end
  if flags.insecure and flags.cacert then usage_error(cmd, "-insecure and -cacert exclude each other") end
  if (flags.cert == nil) ~= (flags.key == nil) then usage_error(cmd, "-cert and -key go together") end
  check_tls_file("-cacert", flags.cacert, "not a PEM certificate bundle")
  check_tls_file("-cert", flags.cert, "not a PEM certificate")
  check_tls_file("-key", flags.key, "not a PEM key")
  local transport_opts = { ca_file = flags.cacert, compression = flags.gzip and "gzip" or nil,
    cert_file = flags.cert, key_file = flags.key, server_name = flags.servername,
    insecure = flags.insecure or nil }
  if flags.protocol ~= nil then
    local protocol = ({ grpc = "grpc", grpcweb = "grpc-web", connect = "connect" })[flags.protocol]
    if not protocol then
      usage_error(cmd, "-protocol: grpc, grpcweb or connect expected, got " .. show(flags.protocol))
    end
    transport_opts.protocol = protocol
  end
  if flags.get then
    if transport_opts.protocol ~= "connect" then usage_error(cmd, "-get needs -protocol connect") end
    transport_opts.get = true
  end
  if flags.http1 then
    if transport_opts.protocol ~= "grpc-web" and transport_opts.protocol ~= "connect" then
      usage_error(cmd, "-http1 needs -protocol grpcweb or connect (gRPC needs HTTP/2)")
    end
    transport_opts.http_version = "1.1"
  end
  local ct = flags["connect-timeout"]
  if ct ~= nil then
    local bad = seconds_problem("-connect-timeout", ct)
    if bad then usage_error(cmd, bad) end
    transport_opts.connect_timeout = ct
  end
  local ok, transport = pcall(pc.grpc, url, transport_opts) -- pc.grpc's errors name no position here
  if not ok then -- a target the user typed as pc.grpc took it: named as typed
    fail((tostring(transport):gsub("^pc%.grpc: target '" .. url:gsub("%p", "%%%0") .. "'", function()
      return word .. " '" .. quoted .. "'" end)))
  end
  return transport
end

-- The options of a reflection client (protocall.rpc.reflection) with
-- the -H metadata and the -max-time deadline of `flags`.
function M.reflection_options(flags, cmd)
  local opts = { metadata = M.metadata_of(flags, cmd) }
  if flags["max-time"] and flags["max-time"] > 0 then opts.timeout = flags["max-time"] end
  return opts
end

-- Runs fn(r) with a reflection client of TARGET; returns fn's result, or
-- on failure nil and the exit status (a symbol the server lacks: one line,
-- `missing` .. the symbol, status 1; other failures as a call's).
function M.with_reflection(flags, transport, fn, missing, cmd)
  local r = reflection.client(transport, M.reflection_options(flags, cmd))
  local ok, res = pcall(fn, r)
  r.close()
  if ok then return res end
  if getmetatable(res) == pc.Error and res.reflection and res.code == "NOT_FOUND" and missing then
    stderr:write(missing, "\n")
    return nil, 1
  end
  if getmetatable(res) == Failure or getmetatable(res) == Usage then error(res, 0) end
  return nil, M.print_error(res, flags)
end

return M
