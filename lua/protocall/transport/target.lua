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
-- default). A host is a name, an IPv4 address or "[IPv6]". A dns: target
-- is marked `dns = true`; its authority, "dns://IP:PORT/host:port" as gRPC
-- spells it, names the DNS server (`dns_server`); a dns: name beginning
-- with "_" and without a port ("dns:///_grpc._tcp.example.com") is
-- resolved through its SRV records (`port` nil). `name` is the host
-- as :authority (an SRV name without its "_service._proto." labels). A control
-- character (a NUL above all: C would cut the string there and reach
-- another host) or a space is refused.
-- Unix-domain sockets: "unix:path", "unix:///absolute/path" and
-- "unix-abstract:name" (internal.unix_address), h2c.
--- problem = server_problem(server): what is wrong with the DNS server
-- address `server` ("IP", "IP:PORT", "[IPv6]:PORT"), nil when nothing: a
-- port must be in 1..65535.
local function server_problem(server)
  local port = server:match("^%[[^%]]*%]:(.*)$") or server:match("^[^:]*:(.*)$")
  if port == nil then return nil end
  local n = port:match("^%d+$") and tonumber(port)
  if not n or n < 1 or n > 65535 then
    return "DNS server '" .. server .. "': port must be in 1..65535"
  end
  return nil
end
M.server_problem = server_problem

local function parse(target)
  local unix, why = internal.unix_address(target) -- a path may hold spaces
  if unix then return unix end
  if unix == false then return nil, why end
  if target:find("[%c ]") then return nil, "control characters and spaces are not allowed" end
  local scheme, rest = target:match("^(https?)://(.*)$")
  local server
  if not scheme then
    server, rest = target:match("^dns://([^/]*)/(.*)$")
    if rest == nil then
      if target:find("://", 1, true) then
        return nil, "expected http://host:port, https://host:port, dns:///host:port or host:port"
      end
      rest = target
    end
    scheme = "http"
  end
  if server and server ~= "" then
    local problem = server_problem(server)
    if problem then return nil, problem end
  end
  local query = rest:match("[?#].*$")
  if query then return nil, "a query or fragment ('" .. query .. "') is not allowed" end
  local path = rest:match("^[^/]*(/.+)$")
  if path then
    return nil, "a path ('" .. path .. "') is not allowed: a target is host:port (the method is the path)"
  end
  local host, port = rest:match("^%[([%x:.]+)%]:?([^/]*)/?$")
  if not host then
    host, port = rest:match("^([^:/%[%]]+):?([^:/]*)/?$")
    -- a DNS name (letters, digits, '-', '.', '_' of SRV labels) or an IPv4 address
    if host and host:find("[^%w.%-_]") then
      return nil, "host '" .. host .. "' has a character not allowed in a host name"
    end
  end
  if not host or host == "" then return nil, "no host" end
  if port ~= "" and not port:find("^%d+$") then
    return nil, "port '" .. port .. "' must be a number in 1..65535"
  end
  if server and port == "" and host:find("^_") then
    return { host = host, tls = false, dns = true, dns_server = server ~= "" and server or nil,
      name = (host:gsub("^_[^.]*%._[^.]*%.", "")) } -- the :authority: the service's labels left out
  end
  if port == "" then
    if scheme == "http" then return nil, "h2c needs a port (http://host:port)" end
    port = "443"
  else
    local n = tonumber(port)
    if n < 1 or n > 65535 then return nil, "port must be in 1..65535" end
  end
  return { host = host, port = port, tls = scheme == "https", dns = server ~= nil or nil,
    dns_server = server ~= "" and server or nil, name = host }
end
M.parse = parse

--- places, dns | nil, problem = places(target): the backends of `target`
-- (a string or a list of addresses, as pc.grpc takes it) as {host=, port=,
-- tls=} places, and for a dns: target the place of the name, which
-- transport/dns.lua resolves; nil and what is wrong.
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
  if where.dns then return { where }, where end
  return { where }
end

--- places | nil = resolve_now(where): every address of the dns: place
-- `where` as places (getaddrinfo, which blocks: for host I/O drivers
-- only, whose host owns the sockets; transport/dns.lua), nil when it does
-- not resolve or has no port (SRV).
function M.resolve_now(where)
  if where.port == nil then return nil end
  local addresses = core.resolve(where.host, where.port)
  if not addresses then return nil end
  local places = {}
  for i, a in ipairs(addresses) do places[i] = { host = a, port = where.port, tls = where.tls } end
  return places
end

return M
