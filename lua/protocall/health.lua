--- gRPC's health service, grpc.health.v1.Health (grpc/health/v1/health.proto,
-- built in: core/schema/wkt.c), as an ordinary handler table (doc/guide.md "Health
-- and reflection"): pc.health() and pc.server's `health` option.
local M = {}

local type, error, pairs, setmetatable, getmetatable, tostring = type, error, pairs, setmetatable,
  getmetatable, tostring

local HEALTH_FILE = "grpc/health/v1/health.proto"
local STATUSES = { UNKNOWN = true, SERVING = true, NOT_SERVING = true }
local WATCH_POLL = 0.01 -- seconds between two looks at a watched status

function M.install(pc, core)
  local Health = { __name = "protocall.Health" }
  local methods = {}
  Health.__index = methods
  local state = setmetatable({}, { __mode = "k" }) -- health -> {statuses = {service -> status}}

  --- true | nil, err = pc._load_builtin(pool, name): adds the built-in
  -- file `name` (core/schema/wkt.c) to `pool` unless it is there; nil and
  -- what is wrong when the pool is frozen without it.
  function pc._load_builtin(pool, name)
    if pool:file(name) then return true end
    local ok, err = core.load_proto(pool, name, nil, {})
    if not ok then return nil, "cannot add the built-in " .. name .. " to the pool (" .. tostring(err) .. ")" end
    return true
  end

  --- health = pc.health([{pool = p}]): a handler table for
  -- grpc.health.v1.Health ({Check = fn, Watch = fn}, so
  -- pc.server{["grpc.health.v1.Health"] = health} serves it; pc.server's
  -- `health = health` option does the same) with the status of each
  -- service: "" (the server as a whole) starts "SERVING", every other
  -- service is unknown until health:set names it. Check answers a known
  -- service's status and fails NOT_FOUND for an unknown one; Watch sends
  -- the current status (SERVICE_UNKNOWN for an unknown service) and then
  -- every change, until the client cancels (it looks every 10 ms, sleeping
  -- with ctx.sleep or pc.sleep, so under pc.run other tasks go on meanwhile). `pool`
  -- (default the default pool) gets grpc/health/v1/health.proto if it lacks
  -- it; raises when that pool is frozen without it.
  function pc.health(opts)
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #1 to 'health' (table expected, got " .. type(opts) .. ")", 2)
    end
    for k in pairs(opts or {}) do
      if k ~= "pool" then error("pc.health: unknown option '" .. tostring(k) .. "'", 2) end
    end
    local ok, err = pc._load_builtin(opts and opts.pool or pc._default_pool, HEALTH_FILE)
    if not ok then error("pc.health: " .. err, 2) end
    local st = { statuses = { [""] = "SERVING" } }
    local h = {}

    function h.Check(request)
      local s = st.statuses[request.service]
      if s == nil then
        error(pc.Error { code = "NOT_FOUND", message = "unknown service '" .. request.service .. "'" }, 0)
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
        local sleep = ctx.sleep or pc.sleep
        sleep(WATCH_POLL)
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
  end

  --- status | nil = health:get(service): the status set for `service`.
  function methods:get(service)
    local st = state[self]
    if not st then error("bad argument #1 to 'get' (protocall.Health expected)", 2) end
    return st.statuses[service]
  end

  --- pc._is_health(v): whether `v` is a pc.health() object.
  function pc._is_health(v)
    return getmetatable(v) == Health
  end
end

return M
