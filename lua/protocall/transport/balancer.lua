--- Several backends behind one pc.grpc target: one transport per backend
-- (transport/grpc.lua, one connection each) and a policy choosing one per
-- call.
--
-- `pick_first` sends every call to the first backend in the list that is
-- not marked failed; `round_robin` takes the next one each call, skipping
-- failed ones. A backend is marked failed when a call on it ends
-- UNAVAILABLE while it has no connection (the connection could not be made
-- or was lost; an UNAVAILABLE the server sent on a live connection marks
-- nothing), and skipped until its backoff passes: 1 s, doubling on each
-- failure to 30 s, reset by a call that succeeds. When every backend is
-- failed, a dns:/// target is resolved again (new addresses join, gone ones
-- leave) and the call goes to the backend whose backoff ends first. The
-- attempts of one hedged call go to backends none of its earlier attempts
-- used while there are such, so a retry after UNAVAILABLE (the failed
-- backend now skipped) and a hedge both land on another backend.
local core = require "protocall.core"

local setmetatable, pcall, error, pairs, ipairs, type, tostring =
  setmetatable, pcall, error, pairs, ipairs, type, tostring
local min = math.min
local monotonic = core.monotonic

local M = {}

local FIRST_BACKOFF, MAX_BACKOFF = 1, 30


local Balanced = { __name = "protocall.BalancedTransport" }
Balanced.__index = Balanced

