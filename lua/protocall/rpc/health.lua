--- gRPC's health service, grpc.health.v1.Health (grpc/health/v1/health.proto,
-- built in: core/schema/wkt.h), as an ordinary handler table: pc.health()
-- and pc.server's `health` option (rpc/server.lua).
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local sched = require "protocall.sched"

local type, error, pairs, next, setmetatable, getmetatable, tostring = type, error, pairs, next,
  setmetatable, getmetatable, tostring
local floor = math.floor
local Error = errors.Error
local now, wait_signal, fire = sched.now, sched.wait_signal, sched.fire

local M = {}

--- The built-in file and the service's full name.
M.FILE = "grpc/health/v1/health.proto"
M.SERVICE = "grpc.health.v1.Health"
local STATUSES = { UNKNOWN = true, SERVING = true, NOT_SERVING = true }
-- A watcher waits for health:set to wake it, and at most this long (up to
-- the next whole second of the clock, so idle watchers wake in one round):
-- then it looks whether its call is over (the client cancelled it, its
-- deadline passed), which nothing signals.
local WATCH_SLICE = 1

--- WAIT: the key of a handler context's wait(signal, seconds) -> whether it
-- waited, where the placement runs a handler outside the scheduler's tasks
-- (rpc/inproc.lua: a coroutine the caller resumes); without it a watcher
-- waits with sched.wait_signal (pc.listen runs each handler as a task).
M.WAIT = setmetatable({}, { __name = "protocall.health.wait" })
local WAIT = M.WAIT

local Health = { __name = "protocall.Health" }
local methods = {}
Health.__index = methods
local state = setmetatable({}, { __mode = "k" }) -- health -> {statuses = {service -> status}}

--- health = pc.health([{pool = p}]): a handler table for
-- grpc.health.v1.Health ({Check = fn, Watch = fn}, so
-- pc.server{["grpc.health.v1.Health"] = health} serves it; pc.server's
-- `health = health` option does the same) with the status of each
-- service: "" (the server as a whole) starts "SERVING", every other
-- service is unknown until health:set names it. Check answers a known
-- service's status and fails NOT_FOUND for an unknown one; Watch sends
-- the current status (SERVICE_UNKNOWN for an unknown service) and then
-- every change, until the client cancels: health:set wakes the watchers of
-- that service (under pc.run the other tasks go on meanwhile; an idle
-- watcher costs nothing but a look at its call once a second). `pool`
-- (default the default pool) gets grpc/health/v1/health.proto if it lacks
-- it; raises when that pool is frozen without it.
function M.health(opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #1 to 'health' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k in pairs(opts or {}) do
    if k ~= "pool" then error("pc.health: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local ok, err = schema.load_builtin(opts and opts.pool or schema.default_pool(), M.FILE)
  if not ok then error("pc.health: " .. err, 2) end
  return M.new()
end

-- The seconds a watcher with context `ctx` waits at most: until the next
-- whole second, or just past its deadline when that comes first.
local function slice(ctx)
  local t = now()
  local s = floor(t) + WATCH_SLICE - t
  local d = ctx.deadline
  if d ~= nil and d - t + 0.001 < s then
    s = d - t + 0.001
    if s < 0.001 then s = 0.001 end
  end
  return s
end

--- health = new(): a pc.health() object (its file already loaded).
function M.new()
  -- statuses: service -> status; signals: service -> the scheduler signal
  -- its watchers wait on (sched.wait_signal), dropped when none waits.
  local st = { statuses = { [""] = "SERVING" }, signals = {} }
  local h = {}

  function h.Check(request)
    local s = st.statuses[request.service]
    if s == nil then
      error(Error { code = "NOT_FOUND", message = "unknown service '" .. request.service .. "'" }, 0)
    end
    return { status = s }
  end

  function h.Watch(request, ctx)
    local service, sent = request.service, nil
    while true do
      local s = st.statuses[service] or "SERVICE_UNKNOWN"
      if s ~= sent then
        ctx.send { status = s }
        sent = s
      end
      if ctx.cancelled and ctx:cancelled() then return nil end
      local sig = st.signals[service]
      if not sig then
        sig = {}
        st.signals[service] = sig
      end
      local seconds = slice(ctx)
      local wait = ctx[WAIT] or wait_signal
      if not wait(sig, seconds) then sched.sleep(seconds) end -- outside a task nothing can set it
      if next(sig) == nil and st.signals[service] == sig then st.signals[service] = nil end
    end
  end

  state[h] = st
  return setmetatable(h, Health)
end

--- health:set(service, status): sets the status of `service` (a full
-- service name, or "" for the server as a whole) to "SERVING",
-- "NOT_SERVING" or "UNKNOWN"; nil forgets the service (Check then fails
-- NOT_FOUND, Watch sends SERVICE_UNKNOWN). Watchers of it see the change.
function methods:set(service, status)
  local st = state[self]
  if not st then error("bad argument #1 to 'set' (protocall.Health expected)", 2) end
  if type(service) ~= "string" then
    error("bad argument #1 to 'set' (service name expected, got " .. type(service) .. ")", 2)
  end
  if status ~= nil and not STATUSES[status] then
    error("bad argument #2 to 'set' (\"SERVING\", \"NOT_SERVING\", \"UNKNOWN\" or nil expected, got "
      .. (type(status) == "string" and "\"" .. status .. "\"" or type(status)) .. ")", 2)
  end
  st.statuses[service] = status
  local sig = st.signals[service]
  if sig then fire(sig) end
end

--- status | nil = health:get(service): the status set for `service`.
function methods:get(service)
  local st = state[self]
  if not st then error("bad argument #1 to 'get' (protocall.Health expected)", 2) end
  return st.statuses[service]
end

--- ok = is_health(v): whether `v` is a pc.health() object.
function M.is_health(v)
  return getmetatable(v) == Health
end

return M
