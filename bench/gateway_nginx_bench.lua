-- REST/JSON through nginx (protocall.resty.gateway, doc/gateway.md): wrk ->
-- nginx transcoding a POST of {"data": base64} into bench.Echo/Echo over
-- the worker's shared HTTP/2 connection -> the C++ gRPC echo server
-- (bench/grpc_cpp), beside wrk -> nginx proxy_pass of the same JSON to an
-- HTTP upstream answering that JSON (a second nginx, `return 200`): the
-- ceiling of a JSON request through nginx. One nginx worker in front, 32
-- connections, one wrk thread. The issue's goal: requests/s >= 0.8x of
-- plain proxying (APISIX's grpc-transcode measured 0.47x), with the C++
-- upstream (the goal row). That upstream is `echo_server -async 1`:
-- Echo on grpc++'s async API, one completion queue driven by one thread
-- (grpc's own QPS benchmarks serve this way; one thread, as the machine has
-- 2 cores for wrk, both nginx and the server), no logging; the bench prints
-- it. `--upstreams cppsync` adds the same server with every method on the
-- sync API and grpc++'s default thread pool, which the server benches
-- compare with (it spent about twice the CPU a call).
-- How the rounds run: on a shared machine the load moves within seconds
-- (proxy_pass alone read 20,743-75,387 req/s across 5 s rounds of one
-- run), so the rates of cases measured far apart do not compare. Each
-- round therefore drives, for every gateway upstream in turn, a pair: 1 s
-- of it and 1 s of proxy_pass back to back, which one goes first
-- alternating (16 rounds; --quick: 2). A pair's ratio is the gateway's
-- req/s over the proxy_pass req/s next to it; the ratio printed, and the
-- goal row's figure, is the MEDIAN OF THE PAIR RATIOS, with their
-- quartiles and min-max beside it. req/s and p99 are the medians of the
-- case's rounds (proxy_pass's: of all its rounds); CPU per request is the
-- CPU of all the case's rounds over all its requests.
-- The same gateway is also driven in front of two other upstreams of the
-- same service, for what the upstream's own cost does to the ratio (on 2
-- shared cores the upstream's CPU is taken from nginx's and wrk's): a
-- protocall server (pc.listen, bench/server_bench.lua --serve) and the
-- python3-grpcio one (bench/grpc_py/echo.py, skipped when python3-grpcio
-- is missing). Each row prints the front worker's CPU per request and the
-- upstream's (the answering nginx's worker, or the gRPC server's process:
-- /proc).
-- On a 2-core machine wrk, both nginx and the upstream share the cores:
-- the ratio, not the rates, is the figure.
-- With --callgrind (valgrind, h2load) the front nginx runs as one process
-- (master_process off) under callgrind instead, and each case is 3,000
-- POSTs by h2load --h1 -c8 after 4,000 of warm-up: the instructions per
-- request of the process, which the machine's load does not move (the
-- upstreams run outside valgrind). No wrk rounds then. --keep DIR (with
-- --callgrind) copies each case's callgrind dump to DIR/<case>.callgrind
-- for callgrind_annotate --inclusive=yes. --jitv FILE: the front nginx
-- logs LuaJIT's trace events to FILE (jit.v: which traces compile, which
-- abort and why).
-- --abort turns on what a client going away needs in the gateway's
-- locations (lua_check_client_abort on, lua_need_request_body on: each
-- request then registers an ngx.on_abort callback, doc/gateway.md).
-- Run: build/release/protocall bench/gateway_nginx_bench.lua [--quick] [--upstreams cpp,cppsync,protocall,python]
--      [--callgrind [--keep DIR]] [--jitv FILE] [--abort]
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local H = require "bench.harness"
local helper = require "grpc_helper"

local quick, wanted, callgrind, keep, jitv, abort = false, "cpp,protocall,python", false, nil, nil, false
for i, a in ipairs(arg or {}) do
  if a == "--quick" then quick = true end
  if a == "--abort" then abort = true end
  if a == "--callgrind" then callgrind = true end
  if a == "--jitv" then jitv = assert(arg[i + 1], "--jitv: a file") end
  if a == "--keep" then keep = assert(arg[i + 1], "--keep: a directory") end
  if a == "--upstreams" then wanted = assert(arg[i + 1], "--upstreams: a list such as cpp,protocall") end
end
-- rounds (even, so each pair runs as many times in either order) and
-- seconds of wrk per case in a pair
local ROUNDS, SECONDS = quick and 2 or 16, 1

