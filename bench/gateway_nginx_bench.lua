-- REST/JSON through nginx (protocall.resty.gateway, doc/gateway.md): wrk ->
-- nginx transcoding a POST of {"data": base64} into bench.Echo/Echo over
-- the worker's shared HTTP/2 connection -> the C++ gRPC echo server
-- (bench/grpc_cpp), beside wrk -> nginx proxy_pass of the same JSON to an
-- HTTP upstream answering that JSON (a second nginx, `return 200`): the
-- ceiling of a JSON request through nginx. One nginx worker in front, 32
-- connections, one wrk thread; the two take turns (3 rounds of 5 s, the
-- median reported; --quick: 1 round of 1 s). The issue's goal: requests/s
-- >= 0.8x of plain proxying (APISIX's grpc-transcode measured 0.47x).
-- On a 2-core machine wrk, both nginx and the upstream share the cores:
-- the ratio, not the rates, is the figure.
-- Run: build/release/protocall bench/gateway_nginx_bench.lua [--quick]
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local H = require "bench.harness"
local helper = require "grpc_helper"

local quick = false
for _, a in ipairs(arg or {}) do if a == "--quick" then quick = true end end
local ROUNDS, SECONDS = quick and 1 or 3, quick and 1 or 5

local absent = N.missing { ["/usr/bin/wrk"] = "wrk" }
if absent then
  print("gateway_nginx_bench: skipped, missing: " .. absent)
  return
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
        gw = require "protocall.resty.gateway"
        local f = assert(io.open("@ROOT@/bench/grpc_cpp/echo.proto"))
        assert(gw.configure("echo", { protos = { ["echo.proto"] = f:read("*a") }, upstream = "127.0.0.1:@GRPC@",
            http = { rules = { { selector = "bench.Echo.Echo", post = "/v1/echo", body = "*" } } } }))
        f:close()
    }
    server {
        listen 127.0.0.1:@PORT@;
        location = /v1/echo {
            content_by_lua_block { gw.handle("echo") }
        }
        location = /proxy {
            proxy_pass http://ceiling/answer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
]]

local grpc = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "C++ echo server")
local answer = N.start("bench-answer", ANSWER)
local front = N.start("bench-gateway", (FRONT:gsub("@ANSWER@", tostring(answer.port)):gsub("@GRPC@",
  tostring(grpc.port))))
local script = os.tmpname()
N.write(script, "wrk.method = 'POST'\nwrk.body = '" .. BODY .. "'\nwrk.headers['Content-Type'] = 'application/json'\n")

local UNIT = { us = 1e-3, ms = 1, s = 1000 }

-- Seconds of CPU the front nginx's worker used so far (user + system,
-- /proc/PID/stat; nil where there is no /proc): the CPU per request is a
-- figure the other processes sharing the cores disturb less than the rate.
local worker
do
  local f = io.open(front.prefix .. "/logs/nginx.pid")
  local master = f and f:read("*n")
  if f then f:close() end
  local p = master and io.popen("pgrep -P " .. master .. " 2>/dev/null")
  worker = p and p:read("*n")
  if p then p:close() end
end
local TICKS = 100 -- USER_HZ
local function worker_cpu()
  local f = worker and io.open("/proc/" .. worker .. "/stat")
  if not f then return nil end
  local fields = {}
  for x in f:read("*a"):match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  f:close()
  return (tonumber(fields[12]) + tonumber(fields[13])) / TICKS
end

-- requests/s, p99 in ms, non-2xx count of `seconds` of wrk on `path`,
-- and the front worker's CPU microseconds per request (nil without /proc).
local function drive(path, seconds)
  local c0 = worker_cpu()
  local out = io.popen("wrk -t1 -c32 -d" .. seconds .. "s --latency -s " .. N.quote(script) .. " "
    .. N.quote(front.url .. path) .. " 2>&1")
  local text = out:read("*a")
  out:close()
  local c1 = worker_cpu()
  local rate = tonumber(text:match("Requests/sec:%s+([%d.]+)"))
  local p99, unit = text:match("\n%s+99%%%s+([%d.]+)(%a+)")
  assert(rate and p99, "wrk said: " .. text)
  local total = tonumber(text:match("(%d+) requests in"))
  local cpu = c0 and c1 and total and total > 0 and (c1 - c0) / total * 1e6 or nil
  return rate, tonumber(p99) * UNIT[unit], tonumber(text:match("Non%-2xx or 3xx responses: (%d+)") or 0), cpu
end

local ok, err = pcall(function()
  -- the answers are the same JSON both ways
  for _, path in ipairs { "/v1/echo", "/proxy" } do
    local p = io.popen("curl -s -d '" .. BODY .. "' " .. N.quote(front.url .. path))
    local got = p:read("*a")
    p:close()
    assert(got == BODY, path .. " answered " .. got)
  end
  drive("/v1/echo", 1) -- warm-up (the worker's connection, the JIT)
  drive("/proxy", 1)
  local runs = { gateway = {}, proxy = {} }
  for _ = 1, ROUNDS do
    for _, case in ipairs { { "gateway", "/v1/echo" }, { "proxy", "/proxy" } } do
      local rate, p99, bad, cpu = drive(case[2], SECONDS)
      assert(bad == 0, case[1] .. ": " .. bad .. " answers not 2xx")
      local r = runs[case[1]]
      r[#r + 1] = { rate = rate, p99 = p99, cpu = cpu }
    end
  end
  local function median(list)
    table.sort(list, function(a, b) return a.rate < b.rate end)
    return list[(#list + 1) // 2]
  end
  local g, p = median(runs.gateway), median(runs.proxy)
  print(("REST/JSON through nginx, 1 worker, wrk -c32, median of %d x %d s"):format(ROUNDS, SECONDS))
  local function cpu(r) return r.cpu and ("%9.1f"):format(r.cpu) or ("%9s"):format("-") end
  print(("  %-48s %9s %9s %9s"):format("", "req/s", "p99 ms", "us CPU/req"))
  print(("  %-48s %9.0f %9.2f %s"):format("nginx proxy_pass -> HTTP JSON upstream (ceiling)", p.rate, p.p99, cpu(p)))
  print(("  %-48s %9.0f %9.2f %s"):format("nginx + protocall gateway -> C++ gRPC upstream", g.rate, g.p99, cpu(g)))
  print(("  gateway / proxy_pass: %.2fx (goal >= 0.8x); us CPU/req: the front worker's, of the run shown")
    :format(g.rate / p.rate))
  H.record("gateway_nginx_ratio", g.rate / p.rate)
end)
os.remove(script)
N.stop(front)
N.stop(answer)
helper.stop(grpc)
if not ok then error(err, 0) end
