-- A fleet in one process: backends that differ (one steady, one failing
-- every other call, one whose health says NOT_SERVING), a client that
-- balances over them with client-side health checks and outlier detection,
-- then the same backends behind an xds:/// name whose routes, clusters and
-- endpoints an xDS management server gives (a stand-in of a few dozen lines
-- here, where a fleet has Istio, Traffic Director or go-control-plane), and
-- an endpoint update moving traffic while calls go on.
-- Run: build/release/protocall examples/fleet.lua (spec/examples_spec.lua
-- runs it). doc/fleet.md is the chapter it illustrates.
local pc = require "protocall"
local protos = require "protocall.transport.xds_protos" -- the management server's messages

pc.load [[syntax = "proto3"; package fleet; message Who { string name = 1; }
          service Named { rpc Get(Who) returns (Who); }]]

-- A backend named `name` on a free port: its health for fleet.Named is
-- `status`; with `flaky` every other call fails INTERNAL. Connections are
-- sent GOAWAY after about a minute (max_connection_age), so that clients
-- spread over backends that joined since.
local listeners = {}
local function backend(name, status, flaky)
  local health, n = pc.health(), 0
  health:set("fleet.Named", status or "SERVING")
  local l = pc.listen(pc.server({ ["fleet.Named"] = { Get = function()
    n = n + 1
    if flaky and n % 2 == 0 then error(pc.Error { code = "INTERNAL", message = name .. " failed" }) end
    return { name = name }
  end } }, { health = health }), "127.0.0.1:0", { max_connection_age = 60 })
  pc.spawn(function() l:serve() end)
  listeners[#listeners + 1] = l
  return "127.0.0.1:" .. l.port
end

-- Calls `n` times: {backend name = calls answered, failed = calls failed}.
local function spread(stub, n)
  local count = {}
  for _ = 1, n do
    local ok, r = pcall(stub.Get, stub, {})
    local k = ok and r.name or "failed"
    count[k] = (count[k] or 0) + 1
  end
  return count
end

local function show(count)
  local keys = {}
  for k in pairs(count) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. " " .. count[k] end
  return table.concat(keys, ", ")
end

local steady, flaky, draining = backend("steady"), backend("flaky", "SERVING", true), backend("draining", "NOT_SERVING")

-- 1. A static list: round_robin, health checks, outlier detection.
local function static_list()
  local t = pc.grpc({ steady, flaky, draining })
  local stub = pc.client("fleet.Named", { transport = t, timeout = 2, service_config = {
    healthCheckConfig = { serviceName = "fleet.Named" },
    loadBalancingConfig = { { outlier_detection_experimental = {
      interval = "0.1s", baseEjectionTime = "1s", maxEjectionPercent = 50,
      failurePercentageEjection = { threshold = 40, minimumHosts = 2, requestVolume = 4 },
      childPolicy = { { round_robin = {} } } } } },
  } })
  local first = spread(stub, 8)
  print("static list, first 8 calls: " .. show(first))
  local t0 = pc.now()
  while not t:backends()[2].ejected and pc.now() - t0 < 5 do -- the next sweep ejects flaky
    spread(stub, 2)
    pc.sleep(0.02)
  end
  print("after a sweep: next 6 calls: " .. show(spread(stub, 6)))
  for _, b in ipairs(t:backends()) do
    print(("  %s health %s ejected %s"):format(b.address == steady and "steady" or b.address == flaky and "flaky"
      or "draining", b.health, tostring(b.ejected)))
  end
  t0 = pc.now()
  while t:backends()[2].ejected and pc.now() - t0 < 5 do -- back after baseEjectionTime (1 s)
    pc.sleep(0.05)
    spread(stub, 1)
  end
  local out = pc.now() - t0
  -- (seen ejected a little after the sweep that ejected it: 0.8 s, not 1)
  print(("flaky back after the ejection time: %s"):format(tostring(out >= 0.8 and not t:backends()[2].ejected)))
  t:close()
end

-- 2. xds:///fleet. The management server: ADS (state of the world), one
-- stream per client, every resource of a kind answered when first asked
-- for and pushed again by set().
local xp = protos.pool()
local function any(kind, type_name, value)
  return { type_url = protos.TYPE_URL[kind], value = pc.encode(xp:type(type_name), value) }
end
local resources, versions, streams = {}, {}, {}
local function response(kind)
  return { version_info = tostring(versions[kind]), nonce = kind .. versions[kind], type_url = protos.TYPE_URL[kind],
    resources = resources[kind] }
end
local function set(kind, list)
  resources[kind], versions[kind] = list, (versions[kind] or 0) + 1
  for ctx in pairs(streams) do ctx.send(response(kind)) end
end
local management = pc.listen(pc.server({ ["envoy.service.discovery.v3.AggregatedDiscoveryService"] = {
  StreamAggregatedResources = function(ctx)
    streams[ctx] = true
    while true do
      local req = ctx.recv()
      if not req then break end
      local kind
      for k, url in pairs(protos.TYPE_URL) do if url == req.type_url then kind = k end end
      if kind and resources[kind] and (req.response_nonce or "") == "" then ctx.send(response(kind)) end
      if req.error_detail then print("NACK: " .. req.error_detail.message) end
    end
    streams[ctx] = nil
  end } }, { pool = xp }), "127.0.0.1:0")
pc.spawn(function() management:serve() end)

-- Listener "fleet": every call to cluster blue (75) or green (25).
local HCM = protos.HCM:match("/(.*)$")
set("LDS", { any("LDS", "envoy.config.listener.v3.Listener", { name = "fleet", api_listener = { api_listener = {
  type_url = protos.HCM, value = pc.encode(xp:type(HCM), { route_config = { name = "routes", virtual_hosts = { {
    name = "all", domains = { "*" }, routes = { { match = { prefix = "" }, route = { weighted_clusters = {
      clusters = { { name = "blue", weight = { value = 75 } }, { name = "green", weight = { value = 25 } } } } } } },
  } } } }) } } }) })
local function cluster(name)
  return any("CDS", "envoy.config.cluster.v3.Cluster", { name = name, type = "EDS",
    eds_cluster_config = { eds_config = { ads = {} } } })
end
set("CDS", { cluster("blue"), cluster("green") })
local function endpoints(name, address)
  local host, port = address:match("^(.*):(%d+)$")
  return any("EDS", "envoy.config.endpoint.v3.ClusterLoadAssignment", { cluster_name = name, endpoints = { {
    locality = { zone = "z1" }, load_balancing_weight = { value = 1 }, lb_endpoints = { { endpoint = {
      address = { socket_address = { address = host, port_value = tonumber(port) } } } } } } } })
end
set("EDS", { endpoints("blue", steady), endpoints("green", flaky) })

-- The bootstrap names the management server: a file that GRPC_XDS_BOOTSTRAP
-- names, the text in GRPC_XDS_BOOTSTRAP_CONFIG, or pc.grpc's xds_bootstrap.
local bootstrap = ([[{"xds_servers": [{"server_uri": "127.0.0.1:%d", "channel_creds": [{"type": "insecure"}]}],
  "node": {"id": "example", "locality": {"zone": "z1"}}}]]):format(management.port)

local function xds_target()
  local t = pc.grpc("xds:///fleet", { xds_bootstrap = bootstrap })
  local stub = pc.client("fleet.Named", { transport = t, timeout = 2 })
  local count = spread(stub, 400)
  local green = (count.flaky or 0) + (count.failed or 0)
  print(("xds:///fleet, 400 calls: blue %d, green %d (weights 75 and 25)"):format(count.steady or 0, green))
  -- green moves to the draining backend (its health is not checked here: no healthCheckConfig)
  set("EDS", { endpoints("blue", steady), endpoints("green", draining) })
  local calls = 0
  local moved
  repeat
    calls = calls + 1
    local ok, r = pcall(stub.Get, stub, {})
    moved = ok and r.name == "draining"
  until moved or calls > 1000
  print("after the EDS update: green's calls reach draining: " .. tostring(moved))
  local bk = t:backends()
  for _, b in ipairs(bk) do
    print(("  cluster %s endpoint %s from EDS version %s"):format(b.cluster,
      b.address == steady and "steady" or b.address == draining and "draining" or b.address, b.version))
  end
  print(("versions: LDS %s, CDS %s, EDS %s"):format(bk.versions.LDS, bk.versions.CDS, bk.versions.EDS))
  t:close()
end

pc.spawn(function()
  static_list()
  xds_target()
  management:shutdown(0)
  for _, l in ipairs(listeners) do l:shutdown(0) end
end)
pc.run()
