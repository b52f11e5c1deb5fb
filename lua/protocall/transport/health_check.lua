--- Client-side health checking (gRFC A17) for the balancer
-- (transport/balancer.lua): one grpc.health.v1.Health/Watch stream per
-- backend, read without blocking whenever the balancer picks, so a
-- backend takes calls only while its server says SERVING.
--
-- A watch is "connecting" until the server's first answer; then "SERVING",
-- "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN" as the server says, and
-- "UNIMPLEMENTED" (health checking off for that backend: it takes calls,
-- as A17 says) when the server has no Health service. A stream that ends
-- or fails otherwise (the backend unreachable, the server restarting) is
-- "failed" and starts again after a backoff of 1 s doubling to 30 s, reset
-- by an answer; a stream that had answered starts again at once, its last
-- answer standing meanwhile.
local schema = require "protocall.schema"
local core = require "protocall.core"

local setmetatable, type, pcall, min = setmetatable, type, pcall, math.min
local monotonic = core.monotonic

local M = {}

local PATH = "/grpc.health.v1.Health/Watch"
local FIRST_BACKOFF, MAX_BACKOFF = 1, 30
local STATUS = { [0] = "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" }

-- The Watch method's input and output types, from a pool of its own.
local watch_method
local function method()
  if watch_method == nil then
    local pool = schema.pool()
    assert(schema.load_builtin(pool, "grpc/health/v1/health.proto"))
    watch_method = pool:service("grpc.health.v1.Health").methods.Watch
  end
  return watch_method
end


local Watch = { __name = "protocall.HealthWatch" }
Watch.__index = Watch

--- watch = M.watch(transport, service): a watch of one backend's health
-- over `transport` (pc.grpc's, one backend) for `service` (a string; ""
-- the server as a whole), started at its first poll. `watch.state` is
-- the last answer (above), `watch.serving` counts the SERVING answers
-- received (each one a connection up and its server answering).
function M.watch(transport, service)
  return setmetatable({ transport = transport, service = service, request = core.encode(method().input,
    { service = service }), state = "connecting", retry_at = 0, serving = 0 }, Watch)
end

-- Whether the backend may take calls.
function Watch:up()
  local s = self.state
  return s == "SERVING" or s == "UNIMPLEMENTED"
end

-- The stream ended or failed with status `code` (a name).
local function ended(self, code)
  self.handle, self.call = nil, nil
  if code == "UNIMPLEMENTED" then
    self.state = "UNIMPLEMENTED"
    return
  end
  if self.answered then
    -- it had answered: start again at once, the last answer standing
    -- until the new stream's first (a server ending each Watch after one
    -- answer keeps its backend SERVING)
    self.backoff, self.retry_at = nil, 0
  else
    self.state = "failed"
    self.backoff = self.backoff and min(self.backoff * 2, MAX_BACKOFF) or FIRST_BACKOFF
    self.retry_at = monotonic() + self.backoff
  end
  self.answered = false
end

-- Takes one Watch response (bytes).
local function answer(self, bytes)
  local ok, r = pcall(core.decode, method().output, bytes, { table = true })
  local status = ok and r and r.status
  if type(status) == "number" then status = STATUS[status] end
  self.state = type(status) == "string" and status or "UNKNOWN"
  self.answered, self.backoff = true, nil
  if self.state == "SERVING" then self.serving = self.serving + 1 end
end

--- watch:poll(): starts the stream when it is due and takes what arrived,
-- without waiting (the channel is pumped by the caller: watch:channel()).
function Watch:poll()
  if self.state == "UNIMPLEMENTED" or self.closed then return end
  if self.handle == nil then
    if monotonic() < self.retry_at then return end
    local ok, h = pcall(self.transport.start_server_stream, self.transport, PATH, self.request, {})
    if not ok then return ended(self, type(h) == "table" and h.code or "INTERNAL") end
    self.handle = h
  end
  if self.call == nil then
    local ok, it, c = self.handle:result()
    if ok == nil then return end
    if ok == false then return ended(self, it.code) end
    self.call = c
    answer(self, it()) -- the first message, already read
  end
  -- a stream that ended OK with no message was released by its iterator
  if self.call.final then return ended(self, "OK") end
  local raw = self.call.call
  while true do
    local m = raw:next()
    if m == false then return end
    if m == nil then
      local code = raw:status().code
      raw:close()
      return ended(self, code)
    end
    answer(self, m)
  end
end

--- watch:channel() -> the channel its stream is on (to pump), or nil.
function Watch:channel()
  if self.handle then return self.transport.channel end
  return nil
end

--- watch:close(): ends the stream (CANCELLED) and stops watching.
function Watch:close()
  self.closed = true
  if self.call then
    self.call:cancel()
  elseif self.handle then
    self.handle:cancel()
  end
  self.handle, self.call = nil, nil
end

return M
