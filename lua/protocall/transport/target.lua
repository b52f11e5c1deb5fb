--- Targets: where pc.grpc connects, from the spellings gRPC's naming
-- document gives (host:port, URLs, dns:///, ipv4:/ipv6: lists, a Lua list).
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"

local type, pairs, ipairs, tonumber = type, pairs, ipairs, tonumber
local mtype = compat.mtype

local M = {}

--- place | nil, problem = parse(target): {host=, port=, tls=} for one
-- address `target`, or nil and what is wrong. Accepted:
-- "http://host:port" and "host:port" and "dns:///host:port" (HTTP/2
-- without TLS, prior knowledge), "https://host[:port]" (TLS; port 443 by
-- default). A host is a name, an IPv4 address or "[IPv6]". A control
-- character (a NUL above all: C would cut the string there and reach
-- another host) or a space is refused.
-- Unix-domain sockets: "unix:path", "unix:///absolute/path" and
-- "unix-abstract:name" (internal.unix_address), h2c.
local function parse(target)
  local unix, why = internal.unix_address(target) -- a path may hold spaces
  if unix then return unix end
  if unix == false then return nil, why end
  if target:find("[%c ]") then return nil, "control characters and spaces are not allowed" end
  local scheme, rest = target:match("^(https?)://(.*)$")
  if not scheme then
    rest = target:match("^dns:///(.*)$")
    if rest == nil then
      if target:find("://", 1, true) then
        return nil, "expected http://host:port, https://host:port, dns:///host:port or host:port"
      end
      rest = target
    end
    scheme = "http"
  end
  local path = rest:match("^[^/]*(/.+)$")
  if path then
    return nil, "a path ('" .. path .. "') is not allowed: a target is host:port (the method is the path)"
  end
  local host, port = rest:match("^%[([%x:.]+)%]:?(%d*)/?$")
  if not host then host, port = rest:match("^([^:/%[%]]+):?(%d*)/?$") end
  if not host or host == "" then return nil, "no host" end
  if port == "" then
    if scheme == "http" then return nil, "h2c needs a port (http://host:port)" end
    port = "443"
  else
    local n = tonumber(port)
    if n < 1 or n > 65535 then return nil, "port must be in 1..65535" end
  end
  return { host = host, port = port, tls = scheme == "https" }
end
M.parse = parse

--- places, dns | nil, problem = places(target): the backends of `target`
-- (a string or a list of addresses, as pc.grpc takes it) as {host=, port=,
-- tls=} places, and for a dns:/// target the place of the name, which is
-- resolved again later (transport/balancer.lua); nil and what is wrong.
function M.places(target)
  local list
  if type(target) == "table" then
    list = {}
    local n = #target
    if n == 0 then return nil, "list of at least one address expected" end
    for k in pairs(target) do
      if mtype(k) ~= "integer" or k < 1 or k > n then return nil, "list of addresses expected (keys 1..n)" end
    end
    for i = 1, n do
      if type(target[i]) ~= "string" then
        return nil, "address " .. i .. ": string expected, got " .. type(target[i])
      end
      list[i] = target[i]
    end
  elseif type(target) == "string" then
    local kind, rest = target:match("^(ipv[46]):(.*)$")
    if kind then
      list = {}
      for a in (rest .. ","):gmatch("([^,]*),") do list[#list + 1] = a end
    end
  end
  if list then
    local places = {}
    for i, a in ipairs(list) do
      local where, problem = parse(a)
      if not where then return nil, "address " .. i .. " '" .. a:gsub("%c", "?") .. "': " .. problem end
      if i > 1 and where.tls ~= places[1].tls then
        return nil, "every address must use the same scheme (TLS or not)"
      end
      places[i] = where
    end
    return places
  end
  local where, problem = parse(target)
  if not where then return nil, problem end
  if target:find("^dns:///") then
    local addresses = core.resolve(where.host, where.port)
    if addresses and #addresses > 1 then
      local places = {}
      for i, a in ipairs(addresses) do places[i] = { host = a, port = where.port, tls = where.tls } end
      return places, where
    end
  end
  return { where }
end

return M
