-- What an xds:/// target costs beyond a call (issue goals: ADS update to
-- traffic moved, memory per 1,000 endpoints; bench/xds_bench.lua measures
-- the call itself):
--
-- 1. Update to traffic moved: an ADS server of the subset protos
--    (lua/protocall/transport/xds_protos.lua) in this process, backends
--    b1 and b2 (pc.listen, same loop) answering with their name, a task
--    calling xds:///svc without pause. The server pushes a change, and the
--    time from its ctx.send to the first call answered by the new backend
--    is the figure (median and max over the pushes): an EDS push moving
--    cluster A's one endpoint between b1 and b2 (a new connection each
--    time: the old endpoint's leaves with it), and an RDS push flipping a
--    weighted_clusters split A 100 / B 0 <-> A 0 / B 100 (both clusters'
--    connections open: the route alone changes). No call may fail.
-- 2. Memory per 1,000 endpoints: a server process (this file with --serve)
--    answers LDS nN -> CDS cN -> EDS cN with N endpoints 127.X.Y.Z:PORT
--    (every 127/8 address reaches its 0.0.0.0 listener); one call through
--    xds:///nN (one connection), then a full collection: the Lua heap
--    (collectgarbage "count") and RSS grown since before the target, for
--    N = 1,000 and 10,000, beside pc.grpc{the same N addresses} (static,
--    round_robin) after one call.
-- 3. With --callgrind: instructions per unary call of the client process
--    under valgrind --tool=callgrind, xds:///svc against the static list
--    of the same two backends (the server in its own process, not counted):
--    (I(N + 500) - I(N)) / 500 each, the ratio is the issue's "<= 1.1x
--    instructions per call".
--
--   build/release/protocall bench/xds_fleet_bench.lua [--quick] [--callgrind]
local pc = require "protocall"
local H = require "bench.harness"
local protos = require "protocall.transport.xds_protos"
local X = require "bench.xds_common"

local XB, pool = X.XB, X.pool
local any, kind_of, bootstrap = X.any, X.kind_of, X.bootstrap
local listener, routes, cluster, cla = X.listener, X.routes, X.cluster, X.cla
local RC_T = X.RC_T

local function backend_server(name)
  return pc.server({ ["xb.Named"] = { Who = function() return { name = name or "b" } end } }, { pool = pool })
end

