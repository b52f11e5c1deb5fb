-- The few ngx fields protocall.resty reads, as a stub, and a loader of a
-- protocall.resty module under it, for specs that test the OpenResty
-- modules without nginx (resty_grpc_spec, otlp_exporter_spec).
local M = {}

--- stub = M.stub(fields): the stub ngx table, `fields` (a table) set over
-- its defaults (get_phase, now, log, var, ...).
function M.stub(fields)
  local stub = {
    socket = { tcp = function() end }, sleep = function() end, now = function() return 1.7e9 end,
    update_time = function() end, get_phase = function() return "content" end,
    timer = { at = function() return true end, every = function() return true end },
    thread = { spawn = function() end, kill = function() end },
    worker = { exiting = function() return false end, pid = function() return 1 end, id = function() return 0 end },
    log = function() end, WARN = 5, ERR = 4, var = {}, config = { subsystem = "http" },
  }
  for k, v in pairs(fields or {}) do stub[k] = v end
  return stub
end

--- mod = M.load(name, stub): requires module `name` with `stub` as the
-- global ngx (and a stub ngx.semaphore: count 0, post and wait do
-- nothing); restores the global ngx and
-- package.loaded afterwards, so the modules loaded under the stub are
-- forgotten. Raises what the require raised.
function M.load(name, stub)
  local before = {}
  for n in pairs(package.loaded) do before[n] = true end
  local saved_preload = package.preload["ngx.semaphore"]
  package.preload["ngx.semaphore"] = function()
    local sem = { count = function() return 0 end, post = function() end, wait = function() return true end }
    return { new = function() return setmetatable({}, { __index = sem }) end }
  end
  local saved_ngx = rawget(_G, "ngx")
  rawset(_G, "ngx", stub)
  local ok, mod = pcall(require, name)
  rawset(_G, "ngx", saved_ngx)
  for n in pairs(package.loaded) do
    if not before[n] then package.loaded[n] = nil end
  end
  package.preload["ngx.semaphore"] = saved_preload
  assert(ok, mod)
  return mod
end

return M
