-- Unary gRPC calls through nginx (doc/openresty.md "Connections per
-- worker"): a client -> nginx (4 workers) -> the C++ gRPC echo server
-- (bench/grpc_cpp, bench.Echo/Echo of 32 bytes), two ways:
--   protocall: a location whose content_by_lua makes the call with
--     resty.call through the worker's pool (protocall.resty.pool: one
--     multiplexed HTTP/2 connection per worker here);
--   grpc_pass: nginx's own gRPC proxy (`grpc_pass` to an upstream with
--     `keepalive`), which carries one stream per upstream connection at a
--     time (nginx#1066), so it holds as many upstream connections as
--     calls in flight.
-- grpc_pass needs a gRPC client (HTTP/2, the gRPC-framed body, `te:
-- trailers`), so the pair is driven by one tool, nghttp2's h2load (Debian's
-- nghttp2-client), over h2c with one stream per client connection (-m 1,
-- as wrk's HTTP/1.1 requests): the protocall location takes a GET, the
-- grpc_pass one the POST of the framed request; both answer the same
-- 32 bytes. The rounds alternate (3 x 5 s each, the median reported;
-- --quick: 1 x 1 s); per case: requests/s, the workers' CPU (user + system,
-- /proc) per request, and the upstream connections (established TCP
-- connections to the server's port, sampled at the middle of the round).
-- Then the load run: wrk (HTTP/1.1) -> the protocall location through a
-- pool of 2 connections x 2 streams per worker to a second C++ server (its
-- connections are the pools' alone) for 60 s (--quick: 3 s):
-- no failed request, upstream connections at the bound (4 workers x 2),
-- the workers' memory at 10 s and at the end, and each worker's own
-- samples (every second, through error.log) of its Lua heap
-- (collectgarbage "count") and RSS: a Lua heap flat while RSS grows puts
-- the growth outside Lua's objects. RESTY_BENCH_FULL_GC=1 (a diagnosis,
-- not a figure: it slows the workers) runs a full collection before each
-- sample, so the middle figure is the heap's live data.
-- The same pair over TLS follows (a second C++ server with a test CA's
-- certificate: protocall's TLS runs in the engine over the cosocket's
-- bytes, grpc_pass's is nginx's grpcs://).
-- Goals (bench/goals.lua): requests/s protocall / grpc_pass >= 1.0x,
-- worker CPU per request protocall / grpc_pass <= 1.0x, both pairs; the
-- workers' RSS growth from half-time to the end of the load run <= 1 MiB
-- (memory flat after warm-up).
-- On a 2-core machine the clients, nginx and the server share the cores:
-- the ratios, not the rates, are the figures.
-- With --callgrind (steadier than the clock on a loaded machine), also
-- the instructions per request of one nginx process (master_process off,
-- one worker) under valgrind --tool=callgrind, h2load -c8 -m1: per case
-- (a bare content_by_lua answering the 32 bytes, resty.call, grpc_pass,
-- and both over TLS) a warm-up of 1,000 requests, then 3,000 counted
-- (callgrind_control dumps the counters before and after);
-- --callgrind-only runs that alone; --keep DIR keeps the dumps there
-- (DIR/resty.N, one per dump: warm-up, counted, ... in the cases' order)
-- for callgrind_annotate --inclusive=yes.
-- Run: build/release/protocall bench/resty_bench.lua [--quick] [--callgrind | --callgrind-only] [--keep DIR]
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local helper = require "grpc_helper"
local H = require "bench.harness"

local quick, callgrind, callgrind_only, keep = false, false, false, nil
for i, a in ipairs(arg or {}) do
  if a == "--quick" then
    quick = true
  elseif a == "--callgrind" then
    callgrind = true
  elseif a == "--callgrind-only" then
    callgrind, callgrind_only = true, true
  elseif a == "--keep" then
    keep = assert(arg[i + 1], "--keep needs a directory")
  end
end
local ROUNDS, SECONDS, LOAD_SECONDS = quick and 1 or 3, quick and 1 or 5, quick and 3 or 60
local CONNECTIONS = 32

local absent = N.missing { ["/usr/bin/wrk"] = "wrk", ["/usr/bin/h2load"] = "h2load (nghttp2-client)" }
if absent then
  print("resty_bench: skipped, missing: " .. absent)
  return
end
assert(os.execute("make -s -C bench/grpc_cpp >/dev/null"), "make -C bench/grpc_cpp failed")

local DATA = ("x"):rep(32)

-- The standard output of the shell command line `cmd`.
local function capture(cmd)
  local f = io.popen(cmd)
  local out = f:read("*a")
  f:close()
  return out
end

local CONF = N.lua_conf(4, [[
    upstream echo_grpc {
        server 127.0.0.1:@GRPC@;
        keepalive 256;
        keepalive_requests 100000000;
    }
    init_by_lua_block {
        pc = require "protocall"
        resty = require "protocall.resty"
        assert(pc.load_file("@ROOT@/bench/grpc_cpp/echo.proto"))
        UPSTREAM, LOAD, DATA = "127.0.0.1:@GRPC@", "127.0.0.1:@LOAD@", "@DATA@"
        TLS, TLS_OPTS = "https://127.0.0.1:@TLS@", { ca_file = "@CERTS@/ca.pem" }
        -- one Echo of DATA to `target` through the worker's pool: answers the data, or 502
        function echo(target, transport)
            local r, err = resty.call(pc, target, "/bench.Echo/Echo", { data = DATA },
                { timeout = 10, pool = POOLS[target == LOAD and "narrow" or "wide"], transport = transport })
            if not r then
                ngx.status = 502
                ngx.say(tostring(err))
                return ngx.exit(502)
            end
            ngx.print(r.data)
        end
        POOLS = { wide = { name = "wide", max_streams = 100, max_connections = 1 },
                  narrow = { name = "narrow", max_streams = 2, max_connections = 2 } }
    }
    # each worker's Lua heap (collectgarbage "count") and RSS every second, for the load run's memory rows
    init_worker_by_lua_block {
        if not @SAMPLE@ then return end
        ngx.timer.every(1, function()
            local f = io.open("/proc/self/status")
            local rss = f and f:read("*a"):match("VmRSS:%s+(%d+)")
            if f then f:close() end
            -- the resident part of glibc malloc's [heap] (C allocations: nginx, protocall, nghttp2)
            f = io.open("/proc/self/smaps")
            local brk = f and f:read("*a"):match("%[heap%]\n.-\nRss:%s+(%d+)") or "0"
            if f then f:close() end
            local heap = collectgarbage("count")
            if @FULLGC@ then collectgarbage() end
            ngx.log(ngx.WARN, "resty_bench memory pid=", ngx.worker.pid(), " t=", ngx.now(), " heap_kib=",
                math.floor(heap), " live_kib=", math.floor(collectgarbage("count")), " rss_kib=", rss,
                " brk_kib=", brk)
        end)
    }
    server {
        listen 127.0.0.1:@PORT@;
        listen 127.0.0.1:@H2PORT@ http2;
        # h2load does not reconnect: the default 1000 requests per client connection would end its clients
        keepalive_requests 100000000;
        location = /pc {
            content_by_lua_block { echo(ngx.var.arg_pool == "narrow" and LOAD or UPSTREAM) }
        }
        location = /pcs {
            content_by_lua_block { echo(TLS, TLS_OPTS) }
        }
        # nginx and content_by_lua alone (the callgrind floor)
        location = /bare {
            content_by_lua_block { ngx.print(DATA) }
        }
        location /bench.Echo/ {
            grpc_pass grpc://echo_grpc;
        }
    }
    upstream echo_grpcs {
        server 127.0.0.1:@TLS@;
        keepalive 256;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:@H2TLS@ http2;
        keepalive_requests 100000000;
        location /bench.Echo/ {
            grpc_pass grpcs://echo_grpcs;
            grpc_ssl_trusted_certificate @CERTS@/ca.pem;
            grpc_ssl_verify on;
            grpc_ssl_name localhost;
            grpc_ssl_session_reuse on;
        }
    }
]])

-- The Msg{data = DATA} request in gRPC's framing (flag 0, big-endian length).
local function framed()
  local msg = "\10" .. string.char(#DATA) .. DATA
  local n = #msg
  return "\0" .. string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256,
    n % 256) .. msg
end

local grpc = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "C++ echo server")
-- the load run's upstream: a server of its own, so its connections are the pools' alone
local load = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "C++ echo server")
local certs = helper.make_certs()
local tls = helper.spawn_command("build/bench-grpc-cpp/echo_server 0 " .. certs .. "/server.pem " .. certs
  .. "/server.key", "C++ echo server (TLS)")
-- The configuration with the servers' ports, and the h2c ports it listens on.
local function conf(text)
  local h2port, h2tls = N.free_port(), N.free_port()
  return text:gsub("@GRPC@", tostring(grpc.port)):gsub("@H2PORT@", tostring(h2port))
    :gsub("@DATA@", DATA):gsub("@LOAD@", tostring(load.port)):gsub("@TLS@", tostring(tls.port))
    :gsub("@H2TLS@", tostring(h2tls)):gsub("@CERTS@", certs)
    :gsub("@FULLGC@", os.getenv("RESTY_BENCH_FULL_GC") and "true" or "false"),
    "http://127.0.0.1:" .. h2port, "http://127.0.0.1:" .. h2tls
end
local front, h2url, h2tls_url
if not callgrind_only then
  local text
  text, h2url, h2tls_url = conf(CONF:gsub("@SAMPLE@", "true"))
  front = N.start("bench-resty", text)
end
local body = os.tmpname()
N.write(body, framed())

local function workers()
  local master = N.read(front.prefix .. "/logs/nginx.pid"):match("%d+")
  local out = capture("ps --ppid " .. master .. " -o pid=")
  local pids = {}
  for pid in out:gmatch("%d+") do pids[#pids + 1] = pid end
  assert(#pids == 4, "nginx workers: " .. out)
  return pids
end

local function workers_cpu(pids)
  local s = 0
  for _, pid in ipairs(pids) do s = s + H.proc_cpu(pid) end
  return s
end

-- established connections to the load run's server per nginx worker: {[pid] = n}
local function per_worker()
  local out = capture("ss -Htnp state established '( dport = :" .. load.port .. " )'")
  local per = {}
  for pid in out:gmatch("pid=(%d+)") do per[pid] = (per[pid] or 0) + 1 end
  return per
end

local function upstream_connections(server)
  local out = capture("ss -Htn state established '( dport = :" .. (server or grpc).port .. " )'")
  local n = 0
  for _ in out:gmatch("[^\n]+") do n = n + 1 end
  return n
end

local counted -- the server whose connections `run` counts (nil: grpc)

-- Runs the shell command `cmd` for `seconds`, sampling the upstream
-- connections at half-time: its output, the workers' CPU seconds used, the connections.
local function run(cmd, seconds, pids)
  local c0 = workers_cpu(pids)
  local p = io.popen(cmd .. " 2>&1")
  os.execute("sleep " .. seconds / 2)
  local conns = upstream_connections(counted)
  local text = p:read("*a")
  p:close()
  return text, workers_cpu(pids) - c0, conns
end

local function h2load(path, seconds, pids, post, url)
  local text, cpu, conns = run("h2load -c" .. CONNECTIONS .. " -m1 -t1 -D" .. seconds
    .. (post and (" -d " .. N.quote(body) .. " -H 'content-type: application/grpc' -H 'te: trailers'") or "")
    .. " " .. N.quote((url or h2url) .. path), seconds, pids)
  local done, failed, errored = text:match("requests: %d+ total, %d+ started, (%d+) done, %d+ succeeded, (%d+) failed, "
    .. "(%d+) errored")
  local c3, c4, c5 = text:match("status codes: %d+ 2xx, (%d+) 3xx, (%d+) 4xx, (%d+) 5xx")
  local rate = tonumber(text:match("finished in [%d.]+%a+, ([%d.]+) req/s"))
  assert(rate and done and c3, "h2load said: " .. text)
  assert(failed + errored + c3 + c4 + c5 == 0, path .. ": not every request succeeded: " .. text)
  return { rate = rate, cpu_us = cpu / tonumber(done) * 1e6, conns = conns, n = tonumber(done) }
end

local function rss_kib(pids)
  local t = 0
  for _, pid in ipairs(pids) do
    t = t + tonumber(N.read("/proc/" .. pid .. "/status"):match("VmRSS:%s+(%d+)"))
  end
  return t
end

-- The instructions per request of one nginx process under callgrind
-- (--callgrind): {case name -> instructions per request}, in CG_CASES' order.
local CG_WARM, CG_COUNTED = 1000, 3000
local CG_CASES = {
  { name = "nginx + content_by_lua (floor)", path = "/bare" },
  { name = "resty.call", path = "/pc" },
  { name = "grpc_pass", path = "/bench.Echo/Echo", post = true },
  { name = "resty.call over TLS", path = "/pcs" },
  { name = "grpc_pass over TLS", path = "/bench.Echo/Echo", post = true, tls = true },
}
local function instructions()
  local dir = keep or os.tmpname()
  os.execute("rm -f " .. N.quote(dir) .. "; mkdir -p " .. N.quote(dir))
  local out = dir .. "/resty"
  os.execute("rm -f " .. N.quote(out) .. " " .. N.quote(out) .. ".*")
  local text, url, tls_url = conf(CONF:gsub("@SAMPLE@", "false"))
  text = text:gsub("master_process on;", "master_process off;"):gsub("worker_processes 4;", "worker_processes 1;")
  local cg = N.start("bench-resty-cg", text, nil, {
    command = "valgrind --tool=callgrind --callgrind-out-file=" .. N.quote(out), seconds = 120 })
  local results, dumps = {}, 0
  local ok, why = pcall(function()
    local pid = N.read(cg.prefix .. "/logs/nginx.pid"):match("%d+")
    assert(pid, "no nginx.pid under callgrind")
    local function drive(c, n)
      local said = capture("h2load -c8 -m1 -t1 -n" .. n
        .. (c.post and (" -d " .. N.quote(body) .. " -H 'content-type: application/grpc' -H 'te: trailers'") or "")
        .. " " .. N.quote((c.tls and tls_url or url) .. c.path) .. " 2>&1")
      local done, ok2xx = said:match("requests: %d+ total, %d+ started, (%d+) done, (%d+) succeeded")
      assert(tonumber(done) == n and tonumber(ok2xx) == n, c.path .. ": not every request succeeded: " .. said)
    end
    -- the counters since the last dump (a dump zeroes them)
    local function dump()
      assert(os.execute("callgrind_control -d " .. pid .. " >/dev/null 2>&1"), "callgrind_control failed")
      dumps = dumps + 1
      local path = out .. "." .. dumps
      for _ = 1, 100 do
        local total = N.read(path):match("\ntotals:%s+(%d+)")
        if total then return tonumber(total) end
        os.execute("sleep 0.1")
      end
      error("no callgrind dump " .. path)
    end
    for _, c in ipairs(CG_CASES) do
      drive(c, CG_WARM)
      dump()
      drive(c, CG_COUNTED)
      results[#results + 1] = dump() / CG_COUNTED
    end
  end)
  N.stop(cg)
  if not keep then os.execute("rm -rf " .. N.quote(dir)) end
  if not ok then error(why, 0) end
  local rows = {}
  for i, c in ipairs(CG_CASES) do
    rows[i] = { name = c.name, unit = "instr", values = { results[i], results[1] and results[i] - results[1] } }
  end
  H.table(("instructions per request, one nginx process under callgrind, h2load -c8 -m1, %d requests after %d"
    ):format(CG_COUNTED, CG_WARM), { "total", "above the floor" }, rows)
  print(("  resty.call / grpc_pass: %.2fx (h2c), %.2fx (TLS)%s"):format(results[2] / results[3],
    results[4] / results[5], keep and ("; dumps kept in " .. keep .. " (resty.2, .4, .6, .8, .10: counted)") or ""))
end

local ok, err = pcall(function()
  if callgrind_only then return instructions() end
  local pids = workers()
  -- both answer the 32 bytes (grpc_pass: the framed response, grpc-status 0)
  local got = capture("curl -s " .. N.quote(front.url .. "/pc"))
  assert(got == DATA, "/pc answered " .. got)
  got = capture("curl -s --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' "
    .. "--data-binary @" .. N.quote(body) .. " -D - " .. N.quote(h2url .. "/bench.Echo/Echo"))
  assert(got:find(DATA, 1, true) and got:find("grpc%-status: 0"), "grpc_pass answered " .. got)
  h2load("/pc", 1, pids) -- warm-up: every worker's connection, the JIT
  h2load("/bench.Echo/Echo", 1, pids, true)
  local runs = { pc = {}, pass = {} }
  for _ = 1, ROUNDS do
    runs.pc[#runs.pc + 1] = h2load("/pc", SECONDS, pids)
    runs.pass[#runs.pass + 1] = h2load("/bench.Echo/Echo", SECONDS, pids, true)
  end
  local function median(list)
    table.sort(list, function(a, b) return a.rate < b.rate end)
    return list[(#list + 1) // 2]
  end
  local pc, pass = median(runs.pc), median(runs.pass)
  H.table(("unary calls through nginx (4 workers), h2load -c%d -m1 over h2c, median of %d x %d s"):format(
    CONNECTIONS, ROUNDS, SECONDS), { "protocall", "grpc_pass" }, {
    { name = "requests/s", values = { pc.rate, pass.rate } },
    { name = "worker CPU per request", unit = "us", values = { pc.cpu_us, pass.cpu_us } },
    { name = "upstream connections (at half-time)", values = { pc.conns, pass.conns } },
  }, { { name = "protocall / grpc_pass", num = 1, den = 2 } })
  H.record("resty_rate_ratio", pc.rate / pass.rate)
  H.record("resty_cpu_ratio", pc.cpu_us / pass.cpu_us)

  -- the same over TLS: protocall's TLS in the engine over the cosocket's bytes, grpc_pass's grpcs://
  got = capture("curl -s " .. N.quote(front.url .. "/pcs"))
  assert(got == DATA, "/pcs answered " .. got)
  counted = tls
  h2load("/pcs", 1, pids)
  h2load("/bench.Echo/Echo", 1, pids, true, h2tls_url)
  runs = { pc = {}, pass = {} }
  for _ = 1, ROUNDS do
    runs.pc[#runs.pc + 1] = h2load("/pcs", SECONDS, pids)
    runs.pass[#runs.pass + 1] = h2load("/bench.Echo/Echo", SECONDS, pids, true, h2tls_url)
  end
  pc, pass = median(runs.pc), median(runs.pass)
  H.table(("the same to the upstream over TLS (ALPN h2), median of %d x %d s"):format(ROUNDS, SECONDS),
    { "protocall", "grpc_pass" }, {
    { name = "requests/s", values = { pc.rate, pass.rate } },
    { name = "worker CPU per request", unit = "us", values = { pc.cpu_us, pass.cpu_us } },
    { name = "upstream connections (at half-time)", values = { pc.conns, pass.conns } },
  }, { { name = "protocall / grpc_pass", num = 1, den = 2 } })
  H.record("resty_tls_rate_ratio", pc.rate / pass.rate)
  H.record("resty_tls_cpu_ratio", pc.cpu_us / pass.cpu_us)

  -- the load run: wrk through pools of 2 connections x 2 streams per worker
  local samples, most, at_bound = {}, 0, 0
  local load_start = tonumber(capture("date +%s.%N"))
  local c0 = workers_cpu(pids)
  local p = io.popen("wrk -t2 -c64 -d" .. LOAD_SECONDS .. "s " .. N.quote(front.url .. "/pc?pool=narrow") .. " 2>&1")
  local rss_early, rss_half
  for i = 1, LOAD_SECONDS - 1 do
    os.execute("sleep 1")
    samples[#samples + 1] = upstream_connections(load)
    local full = 0
    for _, n in pairs(per_worker()) do
      most = math.max(most, n)
      if n == 2 then full = full + 1 end
    end
    at_bound = math.max(at_bound, full)
    if i == math.min(10, LOAD_SECONDS - 1) then rss_early = rss_kib(pids) end
    if i == LOAD_SECONDS // 2 then rss_half = rss_kib(pids) end
  end
  local text = p:read("*a")
  p:close()
  local cpu = workers_cpu(pids) - c0
  local rss_end = rss_kib(pids)
  local requests = tonumber(text:match("(%d+) requests in"))
  local rate = tonumber(text:match("Requests/sec:%s+([%d.]+)"))
  assert(requests and rate, "wrk said: " .. text)
  local bad = tonumber(text:match("Non%-2xx or 3xx responses: (%d+)") or 0)
  local sock = text:match("Socket errors: ([^\n]+)")
  local lo, hi = math.huge, 0
  for _, n in ipairs(samples) do lo, hi = math.min(lo, n), math.max(hi, n) end
  print(("\n## the load run: wrk -t2 -c64 -> protocall (pools of 2 connections x 2 streams per worker), %d s")
    :format(LOAD_SECONDS))
  print(("  requests %d (%.0f/s), non-2xx %d, socket errors %s"):format(requests, rate, bad, sock or "none"))
  print(("  worker CPU per request %.1f us; upstream connections each second %d..%d (bound 4 x 2 = 8), at most %d"
    .. " per worker, %d of 4 workers at the bound at once"):format(cpu / requests * 1e6, lo, hi, most, at_bound))
  print(("  the 4 workers' RSS at %d s %.1f MiB, at %d s %.1f MiB, at the end %.1f MiB"):format(
    math.min(10, LOAD_SECONDS - 1), rss_early / 1024, LOAD_SECONDS // 2, rss_half / 1024, rss_end / 1024))
  -- each worker's Lua heap and RSS over the run (its own samples, every second, in error.log)
  local series = {}
  for pid, t, heap, live, rss, brk in N.read(front.prefix .. "/logs/error.log"):gmatch(
    "resty_bench memory pid=(%d+) t=([%d.]+) heap_kib=(%d+) live_kib=(%d+) rss_kib=(%d+) brk_kib=(%d+)") do
    t = tonumber(t) - load_start
    if t >= 0 and t <= LOAD_SECONDS then
      series[pid] = series[pid] or {}
      table.insert(series[pid], { t = t, heap = tonumber(heap), live = tonumber(live), rss = tonumber(rss),
        brk = tonumber(brk) })
    end
  end
  print("  each worker: seconds into the run, Lua heap / (after a full GC with RESTY_BENCH_FULL_GC=1) / "
    .. "RSS / malloc's [heap] resident, MiB")
  for pid, list in pairs(series) do
    local parts = {}
    for i, m in ipairs(list) do
      if i % 10 == 0 or i == #list then
        parts[#parts + 1] = ("%.0fs %.1f/%.1f/%.1f/%.1f"):format(m.t, m.heap / 1024, m.live / 1024, m.rss / 1024,
          m.brk / 1024)
      end
    end
    print(("  worker %s: %s"):format(pid, table.concat(parts, ", ")))
  end
  H.record("resty_load_rss_growth", (rss_end - rss_half) / 1024)
  assert(bad == 0 and not sock, "failed requests under load: " .. text)
  assert(hi <= 8 and most <= 2, "more upstream connections than the pools' bound: " .. table.concat(samples, " "))
  if callgrind then instructions() end
end)
os.remove(body)
N.stop(front)
helper.stop(grpc)
helper.stop(load)
helper.stop(tls)
os.execute("rm -rf " .. N.quote(certs))
if not ok then error(err, 0) end
