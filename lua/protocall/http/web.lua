--- gRPC-Web and Connect in front of a plain gRPC upstream: what a proxy
-- needs between the web's framing (core/net/web.h, through protocall.core)
-- and a gRPC call, with no I/O (the nginx gateway,
-- lua/protocall/resty/gateway.lua, reads the request and writes what these
-- return). Messages pass as bytes when the codec is proto; the +json
-- codecs go through the method's types (pc.from_json / pc.to_json).
--
-- The protocols (grpc/grpc-web doc/PROTOCOL-WEB.md, connectrpc.com/docs/protocol).
-- gRPC-Web ("application/grpc-web[+proto|+json]", "-text" in base64): the
-- body is gRPC's 5-byte length-prefixed messages; the answer is status
-- 200, the response headers, the messages and one last message flagged
-- 0x80 holding the status and trailers as header lines. Connect unary
-- (POST "application/proto" or "application/json" to
-- "/pkg.Service/Method"): the body is the message; the answer is the
-- message with status 200 and trailers as "trailer-<key>" headers, or
-- Connect's error JSON with its HTTP status. Connect streaming
-- ("application/connect+proto|json"): 5-byte envelopes both ways, the last
-- answer envelope flagged 0x02 holding the end-of-stream JSON (the error,
-- the trailers).
local core = require "protocall.core"
local errors = require "protocall.errors"
local json = require "protocall.json"
local wire = require "protocall.wire"
local refusal = require("protocall.validate").refusal
local details_bin = require("protocall.status").details_bin

local type, ipairs, pairs, tostring, pcall, setmetatable, error =
  type, ipairs, pairs, tostring, pcall, setmetatable, error
local byte, char, lower, format, concat = string.byte, string.char, string.lower, string.format, table.concat
local floor = math.floor
local Error = errors.Error
local classify, web_trailers, connect_end_stream, connect_error, connect_timeout, b64decode, b64encode =
  core.web_classify, core.web_trailers, core.connect_end_stream, core.connect_error, core.connect_timeout,
  core.web_base64_decode, core.web_base64_encode
local metadata_problem = core.metadata_problem
local encode, decode, from_json, to_json = wire.encode, wire.decode, json.from_json, json.to_json

local M = {}