local absent = N.missing { ["/usr/bin/wrk"] = "wrk" }
if absent then
  print("gateway_nginx_bench: skipped, missing: " .. absent)
  return
end
if callgrind then
  absent = N.missing { ["/usr/bin/valgrind"] = "valgrind", ["/usr/bin/callgrind_control"] = "valgrind",
    ["/usr/bin/h2load"] = "h2load (nghttp2-client)" }
  if absent then
    print("gateway_nginx_bench --callgrind: skipped, missing: " .. absent)
    return
  end
end
assert(os.execute("make -s -C bench/grpc_cpp >/dev/null"), "make -C bench/grpc_cpp failed")

local BODY = '{"data":"aGVsbG8sIHdvcmxkIQ=="}'

local COMMON = [[
daemon off;
master_process on;
worker_processes 1;
pid logs/nginx.pid;
error_log logs/error.log;
events {
    worker_connections 4096;
}
]]

local TEMP = [[
    access_log off;
    client_body_temp_path temp/body;
    proxy_temp_path temp/proxy;
    fastcgi_temp_path temp/fastcgi;
    uwsgi_temp_path temp/uwsgi;
    scgi_temp_path temp/scgi;
]]

local ANSWER = COMMON .. "http {\n" .. TEMP .. [[
    server {
        listen 127.0.0.1:@PORT@;
        location = /answer {
            default_type application/json;
            return 200 ']] .. BODY .. [[';
        }
    }
}
]]

