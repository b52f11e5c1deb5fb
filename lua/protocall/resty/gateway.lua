--- HTTP/JSON transcoding inside nginx (`require "protocall.resty.gateway"`):
-- a content handler that answers a REST request by its google.api.http
-- rule with a gRPC call over the worker's multiplexed connection to the
-- upstream (protocall.resty: cosockets, nothing blocks), through
-- pc.transcoder (lua/protocall/http/). Rules and schemas are set per
-- route name and replaced at run time without a reload (doc/gateway.md):
--
--   init_by_lua_block {
--     require "protocall" -- first: it registers its built-in Lua files, this module's among them
--     gw = require "protocall.resty.gateway"
--     assert(gw.configure("library", { protos = { ["library.proto"] = TEXT },
--                                     upstream = "127.0.0.1:50051" })) }
--   location /v1/ { content_by_lua_block { gw.handle("library") } }
--
-- A route's configuration is compiled into a version (a pool, a
-- transcoder, a transport) by `configure`, before anything changes; the
-- route then points at the new version by one assignment. A request takes
-- the version current when it starts and uses only it, so a swap never
-- mixes two versions in one answer and calls in flight end on theirs. The
-- versions are the worker's own (each nginx worker is a Lua state); a
-- route with `reflection` fetches its schema from the upstream's
-- reflection service in a timer and refreshes it (`configure`);
-- `publish` puts a configuration in an ngx.shared dict so every worker
-- compiles it (see `publish` and `handle`'s `shared` option).
local ngx = rawget(_G, "ngx")
local pc = require "protocall"
local resty = require "protocall.resty"
local web = require "protocall.http.web"
local core = require "protocall.core"
local reflection = require "protocall.rpc.reflection"
local ruleless_types = require("protocall.validate").ruleless_types
local CHECKED, seconds_problem = require("protocall.internal").CHECKED, require("protocall.internal").seconds_problem

local type, pairs, ipairs, tostring, tonumber, pcall, error, setmetatable =
  type, pairs, ipairs, tostring, tonumber, pcall, error, setmetatable
local concat, sort, format = table.concat, table.sort, string.format
local min, huge = math.min, math.huge
local web_classify, ACCEPT_POST = core.web_classify, core.web_accept_post
local ACCEPT_POST_STREAM = (ACCEPT_POST:gsub(", application/proto, application/json$", "")) -- (rpc/rest.lua's)
local upstream_failure, gateway_words = web.upstream_failure, web.gateway_words

local M = {}

-- route name -> the current version (this worker's)
local current = {}
-- route name -> versions made so far (version numbers count per route)
local counts = {}
-- upstream target -> resty.grpc transport, shared by the versions naming
-- it; weak, so a transport no version holds is collected (and its
-- connection ends, as resty.grpc's do)
local transports = setmetatable({}, { __mode = "v" })

-- Options of `configure` that are pc.transcoder's.
local TRANSCODER = {
  http = true, services = true, unbound = true, headers = true, ignore_unknown_query = true,
  ignore_unknown_fields = true, max_query_bytes = true, max_query_params = true, json = true,
  max_depth = true, max_body_bytes = true, validate = true,
}
local OWN = { protos = true, descriptor_set = true, upstream = true, grpc = true, transport = true,
  timeout = true, prefix = true, version_header = true, web = true, reflection = true }

-- The imports a .proto text names (comments dropped first).
local function imports_of(text)
  text = text:gsub("/%*.-%*/", " "):gsub("//[^\n]*", "")
  local out = {}
  for name in text:gmatch('%f[%w_]import%s+[%a]*%s*"([^"]+)"') do out[#out + 1] = name end
  return out
end

-- Loads the .proto texts of `protos` (name -> text) into `pool`, each
-- after the files of the table it imports (an import outside the table
-- must be built in: google/protobuf/*, google/api/*, google/rpc/*).
local function load_protos(pool, protos)
  local state = {} -- name -> "loading" | "done"
  local function load_one(name, chain)
    if state[name] == "done" then return true end
    if state[name] == "loading" then
      return nil, "protos: import cycle: " .. concat(chain, " -> ") .. " -> " .. name
    end
    state[name] = "loading"
    chain[#chain + 1] = name
    local text = protos[name]
    for _, dep in ipairs(imports_of(text)) do
      if protos[dep] ~= nil then
        local ok, err = load_one(dep, chain)
        if not ok then return nil, err end
      end
    end
    chain[#chain] = nil
    local ok, err = pool:load(text, { name = name })
    if not ok then return nil, "protos: " .. tostring(err) end
    state[name] = "done"
    return true
  end
  local names = {}
  for name, text in pairs(protos) do
    if type(name) ~= "string" or type(text) ~= "string" then
      return nil, "protos: a table of file name -> .proto text expected"
    end
    names[#names + 1] = name
  end
  sort(names) -- the same files load in the same order in every worker
  for _, name in ipairs(names) do
    local ok, err = load_one(name, {})
    if not ok then return nil, err end
  end
  return true
end

-- A resty.grpc transport to `upstream`, shared with the versions already
-- using it when `grpc` options are not given.
local function transport_of(upstream, grpc)
  if grpc == nil and transports[upstream] then return transports[upstream] end
  local ok, t = pcall(resty.grpc, pc, upstream, grpc)
  if not ok then return nil, "upstream '" .. upstream .. "': " .. tostring(t) end
  if grpc == nil then transports[upstream] = t end
  return t
end

-- The version of the configuration `cfg`, or nil and why. `reflected`:
-- {pool =, services =, transport =} fetched from the upstream's
-- reflection (cfg.reflection), the schema instead of protos and
-- descriptor_set.
local function compile(name, cfg, reflected)
  if type(cfg) ~= "table" then return nil, "configuration table expected, got " .. type(cfg) end
  for k in pairs(cfg) do
    if not TRANSCODER[k] and not OWN[k] then return nil, "unknown option '" .. tostring(k) .. "'" end
  end
  if cfg.reflection ~= nil and not reflected then
    return nil, "reflection: configure's option (each worker fetches its own schema), not publish's"
  end
  if reflected and (cfg.protos ~= nil or cfg.descriptor_set ~= nil) then
    return nil, "reflection: not with 'protos' or 'descriptor_set'"
  end
  if not reflected and cfg.protos == nil and cfg.descriptor_set == nil then
    return nil, "'protos', 'descriptor_set' or 'reflection' expected"
  end
  local pool = reflected and reflected.pool or pc.pool()
  if cfg.descriptor_set ~= nil then
    if type(cfg.descriptor_set) ~= "string" then return nil, "descriptor_set: bytes expected" end
    local ok, err = pool:load_descriptor_set(cfg.descriptor_set)
    if not ok then return nil, "descriptor_set: " .. tostring(err) end
  end
  if cfg.protos ~= nil then
    if type(cfg.protos) ~= "table" then return nil, "protos: a table of file name -> .proto text expected" end
    local ok, err = load_protos(pool, cfg.protos)
    if not ok then return nil, err end
  end
  local topts = {}
  for k in pairs(TRANSCODER) do topts[k] = cfg[k] end
  local services = cfg.services
  if reflected and services == nil then
    services = reflected.services
    topts.services = services
  end
  local ok, tc = pcall(pc.transcoder, pool, topts)
  if not ok then return nil, (tostring(tc):gsub("^bad argument #2 to 'transcoder' %((.*)%)$", "%1")) end
  local timeout = cfg.timeout
  local bad = timeout ~= nil and seconds_problem("timeout", timeout)
  if bad then return nil, bad end
  if cfg.grpc ~= nil and type(cfg.grpc) ~= "table" then
    return nil, "grpc: table of resty.grpc options expected, got " .. type(cfg.grpc)
  end
  local transport = reflected and reflected.transport or cfg.transport
  if transport ~= nil and type(transport) ~= "table" then
    return nil, "transport: a transport expected, got " .. type(transport)
  end
  if transport == nil then
    if type(cfg.upstream) ~= "string" then return nil, "'upstream' (\"host:port\") or 'transport' expected" end
    local err
    transport, err = transport_of(cfg.upstream, cfg.grpc)
    if not transport then return nil, err end
  end
  local vh = cfg.version_header
  if vh ~= nil and (type(vh) ~= "string" or not vh:find("^[%w-]+$")) then
    return nil, "version_header: a header name expected"
  end
  if cfg.prefix ~= nil and (type(cfg.prefix) ~= "string" or cfg.prefix:sub(1, 1) ~= "/") then
    return nil, "prefix: a path starting with '/' expected"
  end
  if cfg.web ~= nil and type(cfg.web) ~= "boolean" then return nil, "web: boolean expected, got " .. type(cfg.web) end
  local n = (counts[name] or 0) + 1
  counts[name] = n
  return { route = name, version = n, pool = pool, tc = tc, transport = transport, timeout = cfg.timeout,
    prefix = cfg.prefix, version_header = cfg.version_header, max_body_bytes = cfg.max_body_bytes or 4194304,
    web = cfg.web and web.methods(pool, services) or nil, validate = cfg.validate and true or nil }
end

---------------------------------------------------------------------------
-- Schemas from the upstream's reflection (cfg.reflection): fetched by an
-- ngx.timer of each worker, then again every `refresh` seconds

-- route name -> {cfg =, refresh =, timeout =, transport =, started =,
-- err =}: the reflecting configuration of the route (a later `configure`
-- replaces it, and the timers of the old one stop)
local reflecting = {}

-- The words of a failure (a pc.Error or anything else).
local function reason(e)
  if type(e) == "table" and e.code then return tostring(e.code) .. ": " .. tostring(e.message) end
  return tostring(e)
end

-- The pool and service names the upstream's reflection answers: the
-- route's `services`, or every service it lists but grpc.reflection.*.
-- Raises the failure.
local function reflect(state)
  local r = reflection.client(state.transport, { timeout = state.timeout })
  local ok, names = pcall(function()
    local out = {}
    for _, s in ipairs(state.cfg.services or r.services()) do
      if state.cfg.services or not s:find("^grpc%.reflection%.") then
        local ok, err = pcall(r.symbol, s)
        -- (a failure of the gateway's channel whole: upstream_failure tells its client its class)
        if not ok then error(upstream_failure(err) and err or "service " .. s .. ": " .. reason(err), 0) end
        out[#out + 1] = s
      end
    end
    return out
  end)
  r.close()
  if not ok then error(names, 0) end
  if #names == 0 then error("the upstream lists no service but grpc.reflection.*", 0) end
  -- what the schema is made of: the same answer makes the same key
  local files, key = r.files(), { concat(names, "\0") }
  local list = {}
  for name in pairs(files) do list[#list + 1] = name end
  sort(list)
  for _, name in ipairs(list) do key[#key + 1] = #name .. ":" .. name .. #files[name] .. ":" .. files[name] end
  return r.pool, names, concat(key, "\0")
end

-- The timer: fetches the schema, compiles it into a new version (kept
-- current) or logs why not (the current version stays), then comes again
-- after `refresh` seconds (at most 5 while the route has no version).
local function fetch(premature, route, state)
  if premature or reflecting[route] ~= state then return end
  local ok, pool, names, key = pcall(reflect, state)
  local v, err, told
  if ok and state.key == key and current[route] and current[route].reflected == state then
    v = current[route] -- the same schema: the version stays
  elseif ok then
    v, err = compile(route, state.cfg, { pool = pool, services = names, transport = state.transport })
    if v then v.reflected, state.key = state, key end
  else
    err = "reflection: " .. reason(pool)
    told = upstream_failure(pool)
    told = told and "reflection: " .. pool.code .. ": " .. told
  end
  if reflecting[route] ~= state then return end -- configured again meanwhile
  if v then
    current[route] = v
    state.err, state.told = nil, nil
  else
    state.err, state.told = err, told or err
    local old = current[route]
    ngx.log(ngx.ERR, "protocall.resty.gateway: ", route, ": schema from the upstream's reflection not taken, ",
      old and ("version " .. old.version .. " stays: ") or "no version yet: ", err)
  end
  local delay = current[route] and state.refresh or min(state.refresh, 5)
  local okt, terr = ngx.timer.at(delay, fetch, route, state)
  if not okt then
    state.started = false -- the next request starts it again
    ngx.log(ngx.ERR, "protocall.resty.gateway: ", route, ": reflection refresh timer: ", terr)
  end
end

-- Starts the fetching timer of `state` unless it runs (false where
-- ngx.timer cannot be used: init_by_lua*, whose workers start it at
-- their first request of the route).
local function start_fetch(route, state)
  if state.started then return true end
  local ok, started = pcall(ngx.timer.at, 0, fetch, route, state)
  state.started = ok and started and true or false
  return state.started
end

-- Checks a reflecting configuration and sets it up; true or nil and why.
local function configure_reflection(route, cfg)
  for k in pairs(cfg) do
    if not TRANSCODER[k] and not OWN[k] then return nil, "unknown option '" .. tostring(k) .. "'" end
  end
  local opt = cfg.reflection
  if opt ~= true and type(opt) ~= "table" then return nil, "reflection: true or {refresh =, timeout =} expected" end
  opt = opt == true and {} or opt
  for k in pairs(opt) do
    if k ~= "refresh" and k ~= "timeout" then return nil, "reflection: unknown option '" .. tostring(k) .. "'" end
  end
  local function seconds(x, what, default)
    if x == nil then return default end
    local bad = seconds_problem("reflection." .. what, x)
    if bad then return nil, bad end
    return x
  end
  local refresh, err = seconds(opt.refresh, "refresh", 60)
  if not refresh then return nil, err end
  local timeout
  timeout, err = seconds(opt.timeout, "timeout", 10)
  if not timeout then return nil, err end
  if cfg.protos ~= nil or cfg.descriptor_set ~= nil then
    return nil, "reflection: not with 'protos' or 'descriptor_set'"
  end
  if cfg.services ~= nil then
    if type(cfg.services) ~= "table" then return nil, "services: a list of service names expected" end
    for _, s in ipairs(cfg.services) do
      if type(s) ~= "string" then return nil, "services: a list of service names expected" end
    end
  end
  local transport = cfg.transport
  if transport ~= nil and type(transport) ~= "table" then
    return nil, "transport: a transport expected, got " .. type(transport)
  end
  if cfg.grpc ~= nil and type(cfg.grpc) ~= "table" then
    return nil, "grpc: table of resty.grpc options expected, got " .. type(cfg.grpc)
  end
  if transport == nil then
    if type(cfg.upstream) ~= "string" then return nil, "'upstream' (\"host:port\") or 'transport' expected" end
    transport, err = transport_of(cfg.upstream, cfg.grpc)
    if not transport then return nil, err end
  end
  local state = { cfg = cfg, refresh = refresh, timeout = timeout, transport = transport, started = false }
  reflecting[route] = state
  start_fetch(route, state)
  return true
end

--- version | true | nil, err = gateway.configure(route, cfg): compiles `cfg`
-- into a new version of the route named `route` (any string; locations
-- name it in `gateway.handle`) and makes it current in this worker at
-- once, by one assignment: requests that started before keep the version
-- they took, later ones get the new one. On failure (nil and why, naming
-- the option, the file or the rule: "protos: library.proto:3:1: ...",
-- "gw.Library.GetBook (library.proto:12:7): rule GET /v1/{nope}: ...") the current version
-- stays. Returns the version number (1, 2, ... per route and worker).
-- Run it in init_by_lua* (the master: every worker inherits the version),
-- init_worker_by_lua*, an ngx.timer or an admin location; compiling takes
-- the worker for as long as loading the schemas does (milliseconds for a
-- few files), never a request's time beyond that.
-- cfg: `protos` (file name -> .proto text, loaded imports first; imports
-- outside the table must be built in) and/or `descriptor_set` (the bytes
-- of a FileDescriptorSet, `protoc -o --include_imports`); `upstream`
-- ("host:port", a resty.grpc transport shared by the routes and versions
-- naming the same target, made with `grpc` options if given, then not
-- shared) or `transport` (a transport of your own); `timeout` (seconds,
-- the deadline of each call; a shorter Grpc-Timeout header wins);
-- `prefix` (a path prefix removed before matching, "/api" for rules
-- written "/v1/..." served under location /api/); `version_header` (a
-- response header naming the version that answered, e.g.
-- "X-Gateway-Version"); and pc.transcoder's
-- options: `http` (rules apart from the schema, a table or JSON text),
-- `services`, `unbound`, `headers`, `ignore_unknown_query`,
-- `ignore_unknown_fields`, `max_query_bytes`, `max_query_params`,
-- `max_body_bytes` (4 MiB unless set), `max_depth`, `json`, `validate`
-- (true: a request breaking its type's protovalidate rules is answered
-- 400 with a google.rpc.BadRequest detail, never reaching the upstream;
-- with `web`, a gRPC-Web or Connect one INVALID_ARGUMENT with it);
-- `web` (true: `handle` also forwards gRPC-Web and Connect requests for
-- the methods of the route's services, doc/gateway.md).
-- `reflection` (true or {refresh = seconds, 60 unless set; timeout =
-- seconds, each fetch's deadline, 10 unless set}), instead of `protos` and
-- `descriptor_set`: the schema comes from the upstream's server
-- reflection (protocall.rpc.reflection over the route's transport),
-- fetched by an ngx.timer of this worker (at once, or at the route's first
-- request when configured in init_by_lua*, where timers cannot start),
-- then every `refresh` seconds, each fetch compiled into a new version as
-- above unless the upstream answered the same files and services; the
-- services are `services`, else every one the upstream lists but
-- grpc.reflection.*. `configure` then returns true at once (the
-- options the schema decides are checked when it comes); until the first
-- schema, `handle` answers 503 UNAVAILABLE naming why; a fetch or compile
-- that fails keeps the current version, logs why (ngx.ERR) and shows it
-- in version()'s info.error. Not for `publish`. doc/gateway.md, "Schemas
-- from the upstream's reflection".
-- An `upstream` host name is resolved by nginx's `resolver` directive
-- (configure it; protocall.resty's `grpc`).
function M.configure(route, cfg)
  if type(route) ~= "string" then
    error("bad argument #1 to 'configure' (string expected, got " .. type(route) .. ")", 2)
  end
  if type(cfg) == "table" and cfg.reflection ~= nil then
    local ok, err = configure_reflection(route, cfg)
    if not ok then return nil, route .. ": " .. err end
    return true
  end
  local v, err = compile(route, cfg)
  if not v then return nil, route .. ": " .. err end
  current[route] = v
  reflecting[route] = nil -- a reflecting configuration before stops fetching
  return v.version
end

--- version, info = gateway.version(route): the number of the route's
-- current version in this worker (nil when it has none) and {routes =
-- tc:routes(), pool = ..., shared = the shared dict's number it came
-- from, if any, error = why the last fetch of a `reflection` route's
-- schema failed or did not compile, nil after a success}; for a
-- `reflection` route with no version yet: nil, {error = ...}.
function M.version(route)
  local v = current[route]
  local state = reflecting[route]
  if not v then return nil, state and { error = state.err } or nil end
  return v.version, { routes = v.tc:routes(), pool = v.pool, shared = v.shared, error = state and state.err }
end

---------------------------------------------------------------------------
-- Sharing versions between workers: an ngx.shared dict holds each route's
-- configuration (serialized) under "<route>" and its number under
-- "<route>#", which `handle(route, {shared = dict})` compares with its own

-- A configuration as a string: strings, numbers, booleans and tables of
-- them (no cycles, no functions: a `transport` cannot be shared).
-- `path` names `v` in an error ("grpc.ssl"); `open`: the tables being
-- written (a cycle cannot be put).
local function serialize(v, out, path, open)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = "s" .. #v .. ":" .. v
  elseif t == "number" then
    if v ~= v or v == huge or v == -huge then
      return nil, path .. ": a number that is not finite cannot be put in a shared dict"
    end
    out[#out + 1] = "n" .. format("%.17g", v) .. ";"
  elseif t == "boolean" then
    out[#out + 1] = v and "T" or "F"
  elseif t == "table" then
    if open[v] then return nil, path .. ": a table holding itself cannot be put in a shared dict" end
    open[v] = true
    out[#out + 1] = "{"
    for k, x in pairs(v) do
      local at = type(k) == "string" and (path == "" and k or path .. "." .. k) or path .. "[" .. tostring(k) .. "]"
      local ok, err = serialize(k, out, at, open)
      if not ok then return nil, err end
      ok, err = serialize(x, out, at, open)
      if not ok then return nil, err end
    end
    out[#out + 1] = "}"
    open[v] = nil
  else
    return nil, (path == "" and "" or path .. ": ") .. "a " .. t .. " cannot be put in a shared dict"
  end
  return true
end

local function deserialize(s, i)
  local tag = s:sub(i, i)
  if tag == "s" then
    local colon = s:find(":", i, true)
    local n = tonumber(s:sub(i + 1, colon - 1))
    return s:sub(colon + 1, colon + n), colon + n + 1
  elseif tag == "n" then
    local semi = s:find(";", i, true)
    return tonumber(s:sub(i + 1, semi - 1)), semi + 1
  elseif tag == "T" or tag == "F" then
    return tag == "T", i + 1
  end
  local t = {}
  i = i + 1
  while s:sub(i, i) ~= "}" do
    local k, x
    k, i = deserialize(s, i)
    x, i = deserialize(s, i)
    t[k] = x
  end
  return t, i + 1
end

--- number | nil, err = gateway.publish(dict, route, cfg): compiles `cfg`
-- here first (as `configure`: nothing changes when it fails) and makes it
-- this worker's version, then stores it in the ngx.shared dict named
-- `dict` (`lua_shared_dict NAME 1m;`) with a new number; every other
-- worker compiles it when one of its `handle(route, {shared = dict})`
-- calls sees the number change (in an ngx.timer: that request and those
-- until it is done are answered by the old version), or at the next look
-- of `gateway.watch`. `cfg` must be plain data (strings, finite numbers,
-- booleans, tables, no cycles, no `transport`: else nil and the path of
-- what cannot be put, "grpc.f: a function ..."); the dict
-- must hold it (its .proto texts or descriptor set and rules). One
-- publisher at a time: two publishing one route at once may leave the
-- older configuration under the newer number. Returns the shared number.
function M.publish(dict, route, cfg)
  local d = ngx.shared[dict]
  if not d then error("bad argument #1 to 'publish' (no lua_shared_dict '" .. tostring(dict) .. "')", 2) end
  if type(route) ~= "string" then
    error("bad argument #2 to 'publish' (string expected, got " .. type(route) .. ")", 2)
  end
  local out = {}
  local ok, err = serialize(cfg, out, "", {})
  if not ok then return nil, route .. ": " .. err end
  local v
  v, err = compile(route, cfg)
  if not v then return nil, route .. ": " .. err end
  -- the number is taken first, the configuration stored, then the number
  -- the workers compare published: a worker seeing it finds that
  -- configuration (or a newer one) stored
  local n
  n, err = d:incr(route .. "#next", 1, 0)
  if n then ok, err = d:set(route, n .. "\n" .. concat(out)) end
  if n and ok then ok, err = d:set(route .. "#", n) end
  if not (n and ok) then return nil, route .. ": shared dict '" .. dict .. "': " .. tostring(err) end
  v.shared = n
  current[route] = v
  reflecting[route] = nil
  return n
end

-- route -> the shared number being compiled or refused in this worker
local pending = {}

-- Compiles the route's shared configuration (in a timer, or for a worker
-- without any version yet in the request) unless it is the current one.
local function adopt(premature, d, dict, route)
  if premature then return end
  local blob = d:get(route)
  if not blob then return end
  local nl = blob:find("\n", 1, true)
  local n = tonumber(blob:sub(1, nl - 1))
  local v = current[route]
  if v and v.shared == n then return end
  local ok, cfg = pcall(deserialize, blob, nl + 1)
  local err
  if ok then v, err = compile(route, cfg) else v, err = nil, "cannot read: " .. tostring(cfg) end
  if not v then
    ngx.log(ngx.ERR, "protocall.resty.gateway: ", route, ": shared version ", n, " of dict '", dict,
      "' refused, the current version stays: ", err)
    pending[route] = n -- not tried again until the number changes
    return
  end
  v.shared = n
  if not current[route] or not current[route].shared or current[route].shared < n then current[route] = v end
  pending[route] = nil
end

-- The route's version, after a look at the shared dict when given.
local function version_of(route, dict)
  local v = current[route]
  if not dict then return v end
  local d = ngx.shared[dict]
  if not d then error("protocall.resty.gateway: handle: no lua_shared_dict '" .. tostring(dict) .. "'", 3) end
  local n = d:get(route .. "#")
  if n and (not v or v.shared ~= n) and pending[route] ~= n then
    if not v then
      adopt(false, d, dict, route)
      return current[route]
    end
    pending[route] = n
    if not ngx.timer.at(0, adopt, d, dict, route) then pending[route] = nil end -- the next request tries again
  end
  return v
end

--- true | nil, err = gateway.watch(dict, seconds): every `seconds` (an
-- ngx.timer.every of this worker: call it in init_worker_by_lua*), looks
-- at the numbers of the routes published in the ngx.shared dict `dict`
-- and compiles those that changed, so a worker takes a new version within
-- `seconds` of its publication even before a request asks (without it,
-- the first request that sees the change starts the compilation and is
-- answered by the version it has). nil and ngx.timer.every's error when
-- the timer cannot start.
function M.watch(dict, seconds)
  local d = ngx.shared[dict]
  if not d then error("bad argument #1 to 'watch' (no lua_shared_dict '" .. tostring(dict) .. "')", 2) end
  local bad = seconds_problem("seconds", seconds, nil, false, huge)
  if bad then error("bad argument #2 to 'watch' (" .. bad .. ")", 2) end
  local function tick(premature)
    if premature then return end
    for _, key in ipairs(d:get_keys(0)) do
      local route = key:match("^(.*)#$")
      local n = route and d:get(key)
      local v = route and current[route]
      if n and (not v or v.shared ~= n) and pending[route] ~= n then adopt(false, d, dict, route) end
    end
  end
  return ngx.timer.every(seconds, tick)
end

---------------------------------------------------------------------------
-- The handler

-- The headers of a {name, value} list (a name given twice: a list).
local function put_headers(list)
  local seen = {}
  for _, h in ipairs(list) do
    local k = h[1]
    local prev = seen[k]
    if prev then
      prev[#prev + 1] = h[2]
      ngx.header[k] = prev
    else
      seen[k] = { h[2] }
      ngx.header[k] = h[2]
    end
  end
end

-- Response metadata as headers (a key given twice: a list of values).
local function set_headers(v, md)
  if not md then return end
  put_headers(v.tc:response_headers(md.headers, md.trailers))
end

-- Ends a request whose client went away (resty.cancel_on_abort's
-- callback ran; its call ended CANCELLED): 499, nginx's "client closed
-- request", unless the status went out already (a stream's 200 stays in
-- the log).
local function gone()
  return ngx.exit(ngx.headers_sent and ngx.OK or 499)
end

-- The failure `err` of an upstream call of version `v` as its client is
-- told it: one the gateway's channel gave (no connection took the call,
-- its connection was lost: web.upstream_failure) says its class without
-- the upstream's address, the whole message going to nginx's error log
-- (ERR; a reconnection backoff's advice for pc.grpc's wait_for_ready in
-- the gateway's words, web.gateway_words); any other (a status the upstream sent, the gateway's refusal of
-- bad input) as it is.
local function told(v, err)
  local text = upstream_failure(err)
  if text then
    ngx.log(ngx.ERR, "protocall.resty.gateway: ", v.route, ": upstream call failed: ", err.code, ": ",
      gateway_words(err.message))
    err.message = text
  end
  return err
end

-- Writes the HTTP answer of a failure (a pc.Error or the transport's
-- error object) with its response metadata as headers.
local function answer_error(v, err)
  if resty.aborted() then return gone() end
  if type(err) ~= "table" then err = { code = "INTERNAL", message = tostring(err) } end
  err = told(v, err)
  local status, body, ct, allow = v.tc:error(err)
  set_headers(v, { headers = err.headers, trailers = err.metadata })
  ngx.status = status
  if allow then ngx.header["Allow"] = allow end
  ngx.header["Content-Type"] = ct
  ngx.header["Content-Length"] = #body
  ngx.print(body)
end

-- A failure of the gateway itself, with no version to write it.
local function bare_error(status, code, message)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.print(format('{"code":%d,"message":"%s","details":[]}', code, (message:gsub('[%c"\\]', "?"))))
end

-- A POST to a method's own path with no content type of gRPC, gRPC-Web or
-- Connect (none, or text/plain): 415 with the types taken in Accept-Post,
-- as connect-go and `protocall gateway` (lua/protocall/rpc/rest.lua) answer;
-- a streaming method `m` takes no Connect unary type.
local function unsupported_type(m)
  local body = "content-type must be gRPC's, gRPC-Web's or Connect's (see Accept-Post)\n"
  ngx.status = 415
  ngx.header["Content-Type"] = "text/plain"
  ngx.header["Content-Length"] = #body
  ngx.header["Accept-Post"] = (m.client_streaming or m.server_streaming) and ACCEPT_POST_STREAM or ACCEPT_POST
  ngx.print(body)
end

-- The value of header `name` in `headers` (ngx.req.get_headers(n, true):
-- names as sent) when it came spelt `name` or `lower` alone (the first of
-- a repeated one, as nginx's variables take it), else ngx.var[var]: what
-- the variable says, without its lookup (a few hundred ns) for the
-- spellings clients send.
local function header_of(headers, name, lower, var)
  local a, b = headers[name], headers[lower]
  if (a == nil) ~= (b == nil) then
    local value = a or b
    if type(value) == "table" then value = value[1] end
    return value
  end
  return ngx.var[var]
end

-- The request body, or nil and a pc.Error: refused from Content-Length
-- alone (413, nothing read) when it says more than max_body_bytes. `cl`:
-- the header's value (false: none; nil: read here).
local function read_body(v, cl)
  local limit = v.max_body_bytes
  if cl == nil then cl = ngx.var.http_content_length end
  if cl then
    local n = tonumber(cl)
    if not n then return nil, { code = "INVALID_ARGUMENT", http_status = 400, message = "bad Content-Length" } end
    if n > limit then
      return nil, { code = "RESOURCE_EXHAUSTED", http_status = 413,
        message = format("body of %d bytes (at most %d)", n, limit) }
    end
    if n == 0 then return "" end
  end -- without Content-Length: chunked (HTTP/1.1), or HTTP/2 DATA frames
  ngx.req.read_body()
  local body = ngx.req.get_body_data()
  if body then return body end
  local file = ngx.req.get_body_file()
  if not file then return "" end
  local f = io.open(file, "rb")
  if not f then return nil, { code = "INTERNAL", message = "cannot read the request body's file" } end
  body = f:read(limit + 1)
  f:close()
  if body and #body > limit then -- the size past limit + 1 is not known
    return nil, { code = "RESOURCE_EXHAUSTED", http_status = 413,
      message = format("body of more than %d bytes", limit) }
  end
  return body or ""
end

local function decoded(route, bytes)
  local m, err = pc.decode(route.output, bytes)
  if not m then error({ code = "INTERNAL", message = "response of " .. route.method .. ": " .. tostring(err) }, 0) end
  return m
end

-- The error of an HttpBody answer's content type no header may carry
-- (a control byte but HTAB, RFC 9110's field-value: nginx would send it
-- escaped or as it is; pc.listen's engine refuses it alike), or nil.
local function bad_content_type(route, ct)
  local at = route.response_is_http_body and ct:find("[%z\1-\8\10-\31\127]")
  if at then
    return { code = "INTERNAL", message = format("%s: header 'content-type': value holds control byte 0x%02x",
      route.method, ct:byte(at)) }
  end
end

-- A server stream (or bidirectional) answered message by message: the
-- HTTP status waits for the first message (so a call failing at once
-- gets its mapped status), then each message is flushed as it comes.
local function answer_stream(v, route, nextmsg, metadata)
  local tc = v.tc
  local kind, ct = tc:stream_kind(route, ngx.var.http_accept)
  local ok, first = pcall(nextmsg)
  if not ok then return answer_error(v, first) end
  local first_chunk -- a raw stream's first chunk, made here for its content type
  if kind == "raw" and first then
    -- a stream of google.api.HttpBody: the first message's content type (grpc-gateway's)
    -- (decoded inside the pcall: a first message no HttpBody decodes is
    -- the gateway's INTERNAL answer, not an error out of the handler)
    local okc, chunk, fct = pcall(function() return tc:response(route, decoded(route, first)) end)
    if not okc and type(chunk) == "table" then return answer_error(v, chunk) end
    if okc then first_chunk, ct = chunk, fct or ct end
    local bad = bad_content_type(route, ct)
    if bad then return answer_error(v, bad) end
  end
  set_headers(v, { headers = metadata().headers })
  ngx.status = 200
  ngx.header["Content-Type"] = ct
  local bytes = first
  while bytes do
    local okm, chunk = true, first_chunk
    first_chunk = nil
    if not chunk then
      okm, chunk = pcall(function() return tc:stream_message(route, decoded(route, bytes), kind) end)
    end
    if not okm then
      ngx.print(tc:stream_error(type(chunk) == "table" and chunk or { code = "INTERNAL", message = tostring(chunk) },
        kind))
      ngx.flush(true)
      return
    end
    ngx.print(chunk)
    ngx.flush(true)
    if resty.aborted() then return end -- the client went away: the caller closes (cancels) the stream
    ok, bytes = pcall(nextmsg)
    if not ok then
      if resty.aborted() then return end
      ngx.print(tc:stream_error(type(bytes) == "table" and told(v, bytes) or { code = "INTERNAL",
        message = tostring(bytes) }, kind))
      ngx.flush(true)
      return
    end
  end
end

-- Writes a unary answer's body (status 200, nginx's default) and its
-- metadata as headers. A function of its own: LuaJIT cannot carry the
-- trace through answer_unary's pcall into the code after it (it aborts
-- "return to lower frame"), and a function's entry starts a trace anew.
local function send_unary(v, body, ct, md)
  if md then
    local h, t = md.headers, md.trailers
    if (h and h[1]) or (t and t[1]) then set_headers(v, md) end
  end
  local header = ngx.header
  header["Content-Type"] = ct
  header["Content-Length"] = #body
  ngx.print(body)
end

local function answer_unary(v, route, bytes, md)
  local ok, body, ct = pcall(v.tc.response_bytes, v.tc, route, bytes)
  if ok and not body then ok, body = false, ct end
  if not ok then return answer_error(v, body) end
  local bad = bad_content_type(route, ct)
  if bad then return answer_error(v, bad) end
  return send_unary(v, body, ct, md)
end

-- The settings of a unary call with neither metadata nor a deadline: one
-- table for every such call (the transports only read their settings),
-- CHECKED so that pc.grpc takes it as it is; "present": the answer's
-- metadata only when it carries some (no tables for the usual answer).
local PLAIN = setmetatable({ with_metadata = "present" }, CHECKED)

---------------------------------------------------------------------------
-- gRPC-Web and Connect clients in front of the gRPC upstream (cfg.web)

local function web_failure(v, a, err)
  if resty.aborted() then return gone() end
  local status, headers, body = a:failure(type(err) == "table" and told(v, err) or err)
  ngx.status = status
  put_headers(headers)
  ngx.header["Content-Length"] = #body
  ngx.print(body)
end

-- A call of a streaming method (any shape; the request messages are all
-- in the body): the head waits for the first answer, each message is
-- flushed as it comes, the end carries the status and trailers.
local function web_stream(v, a, m, list, settings)
  local t = v.transport
  local ok, call = pcall(t.stream, t, m.path, settings)
  if not ok then return web_failure(v, a, call) end
  local first
  ok, first = pcall(function()
    for _, bytes in ipairs(list) do call:send(bytes) end
    call:close_send()
    return call:recv()
  end)
  if not ok then
    call:close()
    return web_failure(v, a, first)
  end
  local status, headers = a:head(call:metadata().headers)
  ngx.status = status
  put_headers(headers)
  local bytes = first
  while bytes do
    local okm, chunk = pcall(a.message, a, bytes)
    if not okm then
      call:close()
      ngx.print(a:finish(chunk))
      return
    end
    ngx.print(chunk)
    ngx.flush(true)
    ok, bytes = pcall(call.recv, call)
    if not ok then
      call:close()
      ngx.print(a:finish(type(bytes) == "table" and told(v, bytes) or bytes))
      return
    end
  end
  local trailers = call:metadata().trailers
  call:close()
  ngx.print(a:finish(nil, trailers))
end

-- Whether version `v`'s `validate` reads the requests of method `m` to
-- check them: not those of a type no rule can reach (validate.lua's
-- ruleless_types of the version's pool, taken at its first web request
-- with `validate`), as REST's tc:request_bytes skips them.
local function checks(v, m)
  if not v.validate then return false end
  local set = v.ruleless
  if not set then
    set = ruleless_types(v.pool)
    v.ruleless = set
  end
  return not set[m.input.full_name]
end

-- Answers a gRPC-Web or Connect request for method `m` (nil: the path
-- names no method of the route) over the version's transport.
local function handle_web(v, m, protocol, codec, path)
  local a = web.answer(protocol, codec, m)
  if not m then
    return web_failure(v, a, pc.Error { code = "UNIMPLEMENTED", message = "no method " .. path:sub(1, 200) })
  end
  if protocol == "connect" and (m.client_streaming or m.server_streaming) then
    return web_failure(v, a, pc.Error { code = "UNIMPLEMENTED", message = m.full_name
      .. " is a streaming method: Connect's streaming protocol (application/connect+" .. codec .. ") calls it" })
  end
  local md, timeout = web.metadata(protocol, ngx.req.get_headers(200))
  if not md then return web_failure(v, a, timeout) end
  local body, berr = read_body(v)
  if not body then return web_failure(v, a, berr) end
  local list, err = web.requests(protocol, codec, m, body, ngx.var.http_content_encoding, checks(v, m))
  if not list then return web_failure(v, a, err) end
  local settings = { metadata = md, timeout = timeout }
  if v.timeout then settings.timeout = timeout and min(timeout, v.timeout) or v.timeout end
  resty.cancel_on_abort()
  if m.client_streaming or m.server_streaming then return web_stream(v, a, m, list, settings) end
  local t = v.transport
  settings.with_metadata = true
  local ok, bytes, mdr = pcall(t.unary, t, m.path, list[1], settings)
  if not ok then return web_failure(v, a, bytes) end
  local status, headers, out
  ok, err = pcall(function()
    if protocol == "connect" then
      status, headers, out = a:unary(bytes, mdr.headers, mdr.trailers)
    else
      status, headers = a:head(mdr.headers)
      out = a:message(bytes) .. a:finish(nil, mdr.trailers)
    end
  end)
  if not ok then return web_failure(v, a, err) end
  ngx.status = status
  put_headers(headers)
  ngx.header["Content-Length"] = #out
  ngx.print(out)
end

-- route name -> true once this worker logged that it has no configuration
local unconfigured_said = {}

-- Logs once a worker (nginx's error log, ERR) that `route` has no
-- configuration here, naming the routes this worker has, so a misspelled
-- name is found there: its requests are answered 503, as a route whose
-- publication (`dict`) has not reached this worker yet is.
local function unconfigured(route, dict)
  if unconfigured_said[route] then return end
  unconfigured_said[route] = true
  local known = {}
  for name in pairs(current) do known[#known + 1] = "'" .. name .. "'" end
  for name in pairs(reflecting) do
    if not current[name] then known[#known + 1] = "'" .. name .. "'" end
  end
  sort(known)
  ngx.log(ngx.ERR, "protocall.resty.gateway: handle: no configuration for gateway route '", route, "'",
    dict and " (nor published in lua_shared_dict '" .. dict .. "')" or "",
    "; this worker's routes: ", #known > 0 and concat(known, ", ") or "none",
    " (gateway.configure / gateway.publish name them; logged once a worker)")
end

--- gateway.handle(route [, {shared = dict}]): content_by_lua*'s handler:
-- answers the nginx request by the route's current version (taken once:
-- the whole request uses it). The method and ngx.var.request_uri (less
-- `prefix`) pick the rule (tc:match); headers become metadata (tc:metadata:
-- `Grpc-Metadata-*`, the `headers` allow-list, `Grpc-Timeout`); a body
-- whose Content-Length is over `max_body_bytes` is refused 413 before any
-- of it is read (a chunked body is read, nginx's client_max_body_size
-- bounding it); the body and query become the request (tc:request, or
-- tc:requests for a client stream from NDJSON); the call goes over the
-- version's transport. A unary answer is the JSON body (or response_body,
-- or HttpBody raw) with status 200 and response headers and trailers as
-- `Grpc-Metadata-*` / `Grpc-Trailer-*`; a server stream is NDJSON
-- (`{"result": ...}` lines) or text/event-stream when Accept asks for
-- it, each message flushed as it arrives, a failure after the first
-- message as a last `{"error": ...}` line. A failure before the answer
-- (no rule, bad input, the call's status) is a google.rpc.Status JSON
-- body with the mapped HTTP status (tc:error); a failure of the gateway's
-- channel rather than a status the upstream sent (no connection took the
-- call, its connection was lost) says its class without the upstream's
-- address ("upstream connect error: connection refused",
-- web.upstream_failure), in every protocol and in a stream's last line,
-- the whole message going to nginx's error log (ERR, each request); a route with no version is
-- 503 UNAVAILABLE, and said once a worker in nginx's error log (ERR)
-- with the names of the routes the worker has. With `shared`, the route's number in that ngx.shared
-- dict is read first (one dict get) and a newer configuration compiled
-- in an ngx.timer (`publish`); a worker with no version of the route yet
-- compiles it in that request.
-- With the version's `web`, a request whose Content-Type is gRPC-Web's
-- (application/grpc-web[-text][+proto|+json]) or Connect's
-- (application/connect+proto|json; application/proto or
-- application/json POSTed to a path naming a method of the route) is
-- answered in that protocol (lua/protocall/http/web.lua): its messages
-- forwarded as a gRPC call (as bytes unless the codec is json; with
-- `validate`, each read into its type and checked first, as REST's are,
-- unless no rule can reach the type (its file imports
-- buf/validate/validate.proto neither itself nor through its imports):
-- one breaking its rules fails the call INVALID_ARGUMENT with the
-- google.rpc.BadRequest detail, HTTP 400 for Connect unary, and nothing
-- reaches the upstream; the bytes forwarded stay those sent), its
-- headers as metadata, Grpc-Timeout / Connect-Timeout-Ms (capped by
-- `timeout`) as the deadline; the response headers, messages (each
-- flushed as it comes for a stream), status and trailers (details
-- included) carried back in the protocol's framing: gRPC-Web's trailers
-- message, Connect's error JSON with its HTTP status or end-of-stream
-- message. A path naming no method of the route is UNIMPLEMENTED in the
-- protocol's form (a POST of application/json stays REST's).
-- A client that goes away cancels the upstream call (RST_STREAM CANCEL)
-- and ends the request 499 when nginx watches it (`lua_check_client_abort
-- on` with `lua_need_request_body on`): the handler registers
-- `resty.cancel_on_abort`; a callback registered before it keeps the
-- request's one `ngx.on_abort` (let it call `resty.abort()`).
function M.handle(route, opts)
  local v = version_of(route, opts and opts.shared)
  if not v then
    local state = reflecting[route]
    if state then
      start_fetch(route, state)
      return bare_error(503, 14, "gateway route '" .. route .. "': no schema yet from the upstream's reflection"
        .. (state.told and ": " .. state.told or " (being fetched)"))
    end
    unconfigured(route, opts and opts.shared)
    return bare_error(503, 14, "no configuration for gateway route '" .. route .. "'")
  end
  local tc = v.tc
  if v.version_header then ngx.header[v.version_header] = v.shared or v.version end
  local target = ngx.var.request_uri
  local prefix = v.prefix
  if prefix then
    if target:sub(1, #prefix) ~= prefix then return answer_error(v, { code = "NOT_FOUND", message = "no route" }) end
    target = target:sub(#prefix + 1)
    if target:sub(1, 1) ~= "/" then target = "/" .. target end
  end
  local web_methods = v.web
  if web_methods then
    local protocol, codec = web.classify(ngx.req.get_method(), ngx.var.content_type)
    if protocol then
      local path = target:match("^[^?#]*")
      local m = web_methods[path]
      -- a POST of JSON to a path that names no method is REST's
      if m or protocol ~= "connect" then return handle_web(v, m, protocol, codec, path) end
    end
  end
  local r, bindings, query = tc:match(ngx.req.get_method(), target)
  if not r then
    local named = web_methods and web_methods[target:match("^[^?#]*")]
    if named and ngx.req.get_method() == "POST" and not web_classify("POST", ngx.var.content_type) then
      return unsupported_type(named)
    end
    return answer_error(v, bindings)
  end
  local headers = ngx.req.get_headers(200, true) -- raw: errors name headers as sent
  local md, timeout = tc:metadata(headers)
  if not md then return answer_error(v, timeout) end
  local body, berr = ""
  if r.body ~= "" or r.client_streaming then
    body, berr = read_body(v, header_of(headers, "Content-Length", "content-length", "http_content_length") or false)
    if not body then return answer_error(v, berr) end
  end
  local ct = header_of(headers, "Content-Type", "content-type", "content_type")
  -- a client that goes away cancels the call (needs lua_check_client_abort on; a
  -- callback the user registered first keeps its own, which may call resty.abort)
  resty.cancel_on_abort()
  if v.timeout then timeout = timeout and min(timeout, v.timeout) or v.timeout end
  local t = v.transport
  if r.client_streaming then
    local next_bytes, err = tc:requests_reader(r, bindings, query, body, ct)
    if not next_bytes then return answer_error(v, err) end
    body = nil -- luacheck: ignore 311 (the lines are packed: the JSON is garbage)
    local settings = { metadata = md, timeout = timeout }
    local ok, call = pcall(t.stream, t, r.path, settings)
    if not ok then return answer_error(v, call) end
    ok, err = pcall(function()
      for bytes in next_bytes do call:send(bytes) end
      call:close_send()
    end)
    if not ok then
      call:close()
      return answer_error(v, err)
    end
    local function metadata() return { headers = call:headers() } end
    if r.server_streaming then
      local res = { pcall(answer_stream, v, r, function() return call:recv() end, metadata) }
      call:close()
      if not res[1] then error(res[2], 0) end
      if resty.aborted() then return gone() end
      return
    end
    local okr, bytes = pcall(call.close_and_recv, call)
    if not okr then
      call:close()
      return answer_error(v, bytes)
    end
    local mdr = { headers = call:headers(), trailers = call:trailers() }
    call:close()
    return answer_unary(v, r, bytes, mdr)
  end
  local request, err = tc:request_bytes(r, bindings, query, body, ct)
  if not request then return answer_error(v, err) end
  body = nil -- luacheck: ignore 311 (the JSON is garbage while the call waits: a stalled upstream holds many)
  if r.server_streaming then
    local ok, iter, _, _, call = pcall(t.server_stream, t, r.path, request, { metadata = md, timeout = timeout })
    if not ok then return answer_error(v, iter) end
    local res = { pcall(answer_stream, v, r, iter, function() return call:metadata() end) }
    call:close()
    if not res[1] then error(res[2], 0) end
    if resty.aborted() then return gone() end
    return
  end
  -- tc:metadata checked the metadata as pc.grpc would; a deadline is
  -- left to its checks
  local settings = PLAIN
  if timeout then
    settings = { metadata = md, timeout = timeout, with_metadata = "present" }
  elseif md[1] ~= nil then
    settings = setmetatable({ metadata = md, with_metadata = "present" }, CHECKED)
  end
  local ok, bytes, mdr = pcall(t.unary, t, r.path, request, settings)
  if not ok then return answer_error(v, bytes) end
  return answer_unary(v, r, bytes, mdr)
end

return M