--- methods = web.methods(pool, services): "/pkg.Service/Method" -> the
-- method (pool:service(...).methods' entries) of the services named in
-- the list `services` (nil: every service of the pool's files). A
-- service the pool does not have is skipped.
function M.methods(pool, services)
  local list = services
  if not list then
    list = {}
    for _, name in ipairs(pool:files()) do
      for _, s in ipairs(pool:file(name).services) do list[#list + 1] = s end
    end
  end
  local out = {}
  for _, sname in ipairs(list) do
    local s = pool:service(sname)
    if s then
      for _, m in ipairs(s.methods) do out[m.path] = m end
    end
  end
  return out
end

-- What a connection attempt's failure says (channel.c's "connect to
-- HOST:PORT: why", resolve.c's "resolve NAME: why", a TLS handshake's
-- "TLS handshake with ...") as its class, checked in order against the
-- message, the address left out (the text after the last ": " for
-- "connect to"); any other: "connection failure". nginx's cosocket says
-- its resolver's failures after "connect to HOST:PORT: " (`no resolver
-- defined to resolve "NAME"`, `NAME could not be resolved (3: Host not
-- found)`), a DNS server's refusal or timeout inside them.
local CONNECT_CLASSES = {
  { "^resolve ", "name not resolved", true },
  { "^connect to %S+: no resolver defined to resolve ", "name not resolved", true },
  { "^connect to %S+: %S+ could not be resolved", "name not resolved", true },
  { "TLS handshake", "TLS handshake failed", true },
  { "[Rr]efused", "connection refused" },
  { "[Tt]imed out", "connection timed out" },
  { "^not connected within", "connection timed out" },
  { "^no HTTP/2 SETTINGS", "no HTTP/2 from the upstream" },
  { "[Uu]nreachable", "upstream unreachable" },
  { "[Nn]o route to host", "upstream unreachable" },
  { "No such file or directory", "no such socket file" }, -- a unix: socket's path
}

-- The class of the failed connection attempt `m` (its backoff hint left out).
local function connect_class(m)
  local tail = m:match("^connect to .*: ([^:]*)$")
  for _, c in ipairs(CONNECT_CLASSES) do
    if (c[3] and m or tail or ""):find(c[1]) then return c[2] end
  end
  return "connection failure"
end

-- The channel's own DEADLINE_EXCEEDED texts of a call that had no ready
-- connection (channel.c, balancer.lua): they name the upstream's address
-- or name.
local NO_CONNECTION = { "^deadline exceeded waiting for a connection", "^deadline exceeded %(connected to ",
  "^deadline exceeded while resolving " }

--- text | nil = web.upstream_failure(err): what a gateway tells its client
-- of the failure `err` of its upstream call when the gateway's channel
-- failed it (not a status the upstream sent, `err.peer`, which passes
-- unchanged: nil), in place of the message naming the upstream's address, which the
-- gateway logs instead: "upstream connect error: CLASS" when no
-- connection took the call (`err.unsent`, or a "connect to", "resolve
-- NAME: why" or TLS failure; CLASS "connection refused", "connection timed out",
-- "name not resolved" (nginx's "connect to HOST:PORT: no resolver defined
-- to resolve ..." and "... could not be resolved ..." too), "TLS handshake
-- failed", "no HTTP/2 from the upstream", "upstream unreachable", "no such socket file" (a unix:
-- socket's path that names no file) or "connection failure"), "upstream
-- connection lost" when its connection failed under it (`err.lost`),
-- "upstream timed out: no connection before the deadline" for a deadline
-- that passed while the channel had no ready connection; a reconnection
-- backoff's hint is kept, its timing only ("(reconnection backoff: the
-- next attempt in 0.97 s; calls fail at once until then)").
--- text = web.gateway_words(message): an upstream call's failure `message`
-- as a gateway tells it, in its answer or its log: a reconnection
-- backoff's advice for pc.grpc's `wait_for_ready` (an option a gateway's
-- routes cannot set: "; a transport with wait_for_ready waits for it)")
-- replaced by what happens, "; calls fail at once until then)"; the rest
-- (what failed, where) unchanged.
local function gateway_words(message)
  return (message:gsub("; a transport with wait_for_ready waits for it%)$", "; calls fail at once until then)"))
end
M.gateway_words = gateway_words

function M.upstream_failure(err)
  if type(err) ~= "table" or err.peer then return nil end -- (peer: the upstream's own status)
  local code, m = err.code, err.message
  if type(m) ~= "string" then return nil end
  local base, hint = m:match("^(.-) (%(reconnection backoff: [^()]*%))$")
  base = base or m
  local text
  -- (the balancer's own failures carry no flag: a dns:/// name it could not
  -- resolve, "connect to HOST:PORT: the channel is closed")
  local attempt = base:find("^connect to ") or base:find("^resolve [^ ]+: ") or base:find("TLS handshake", 1, true)
  if code == "UNAVAILABLE" and (err.unsent or err.lost or attempt) then
    text = (err.unsent or attempt) and "upstream connect error: " .. connect_class(base)
      or "upstream connection lost"
  elseif code == "DEADLINE_EXCEEDED" then
    for _, p in ipairs(NO_CONNECTION) do
      if base:find(p) then
        text = "upstream timed out: no connection before the deadline"
        break
      end
    end
  end
  if not text then return nil end
  if not hint then return text end
  return text .. " " .. gateway_words(hint)
end

--- protocol, codec | nil = web.classify(http_method, content_type):
-- "grpc-web", "grpc-web-text", "connect" (unary) or "connect-stream", and
-- "proto" or "json"; nil for anything else (plain gRPC included: a
-- gRPC client needs HTTP/2 end to end).
function M.classify(http_method, content_type)
  if not content_type then return nil end
  local p, codec = classify(http_method, content_type)
  if p == nil or p == "grpc" then return nil end
  return p, codec
end

local function invalid(msg) return Error { code = "INVALID_ARGUMENT", message = msg } end
local function internal(msg) return Error { code = "INTERNAL", message = msg } end

-- Request headers that are HTTP's or the protocol's own, not metadata.
local NOT_METADATA = {
  host = true, connection = true, ["keep-alive"] = true, ["transfer-encoding"] = true, upgrade = true,
  te = true, trailer = true, ["content-type"] = true, ["content-length"] = true, ["content-encoding"] = true,
  accept = true, ["accept-encoding"] = true, ["user-agent"] = true, ["x-user-agent"] = true,
  ["x-grpc-web"] = true, expect = true, origin = true, referer = true, ["proxy-connection"] = true,
  ["proxy-authorization"] = true, ["accept-language"] = true, cookie = true,
}

--- md, timeout | nil, err = web.metadata(protocol, headers): the call's
-- metadata and deadline (seconds or nil) from the request headers (a
-- table lowercased name -> value or list of values, as nginx's
-- ngx.req.get_headers gives them): every header but HTTP's own (host,
-- content-*, accept*, user-agent, cookie, origin, ...), grpc-* and
-- connect-*; a "-bin" value decoded from base64; a header gRPC cannot
-- carry (a key outside 0-9 a-z - _ ., a value not printable ASCII) is
-- left out. The deadline is Grpc-Timeout's (gRPC-Web) or
-- Connect-Timeout-Ms's (Connect). Fails (nil, a pc.Error
-- INVALID_ARGUMENT) on a Connect-Protocol-Version other than 1 (Connect),
-- a malformed timeout or base64 value, or metadata
-- past the bounds a call takes (1000 pairs, 64 KiB).
function M.metadata(protocol, headers)
  local md, n, bytes = {}, 0, 0
  local timeout
  if protocol == "connect" or protocol == "connect-stream" then
    local version = headers["connect-protocol-version"]
    if version ~= nil and version ~= "1" then -- connect-go refuses another version
      return nil, invalid(format('connect-protocol-version must be "1": got "%s"',
        type(version) == "string" and version:sub(1, 20) or "several values"))
    end
    local t = headers["connect-timeout-ms"]
    if t ~= nil then
      timeout = type(t) == "string" and connect_timeout(t) or nil
      if not timeout then return nil, invalid("bad Connect-Timeout-Ms") end
    end
  else
    local t = headers["grpc-timeout"]
    if t ~= nil then
      local v, unit
      if type(t) == "string" then v, unit = t:match("^(%d+)([HMSmun])$") end
      if not v or #v > 8 then return nil, invalid("bad Grpc-Timeout") end
      timeout = v * ({ H = 3600, M = 60, S = 1, m = 1e-3, u = 1e-6, n = 1e-9 })[unit]
    end
  end
  for name, value in pairs(headers) do
    local key = lower(name)
    if not NOT_METADATA[key] and key:sub(1, 5) ~= "grpc-" and key:sub(1, 8) ~= "connect-"
      and key:find("^[%w%-_%.]+$") and key ~= "-bin" then
      local values = type(value) == "table" and value or { value }
      for _, v in ipairs(values) do
        if key:sub(-4) == "-bin" then
          local raw = b64decode(v)
          if not raw then -- unpadded (Connect and gRPC-Web may leave the padding out)
            local pad = #v % 4
            raw = pad ~= 1 and b64decode(v .. ("="):rep((4 - pad) % 4)) or nil
          end
          if not raw then return nil, invalid(format("header '%s': bad base64", key)) end
          v = raw
        elseif v:find("[^\32-\126]") then
          v = nil
        end
        if v then
          n = n + 1
          md[n] = { key, v }
          bytes = bytes + #key + #v
        end
      end
    end
  end
  if n > 0 then
    local problem = metadata_problem(md)
    if problem then return nil, invalid(problem) end
  end
  return md, timeout
end

-- The 5-byte prefixed messages of `body` (a list of the bytes of each),
-- or nil and a pc.Error. A body ending inside a message is Connect
-- streaming's INVALID_ARGUMENT in connect-go's words (its envelopeReader),
-- gRPC-Web's INTERNAL as gRPC answers a request cut short (grpc-go's
-- io.ErrUnexpectedEOF); a flags byte other than 0 and 1 is INTERNAL as
-- both answer it (grpc-go's "unexpected payload format", connect-go's
-- "invalid envelope flags"), as pc.listen answers them all
-- (core/net/server.c); a compressed message UNIMPLEMENTED.
local function envelopes(body, what, protocol)
  local out, i, len = {}, 1, #body
  local connect = protocol == "connect-stream"
  local cut = connect and invalid or internal
  while i <= len do
    if i + 4 > len then
      return nil, cut(what .. (connect and ": protocol error: incomplete envelope: unexpected EOF"
        or ": a message prefix cut short"))
    end
    local f, b1, b2, b3, b4 = byte(body, i, i + 4)
    local n = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
    if i + 4 + n > len then
      if connect then
        return nil, cut(format("%s: protocol error: promised %d bytes in enveloped message, got %d bytes",
          what, n, len - i - 4))
      end
      return nil, cut(format("%s: a message of %d bytes cut short", what, n))
    end
    if f ~= 0 then
      if f == 1 then
        return nil, Error { code = "UNIMPLEMENTED",
          message = what .. ": compressed request messages are not supported by this gateway" }
      end
      return nil, internal(format("%s: a request message with flags 0x%02x", what, f))
    end
    out[#out + 1] = body:sub(i + 5, i + 4 + n)
    i = i + 5 + n
  end
  return out
end

-- The refusal of request message `m` (nil: it breaks no rule), as
-- pc.server's `validate = true` answers: INVALID_ARGUMENT with a
-- google.rpc.BadRequest detail, INVALID_ARGUMENT "validate: ..." for a
-- rule that fails to evaluate on it, or INTERNAL "validate: ..." for a
-- rule that does not compile.
local function refused(m)
  local ok, err = pcall(refusal, m)
  if not ok then return Error { code = "INTERNAL", message = tostring(err) } end
  return err
end

--- list | nil, err = web.requests(protocol, codec, method, body,
-- content_encoding [, validate]): the request messages as protobuf bytes:
-- the body of a Connect unary call is the message; the others are 5-byte
-- prefixed messages (gRPC-Web-Text's in base64, whose padded chunks may
-- follow each other, CR and LF skipped); the json codec's messages are
-- read into the method's input type (an empty Connect unary JSON body is
-- not JSON: INVALID_ARGUMENT, as connect-go and pc.listen answer it; an
-- empty proto one is the empty message). Fails (nil, pc.Error
-- INVALID_ARGUMENT; UNIMPLEMENTED for a unary or server-streaming
-- method's body of no message or of more than one, gRPC's request
-- cardinality violation, as pc.listen answers it; INTERNAL for a gRPC-Web body cut inside a message, for
-- a flags byte other than 0 and 1 and for gRPC-Web-Text that is not base64,
-- as pc.listen answers them; UNIMPLEMENTED for a compressed body or message) on what cannot be read,
-- naming where. With `validate`, each message is also read into the
-- input type (the proto codec's bytes stay the ones returned) and checked
-- against its protovalidate rules as pc.server's `validate = true` checks
-- a request: the first that breaks one fails with its refusal
-- (INVALID_ARGUMENT "validation failed: ...", a google.rpc.BadRequest in
-- `details`; a rule failing to evaluate: INVALID_ARGUMENT "validate: ...",
-- no details; a rule that does not compile: INTERNAL "validate: ..."), and
-- proto bytes the input type cannot decode fail INVALID_ARGUMENT
-- "message N: ...".
function M.requests(protocol, codec, method, body, content_encoding, validate)
  if content_encoding and content_encoding ~= "identity" then
    return nil, Error { code = "UNIMPLEMENTED", message = "Content-Encoding " .. content_encoding:sub(1, 40)
      .. " is not supported by this gateway" }
  end
  local list, err
  if protocol == "connect" then
    list = { body }
  else
    if protocol == "grpc-web-text" then
      local raw, at = b64decode(body)
      if not raw then
        return nil, internal(at == #body and "body: ended inside a base64 group"
          or format("body: not base64: byte 0x%02x at offset %d", body:byte(at + 1), at))
      end
      body = raw
    end
    list, err = envelopes(body, "body", protocol)
    if not list then return nil, err end
  end
  if codec == "json" then
    local T = method.input
    for i, text in ipairs(list) do
      local ok, m, why = pcall(from_json, T, text)
      if not ok or not m then return nil, invalid(format("message %d: %s", i, tostring(ok and why or m))) end
      local refusal_err = validate and refused(m)
      if refusal_err then return nil, refusal_err end
      local encoded, bytes = pcall(encode, m) -- (raises for a proto2 required field missing)
      if not encoded then return nil, invalid(format("message %d: %s", i, tostring(bytes))) end
      list[i] = bytes
    end
  elseif validate then
    local T = method.input
    for i, bytes in ipairs(list) do
      local ok, m, why = pcall(decode, T, bytes)
      if not ok or not m then return nil, invalid(format("message %d: %s", i, tostring(ok and why or m))) end
      local refusal_err = refused(m)
      if refusal_err then return nil, refusal_err end
    end
  end
  if not method.client_streaming and #list ~= 1 then
    -- a request cardinality violation: UNIMPLEMENTED in gRPC's status
    -- code table, pc.listen's answer (rpc/listen.lua)
    local shape = method.server_streaming and "server-streaming" or "unary"
    return nil, Error { code = "UNIMPLEMENTED", message = format("%s: a %s method takes exactly one request "
      .. "message, got %s", method.full_name, shape, #list == 0 and "none" or "more") }
  end
  return list
end

-- A message of the answer in the codec: the bytes, or their JSON.
local function coded(codec, method, bytes)
  if codec ~= "json" then return bytes end
  local m, err = decode(method.output, bytes)
  if not m then
    error(Error { code = "INTERNAL", message = "response of " .. method.full_name .. ": " .. tostring(err) }, 0)
  end
  return to_json(m)
end

local function prefix(flags, s)
  local n = #s
  return char(flags, floor(n / 16777216) % 256, floor(n / 65536) % 256, floor(n / 256) % 256, n % 256) .. s
end

-- Keys of the upstream's response metadata an answer does not repeat.
local function forwardable(key)
  return key:sub(1, 5) ~= "grpc-" and key ~= "content-type" and key ~= "content-length"
    and key ~= "connection" and key ~= "transfer-encoding" and key ~= "te" and key ~= "trailer"
end

-- The pairs of `list` (nil: none) as HTTP/1 headers: {name, value},
-- "-bin" values in base64, `pre` before each name.
local function headers_of(list, pre, out)
  for _, kv in ipairs(list or {}) do
    local key, value = lower(kv[1]), kv[2]
    if forwardable(key) then
      if key:sub(-4) == "-bin" then value = b64encode(value) end
      out[#out + 1] = { pre .. key, value }
    end
  end
  return out
end

-- The trailers list without grpc-status-details-bin (the framing writes
-- it from the status).
local function trailers_of(list)
  local out = {}
  for _, kv in ipairs(list or {}) do
    if lower(kv[1]) ~= "grpc-status-details-bin" then out[#out + 1] = kv end
  end
  return out
end

-- The status table the C framing takes, from a pc.Error or anything raised.
local function status_of(err)
  if type(err) ~= "table" or type(err.code) ~= "string" then
    return { code = "INTERNAL", message = tostring(err) }
  end
  local details = err.details_bin
  if details == nil and type(err.details) == "string" then details = err.details end
  if details == nil and type(err.details) == "table" then details = details_bin(err) end
  return { code = err.code, message = err.message, details = details }
end

local Answer = {}
Answer.__index = Answer

local CONTENT = {
  ["grpc-web"] = "application/grpc-web+", ["grpc-web-text"] = "application/grpc-web-text+",
  connect = "application/", ["connect-stream"] = "application/connect+",
}

--- a = web.answer(protocol, codec, method): the writer of one call's
-- answer. For a call answered as it streams:
--   status, headers = a:head(response_headers)   -- before the first message
--   chunk = a:message(bytes)                       -- each response message
--   chunk = a:finish(err | nil, trailers)          -- the last bytes
-- (gRPC-Web-Text chunks are base64, each whole). For Connect unary,
-- `a:unary(bytes, headers, trailers)` and for any protocol
-- `a:failure(err)` before anything was written: -> status, headers
-- ({name, value} list, Content-Type included), body. `err` is a pc.Error
-- (its details_bin, or its `details`: bytes or a list of messages, carried
-- whole) or anything raised (INTERNAL).
function M.answer(protocol, codec, method)
  return setmetatable({ protocol = protocol, codec = codec, method = method,
    content_type = CONTENT[protocol] .. codec }, Answer)
end

function Answer:text(s)
  if self.protocol == "grpc-web-text" then return b64encode(s) end
  return s
end

function Answer:head(response_headers)
  return 200, headers_of(response_headers, "", { { "Content-Type", self.content_type } })
end

function Answer:message(bytes)
  return self:text(prefix(0, coded(self.codec, self.method, bytes)))
end

function Answer:finish(err, trailers)
  local st = err and status_of(err) or { code = "OK" }
  trailers = trailers_of(trailers or (err and type(err) == "table" and err.metadata) or nil)
  if self.protocol == "connect-stream" then
    return connect_end_stream(st, trailers)
  end
  return self:text(web_trailers(st, trailers))
end

function Answer:unary(bytes, headers, trailers)
  local body = coded(self.codec, self.method, bytes)
  local h = headers_of(headers, "", { { "Content-Type", self.content_type } })
  headers_of(trailers, "trailer-", h)
  return 200, h, body
end

function Answer:failure(err)
  local headers = type(err) == "table" and type(err.headers) == "table" and err.headers or nil
  local trailers = type(err) == "table" and type(err.metadata) == "table" and err.metadata or nil
  if self.protocol == "connect" then
    local body, status = connect_error(status_of(err))
    local h = headers_of(headers, "", { { "Content-Type", "application/json" } })
    headers_of(trailers_of(trailers), "trailer-", h)
    return status, h, body
  end
  local status, h = self:head(headers)
  return status, h, self:finish(err, trailers)
end

--- The whole body of a call answered at once (gRPC-Web and Connect
-- streaming): the messages of `list` (bytes) and the end.
function Answer:body(list, err, trailers)
  local out = {}
  for i, bytes in ipairs(list) do out[i] = self:message(bytes) end
  out[#out + 1] = self:finish(err, trailers)
  return concat(out)
end

return M
