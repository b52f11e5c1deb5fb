--- Rich error status: gRPC's `grpc-status-details-bin` trailer, a
-- serialized google.rpc.Status whose `details` are google.protobuf.Any
-- messages (google/rpc/status.proto and google/rpc/error_details.proto
-- are built in, core/schema/wkt.h): pc.status_details_bin (what a server
-- sends) and, for transports and servers, the error of a status table with
-- its details decoded.
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local message = require "protocall.message"

local type, pairs, getmetatable, pcall, tonumber, mtype =
  type, pairs, getmetatable, pcall, tonumber, compat.mtype
local format = string.format
local Error, codes = errors.Error, internal.codes
local encode, decode, type_of, is_message, protect = core.encode, core.decode, core.type_of, core.is_message,
  core.protect
local ipairs = message.ipairs -- repeated fields are containers (LuaJIT's ipairs takes tables only)

local M = {}

local TYPE_PREFIX = "type.googleapis.com/"

local function type_named(name) return schema.default_pool():type(name) end

--- bytes | nil [, problem] = details_bin(err): the trailer's value for the
-- pc.Error `err` (nil when it has no details to send), or nil and what is
-- wrong with its details ("details[2]: message expected, got string",
-- or a detail that fails to encode).
local function details_bin(err)
  local details = err.details
  if details == nil then return nil end
  if type(details) ~= "table" or is_message(details) then
    return nil, "details: list of messages expected, got " .. type(details)
  end
  local n = #details
  for k in pairs(details) do
    if mtype(k) ~= "integer" or k < 1 or k > n then
      return nil, "details: list of messages expected (keys 1..n)"
    end
  end
  if n == 0 then return nil end
  local Any = type_named("google.protobuf.Any")
  local packed = {}
  for i = 1, n do
    local d = details[i]
    if not is_message(d) then
      return nil, format("details[%d]: message expected, got %s", i, type(d))
    end
    local T = type_of(d)
    if T == Any then
      packed[i] = d
    else
      local ok, bytes = protect(encode, d)
      if not ok then return nil, format("details[%d]: %s", i, bytes) end
      packed[i] = Any { type_url = TYPE_PREFIX .. T.full_name, value = bytes }
    end
  end
  local ok, bytes = protect(encode, type_named("google.rpc.Status") {
    code = codes[err.code], message = err.message or "", details = packed,
  })
  if not ok then return nil, bytes end
  return bytes
end
M.details_bin = details_bin

--- bytes | nil = pc.status_details_bin(err): the value of the
-- `grpc-status-details-bin` trailer for the pc.Error `err`: a
-- google.rpc.Status with err's code (as a number), message and details.
-- `err.details` is a list of messages: each is packed into a
-- google.protobuf.Any with type URL "type.googleapis.com/<full name>"
-- (an Any is sent as it is). Returns nil when `err.details` is nil or
-- empty (no trailer to send). Raises on an `err` that is not a pc.Error
-- and on details that are not a list of messages, naming the entry
-- ("bad argument #1 to 'status_details_bin' (details[2]: message
-- expected, got string)"). The in-process server
-- (pc.inproc) and the network server both send what this returns.
function M.status_details_bin(err)
  if getmetatable(err) ~= Error then
    error("bad argument #1 to 'status_details_bin' (pc.Error expected, got " .. type(err) .. ")", 2)
  end
  local bytes, problem = details_bin(err)
  if problem then error("bad argument #1 to 'status_details_bin' (" .. problem .. ")", 2) end
  return bytes
end

-- The message an Any holds when the default pool knows its type (a
-- message type: an enum's name fails to decode) and its value decodes,
-- else the Any itself.
local function unpacked(any)
  local name = any.type_url:match("([^/]*)$")
  local T = name ~= "" and type_named(name) or nil
  if T == nil then return any end
  local ok, m = pcall(decode, T, any.value)
  if ok and m then return m end
  return any
end

-- The details of a serialized google.rpc.Status: a list of messages of
-- their own types where the default pool knows the type, the Any
-- otherwise; nil when the bytes are not a Status.
local function decode_details(bytes)
  local st = decode(type_named("google.rpc.Status"), bytes)
  if not st then return nil end
  local list = {}
  for i, any in ipairs(st.details) do list[i] = unpacked(any) end
  return list
end

local RetryInfo

--- error_of(st) -> pc.Error: a transport's status table (code,
-- message, details = the grpc-status-details-bin bytes or nil, metadata,
-- headers, retry_delay, ...) as an error. `details` becomes the decoded
-- list (see decode_details; the bytes stay in `details_bin`, and a
-- trailer that is no Status leaves `details` nil); a
-- google.rpc.RetryInfo among them gives `retry_delay` (seconds) when the
-- server sent no grpc-retry-pushback-ms, which wins.
function M.error_of(st)
  local bin = st.details
  if type(bin) == "string" then
    st.details_bin = bin
    local list = decode_details(bin)
    st.details = list
    if list and st.retry_delay == nil then
      RetryInfo = RetryInfo or type_named("google.rpc.RetryInfo")
      for _, d in ipairs(list) do
        if type_of(d) == RetryInfo and d.retry_delay then
          local delay = tonumber(d.retry_delay.seconds) + d.retry_delay.nanos / 1e9 -- int64: cdata on LuaJIT
          if delay >= 0 then st.retry_delay = delay end
          break
        end
      end
    end
  end
  return Error(st)
end

return M
