--- `protocall decode` and `protocall encode`: binary messages to text or
-- JSON and back.
local pc = require "protocall"
local common = require "protocall.cli.common"

local ipairs, format, concat, pcall, tostring = ipairs, string.format, table.concat, pcall, tostring
local stdout, stderr, fail = common.stdout, common.stderr, common.fail
local usage_error, check_format, need_schema, message_type, load_schemas, read_input, parse_message =
  common.usage_error, common.check_format, common.need_schema, common.message_type,
  common.load_schemas, common.read_input, common.parse_message
local split_delimited, write_message, json_documents, varint = common.split_delimited,
  common.write_message, common.json_documents, common.varint

local M = {}

M.decode = {
  summary = "binary messages to text format or JSON",
  flags = common.with_schema { format = "string", raw = "bool", ["length-delimited"] = "bool",
                        ["emit-defaults"] = "bool" },
  usage = "protocall decode [schema flags] [-format text|json] [-length-delimited] TYPE [FILE]\n" ..
          "       protocall decode -raw [-length-delimited] [FILE]",
  about = "Reads binary messages (FILE or standard input) and prints them as text (as\n" ..
          "`protoc --decode` does) or JSON; -raw prints without a schema, field numbers\n" ..
          "only (as `protoc --decode_raw`). -length-delimited reads a stream of\n" ..
          "varint-prefixed messages.",
  example = "protocall decode -I examples -proto route.proto demo.Route < route.bin",
}

M.encode = {
  summary = "text format or JSON to binary messages",
  flags = common.with_schema { format = "string", ["length-delimited"] = "bool" },
  usage = "protocall encode [schema flags] [-format text|json] [-length-delimited] TYPE [FILE]",
  about = "Reads a message as text format (as `protoc --encode` takes it) or JSON (FILE or\n" ..
          "standard input) and writes its binary encoding to standard output. With\n" ..
          "-format json -length-delimited, every JSON document of the input becomes one\n" ..
          "varint-prefixed message.",
  example = "protocall encode -I examples -proto route.proto demo.Route < route.txt > route.bin",
}

function M.decode.run(flags, args)
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
    local where = (file or "<stdin>") .. (#parts > 1 and format(" (message %d)", i) or "")
    -- -raw reads as google.protobuf.Empty (every field unknown): its errors name no type
    -- (a proto2 required field unset: printed with a warning, as protoc --decode does)
    local m = parse_message(T, "binary", b, where, nil, flags.raw and "google.protobuf.Empty", { partial = true })
    local complete, missing = pc.is_initialized(m)
    if not complete then stderr:write(format("protocall decode: warning: %s: %s\n", where, missing)) end
    if i > 1 and fmt == "text" then stdout:write("\n") end
    write_message(m, fmt, flags, stdout)
  end
  return 0
end

function M.encode.run(flags, args)
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
    local m = parse_message(T, fmt, doc, (args[2] or "<stdin>") .. (#docs > 1 and format(" (document %d)", i) or ""))
    -- a proto2 required field unset is encoded with a warning, as protoc --encode does
    local ok, bytes = pcall(pc.encode, m)
    if not ok and tostring(bytes):find("^missing required field") then
      stderr:write(format("protocall encode: warning: %s%s\n", docs[2] and format("document %d: ", i) or "", bytes))
      bytes = pc.encode(m, { partial = true })
    elseif not ok then
      fail((args[2] or "<stdin>") .. ": " .. tostring(bytes))
    end
    out[#out + 1] = flags["length-delimited"] and varint(#bytes) .. bytes or bytes
  end
  stdout:write(concat(out))
  return 0
end

return M
