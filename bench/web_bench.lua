-- The web's RPC protocols served by pc.listen (doc/performance.md), three
-- figures, each a ratio of two servers or two protocols measured in one run:
--
-- (a) Connect unary calls with JSON bodies (POST application/json,
--     bench.Echo/Echo of bench/grpc_cpp/echo.proto, a 10-byte message):
--     protocall's server (this file with --serve, in its own process)
--     against @connectrpc/connect-node's connectNodeAdapter on node:http2
--     (bench/web/connect_echo.mjs) serving the same service: calls/s and
--     the server process's CPU per call, 4 connections x 16 calls in
--     flight. Goal: >= 3x the calls/s.
-- (b) gRPC-Web (application/grpc-web+proto) against gRPC
--     (application/grpc) on protocall's own server, the same message and
--     load: server CPU per call. Goal: <= 1.2x.
-- (c) Connect unary (application/proto) over HTTP/1.1 keep-alive, 64
--     connections with one call each in flight, against the same over
--     HTTP/2 (64 connections, one stream each): calls/s.
--
-- The load client of every figure is h2load (Debian's nghttp2-client),
-- neither server's code: a C client whose cost per request is far below
-- either server's, which sends the same request bytes to both sides of a
-- ratio (a fixed body file, fixed headers) and speaks HTTP/1.1 as well
-- (--h1), so (c)'s two rates come from one client too. It runs one thread
-- (the machine's other core is the server's). h2load checks HTTP status
-- only (a gRPC error is a 200), so each server answers one call of each
-- kind through protocall's own client before the load.
-- Server CPU: utime + stime of /proc/PID/stat (every thread) around each
-- h2load run, over the calls it completed, after one unmeasured run of
-- each server. Rates are the best of 3
-- alternating runs, CPU the least of them; the load average beside them.
--
--   build/release/protocall bench/web_bench.lua [--quick]
--
-- --quick: one short run of each (a check that everything works).
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

assert(pc.load_file("bench/grpc_cpp/echo.proto", { import_paths = { "bench/grpc_cpp" } }))

if arg[1] == "--serve" then
  local l = pc.listen(pc.server { ["bench.Echo"] = { Echo = function(m) return m end } },
    "127.0.0.1:0", { max_connections = 10000 })
  H.serve(l)
  return
end

package.path = "spec/?.lua;" .. package.path
local peer = require "node_peer"

local quick = false
for _, a in ipairs(arg) do if a == "--quick" then quick = true end end
local RUNS, SECONDS = 3, 2
if quick then RUNS, SECONDS = 1, 0.5 end

local H2LOAD = "/usr/bin/h2load"
local absent = peer.missing("@connectrpc/connect-node", "@connectrpc/connect", "@bufbuild/protobuf")
do
  local f = io.open(H2LOAD)
  if f then f:close() else absent = (absent and absent .. "; " or "") .. "h2load (Debian nghttp2-client)" end
end
if absent then
  if os.getenv("CI") then error("web_bench: missing " .. absent .. " (required when CI is set)", 0) end
  print("\n## web_bench: skipped, missing " .. absent)
  return
end

local Msg = pc.type("bench.Msg")
local message = Msg { data = string.rep("x", 10) }
local proto = pc.encode(message)
local grpc_frame = "\0" .. string.pack(">I4", #proto) .. proto
local json = pc.to_json(message)

local files = {}
local function body_file(bytes)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  files[#files + 1] = path
  return path
end
local BODY = { json = body_file(json), proto = body_file(proto), grpc = body_file(grpc_frame) }

-- The request of each kind: its body file and headers (h2load -H).
local KINDS = {
  connect_json = { body = BODY.json, headers = { "content-type: application/json", "connect-protocol-version: 1" } },
  connect_proto = { body = BODY.proto,
                    headers = { "content-type: application/proto", "connect-protocol-version: 1" } },
  grpc = { body = BODY.grpc, headers = { "content-type: application/grpc", "te: trailers" } },
  grpc_web = { body = BODY.grpc, headers = { "content-type: application/grpc-web+proto", "x-grpc-web: 1" } },
}

-- rate (calls/s), done (calls that succeeded), bytes (response body bytes
-- per call) of one h2load run against `port`.
local function h2load(port, kind, conns, streams, h1)
  local k = KINDS[kind]
  local words = { H2LOAD, "-t 1", "-c " .. conns, "-m " .. streams, "-D " .. math.floor(SECONDS * 1000) .. "ms",
    "-d " .. k.body }
  if h1 then words[#words + 1] = "--h1" end
  for _, h in ipairs(k.headers) do words[#words + 1] = peer.quote("-H" .. h) end
  words[#words + 1] = "http://127.0.0.1:" .. port .. "/bench.Echo/Echo"
  local command = table.concat(words, " ")
  local f = io.popen(command .. " 2>&1")
  local out = f:read("*a")
  f:close()
  local rate = tonumber(out:match("finished in [%d.]+m?s, ([%d.]+) req/s"))
  local done, ok = out:match("requests: %d+ total, %d+ started, (%d+) done, (%d+) succeeded")
  local data = tonumber(out:match("%((%d+)%) data"))
  if not rate or not ok or not data or tonumber(ok) == 0 or tonumber(ok) ~= tonumber(done) then
    error("web_bench: h2load failed or had failed calls: " .. command .. "\n" .. out, 0)
  end
  return rate, tonumber(ok), tonumber(data) / tonumber(ok)
end

-- Runs `kind` against server `s`: rate and the server's CPU seconds per
-- 10,000 calls.
local function load(s, kind, conns, streams, h1)
  local c0 = H.proc_cpu(s.pid)
  local rate, done, bytes = h2load(s.port, kind, conns, streams, h1)
  return rate, (H.proc_cpu(s.pid) - c0) / done * 10000, bytes
end

-- One call of each kind through protocall's client: the server answers it
-- as the echo it should be.
local function check(s, protocols)
  for _, p in ipairs(protocols) do
    local t = pc.grpc(s.url, { protocol = p.protocol, codec = p.codec, http = p.http })
    local answer = assert(t:unary("/bench.Echo/Echo", p.codec == "json" and json or proto))
    local got = p.codec == "json" and pc.from_json(Msg, answer) or pc.decode(Msg, answer)
    assert(got.data == message.data, "web_bench: a wrong echo over " .. p.protocol)
    t:close()
  end
end

local BIN = arg[-1] or "build/release/protocall"
local servers, set = {}, nil
local ok, err = pcall(function()
  set = peer.descriptor_set({ "echo.proto" }, { "bench/grpc_cpp" })
  servers.pc = helper.spawn_command(BIN .. " bench/web_bench.lua --serve", "protocall server")
  servers.node = helper.spawn_command("node bench/web/connect_echo.mjs " .. set .. " h2", "connect-node server")
  check(servers.pc, { { protocol = "connect", codec = "json" }, { protocol = "connect" },
    { protocol = "grpc" }, { protocol = "grpc-web" } })
  check(servers.node, { { protocol = "connect", codec = "json" } })

  -- Unmeasured first runs: Node's JIT warms up (its first second runs at a
  -- third of its rate), the servers' buffers grow.
  h2load(servers.node.port, "connect_json", 4, 16)
  h2load(servers.pc.port, "connect_json", 4, 16)

  local best = {}
  local function keep(name, rate, cpu, bytes)
    local b = best[name] or { rate = 0, cpu = math.huge }
    b.rate, b.cpu, b.bytes = math.max(b.rate, rate), math.min(b.cpu, cpu), bytes
    best[name] = b
  end
  for _ = 1, RUNS do
    keep("a_pc", load(servers.pc, "connect_json", 4, 16))
    keep("a_node", load(servers.node, "connect_json", 4, 16))
    keep("b_grpc", load(servers.pc, "grpc", 4, 16))
    keep("b_web", load(servers.pc, "grpc_web", 4, 16))
    keep("c_h2", load(servers.pc, "connect_proto", 64, 1))
    keep("c_h1", load(servers.pc, "connect_proto", 64, 1, true))
  end
  local load_text = quick and "one quick run" or ("best of %d runs of %g s"):format(RUNS, SECONDS)
  H.table(("(a) Connect unary JSON, bench.Echo/Echo (10 bytes), h2load, 4 connections x 16 in flight, h2c; %s; "
           .. "load average %s"):format(load_text, H.loadavg()),
    { "protocall", "connect-node" },
    { { name = "calls/s", values = { best.a_pc.rate, best.a_node.rate } },
      { name = "server CPU s per 10,000 calls", values = { best.a_pc.cpu, best.a_node.cpu } } },
    { { name = "protocall/node", num = 1, den = 2 } })
  H.table("(b) protocall's server, gRPC-Web against gRPC, the same load",
    { "gRPC-Web", "gRPC" },
    { { name = "calls/s", values = { best.b_web.rate, best.b_grpc.rate } },
      { name = "server CPU s per 10,000 calls", values = { best.b_web.cpu, best.b_grpc.cpu } } },
    { { name = "web/gRPC", num = 1, den = 2 } })
  H.table("(c) protocall's server, Connect unary proto, 64 connections x 1 in flight",
    { "HTTP/1.1", "HTTP/2" },
    { { name = "calls/s", values = { best.c_h1.rate, best.c_h2.rate } },
      { name = "server CPU s per 10,000 calls", values = { best.c_h1.cpu, best.c_h2.cpu } } },
    { { name = "h1/h2", num = 1, den = 2 } })
  local a = best.a_pc.rate / best.a_node.rate
  local b = best.b_web.cpu / best.b_grpc.cpu
  local c = best.c_h1.rate / best.c_h2.rate
  H.report("goals of the web protocols", {
    { name = "Connect JSON calls/s protocall/connect-node", value = a, unit = "x", goal = ">= 3",
      ok = a >= 3, key = "web_connect_node_rate" },
    { name = "Connect JSON CPU per call protocall/connect-node", value = best.a_pc.cpu / best.a_node.cpu,
      unit = "x" },
    { name = "gRPC-Web/gRPC server CPU per call", value = b, unit = "x", goal = "<= 1.2", ok = b <= 1.2,
      key = "web_grpcweb_cpu" },
    { name = "HTTP/1.1/HTTP/2 calls/s, 64 connections", value = c, unit = "x" },
  })
end)
for _, s in pairs(servers) do helper.stop(s) end
for _, f in ipairs(files) do os.remove(f) end
if set then os.remove(set) end
if not ok then error(err, 0) end
