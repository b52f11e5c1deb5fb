-- Decode a binary protobuf payload and print it in text format, as
-- `protoc --decode` does (extensions and unknown fields are not printed):
--   protocall examples/decode.lua [-I DIR]... FILE.proto TYPE PAYLOAD.bin
-- PAYLOAD "-" reads standard input.
-- e.g. protocall examples/decode.lua -I ../shared/corpus/protos/grpc/examples/protos \
--        route_guide.proto routeguide.Feature ../shared/corpus/payloads/grpc/route_guide_feature.bin
local pc = require "protocall"

local paths, rest = {}, {}
local i = 1
while i <= #arg do
  if arg[i] == "-I" then
    paths[#paths + 1] = arg[i + 1]
    i = i + 1
  elseif arg[i]:sub(1, 2) == "-I" then
    paths[#paths + 1] = arg[i]:sub(3)
  else
    rest[#rest + 1] = arg[i]
  end
  i = i + 1
end
local proto, type_name, payload = rest[1], rest[2], rest[3]
if not payload then
  io.stderr:write("usage: protocall examples/decode.lua [-I DIR]... FILE.proto TYPE PAYLOAD.bin|-\n")
  os.exit(2)
end

local function fail(msg)
  io.stderr:write(msg, "\n")
  os.exit(1)
end

-- A file named relative to an import path, as protoc takes it.
local path = proto
for _, dir in ipairs(paths) do
  local f = io.open(dir .. "/" .. proto, "rb")
  if f then
    f:close()
    path = dir .. "/" .. proto
    break
  end
end
local ok, err = pc.load_file(path, { import_paths = paths, name = proto })
if not ok then fail(err) end
local T = pc.type(type_name)
if not T or not T.full_name then fail(type_name .. ": no such message type in " .. proto) end
local bytes
if payload == "-" then
  bytes = io.stdin:read("a")
else
  local f, open_err = io.open(payload, "rb")
  if not f then fail(open_err) end
  bytes = f:read("a")
  f:close()
end
local m, derr = pc.decode(T, bytes)
if not m then fail(payload .. ": " .. derr) end
io.write(pc.to_text(m))
