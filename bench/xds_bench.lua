-- The per-call cost of an xds:/// target against a static list of the same
-- backends (issue goal: <= 1.1x). A server process (this file with
-- --serve) listens on all addresses of one port and serves both the
-- backend's method and an ADS management server (envoy's
-- AggregatedDiscoveryService, the subset protos of
-- lua/protocall/transport/xds_protos.lua) whose resources route
-- xds:///svc to cluster A, endpoints 127.0.0.1:PORT and 127.0.0.2:PORT. The
-- client (this process) calls one unary method round_robin over
-- pc.grpc{"127.0.0.1:PORT", "127.0.0.2:PORT"} and over xds:///svc, runs
-- interleaved (bench/harness.lua measure_pair), wall time per call of the
-- whole round trip (the server's share is the same on both sides).
--
--   build/release/protocall bench/xds_bench.lua [--quick]
local pc = require "protocall"
local H = require "bench.harness"
local protos = require "protocall.transport.xds_protos"
local X = require "bench.xds_common"

-- The resources of each kind: xds:///svc -> cluster A -> two backends on `port`.
local function resources(kind, port)
  if kind == "LDS" then
    return { X.listener("svc", { route_config = X.routes { cluster = "A" } }) }
  elseif kind == "CDS" then
    return { X.cluster("A") }
  elseif kind == "EDS" then
    return { X.cla("A", { { "127.0.0.1", port }, { "127.0.0.2", port } }) }
  end
  return {}
end

if arg[1] == "--serve" then
  -- One server, both services: the subset's pool (a private one, in this
  -- process only) gets xb.Named too.
  local spool = protos.pool()
  assert(spool:load(X.XB, { name = "xb.proto" }))
  local port
  local server = pc.server({
    ["envoy.service.discovery.v3.AggregatedDiscoveryService"] = {
      StreamAggregatedResources = function(ctx)
        while true do
          local req = ctx.recv()
          if not req then return end
          local kind = X.kind_of(req.type_url)
          if kind and (req.response_nonce or "") == "" then
            ctx.send { version_info = "1", nonce = "1", type_url = req.type_url, resources = resources(kind, port) }
          end
        end
      end },
    ["xb.Named"] = { Who = function(m) return m end },
  }, { pool = spool })
  local l = pc.listen(server, "0.0.0.0:0")
  port = l.port
  H.serve(l)
  return
end

local quick = false
for _, a in ipairs(arg) do if a == "--quick" then quick = true end end
local helper = require "spec.grpc_helper"
local BIN = arg[-1] or "build/release/protocall"
local server = helper.spawn_command(BIN .. " bench/xds_bench.lua --serve", "xds bench server")
local ok, err = pcall(function()
  local port = server.port
  local static = pc.grpc({ "127.0.0.1:" .. port, "127.0.0.2:" .. port }, { load_balancing = "round_robin" })
  local xds = pc.grpc("xds:///svc", { xds_bootstrap = X.bootstrap(port) })
  local a = pc.client("xb.Named", { pool = X.pool, transport = static, timeout = 10 })
  local b = pc.client("xb.Named", { pool = X.pool, transport = xds, timeout = 10 })
  local req = { name = "x" }
  assert(b:Who(req).name == "x") -- the configuration arrives
  local sa, sb = H.measure_pair(function(n) for _ = 1, n do a:Who(req) end end,
    function(n) for _ = 1, n do b:Who(req) end end, quick)
  local backends = xds:backends()
  H.report(("unary call round trip, round_robin over 2 backends on loopback, load average %s"):format(H.loadavg()), {
    { name = "static list (pc.grpc{a, b})", value = sa / 1000, unit = "us/call" },
    { name = "xds:///svc (LDS -> CDS -> EDS, same backends)", value = sb / 1000, unit = "us/call" },
    { name = "xds / static", value = sb / sa, unit = "x", goal = "<= 1.1x", ok = sb / sa <= 1.1,
      key = "xds_call_ratio" },
    { name = "backends the xds target balances over", value = #backends, unit = "" },
  })
  static:close()
  xds:close()
end)
helper.stop(server)
if not ok then error(err, 0) end
