--- Rich error status (doc/guide.md "Calls"): gRPC's `grpc-status-details-bin`
-- trailer, a serialized google.rpc.Status whose `details` are
-- google.protobuf.Any messages (google/rpc/status.proto and
-- google/rpc/error_details.proto are built in, core/schema/wkt.h).
--
-- Adds pc.status_details_bin (what a server sends) and, for the
-- transports, pc._status_error (a pc.Error from a transport's status
-- table, its details decoded).
local M = {}

local compat = require "protocall.compat"
local type, ipairs, pairs, getmetatable, pcall, tostring, mtype =
  type, ipairs, pairs, getmetatable, pcall, tostring, compat.mtype
local format = string.format

local TYPE_PREFIX = "type.googleapis.com/"

function M.install(pc, core)
  local ipairs = pc.ipairs -- repeated fields are containers (LuaJIT's ipairs takes tables only)
  local Error, encode, decode, type_of, is_message = pc.Error, pc.encode, pc.decode, pc.type_of,
    core.is_message

  local function type_named(name) return pc._default_pool:type(name) end

  --- pc.status_details_bin(err) -> bytes or nil: the value of the
  -- `grpc-status-details-bin` trailer for the pc.Error `err`: a
  -- google.rpc.Status with err's code (as a number), message and details.
  -- `err.details` is a list of messages: each is packed into a
  -- google.protobuf.Any with type URL "type.googleapis.com/<full name>"
  -- (an Any is sent as it is). Returns nil when `err.details` is nil or
  -- empty (no trailer to send). Raises on an `err` that is not a pc.Error
  -- and on details that are not a list of messages, naming the entry
  -- ("details[2]: message expected, got string"). The in-process server
  -- (pc.inproc) and the network server both send what this returns.
  function pc.status_details_bin(err)
    if getmetatable(err) ~= Error then
      error("bad argument #1 to 'status_details_bin' (pc.Error expected, got " .. type(err) .. ")", 2)
    end
    local details = err.details
    if details == nil then return nil end
    if type(details) ~= "table" or is_message(details) then
      error("status_details_bin: details: list of messages expected, got " .. type(details), 2)
    end
    local n = #details
    for k in pairs(details) do
      if mtype(k) ~= "integer" or k < 1 or k > n then
        error("status_details_bin: details: list of messages expected (keys 1..n)", 2)
      end
    end
    if n == 0 then return nil end
    local Any = type_named("google.protobuf.Any")
    local packed = {}
    for i, d in ipairs(details) do
      if not is_message(d) then
        error(format("status_details_bin: details[%d]: message expected, got %s", i, type(d)), 2)
      end
      local T = type_of(d)
      if T == Any then
        packed[i] = d
      else
        packed[i] = Any { type_url = TYPE_PREFIX .. T.full_name, value = encode(d) }
      end
    end
    local code = pc.codes[err.code]
    return encode(type_named("google.rpc.Status") {
      code = code, message = err.message or "", details = packed,
    })
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
    for i, any in pc.ipairs(st.details) do list[i] = unpacked(any) end
    return list
  end

  local RetryInfo

  --- pc._status_error(st) -> pc.Error: a transport's status table (code,
  -- message, details = the grpc-status-details-bin bytes or nil, metadata,
  -- headers, retry_delay, ...) as an error. `details` becomes the decoded
  -- list (see decode_details; the bytes stay in `details_bin`, and a
  -- trailer that is no Status leaves `details` nil); a
  -- google.rpc.RetryInfo among them gives `retry_delay` (seconds) when the
  -- server sent no grpc-retry-pushback-ms, which wins.
  function pc._status_error(st)
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

  --- pc._status_roundtrip(err) -> pc.Error: what a client receives for the
  -- server-side error `err` (a pc.Error), its details sent through
  -- pc.status_details_bin and decoded back as over the network; details
  -- that cannot be sent make it INTERNAL (internal: pc.inproc).
  function pc._status_roundtrip(err)
    if err.details == nil then return err end
    local ok, bin = pcall(pc.status_details_bin, err)
    if not ok then
      return Error { code = "INTERNAL", message = tostring(bin):gsub("^[^:\n]*:%d+: ", "", 1) }
    end
    local t = {}
    for k, v in pairs(err) do t[k] = v end
    t.details = bin
    return pc._status_error(t)
  end
end

return M