-- The endpoints of listener nN: N addresses 127.X.Y.Z (Z from 1) on `port`.
local function many(n, port)
  local list = {}
  for i = 0, n - 1 do
    list[i + 1] = { ("127.%d.%d.%d"):format(i // 62500, i // 250 % 250, i % 250 + 1), port }
  end
  return list
end

if arg[1] == "--serve" then
  -- LDS nN -> cluster cN -> N endpoints; LDS svc -> cluster A -> 127.0.0.1
  -- and 127.0.0.2 (the callgrind pair); xb.Named on the same port.
  local spool = protos.pool()
  assert(spool:load(XB, { name = "xb.proto" }))
  local port
  local function resources(kind, names)
    local out = {}
    for _, name in ipairs(names) do
      local n = tonumber(name:match("^[nc](%d+)$"))
      if kind == "LDS" then
        out[#out + 1] = listener(name, { route_config = routes { cluster = n and "c" .. n or "A" } })
      elseif kind == "CDS" then
        out[#out + 1] = cluster(name)
      elseif kind == "EDS" then
        out[#out + 1] = cla(name, n and many(n, port) or { { "127.0.0.1", port }, { "127.0.0.2", port } })
      end
    end
    return out
  end
  local server = pc.server({
    ["envoy.service.discovery.v3.AggregatedDiscoveryService"] = {
      StreamAggregatedResources = function(ctx)
        local nonce = 0
        while true do
          local req = ctx.recv()
          if not req then return end
          local kind = kind_of(req.type_url)
          if kind and not req.error_detail then
            -- answer every request whose names are new (not an ACK of ours)
            local names = req.resource_names or {}
            local key = table.concat(names, ",")
            ctx.asked = ctx.asked or {}
            if ctx.asked[kind] ~= key then
              ctx.asked[kind] = key
              nonce = nonce + 1
              ctx.send { version_info = "1", nonce = tostring(nonce), type_url = req.type_url,
                resources = resources(kind, names) }
            end
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

if arg[1] == "--client" then
  -- The callgrind child: `--client PORT static|xds N`: one call (connect,
  -- the configuration), then N calls.
  local port, kind, n = tonumber(arg[2]), arg[3], tonumber(arg[4])
  local t = kind == "xds" and pc.grpc("xds:///svc", { xds_bootstrap = bootstrap(port) })
    or pc.grpc({ "127.0.0.1:" .. port, "127.0.0.2:" .. port }, { load_balancing = "round_robin" })
  local c = pc.client("xb.Named", { pool = pool, transport = t, timeout = 10 })
  local req = { name = "x" }
  assert(c:Who(req).name == "x")
  for _ = 1, n do c:Who(req) end
  t:close()
  return
end

-- Lua heap (KiB) and RSS (KiB) after a full collection.
local function footprint()
  collectgarbage()
  collectgarbage()
  return collectgarbage("count"), (H.rss() or 0) / 1024
end

if arg[1] == "--mem" then
  -- The memory child: `--mem PORT xds|static N` prints the Lua heap and the
  -- RSS (KiB) a target of N endpoints holds after one call, grown since
  -- before it (a process of its own, so that RSS starts from nothing freed).
  local port, kind, n = tonumber(arg[2]), arg[3], tonumber(arg[4])
  local heap0, rss0 = footprint()
  local t
  if kind == "xds" then
    t = pc.grpc("xds:///n" .. n, { xds_bootstrap = bootstrap(port) })
  else
    local list = {}
    for i, e in ipairs(many(n, port)) do list[i] = e[1] .. ":" .. e[2] end
    t = pc.grpc(list, { load_balancing = "round_robin" })
  end
  local c = pc.client("xb.Named", { pool = pool, transport = t, timeout = 30 })
  assert(c:Who({ name = "x" }).name == "x")
  local heap1, rss1 = footprint()
  local backends = #t:backends()
  assert(backends == n, "the target balances over " .. backends .. " backends, not " .. n)
  print(("%.1f %.1f"):format(heap1 - heap0, rss1 - rss0))
  t:close()
  return
end

local quick, callgrind = false, false
for _, a in ipairs(arg) do
  if a == "--quick" then quick = true elseif a == "--callgrind" then callgrind = true end
end

local function median(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end
local function max(list)
  local m = -math.huge
  for _, v in ipairs(list) do if v > m then m = v end end
  return m
end

-- 1. Update to traffic moved.
local function update_latency(pushes)
  local b1 = pc.listen(backend_server("b1"), "127.0.0.1:0")
  local b2 = pc.listen(backend_server("b2"), "127.0.0.1:0")
  local split = function(a, b)
    return { weighted_clusters = { clusters = { { name = "A", weight = { value = a } },
      { name = "B", weight = { value = b } } } } }
  end
  -- The current resources of each kind, and the open streams to push to.
  local current = {
    LDS = { listener("svc", { rds = { config_source = { ads = {} }, route_config_name = "rc" } }) },
    RDS = { any("RDS", RC_T, routes { cluster = "A" }) },
    CDS = { cluster("A"), cluster("B") },
    EDS = { cla("A", { { "127.0.0.1", b1.port } }), cla("B", { { "127.0.0.1", b2.port } }) },
  }
  local versions, streams, nonce = { LDS = 1, RDS = 1, CDS = 1, EDS = 1 }, {}, 0
  local function response(kind)
    nonce = nonce + 1
    return { version_info = tostring(versions[kind]), nonce = tostring(nonce), type_url = protos.TYPE_URL[kind],
      resources = current[kind] }
  end
  local ms = pc.listen(pc.server({ ["envoy.service.discovery.v3.AggregatedDiscoveryService"] = {
    StreamAggregatedResources = function(ctx)
      streams[ctx] = true
      local asked = {} -- per kind, the names last asked for on this stream
      while true do
        local req = ctx.recv()
        if not req then break end
        local kind = kind_of(req.type_url)
        -- answered: a first request, and one that asks for other names (a state-of-the-world
        -- server answers a new subscription; the client ignored names it did not ask for)
        local names = table.concat(req.resource_names or {}, ",")
        if kind and ((req.response_nonce or "") == "" or asked[kind] ~= names) then ctx.send(response(kind)) end
        if kind then asked[kind] = names end
      end
      streams[ctx] = nil
    end } }, { pool = protos.pool() }), "127.0.0.1:0")
  -- Replaces `kind`'s resources and sends them; the time it was sent.
  local function push(kind, resources)
    current[kind] = resources
    versions[kind] = versions[kind] + 1
    local t
    for ctx in pairs(streams) do
      t = pc.now()
      ctx.send(response(kind))
    end
    return t
  end
  local result = { EDS = {}, RDS = {} }
  local failed, calls = 0, 0
  for _, l in ipairs { b1, b2, ms } do pc.spawn(function() l:serve() end) end
  pc.spawn(function()
    local t = pc.grpc("xds:///svc", { xds_bootstrap = bootstrap(ms.port) })
    local c = pc.client("xb.Named", { pool = pool, transport = t, timeout = 5 })
    local last, want, seen, stop = nil, nil, nil, false
    pc.spawn(function() -- the caller: without pause; `seen`: when an answer first came from `want`
      while not stop do
        local ok, r = pcall(c.Who, c, {})
        calls = calls + 1
        if ok then
          last = r.name
          if r.name == want and not seen then seen = pc.now() end
        else
          failed = failed + 1
        end
      end
    end)
    -- Pushes, then waits for the first answer from `want`: milliseconds.
    local function moved(kind, resources, name)
      want, seen = name, nil
      local t0 = push(kind, resources)
      while not seen do
        pc.sleep(0.005)
        if pc.now() - t0 > 5 then
          local bk = t:backends()
          error(("%s push: no call reached %s within 5 s (versions EDS %s, RDS %s, %d failed)"):format(kind, name,
            tostring(bk.versions.EDS), tostring(bk.versions.RDS), failed), 0)
        end
      end
      want = nil
      return (seen - t0) * 1000
    end
    while last ~= "b1" do pc.sleep(0.01) end
    for i = 1, pushes do -- EDS: cluster A's endpoint b1 <-> b2
      local to = i % 2 == 1 and b2 or b1
      local ms_ = moved("EDS", { cla("A", { { "127.0.0.1", to.port } }), cla("B", { { "127.0.0.1", b2.port } }) },
        to == b1 and "b1" or "b2")
      result.EDS[i] = ms_
      pc.sleep(0.02)
    end
    -- RDS: A (b1) and B (b2) both known; the route's split flips.
    current.EDS = { cla("A", { { "127.0.0.1", b1.port } }), cla("B", { { "127.0.0.1", b2.port } }) }
    push("EDS", current.EDS)
    moved("RDS", { any("RDS", RC_T, routes(split(100, 0))) }, "b1")
    pc.sleep(0.1)
    for i = 1, pushes do
      local a = i % 2 == 1 and 0 or 100
      result.RDS[i] = moved("RDS", { any("RDS", RC_T, routes(split(a, 100 - a))) }, a == 0 and "b2" or "b1")
      pc.sleep(0.02)
    end
    stop = true
    pc.sleep(0.05)
    t:close()
    for _, l in ipairs { b1, b2, ms } do l:shutdown(0) end
  end)
  pc.run()
  return result, failed, calls
end

local pushes = quick and 5 or 40
local res, failed, calls = update_latency(pushes)
H.report(("ADS push to the first call on the new backend, %d pushes each, calls running without pause, "
  .. "load average %s"):format(pushes, H.loadavg()), {
  { name = "EDS push (endpoint moves, new connection): median", value = median(res.EDS), unit = "ms" },
  { name = "EDS push: max", value = max(res.EDS), unit = "ms" },
  { name = "RDS push (weighted_clusters flip): median", value = median(res.RDS), unit = "ms" },
  { name = "RDS push: max", value = max(res.RDS), unit = "ms" },
  { name = "calls made / failed", value = calls, unit = "/ " .. failed, ok = failed == 0, goal = "0 failed" },
})
if failed ~= 0 then error(failed .. " calls failed while the configuration moved", 0) end

-- 2. Memory per 1,000 endpoints (and 3., the callgrind counts) against the
-- server process.
local helper = require "spec.grpc_helper"
local BIN = arg[-1] or "build/release/protocall"
local server = helper.spawn_command(BIN .. " bench/xds_fleet_bench.lua --serve", "xds fleet bench server")

-- The heap and RSS (KiB) a target of n endpoints holds (the --mem child).
local function held(port, kind, n)
  local f = io.popen(("%s bench/xds_fleet_bench.lua --mem %d %s %d"):format(BIN, port, kind, n))
  local line = f:read("*l")
  f:close()
  local heap, rss = (line or ""):match("^(%S+) (%S+)$")
  if not heap then error("bench/xds_fleet_bench.lua --mem " .. kind .. " " .. n .. " printed " .. tostring(line), 0) end
  return tonumber(heap), tonumber(rss)
end

local ok, err = pcall(function()
  local port = server.port
  local sizes = quick and { 1000 } or { 1000, 10000 }
  local rows, got = {}, {}
  for _, n in ipairs(sizes) do
    local xh, xr = held(port, "xds", n)
    local sh, sr = held(port, "static", n)
    got[n] = { xh, xr, sh, sr }
    local per = 1000 / n
    rows[#rows + 1] = { name = ("xds:///n%d, Lua heap per 1,000 endpoints"):format(n), value = xh * per,
      unit = "KiB" }
    rows[#rows + 1] = { name = ("xds:///n%d, RSS per 1,000 endpoints"):format(n), value = xr * per, unit = "KiB" }
    rows[#rows + 1] = { name = ("static list of %d, Lua heap per 1,000"):format(n), value = sh * per, unit = "KiB" }
    rows[#rows + 1] = { name = ("static list of %d, RSS per 1,000"):format(n), value = sr * per, unit = "KiB" }
    rows[#rows + 1] = { name = ("xds / static, Lua heap (%d endpoints)"):format(n), value = xh / sh, unit = "x" }
  end
  if got[10000] then -- the fixed part (the subset protos, the connection) drops out
    local a, b = got[1000], got[10000]
    local function m(i) return (b[i] - a[i]) / 9 end
    rows[#rows + 1] = { name = "xds, marginal Lua heap per 1,000 (10,000 - 1,000)", value = m(1), unit = "KiB" }
    rows[#rows + 1] = { name = "xds, marginal RSS per 1,000", value = m(2), unit = "KiB" }
    rows[#rows + 1] = { name = "static, marginal Lua heap per 1,000", value = m(3), unit = "KiB" }
    rows[#rows + 1] = { name = "static, marginal RSS per 1,000", value = m(4), unit = "KiB" }
  end
  H.report("memory a target holds per 1,000 endpoints after one call (one connection), full collection", rows)

  if callgrind then
    local function per_call(kind)
      local function total(n)
        return H.callgrind(("%s bench/xds_fleet_bench.lua --client %d %s %d"):format(BIN, port, kind, n))
      end
      local a, b = total(100), total(600)
      return a and b and (b - a) / 500 or nil
    end
    local s, x = per_call("static"), per_call("xds")
    if s and x then
      H.report("instructions per unary call of the client process (callgrind, (I(600) - I(100)) / 500)", {
        { name = "static list (pc.grpc{a, b})", value = s, unit = "instr/call" },
        { name = "xds:///svc (same backends)", value = x, unit = "instr/call" },
        { name = "xds / static", value = x / s, unit = "x", goal = "<= 1.1x", ok = x / s <= 1.1,
          key = "xds_call_instr_ratio" },
      })
    else
      print("\ncallgrind: valgrind did not run (is it installed?); instruction counts not measured")
    end
  end
end)
helper.stop(server)
if not ok then error(err, 0) end
