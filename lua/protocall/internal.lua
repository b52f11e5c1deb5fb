--- Helpers private to the modules of lua/protocall: the status code table,
-- argument errors in Lua's wording and a callable test. Not part of the
-- public table; nothing outside lua/protocall may rely on them.
local core = require "protocall.core"

local compat = require "protocall.compat"

local type, error, getmetatable, tostring, pairs, next, format = type, error, getmetatable, tostring, pairs,
  next, string.format
local huge, mtype = math.huge, compat.mtype

local M = {}

--- codes: the canonical gRPC status codes by name and by number
-- (grpc/grpc doc/statuscodes.md): codes.UNAVAILABLE == 14,
-- codes[14] == "UNAVAILABLE". The public `pc.codes` is this table.
local codes = {}
for n = 0, 16 do
  local name = core.code_name(n)
  codes[name] = n
  codes[n] = name
end
M.codes = codes

--- argerror(fname, msg, level [, arg]): raises "bad argument #arg to
-- 'fname' (msg)" (arg 1 by default) as luaL_argerror words it, at the
-- position `error(msg, level)` in the caller of argerror would give (2:
-- the caller's caller).
function M.argerror(fname, msg, level, arg)
  error(format("bad argument #%d to '%s' (%s)", arg or 1, fname, msg), level + 1)
end

--- show(v) -> tostring(v) for an error message, but "nan" for NaN (Lua
-- 5.4 prints 0/0 as the C library's "-nan").
function M.show(v)
  if v ~= v then return "nan" end
  return tostring(v)
end

--- problem | nil = compression_problem(c): what is wrong with `c` as a
-- call's compression, or nil: the transports know "gzip" and "identity"
-- (false and nil: none). The client's options and a transport's settings
-- share it.
function M.compression_problem(c)
  if c == nil or c == false or c == "gzip" or c == "identity" then return nil end
  return format("compression '%s': expected \"gzip\" or \"identity\"", tostring(c))
end

--- problem | nil = with_metadata_problem(v): what is wrong with `v` as a
-- call's with_metadata (nil, true, false or "present": the metadata only
-- when the answer carried some besides gRPC's own), or nil. A transport's
-- settings (check_call) and a stub's per-call options (rpc/client.lua)
-- share it.
function M.with_metadata_problem(v)
  if v == nil or v == true or v == false or v == "present" then return nil end
  local got = type(v)
  if got == "string" then got = format("string %q", v:sub(1, 40)) end
  return 'with_metadata: true, false or "present" expected, got ' .. got
end

--- problem | nil = seconds_problem(name, v, others, past_ok, max): what
-- is wrong with `v` as the timeout or deadline `name`, in seconds, or nil
-- when it is a number the caller takes: > 0 and finite (`max`: at most
-- `max`; math.huge: infinity too, no limit), or with `past_ok` any finite number (<= 0: a deadline already
-- past, the call fails at once). `others` (nil, or words such as
-- "pc.ExponentialTimeout or false") names the values of other types the
-- caller takes, which it checks itself before. Every timeout and deadline
-- check of lua/protocall (call options, pc.Retry, pc.ExponentialTimeout,
-- a transport's settings, pc.grpc's and pc.listen's options, the
-- transcoder, the gateway, the command's flags) words its problem so:
-- "timeout: positive number of seconds expected, got -1", "timeout:
-- number of seconds, pc.ExponentialTimeout or false expected, got string".
function M.seconds_problem(name, v, others, past_ok, max)
  if type(v) ~= "number" then
    return format("%s: number of seconds%s expected, got %s", name,
      others and ((others:find(" or ") and ", " or " or ") .. others) or "", type(v))
  end
  if past_ok then
    if v == v and v > -huge and v < huge then return nil end
    return format("%s: finite number of seconds expected, got %s", name, M.show(v))
  end
  if v > 0 and (v < huge or max == huge) and (max == nil or v <= max) then return nil end
  return format("%s: positive number of seconds%s expected, got %s", name,
    max and max < huge and format(" up to %.14g", max) or "", M.show(v))
end

-- The keys of a call's settings (`tried`: a balancer's, transport/balancer.lua;
-- `no_side_effects`: the method's idempotency_level is NO_SIDE_EFFECTS, which a
-- Connect transport made with `get = true` sends as Connect's GET).
local SETTINGS = {
  timeout = true, metadata = true, compression = true, with_metadata = true, previous_attempts = true,
  tried = true, no_side_effects = true, ring_hash = true,
}

-- Method paths check_path took (a process calls few, each many times:
-- one table look-up instead of the pattern), emptied past 1000.
local good_paths, ngood = {}, 0

-- Raises "bad argument #1 to `name`" for a method path the channel
-- refuses (core/net/grpc.c pc_Grpc_PathCheck: a leading '/', no spaces,
-- control characters, '?', '#' or '%'), at `level`.
local function check_path(name, path, level)
  if good_paths[path] then return end
  if type(path) ~= "string" then M.argerror(name, "string expected, got " .. type(path), level + 1) end
  local why = path:sub(1, 1) ~= "/" and "expected /package.Service/Method"
    or path:find("[%z\1- \127?#%%]") and "unexpected character"
  if why then
    M.argerror(name, format("method path '%s': %s", path:sub(1, 200):gsub("%c", "?"), why), level + 1)
  end
  if ngood >= 1000 then good_paths, ngood = {}, 0 end
  good_paths[path], ngood = true, ngood + 1
end

--- problem | nil = attempt_problem(timeout, metadata, compression): what
-- is wrong with an attempt's compression (compression_problem), timeout
-- (seconds or nil, seconds_problem: finite, and a timeout <= 0 is allowed:
-- the call fails at once) or metadata ({key, value}
-- pairs or nil: core.metadata_problem), the first found; nil when all
-- are right. check_call's checks, and the client's of what a per-attempt
-- interceptor hands on (rpc/client.lua).
function M.attempt_problem(timeout, metadata, compression)
  local problem = M.compression_problem(compression)
  if problem then return problem end
  if timeout ~= nil then
    problem = M.seconds_problem("timeout", timeout, "nil", true)
    if problem then return problem end
  end
  -- an empty plain table (what most calls pass) has nothing to check: no C call
  if metadata ~= nil and not (type(metadata) == "table" and metadata[1] == nil and getmetatable(metadata) == nil
      and next(metadata) == nil) then
    return core.metadata_problem(metadata)
  end
  return nil
end

--- settings = check_call(name, path, settings, level, sarg, compression):
-- the checks of a transport's call arguments, the same for pc.grpc's
-- (transport/grpc.lua) and pc.inproc's (rpc/inproc.lua): `path` a method
-- path as the channel takes it, `settings` nil or {timeout = seconds or
-- nil, metadata = {{k, v}, ...} (core.metadata_problem: no reserved
-- keys), compression = "gzip" | "identity" | false (none) | nil (the
-- transport's, `compression`), with_metadata = boolean or "present"
-- (pc.grpc's unary: the metadata only when the answer carried some),
-- previous_attempts = n (sent as grpc-previous-rpc-attempts when positive:
-- a retry or hedge of gRFC A6) or nil, no_side_effects = boolean or nil
-- (the method is marked NO_SIDE_EFFECTS), tried and ring_hash (a
-- balancer's: a hedged call's backends, a call's place on the ring of
-- transport/ring_hash.lua)} and no other keys. The timeout and
-- compression follow the client's rules (seconds_problem,
-- compression_problem), but a timeout <= 0 is allowed (the call fails at
-- once). Returns the settings ({} for nil); misuse raises "bad argument
-- #1 (the path) or #`sarg` (the settings) to `name`" at `level` (1: the
-- caller of check_call).
function M.check_call(name, path, settings, level, sarg, compression)
  level = level + 1
  check_path(name, path, level)
  if settings == nil then return {} end
  if type(settings) ~= "table" then M.argerror(name, "table expected, got " .. type(settings), level, sarg) end
  for k in pairs(settings) do
    if not SETTINGS[k] then M.argerror(name, format("unknown setting '%s'", tostring(k)), level, sarg) end
  end
  if settings.compression ~= nil then compression = settings.compression end
  local problem = M.attempt_problem(settings.timeout, settings.metadata, compression)
  if not problem then problem = M.with_metadata_problem(settings.with_metadata) end
  local previous = settings.previous_attempts
  if not problem and previous ~= nil and (mtype(previous) ~= "integer" or previous < 0 or previous > 100) then
    problem = "previous_attempts: integer in 0..100 expected, got " .. M.show(previous)
  end
  local rh = settings.ring_hash
  if not problem and rh ~= nil and (type(rh) ~= "number" or rh ~= rh or rh < 0 or rh >= 2 ^ 64) then
    problem = "ring_hash: a number in [0, 2^64) expected, got " .. M.show(rh)
  end
  if problem then M.argerror(name, problem, level, sarg) end
  return settings
end

--- CHECKED: the metatable of call settings made by protocall's own
-- attempts (rpc/attempts.lua) from options the client already checked
-- (what a per-attempt interceptor changed too: rpc/client.lua checks it
-- with attempt_problem): check_call's users may take such a table as it is.
M.CHECKED = { __name = "protocall.CheckedSettings" }

--- DURATION_MAX: the longest google.protobuf.Duration protocall takes, in
-- seconds (duration.proto's range: about 10,000 years), the whole value
-- (seconds and nanos together) compared: the service config's durations
-- (rpc/service_config.lua), an xDS cluster's outlier_detection
-- (transport/xds_client.lua) and outlier detection's config
-- (transport/outlier.lua) share it, so what a parser takes the detector
-- takes too.
M.DURATION_MAX = 315576000000

--- check_request(name, request, level): raises "bad argument #2 to
-- `name`" at `level` (1: the caller of check_request) unless `request`
-- is a string (a request message's bytes).
function M.check_request(name, request, level)
  if type(request) ~= "string" then M.argerror(name, "string expected, got " .. type(request), level + 1, 2) end
end

--- check_args(name, path, request, settings, level, sarg): a several-
-- backend transport's checks of a call's arguments before it picks a
-- backend (transport/balancer.lua, transport/xds.lua: picking reads the
-- timeout, metadata and ring_hash), the misuse one backend's transport
-- raises: check_call (settings a client's attempt made, CHECKED, taken as
-- they are), then check_request when `sarg` is 3 (a unary or
-- server-streaming call). The transport then calls its backend with
-- CHECKED as the extra last argument (pc.grpc's methods: the settings are
-- checked, not again: a second check_call was ~7,400 of ~70,000
-- instructions of a balanced unary call, bench/balancer_check_bench.lua).
-- Raises at `level` (1: the caller of check_args).
function M.check_args(name, path, request, settings, level, sarg)
  level = level + 1
  if getmetatable(settings) ~= M.CHECKED then M.check_call(name, path, settings, level, sarg) end
  if sarg == 3 then M.check_request(name, request, level) end
end

-- Built-in services (core/schema/wkt.h) a pool holds only once their file
-- is loaded, and how to load it.
local BUILTIN_SERVICES = {
  ["grpc.health.v1.Health"] = "call pc.health() (or load grpc/health/v1/health.proto) first",
  ["grpc.reflection.v1.ServerReflection"] =
    "give pc.server reflection = true (or load grpc/reflection/v1/reflection.proto) first",
  ["grpc.reflection.v1alpha.ServerReflection"] =
    "give pc.server reflection = true (or load grpc/reflection/v1alpha/reflection.proto) first",
}

--- text = unknown_service(name): what pc.server and pc.client say of a
-- service `name` their pool lacks: "unknown service 'NAME'", or for one of
-- the built-in services (health, reflection) whose file is not loaded the
-- fix: "grpc.health.v1.Health is not loaded: call pc.health() (or load
-- grpc/health/v1/health.proto) first".
function M.unknown_service(name)
  local fix = BUILTIN_SERVICES[name]
  if fix then return name .. " is not loaded: " .. fix end
  return "unknown service '" .. tostring(name) .. "'"
end

--- is_callable(v): whether v is a function or has a __call metamethod.
function M.is_callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

--- code_name(c) -> the status name of code `c` (a name or a number), or
-- nil when it is neither.
function M.code_name(c)
  local name = codes[c]
  if type(name) == "number" then return c end
  return name
end

--- place | false, problem | nil = unix_address(address): a Unix-domain
-- socket as gRPC's naming document spells it: "unix:path" (relative or
-- absolute), "unix:///absolute/path" or "unix-abstract:name" (Linux's
-- abstract namespace) -> {unix = path, abstract = boolean, host =
-- "localhost", port = "0", tls = false}; false and what is wrong with
-- one; nil for an address of another kind. (pc.grpc's targets and
-- pc.listen's addresses.)
local UNIX_MAX = 107 -- bytes of sun_path a path may take (106 for an abstract name)

function M.unix_address(address)
  local kind, rest = address:match("^(unix%-abstract):(.*)$")
  if not kind then kind, rest = address:match("^(unix):(.*)$") end
  if not kind then return nil end
  local path = rest
  if kind == "unix" and rest:find("^//") then
    path = rest:match("^//(/.*)$")
    if not path then return false, "unix://ABSOLUTE_PATH expected (three slashes: unix:///tmp/x.sock)" end
  end
  if path == "" then return false, "an empty path" end
  if path:find("%c") then return false, "control characters are not allowed" end
  local max = kind == "unix" and UNIX_MAX or UNIX_MAX - 1
  if #path > max then
    return false, (kind == "unix" and "path" or "name") .. " longer than " .. max .. " bytes (sun_path)"
  end
  return { unix = path, abstract = kind == "unix-abstract", host = "localhost", port = "0", tls = false }
end

--- mt = forwarding(name): the metatable of a call standing in for another
-- (`inner`, a field of the stand-in): a field is inner's, a method runs on
-- inner whether called on the stand-in or on inner, and closing the
-- stand-in (Lua 5.4's to-be-closed variable of a generic for) closes
-- inner. (A balancer's call that moved to another backend, a retried
-- stream's current attempt.)
function M.forwarding(name)
  local mt = { __name = name }
  function mt.__close(self, err)
    local inner = rawget(self, "inner")
    local imt = inner and getmetatable(inner)
    local close = type(imt) == "table" and imt.__close
    if close then close(inner, err) end
  end
  function mt.__index(self, k)
    local inner = rawget(self, "inner")
    local v = inner[k]
    if type(v) ~= "function" then return v end
    return function(p, ...)
      if p == self then p = rawget(self, "inner") end
      return v(p, ...)
    end
  end
  return mt
end

return M