local FRONT = "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n"
  .. "load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n" .. COMMON .. "http {\n" .. TEMP .. [[
    lua_package_path "@ROOT@/lua/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_package_cpath "@ROOT@/build/luajit/?.so;;";
    upstream ceiling {
        server 127.0.0.1:@ANSWER@;
        keepalive 64;
    }
    init_by_lua_block {
        @JITV@
        gw = require "protocall.resty.gateway"
        local f = assert(io.open("@ROOT@/bench/grpc_cpp/echo.proto"))
        local proto = f:read("*a")
        f:close()
        -- a route per upstream: the C++ one's at /v1/echo, the others'
        -- at /<name>/v1/echo (prefix "/<name>")
        for name, port in ("@UPSTREAMS@"):gmatch("(%w+)=(%d+)") do
            assert(gw.configure(name, { protos = { ["echo.proto"] = proto }, upstream = "127.0.0.1:" .. port,
                prefix = name ~= "cpp" and "/" .. name or nil,
                http = { rules = { { selector = "bench.Echo.Echo", post = "/v1/echo", body = "*" } } } }))
        end
    }
    server {
        listen 127.0.0.1:@PORT@;
@LOCATIONS@
        location = /proxy {
            proxy_pass http://ceiling/answer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
]]

-- grpc++'s version, for the C++ upstreams' line.
local grpcpp = io.popen("pkg-config --modversion grpc++ 2>/dev/null")
local GRPCPP = "grpc++ " .. (grpcpp:read("*l") or "?")
grpcpp:close()
-- The gRPC upstreams: {label, command, name of the server, how it serves}.
local UPSTREAMS = {
  cpp = { "C++ gRPC", "build/bench-grpc-cpp/echo_server -async 1 0", "C++ echo server",
    GRPCPP .. " async API, 1 completion queue driven by 1 thread" },
  cppsync = { "C++ gRPC, sync API", "build/bench-grpc-cpp/echo_server 0", "C++ echo server",
    GRPCPP .. " sync API, default thread pool" },
  protocall = { "protocall (pc.listen)", (arg[-1] or "build/release/protocall") .. " bench/server_bench.lua --serve",
    "protocall server", "one thread, pc.run" },
  python = { "python3-grpcio", "/usr/bin/python3 bench/grpc_py/echo.py server 0", "python3-grpcio server",
    "grpc.server, a pool of 16 threads" },
}
local upstreams = {}
for name in wanted:gmatch("[^,]+") do
  local u = assert(UPSTREAMS[name], "--upstreams: cpp, cppsync, protocall or python expected, got " .. name)
  if name == "python" and not os.execute("/usr/bin/python3 -c 'import grpc' 2>/dev/null") then
    print("gateway_nginx_bench: python3-grpcio upstream skipped: no python3-grpcio")
  else
    upstreams[#upstreams + 1] = { name = name, label = u[1], command = u[2], how = u[4],
      server = helper.spawn_command(u[2], u[3]) }
  end
end
-- The path of upstream `name`'s route.
local function path_of(name) return name == "cpp" and "/v1/echo" or "/" .. name .. "/v1/echo" end
local list, locations = {}, {}
for _, u in ipairs(upstreams) do
  list[#list + 1] = u.name .. "=" .. u.server.port
  local watch = abort and "            lua_check_client_abort on;\n            lua_need_request_body on;\n" or ""
  locations[#locations + 1] = ("        location = %s {\n%s"
    .. "            content_by_lua_block { gw.handle(%q) }\n        }"):format(path_of(u.name), watch, u.name)
end
local answer = N.start("bench-answer", ANSWER)
local conf = FRONT:gsub("@ANSWER@", tostring(answer.port)):gsub("@UPSTREAMS@", table.concat(list, " "))
conf = conf:gsub("@LOCATIONS@", function() return table.concat(locations, "\n") end)
conf = conf:gsub("@JITV@", function() return jitv and ("require(\"jit.v\").start(%q)"):format(jitv) or "" end)

-- nginx on `conf` as one process under callgrind (N.start's prefix and
-- fill-ins); n.vgpid is valgrind's process, n.out its dump file's name.
local function start_callgrind(name, text)
  local port = N.free_port()
  local prefix = N.ROOT .. "/build/nginx/" .. name .. "-" .. port
  os.execute("rm -rf " .. N.quote(prefix) .. "; mkdir -p " .. N.quote(prefix .. "/conf") .. " "
    .. N.quote(prefix .. "/logs") .. " " .. N.quote(prefix .. "/temp"))
  text = text:gsub("master_process on", "master_process off"):gsub("@ROOT@", N.ROOT):gsub("@PORT@", tostring(port))
  N.write(prefix .. "/conf/nginx.conf", text)
  local out = prefix .. "/callgrind.out"
  local script = "valgrind --tool=callgrind --callgrind-out-file=" .. N.quote(out) .. " nginx -p "
    .. N.quote(prefix .. "/") .. " -c " .. N.quote(prefix .. "/conf/nginx.conf") .. " -e "
    .. N.quote(prefix .. "/logs/error.log") .. " >" .. N.quote(prefix .. ".out") .. " 2>&1 & n=$!; echo $n > "
    .. N.quote(prefix .. "/vg.pid") .. "; cat >/dev/null; kill -TERM $n 2>/dev/null; wait $n"
  local n = N.launch(script, port, prefix, { prefix .. ".out", prefix .. "/logs/error.log" })
  n.vgpid, n.out = N.read(prefix .. "/vg.pid"):match("%d+"), out
  return n
end

local front = callgrind and start_callgrind("bench-gateway-cg", conf) or N.start("bench-gateway", conf)
local script = os.tmpname()
N.write(script, "wrk.method = 'POST'\nwrk.body = '" .. BODY .. "'\nwrk.headers['Content-Type'] = 'application/json'\n")

local UNIT = { us = 1e-3, ms = 1, s = 1000 }

-- The worker process of the nginx `n` (one worker), or nil without pgrep.
local function worker_of(n)
  local f = io.open(n.prefix .. "/logs/nginx.pid")
  local master = f and f:read("*n")
  if f then f:close() end
  local p = master and io.popen("pgrep -P " .. master .. " 2>/dev/null")
  local pid = p and p:read("*n")
  if p then p:close() end
  return pid
end

local TICKS = 100 -- USER_HZ
-- Seconds of CPU the process `pid` used so far (user + system, every
-- thread, /proc/PID/stat; nil where there is no /proc): the CPU per
-- request is a figure the other processes sharing the cores disturb less
-- than the rate.
local function cpu_of(pid)
  local f = pid and io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local fields = {}
  for x in f:read("*a"):match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  f:close()
  return (tonumber(fields[12]) + tonumber(fields[13])) / TICKS
end
local worker = worker_of(front)

-- requests/s, p99 in ms, non-2xx count of `seconds` of wrk on `path`, the
-- CPU seconds the front worker and the process `upstream` used meanwhile
-- (nil without /proc), and the number of requests.
local function drive(path, seconds, upstream)
  local c0, u0 = cpu_of(worker), cpu_of(upstream)
  local out = io.popen("wrk -t1 -c32 -d" .. seconds .. "s --latency -s " .. N.quote(script) .. " "
    .. N.quote(front.url .. path) .. " 2>&1")
  local text = out:read("*a")
  out:close()
  local c1, u1 = cpu_of(worker), cpu_of(upstream)
  local rate = tonumber(text:match("Requests/sec:%s+([%d.]+)"))
  local p99, unit = text:match("\n%s+99%%%s+([%d.]+)(%a+)")
  assert(rate and p99, "wrk said: " .. text)
  local total = assert(tonumber(text:match("(%d+) requests in")), "wrk said: " .. text)
  return rate, tonumber(p99) * UNIT[unit], tonumber(text:match("Non%-2xx or 3xx responses: (%d+)") or 0),
    c0 and c1 and c1 - c0, u0 and u1 and u1 - u0, total
end

-- The instructions callgrind counted in `front` since the last zeroing.
-- With --keep, the dump is copied to DIR/<name>.callgrind.
local function instructions(name)
  assert(os.execute("callgrind_control -d " .. front.vgpid .. " >/dev/null 2>&1"))
  local p = io.popen("ls -t " .. N.quote(front.out) .. "* | head -1")
  local file = p:read("*l")
  p:close()
  local text = N.read(file)
  if keep then
    assert(os.execute("mkdir -p " .. N.quote(keep) .. " && cp " .. N.quote(file) .. " "
      .. N.quote(keep .. "/" .. name .. ".callgrind")))
  end
  return assert(tonumber(text:match("\ntotals: (%d+)") or text:match("\nsummary: (%d+)")), "no totals in " .. file)
end

-- `n` POSTs of BODY to `path` by h2load over HTTP/1.1, all answered 2xx.
local function h2load(path, n)
  local p = io.popen("h2load --h1 -c8 -m1 -n" .. n .. " -d " .. N.quote(script .. ".json")
    .. " -H 'Content-Type: application/json' " .. N.quote(front.url .. path) .. " 2>&1")
  local text = p:read("*a")
  p:close()
  assert(tonumber(text:match("status codes: (%d+) 2xx")) == n, "h2load said: " .. text)
end

-- Which upstream is which: its command line and how it serves.
local function print_upstreams()
  for _, u in ipairs(upstreams) do
    print(("  %s: %s (%s)"):format(u.label, u.command:gsub(" 0$", " PORT"), u.how))
  end
end

local ok, err = pcall(function()
  if callgrind then
    N.write(script .. ".json", BODY)
    local COUNT = 3000
    local cases = { { "nginx proxy_pass -> HTTP JSON upstream (ceiling)", "/proxy", "proxy" } }
    for _, u in ipairs(upstreams) do
      cases[#cases + 1] = { "nginx + protocall gateway -> " .. u.label .. " upstream", path_of(u.name), u.name }
    end
    print(("REST/JSON through nginx under callgrind (one process), h2load --h1 -c8, %d requests after 4,000")
      :format(COUNT))
    local base
    for _, case in ipairs(cases) do
      h2load(case[2], 4000) -- warm-up: connections, the JIT's traces
      assert(os.execute("callgrind_control -z " .. front.vgpid .. " >/dev/null 2>&1"))
      h2load(case[2], COUNT)
      local per = instructions(case[3]) / COUNT
      base = base or per
      print(("  %-60s %8.1fk instructions a request (%.2fx)"):format(case[1], per / 1000, per / base))
    end
    print_upstreams()
    os.remove(script .. ".json")
    return
  end
  local cases = { { key = "proxy", path = "/proxy", label = "nginx proxy_pass -> HTTP JSON upstream (ceiling)",
    pid = worker_of(answer) } }
  for _, u in ipairs(upstreams) do
    cases[#cases + 1] = { key = u.name, path = path_of(u.name), pid = u.server.pid,
      label = "nginx + protocall gateway -> " .. u.label .. " upstream" }
  end
  -- the answers are the same JSON every way
  for _, case in ipairs(cases) do
    local p = io.popen("curl -s -d '" .. BODY .. "' " .. N.quote(front.url .. case.path))
    local got = p:read("*a")
    p:close()
    assert(got == BODY, case.path .. " answered " .. got)
    drive(case.path, 1) -- warm-up (the worker's connections, the JIT)
  end
  -- every round of a case: {rate =, p99 =, cpu =, ucpu =, total =}; the
  -- pair ratios of each gateway upstream
  local runs, ratios = {}, {}
  local function run(case)
    local rate, p99, bad, cpu, ucpu, total = drive(case.path, SECONDS, case.pid)
    assert(bad == 0, case.key .. ": " .. bad .. " answers not 2xx")
    local r = runs[case.key] or {}
    runs[case.key] = r
    r[#r + 1] = { rate = rate, p99 = p99, cpu = cpu, ucpu = ucpu, total = total }
    return rate
  end
  local proxy = cases[1]
  for round = 1, ROUNDS do
    for i = 2, #cases do
      local case = cases[i]
      local g, p
      -- which goes first alternates from pair to pair and round to round
      if (round + i) % 2 == 0 then
        p = run(proxy)
        g = run(case)
      else
        g = run(case)
        p = run(proxy)
      end
      local l = ratios[case.key] or { first = {}, second = {} }
      ratios[case.key] = l
      l[#l + 1] = g / p
      local o = (round + i) % 2 == 0 and l.second or l.first
      o[#o + 1] = g / p
    end
  end
  -- the value at fraction q (0..1) of the sorted numbers `l`, interpolated
  local function quantile(l, q)
    local x = (#l - 1) * q + 1
    local i = math.floor(x)
    return l[i] + (x - i) * ((l[i + 1] or l[i]) - l[i])
  end
  -- the sorted copy of field `f` of the rounds `l` (or of the numbers)
  local function sorted(l, f)
    local s = {}
    for i, r in ipairs(l) do s[i] = f and r[f] or r end
    table.sort(s)
    return s
  end
  -- microseconds of the CPU field `f` per request over all the rounds `l`
  local function per_request(l, f)
    local cpu, total = 0, 0
    for _, r in ipairs(l) do
      if not r[f] then return nil end
      cpu, total = cpu + r[f], total + r.total
    end
    return total > 0 and cpu / total * 1e6 or nil
  end
  print(("REST/JSON through nginx, 1 worker, wrk -c32: %d rounds, each a pair per gateway upstream (%d s of it"
    .. " and %d s of proxy_pass back to back, the order alternating); load average %s"):format(ROUNDS, SECONDS,
    SECONDS, H.loadavg()))
  local function us(x) return x and ("%9.1f"):format(x) or ("%9s"):format("-") end
  print(("  %-60s %9s %9s %9s %11s %11s %10s %9s"):format("", "req/s", "p99 ms", "ratio", "quartiles", "min-max",
    "us CPU/req", "upstream"))
  for _, case in ipairs(cases) do
    local l = runs[case.key]
    local rate, p99 = quantile(sorted(l, "rate"), 0.5), quantile(sorted(l, "p99"), 0.5)
    local ratio, quart, range = "", "", ""
    local r = ratios[case.key] and sorted(ratios[case.key])
    if r then
      ratio = ("%.2fx"):format(quantile(r, 0.5))
      quart = ("%.2f-%.2f"):format(quantile(r, 0.25), quantile(r, 0.75))
      range = ("%.2f-%.2f"):format(r[1], r[#r])
      if case.key == "cpp" then H.record("gateway_nginx_ratio", quantile(r, 0.5)) end
    end
    print(("  %-60s %9.0f %9.2f %9s %11s %11s %10s %s"):format(case.label, rate, p99, ratio, quart, range,
      us(per_request(l, "cpu")), us(per_request(l, "ucpu"))))
  end
  print("  ratio: the median over the row's pairs of its req/s / the adjacent proxy_pass round's (the goal,")
  print("  >= 0.8x: the C++ row's median pair ratio), with the pair ratios' quartiles and min-max; req/s, p99:")
  print("  medians of the row's rounds; us CPU/req: the front worker's and the upstream's (nginx's worker, or")
  print("  the gRPC server's process) over all the row's rounds")
  for _, case in ipairs(cases) do
    local s, o = sorted(runs[case.key], "rate"), ratios[case.key]
    -- the median pair ratio by which went first: a gap is what the order
    -- does, which the alternation cancels in the median of all pairs
    local order = o and ("; median pair ratio when it ran first %.2fx, second %.2fx"):format(
      quantile(sorted(o.first), 0.5), quantile(sorted(o.second), 0.5)) or ""
    print(("  %s: req/s of its %d rounds %.0f-%.0f%s"):format(case.key, #s, s[1], s[#s], order))
  end
  print_upstreams()
end)
os.remove(script)
N.stop(front)
N.stop(answer)
for _, u in ipairs(upstreams) do helper.stop(u.server) end
if not ok then error(err, 0) end
