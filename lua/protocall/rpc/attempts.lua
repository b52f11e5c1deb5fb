--- The attempts of a client's calls (rpc/client.lua): one function per
-- method shape that makes one attempt over a transport (bytes in, a
-- decoded response or a stream of them out), as pc.wrap_method calls its
-- target: unary, server streaming, and hedged (several attempts in flight,
-- call/hedge.lua). The settings a transport gets are one table
-- {timeout =, metadata =, compression =, with_metadata =,
-- previous_attempts =, tried =}.
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local hedge = require "protocall.call.hedge"

local type, error, pcall, setmetatable = type, error, pcall, setmetatable
local CHECKED = internal.CHECKED
local format = string.format
local status, decode, from_json = errors.status, core.decode, core.from_json
local JSON_IN = { ignore_unknown = true }

local M = {}

--- err = too_large(full, what, n, max): the RESOURCE_EXHAUSTED (local)
-- error of a request or response (`what`) of `n` bytes past the service
-- config's `max` for method `full`.
function M.too_large(full, what, n, max)
  return status("RESOURCE_EXHAUSTED", format("%s: %s of %d bytes is larger than the service config's %d",
    full, what, n, max), { ["local"] = true })
end

--- resp = decoded(m, bytes, max, json): the decoded response of method
-- `m` in `bytes`, within the size limit `max` (nil: none); raises the
-- call's pc.Error (RESOURCE_EXHAUSTED, INTERNAL; both local) otherwise.
-- `json`: the bytes are proto3 JSON (a transport with codec "json"),
-- members naming no field skipped (as connect-go's JSON codec reads).
local function decoded(m, bytes, max, json)
  if max and #bytes > max then error(M.too_large(m.full_name, "response", #bytes, max), 0) end
  local resp, err
  if json then
    resp, err = from_json(m.output, bytes, JSON_IN)
  else
    resp, err = decode(m.output, bytes)
  end
  if not resp then
    error(status("INTERNAL", m.full_name .. ": response failed to decode: " .. err, { ["local"] = true }), 0)
  end
  return resp
end

-- The with_metadata setting of a transport call for with_metadata record
-- `rec` (nil: none): true, or "present" for a call made {with_metadata =
-- "present"} (rec.present), so the transport gives nil when the answer
-- carried only gRPC's own metadata.
local function want_of(rec)
  if rec == nil then return false end
  return rec.present and "present" or true
end

-- A unary attempt. The request is its bytes, or a record {bytes=,
-- present=} of a call made {with_metadata = true or "present"}: the
-- attempt then asks the transport for the response's headers and
-- trailers and sets record.metadata.
-- `attempt` is nil for the first, then 2, 3, ... (pc.wrap_method); the
-- transport sends previous_attempts as grpc-previous-rpc-attempts.
function M.unary(transport, m, max)
  local path, json = m.path, transport.json
  local safe = m.idempotency_level == "NO_SIDE_EFFECTS" or nil -- Connect GET may carry it
  return function(request, timeout, metadata, compression, attempt)
    local rec
    if type(request) == "table" then rec, request = request, request.bytes end
    -- the callable checked these options: the transport need not again (internal.CHECKED)
    local bytes, meta = transport:unary(path, request, setmetatable({ timeout = timeout, metadata = metadata,
      compression = compression, with_metadata = want_of(rec), previous_attempts = attempt and attempt - 1,
      no_side_effects = safe }, CHECKED))
    if rec then rec.metadata = meta end
    return decoded(m, bytes, max, json)
  end
end

-- {headers=, trailers=} of a with_metadata record (empty lists from a
-- transport that has none: a host's).
function M.metadata_of(rec)
  local meta = rec.metadata
  if type(meta) ~= "table" then meta = {} end
  return { headers = meta.headers or {}, trailers = meta.trailers or {} }
end

--- meta = metadata_result(rec): what a unary stub call made with
-- with_metadata returns second: metadata_of(rec), or nil for a call made
-- {with_metadata = "present"} whose answer carried no metadata but gRPC's
-- own (the transport gave none: a host's never does).
function M.metadata_result(rec)
  if rec.present and rec.metadata == nil then return nil end
  return M.metadata_of(rec)
end

-- {headers=, trailers=} a transport's stream call holds (pc.grpc's
-- call:metadata()), nil when it has none or is closed.
local function transport_metadata(call)
  local t = type(call)
  if t ~= "table" and t ~= "userdata" then return nil end
  local ok, m = pcall(function()
    if call.metadata then return call:metadata() end
    if call.headers and call.trailers then return { headers = call:headers(), trailers = call:trailers() } end
  end)
  return ok and type(m) == "table" and m or nil
end

--- iterator, call = stub:StreamMethod(request [, opts]): the second value
-- of a server-streaming stub call, also its generic for's closing value:
-- `call:cancel()` ends the stream CANCELLED (over
-- the network RST_STREAM CANCEL, the server sees CANCELLED; in process the
-- handler stops) and the loop's next step raises CANCELLED, as grpcio's
-- iterator does after call.cancel() (nothing once the stream has ended);
-- `call:close()` ends it quietly (the loop's next step returns nil), as a
-- generic `for` left early does. With `{with_metadata = true}`:
-- `call:headers()` -> the response headers ({key, value} pairs; those
-- received so far while the stream runs), `call:trailers()` -> the
-- trailers once the stream has ended ({} before). Both are the last
-- attempt's (a retried or resumed stream's latest) and also set when it
-- failed (as the error's `headers` and `metadata`); a transport without
-- metadata (a host's) gives empty lists.
local StreamCall = { __name = "protocall.StreamCall" }
StreamCall.__index = StreamCall

local function metadata_record(self, name)
  local rec = self.rec
  if not rec then error(name .. ": " .. self.full .. " was called without {with_metadata = true}", 3) end
  return rec
end

function StreamCall:headers()
  local rec = metadata_record(self, "headers")
  local m = rec.metadata
  if m == nil and rec.live ~= nil then m = transport_metadata(rec.live) end
  return m and m.headers or {}
end

function StreamCall:trailers()
  local m = metadata_record(self, "trailers").metadata
  return m and m.trailers or {}
end

function StreamCall:cancel()
  if self.ended then return end
  self.ended, self.cancelled = true, true
  local c = self.current()
  if c ~= nil and c.cancel then c:cancel() end
end

function StreamCall:close()
  self.ended = true
  local c = self.current()
  if c ~= nil then c:close() end
end
StreamCall.__close = StreamCall.close

-- A server-streaming attempt lasts until the first response (or the end
-- of the stream): a failure before it is retried by the call's policy,
-- as gRPC commits a call once a response arrives; later failures reach
-- the caller's loop (or, with `resume`, start the next attempt).
-- The transport's call (its closing value) of each stream iterator a
-- stub hands out, so the stub returns it as the generic for's fourth
-- value: leaving the loop early closes the stream (RST_STREAM CANCEL over
-- the network, the handler stopped in process).
local stream_closers = setmetatable({}, { __mode = "k" })
M.stream_closers = stream_closers
local Closing = { __name = "protocall.StreamClose" }
M.Closing = Closing
Closing.__index = Closing
function Closing.close(self)
  local c = self.current()
  if c ~= nil then c:close() end
end
function Closing.cancel(self)
  local c = self.current()
  if c ~= nil and c.cancel then c:cancel() end
end
Closing.__close = Closing.close

-- The iterator `iter` of a transport's stream `call` for with_metadata
-- record `rec`: rec.live is the call while it runs (StreamCall:headers
-- reads it), rec.metadata its metadata once it ended, or the error's
-- (`headers`, `metadata`) when it failed.
local function watched(rec, iter, call)
  rec.metadata, rec.live = nil, call
  return function(st, c)
    local ok, bytes = pcall(iter, st, c)
    if not ok then
      if type(bytes) == "table" then rec.metadata = { headers = bytes.headers, trailers = bytes.metadata } end
      error(bytes, 0)
    end
    if bytes == nil then rec.metadata = transport_metadata(call) or {} end
    return bytes
  end
end

function M.server_stream(transport, m, max)
  local path, json = m.path, transport.json
  local function next_of(bytes)
    if bytes == nil then return nil end
    return decoded(m, bytes, max, json)
  end
  return function(request_bytes, timeout, metadata, compression, attempt)
    local rec -- a with_metadata record (stream_metadata below)
    if type(request_bytes) == "table" then
      rec, request_bytes = request_bytes.sink or request_bytes, request_bytes.bytes
    end
    local iter, state, ctl, call = transport:server_stream(path, request_bytes, { timeout = timeout,
      metadata = metadata, compression = compression, previous_attempts = attempt and attempt - 1 })
    if rec then iter = watched(rec, iter, call) end
    local first = next_of(iter(state, ctl))
    local done = first == nil
    local f = function()
      if first ~= nil then
        local r = first
        first = nil
        return r
      end
      if done then return nil end
      local r = next_of(iter(state, ctl))
      if r == nil then done = true end
      return r
    end
    stream_closers[f] = call
    return f, call
  end
end

--- it, call, nil, call = stream_values(it, full, rec): the generic for's
-- four values for a stream iterator `it` of a stub's method `full`: the
-- StreamCall (above) of the transport's call (`rec` the with_metadata
-- record, or nil) and an iterator that raises CANCELLED after its
-- cancel(), returns nil after its close(), and otherwise is `it`.
function M.stream_values(it, full, rec)
  local closer = stream_closers[it]
  local call = setmetatable({ rec = rec, full = full, current = function() return closer end }, StreamCall)
  local function f()
    if call.ended then
      if call.cancelled then
        call.cancelled = false
        error(status("CANCELLED", full .. ": cancelled by the client", { ["local"] = true }), 0)
      end
      return nil
    end
    local r = it()
    if r == nil then call.ended = true end
    return r
  end
  return f, call, nil, call
end

--- attempt = hedged(transport, m, max, policy, bucket, clock, sleep): a
-- hedged call of unary or server-streaming method `m` as one attempt
-- function (call/hedge.lua runs the hedges). On a
-- transport with start_unary / start_server_stream and wait (pc.grpc's)
-- the hedges are in flight together on its connection, a stream committing
-- at its first response; on any other (pc.inproc) each attempt runs to
-- its end before the next may start, so only a failure with a non-fatal
-- code (or pushback) leads to the next one. `bucket` is the client's C
-- retry token bucket or nil; `clock` and `sleep` the client's.
-- An attempt that ended when it started (a transport without start_*).
local Ended = { __index = {
  result = function(h) return h.ok, h.v end,
  cancel = function() end,
} }

function M.hedged(transport, m, max, policy, bucket, clock, sleep)
  local path, streaming, json = m.path, m.server_streaming, transport.json
  local begin = transport[streaming and "start_server_stream" or "start_unary"]
  local start, wait, sync
  if type(begin) == "function" and type(transport.wait) == "function" then
    local function decode_stream(it)
      return function()
        local b = it()
        if b == nil then return nil end
        return decoded(m, b, max, json)
      end
    end
    -- `request` is the bytes, or a record {bytes=} of a call made with
    -- with_metadata (the winner sets record.metadata), as unary_attempt's.
    start = function(request, timeout, metadata, compression, previous, tried)
      local rec = type(request) == "table" and request or nil
      local h = begin(transport, path, rec and rec.bytes or request, { timeout = timeout, metadata = metadata,
        compression = compression, previous_attempts = previous > 0 and previous or nil, tried = tried,
        with_metadata = want_of(rec) or nil })
      return {
        raw = h,
        cancel = function() h:cancel() end,
        result = function()
          local ok, v, meta = h:result()
          if not ok then return ok, v end
          if streaming then
            -- meta is the stream's call (its third result)
            local it = decode_stream(rec and watched(rec.sink or rec, v, meta) or v)
            stream_closers[it] = meta
            return true, it
          end
          if rec then rec.metadata = meta end
          return pcall(decoded, m, v, max, json)
        end,
      }
    end
    wait = function(list, seconds)
      local raw = {}
      for i = 1, #list do raw[i] = list[i].raw end
      transport:wait(raw, seconds)
    end
  else
    local run = (streaming and M.server_stream or M.unary)(transport, m, max)
    start = function(bytes, timeout, metadata, compression, previous)
      local ok, v = pcall(run, bytes, timeout, metadata, compression, previous + 1)
      return setmetatable({ ok = ok, v = v, sync = true }, Ended)
    end
    wait = function(_, seconds)
      if seconds > 0 then sleep(seconds) end
    end
    sync = true
  end
  return hedge.run(policy, { start = start, wait = wait, clock = clock, bucket = bucket, sync = sync })
end

return M
