--- gRPC over HTTP/2: `pc.grpc(target, opts)`, the network transport
-- (core/net/README.md).
-- A transport moves bytes: the caller encodes requests and decodes
-- responses. The C side (core/net/grpc_http2.c through libcurl + nghttp2) does
-- framing, gzip, grpc-timeout, metadata and status; this file shapes
-- options, settings and error objects.
local setmetatable, type, error, pairs, tostring = setmetatable, type, error, pairs, tostring
local floor, io_open = math.floor, io.open

local M = {}

-- Failures raise pc.Error (lua/protocall/call.lua, installed first) with
-- the transport's fields: code, message, details (grpc-status-details-bin
-- bytes), metadata (trailers as {key, value} pairs), headers (response
-- headers, same shape), retry_delay (grpc-retry-pushback-ms in seconds; -1
-- with no_retry = true for a negative or malformed value), local (true for
-- a failure protocall found that would recur), method (the call's path).
local new_error
-- pc._metadata_problem (call.lua): the shared metadata check.
local metadata_problem

local Transport = {}
Transport.__index = Transport

local TRANSPORT_OPTIONS = {
  ca_file = "string", max_receive_size = "number", max_unread_size = "number",
  compression = "string",
  metadata = "table", user_agent = "string",
}

local function check_compression(c, level)
  if c ~= nil and c ~= "gzip" and c ~= "identity" then
    error("compression '" .. tostring(c) .. "': expected \"gzip\" or \"identity\"", level + 1)
  end
  return c == "gzip"
end

local function merged_metadata(base, extra)
  if base == nil then return extra end
  if extra == nil or #extra == 0 then return base end
  local all = {}
  for i = 1, #base do all[i] = base[i] end
  for i = 1, #extra do all[#base + i] = extra[i] end
  return all
end

-- Settings of one call: {timeout = seconds or nil, metadata = {{k, v}, ...},
-- compression = "gzip" | "identity" | nil, with_metadata = boolean}.
local function settings_of(self, name, path, request, settings, level)
  if type(path) ~= "string" then
    error("bad argument #1 to '" .. name .. "' (string expected, got " .. type(path) .. ")", level + 1)
  end
  if type(request) ~= "string" then
    error("bad argument #2 to '" .. name .. "' (string expected, got " .. type(request) .. ")",
          level + 1)
  end
  if settings ~= nil and type(settings) ~= "table" then
    error("bad argument #3 to '" .. name .. "' (table expected, got " .. type(settings) .. ")",
          level + 1)
  end
  settings = settings or {}
  local compression = settings.compression
  if compression == nil then compression = self.compression end
  local gzip = check_compression(compression, level + 1)
  local timeout = settings.timeout
  if timeout ~= nil and type(timeout) ~= "number" then
    error("timeout: seconds (a number) or nil expected, got " .. type(timeout), level + 1)
  end
  if settings.metadata ~= nil then
    local problem = metadata_problem(settings.metadata)
    if problem then error(problem, level + 1) end
  end
  return timeout, merged_metadata(self.metadata, settings.metadata), gzip, settings.with_metadata
end

--- Unary call: `transport:unary(path, request_bytes, settings)` ->
-- `response_bytes` (and `{headers = pairs, trailers = pairs}` when
-- `settings.with_metadata`). `path` is "/pkg.Service/Method"; settings as
-- `settings_of` above; `timeout` in seconds is sent as grpc-timeout and
-- enforced here too (a timeout <= 0 fails at once). Raises the transport's
-- error object with the canonical `code` on any failure; raises a string
-- at the caller's line on misuse (bad metadata, bad path, closed transport).
function Transport:unary(path, request, settings)
  local timeout, md, gzip, want_md = settings_of(self, "unary", path, request, settings, 2)
  local ok, a, b = self.channel:unary(path, request, timeout, md, gzip, want_md)
  if ok then return a, b end
  a.method = path
  error(new_error(a), 0)
end

--- Server-streaming call: `for bytes in transport:server_stream(path,
-- request_bytes, settings) do ... end`. The iterator returns each response
-- message, then nil after a status OK; any other status raises the error
-- object. `timeout` covers the whole stream. The fourth value is the call:
-- `call:metadata()` -> {headers = pairs, trailers = pairs} received so far,
-- `call:close()` cancels it (RST_STREAM) if still running; a generic `for`
-- closes it when the loop ends or is left early; `call:buffered()` is the
-- bytes it holds for received, unread data. Other calls on the transport
-- read this stream too: when what they read for it would take its unread
-- bytes past the transport's `max_unread_size`, the iterator raises RESOURCE_EXHAUSTED (local = true,
-- "server stream: N bytes received but not read (limit M bytes): the
-- consumer fell too far behind") and the stream is cancelled, its unread
-- messages dropped; the other calls go on (a hard bound: libcurl 7.88
-- cannot pause one HTTP/2 stream without harming the others). A stream
-- read with no other calls running is never failed this way, however slow.
function Transport:server_stream(path, request, settings)
  local timeout, md, gzip = settings_of(self, "server_stream", path, request, settings, 2)
  local call = self.channel:start(path, request, timeout, md, gzip)
  local finished = false
  local function iterate()
    if finished then return nil end
    local msg = call:next()
    if msg ~= nil then return msg end
    finished = true
    local st = call:status()
    if st.code ~= "OK" then
      st.method = path
      error(new_error(st), 0)
    end
    return nil
  end
  return iterate, nil, nil, call
end

--- Closes the connection (calls still being read keep it until they end).
function Transport:close()
  self.channel:close()
end

-- Whether `target` is "http://host:port" or "https://host[:port]" that
-- libcurl will read as written: nil when it is, else what is wrong. A
-- control character (a NUL above all: C would cut the string there and
-- reach another host) or a space is refused.
local MAX_RECEIVE_LIMIT = 2 ^ 31 - 1

local function target_problem(target)
  if target:find("[%c ]") then return "control characters and spaces are not allowed" end
  local scheme, rest = target:match("^(https?)://(.*)$")
  if not scheme then return "expected http://host:port or https://host:port" end
  local host, port = rest:match("^(%[[%x:.]+%]):?(%d*)/?$")
  if not host then host, port = rest:match("^([^:/%[%]]+):?(%d*)/?$") end
  if not host or host == "" then return "no host" end
  if port == "" then
    if scheme == "http" then return "h2c needs a port (http://host:port)" end
  else
    local n = tonumber(port)
    if n < 1 or n > 65535 then return "port must be in 1..65535" end
  end
  return nil
end

function M.install(pc, core)
  new_error = pc.Error
  metadata_problem = pc._metadata_problem
  --- `pc.grpc(target, opts)` -> transport. `target` is "http://host:port"
  -- (HTTP/2 without TLS, prior knowledge) or "https://host:port" (TLS,
  -- verification on, the system CA store). opts: `ca_file` (PEM bundle),
  -- `max_receive_size` (bytes, default 4 MiB; a larger response message
  -- fails with RESOURCE_EXHAUSTED, local = true), `max_unread_size` (bytes
  -- a server stream may hold received but unread, default the larger of 4 x
  -- max_receive_size and 1 MiB, at least max_receive_size + 256 KiB + 5;
  -- see Transport:server_stream), `compression` ("gzip" for
  -- every call), `metadata` (list of {key, value} sent with every call;
  -- keys ending in "-bin" carry bytes), `user_agent`. Raises on a bad
  -- option, bad metadata, or a `ca_file` that cannot be read. All calls share one
  -- multiplexed connection, reused across calls and reopened when lost.
  function pc.grpc(target, opts)
    if type(target) ~= "string" then
      error("bad argument #1 to 'grpc' (string expected, got " .. type(target) .. ")", 2)
    end
    local problem = target_problem(target)
    if problem then error("pc.grpc: target '" .. target:gsub("%c", "?") .. "': " .. problem, 2) end
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #2 to 'grpc' (table expected, got " .. type(opts) .. ")", 2)
    end
    opts = opts or {}
    for k, v in pairs(opts) do
      local want = TRANSPORT_OPTIONS[k]
      if want == nil then error("pc.grpc: unknown option '" .. tostring(k) .. "'", 2) end
      if type(v) ~= want then
        error("pc.grpc: option '" .. k .. "' must be a " .. want .. ", got " .. type(v), 2)
      end
    end
    check_compression(opts.compression, 2)
    if opts.metadata ~= nil then
      local problem = metadata_problem(opts.metadata)
      if problem then error("pc.grpc: " .. problem, 2) end
    end
    if opts.ca_file ~= nil then
      local f, why = io_open(opts.ca_file, "rb")
      if not f then error("pc.grpc: option 'ca_file': cannot read " .. why, 2) end
      f:close()
    end
    local max = opts.max_receive_size
    if max ~= nil and (max ~= floor(max) or max < 1 or max > MAX_RECEIVE_LIMIT) then
      error("pc.grpc: option 'max_receive_size' must be an integer in 1..2^31-1", 2)
    end
    if opts.user_agent ~= nil and opts.user_agent:find("%c") then
      error("pc.grpc: option 'user_agent' must not hold control characters", 2)
    end
    local unread = opts.max_unread_size
    if unread ~= nil and (unread ~= floor(unread) or unread < 1) then
      error("pc.grpc: option 'max_unread_size' must be a positive integer", 2)
    end
    local channel, err = core.grpc_channel(target, opts.ca_file, max, opts.user_agent, unread)
    if channel == nil then error("pc.grpc: " .. err, 2) end
    return setmetatable({
      channel = channel, target = target, compression = opts.compression,
      metadata = opts.metadata,
    }, Transport)
  end
end

return M
