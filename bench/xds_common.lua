-- What the xDS benches share (bench/xds_bench.lua, bench/xds_fleet_bench.lua):
-- the backend's schema and the xDS resources an in-process ADS server of the
-- subset protos (lua/protocall/transport/xds_protos.lua) answers with.
--
--   local X = require "bench.xds_common"
local pc = require "protocall"
local core = require "protocall.core"
local protos = require "protocall.transport.xds_protos"

local X = {}

-- The backends' service: xb.Named/Who answers an xb.M.
X.XB = 'syntax = "proto3"; package xb; message M { string name = 1; } service Named { rpc Who(M) returns (M); }'
-- A pool with xb.proto loaded (the clients').
X.pool = pc.pool()
assert(X.pool:load(X.XB, { name = "xb.proto" }))

X.LISTENER_T, X.RC_T = "envoy.config.listener.v3.Listener", "envoy.config.route.v3.RouteConfiguration"
X.CLUSTER_T, X.CLA_T = "envoy.config.cluster.v3.Cluster", "envoy.config.endpoint.v3.ClusterLoadAssignment"

-- The wire bytes of `t` as the subset's message `name`.
function X.enc(name, t) return core.encode(protos.type(name), t) end

-- A google.protobuf.Any of resource `kind` ("LDS", "RDS", ...) holding `t` as message `name`.
function X.any(kind, name, t) return { type_url = protos.TYPE_URL[kind], value = X.enc(name, t) } end

-- The resource kind ("LDS", ...) of type URL `url`, or nil.
function X.kind_of(url)
  for k, u in pairs(protos.TYPE_URL) do if u == url then return k end end
end

-- An LDS resource: listener `name` whose API listener is the HttpConnectionManager `hcm`.
function X.listener(name, hcm)
  return X.any("LDS", X.LISTENER_T, { name = name, api_listener = { api_listener = { type_url = protos.HCM,
    value = X.enc(protos.HCM:match("/(.*)$"), hcm) } } })
end

-- A RouteConfiguration "rc": one virtual host for every domain, one route of every path to `action`.
function X.routes(action)
  return { name = "rc", virtual_hosts = { { name = "vh", domains = { "*" }, routes = { { match = { prefix = "" },
    route = action } } } } }
end

-- A CDS resource: EDS cluster `name`, its endpoints over ADS.
function X.cluster(name)
  return X.any("CDS", X.CLUSTER_T, { name = name, type = 3, eds_cluster_config = { eds_config = { ads = {} } } })
end

-- An EDS resource: the ClusterLoadAssignment of cluster `name`, endpoints {host, port} ... in one locality.
function X.cla(name, list)
  local eps = {}
  for i, e in ipairs(list) do
    eps[i] = { endpoint = { address = { socket_address = { address = e[1], port_value = e[2] } } } }
  end
  return X.any("EDS", X.CLA_T, { cluster_name = name, endpoints = { { locality = { zone = "z1" },
    load_balancing_weight = { value = 1 }, lb_endpoints = eps } } })
end

-- A bootstrap (JSON) naming the ADS server on 127.0.0.1:`port`, insecure.
function X.bootstrap(port)
  return ('{"xds_servers": [{"server_uri": "127.0.0.1:%d", "channel_creds": [{"type": "insecure"}]}], '
    .. '"node": {"id": "bench"}}'):format(port)
end

return X