-- The backend for the next call: healthy and not in `tried` (a hedged
-- call's backends so far) when one is, else healthy, else the one whose
-- backoff ends first (after resolving a dns:/// name again).
local function healthy(self, tried)
  local bs = self.members
  local n = #bs
  local now = monotonic()
  local first = self.policy == "round_robin" and self.next or 1
  local fallback
  for k = 0, n - 1 do
    local i = (first - 1 + k) % n + 1
    local b = bs[i]
    if b.down_until == nil or b.down_until <= now then
      if not (tried and tried[b]) then
        if self.policy == "round_robin" then self.next = i % n + 1 end
        return b
      end
      fallback = fallback or b
    end
  end
  return fallback
end

local function pick(self, tried)
  local b = healthy(self, tried)
  if b then return b end
  if self.resolve then
    self:refresh()
    b = healthy(self, tried)
    if b then return b end
  end
  local bs = self.members
  local best = bs[1]
  for i = 2, #bs do
    if bs[i].down_until < best.down_until then best = bs[i] end
  end
  return best
end

-- A call on backend `b` ended: `err` nil for success.
local function report(b, err)
  if err == nil then
    b.down_until, b.backoff = nil, nil
  elseif type(err) == "table" and err.code == "UNAVAILABLE" and not b.transport.channel:connected() then
    b.backoff = b.backoff and min(b.backoff * 2, MAX_BACKOFF) or FIRST_BACKOFF
    b.down_until = monotonic() + b.backoff
  end
end

local function backend(make, where)
  return { transport = make(where), address = where.host .. ":" .. where.port }
end

--- transport = new(places, make, policy, resolve, target): pc.grpc's
-- several backends. `places` lists {host=, port=,
-- tls=}; make(place) -> a one-backend transport; policy "pick_first" or
-- "round_robin"; resolve() -> places again (dns:/// targets) or nil.
-- The transport has pc.grpc's methods and also
-- transport:set_load_balancing(policy) and transport:backends() ->
-- {{address=, failed=boolean}, ...}.
function M.new(places, make, policy, resolve, target)
  local bs = {}
  for i, where in ipairs(places) do bs[i] = backend(make, where) end
  return setmetatable({ members = bs, make = make, policy = policy, next = 1, resolve = resolve,
    target = target }, Balanced)
end

--- transport:refresh(): resolves a dns:/// target again; backends whose
-- address is gone are dropped (their calls go on), new ones added.
function Balanced:refresh()
  local places = self.resolve and self.resolve()
  if not places then return end
  local by, bs = {}, {}
  for _, b in ipairs(self.members) do by[b.address] = b end
  for _, where in ipairs(places) do
    local key = where.host .. ":" .. where.port
    bs[#bs + 1] = by[key] or backend(self.make, where)
    by[key] = nil
  end
  for _, gone in pairs(by) do gone.transport:close() end
  self.members = bs
  if self.next > #bs then self.next = 1 end
end

--- transport:set_load_balancing("pick_first" | "round_robin"): the
-- policy of calls from now on (pc.client sets its service config's
-- loadBalancingConfig this way). Raises on another name.
function Balanced:set_load_balancing(name)
  if name ~= "pick_first" and name ~= "round_robin" then
    error("set_load_balancing: \"pick_first\" or \"round_robin\" expected, got " .. tostring(name), 2)
  end
  self.policy = name
end

--- transport:backends() -> {{address = "host:port", failed = boolean}, ...}
-- in the list's order.
function Balanced:backends()
  local out, now = {}, monotonic()
  for i, b in ipairs(self.members) do
    out[i] = { address = b.address, failed = b.down_until ~= nil and b.down_until > now }
  end
  return out
end

local function rethrow(b, err)
  report(b, err)
  error(err, 0)
end

-- Raises as pc.grpc's transport does for a call on a closed transport.
local function check_open(self, name, level)
  if self.closed then error("calling '" .. name .. "' on bad self (transport is closed)", level + 1) end
end

--- As pc.grpc's transport:unary, on the backend the policy picks.
function Balanced:unary(path, request, settings)
  check_open(self, "unary", 2)
  local b = pick(self, settings and settings.tried)
  local ok, res, meta = pcall(b.transport.unary, b.transport, path, request, settings)
  if not ok then rethrow(b, res) end
  report(b, nil)
  return res, meta
end

--- As pc.grpc's transport:server_stream, on the backend the policy picks.
function Balanced:server_stream(path, request, settings)
  check_open(self, "server_stream", 2)
  local b = pick(self, settings and settings.tried)
  local ok, iter, state, ctl, call = pcall(b.transport.server_stream, b.transport, path, request, settings)
  if not ok then rethrow(b, iter) end
  return function()
    local okn, msg = pcall(iter, state, ctl)
    if not okn then rethrow(b, msg) end
    if msg == nil then report(b, nil) end
    return msg
  end, nil, nil, call
end

--- As pc.grpc's transport:stream (client streaming and bidirectional),
-- on the backend the policy picks.
function Balanced:stream(path, settings)
  check_open(self, "stream", 2)
  local b = pick(self, settings and settings.tried)
  return b.transport:stream(path, settings)
end

-- A started call on backend `b`, reporting its outcome; `tried` records b.
local function started(self, name, path, request, settings)
  check_open(self, name, 3)
  local tried = settings and settings.tried
  local b = pick(self, tried)
  if tried then tried[b] = true end
  local h = b.transport[name](b.transport, path, request, settings)
  local result = h.result
  h.result = function(hh)
    local ok, v, call = result(hh)
    if ok == false then report(b, v) elseif ok then report(b, nil) end
    return ok, v, call
  end
  return h
end

--- As pc.grpc's transport:start_unary; settings.tried (a table) keeps
-- the backends a hedged call used, so its next attempt goes elsewhere.
function Balanced:start_unary(path, request, settings)
  local h = started(self, "start_unary", path, request, settings)
  return h -- not a tail call: misuse raises at the caller's line
end

--- As pc.grpc's transport:start_server_stream (settings.tried as start_unary).
function Balanced:start_server_stream(path, request, settings)
  local h = started(self, "start_server_stream", path, request, settings)
  return h
end

--- As pc.grpc's transport:wait, over calls on any of the backends.
function Balanced:wait(handles, seconds)
  local t = self.members[1].transport
  return t:wait(handles, seconds)
end

--- Closes every backend's connection.
function Balanced:close()
  self.closed = true
  for _, b in ipairs(self.members) do b.transport:close() end
end

return M
