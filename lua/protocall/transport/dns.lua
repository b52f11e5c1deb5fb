--- The addresses of a dns: target for transport/balancer.lua, from a
-- resolver of core (core/net/resolve.h, c-ares): A and AAAA records, or
-- SRV records for "dns:///_grpc._tcp.name" (the lowest priority group,
-- each address with its record's weight). Nothing blocks: a step reads
-- what came and starts a resolution that is due (the records' TTL passed,
-- or a refresh after a failed connection or a GOAWAY, never sooner than
-- the minimum interval after the last); a call with no address yet waits
-- for the first resolution as a task waits for a socket (the loop's other
-- tasks go on meanwhile).
--
-- A host I/O driver (the transport's `driver` option, OpenResty) owns the
-- sockets, so there a name is resolved by getaddrinfo, which blocks
-- (`blocking`).
local core = require "protocall.core"
local sched = require "protocall.sched"
local target = require "protocall.transport.target"

local setmetatable, tostring, tonumber, ipairs = setmetatable, tostring, tonumber, ipairs

local M = {}

local Resolver = { __name = "protocall.DnsResolver" }
Resolver.__index = Resolver

--- resolver | nil, problem = new(where, server, min_interval): a resolver
-- of the dns: place `where` (transport/target.lua; its `dns_server`
-- before `server`, "IP:PORT"; nil: the system's), re-resolving no sooner
-- than `min_interval` seconds after the last (nil: 30). The first query
-- goes out now.
function M.new(where, server, min_interval)
  if server and not where.dns_server then
    local problem = target.server_problem(server)
    if problem then return nil, problem end
  end
  local r, why = core.resolver(where.host, where.port and tonumber(where.port) or 0,
    where.dns_server or server, min_interval)
  if not r then return nil, why end
  r:step()
  return setmetatable({ r = r, seen = 0, tls = where.tls, why = nil, name = where.host }, Resolver)
end

--- places | nil = resolver:news(): reads what came without waiting; the
-- addresses as {host=, port=, tls=, weight=} places when a resolution
-- ended with some since the last ask, else nil. `resolver.why` says why
-- the last resolution failed (nil after one that did not).
function Resolver:news()
  if self.closed then return nil end
  local v = self.r:step()
  if v == self.seen then return nil end
  self.seen = v
  local list, why = self.r:result()
  self.why = why
  if why then return nil end
  local places = {}
  for i, a in ipairs(list) do
    places[i] = { host = a.host, port = tostring(a.port), tls = self.tls, weight = a.weight }
  end
  return places
end

--- resolver:wait(seconds): until a round of I/O over the resolver's
-- sockets, at most `seconds` (nil: a second; a task yields to the others
-- meanwhile).
function Resolver:wait(seconds)
  sched.pump({ self.r }, seconds or 1)
end

--- resolver:refresh(): a resolution as soon as the minimum interval
-- allows (a backend failed or sent GOAWAY; every backend failed).
function Resolver:refresh()
  if not self.closed then self.r:refresh() end
end
Resolver.all_failed = Resolver.refresh

function Resolver:close()
  self.closed = true
  self.r:close()
end

local Blocking = { __name = "protocall.DnsBlocking" }
Blocking.__index = Blocking

--- resolver = blocking(where, places): the same methods over getaddrinfo
-- (transport/target.lua's resolve_now) for host I/O drivers: `places`
-- resolved already, and again only when every backend has failed (it
-- blocks), not on each failed backend.
function M.blocking(where, places)
  return setmetatable({ where = where, fresh = places, name = where.host }, Blocking)
end

function Blocking:news()
  local places = self.fresh
  self.fresh = nil
  return places
end

function Blocking.refresh() end

function Blocking:all_failed()
  self.fresh = target.resolve_now(self.where)
end

function Blocking.wait() end

function Blocking.close() end

return M
