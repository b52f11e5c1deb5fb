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

-- requests/s, p99 in ms, non-2xx count of `seconds` of wrk on `path`.
local function drive(path, seconds)
  local out = io.popen("wrk -t1 -c32 -d" .. seconds .. "s --latency -s " .. N.quote(script) .. " "
    .. N.quote(front.url .. path) .. " 2>&1")
  local text = out:read("*a")
  out:close()
  local rate = tonumber(text:match("Requests/sec:%s+([%d.]+)"))
  local p99, unit = text:match("\n%s+99%%%s+([%d.]+)(%a+)")
  assert(rate and p99, "wrk said: " .. text)
  return rate, tonumber(p99) * UNIT[unit], tonumber(text:match("Non%-2xx or 3xx responses: (%d+)") or 0)
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
      local rate, p99, bad = drive(case[2], SECONDS)
      assert(bad == 0, case[1] .. ": " .. bad .. " answers not 2xx")
      local r = runs[case[1]]
      r[#r + 1] = { rate = rate, p99 = p99 }
    end
  end
  local function median(list)
    table.sort(list, function(a, b) return a.rate < b.rate end)
    return list[(#list + 1) // 2]
  end
  local g, p = median(runs.gateway), median(runs.proxy)
  print(("REST/JSON through nginx, 1 worker, wrk -c32, median of %d x %d s"):format(ROUNDS, SECONDS))
  print(("  %-48s %9s %9s"):format("", "req/s", "p99 ms"))
  print(("  %-48s %9.0f %9.2f"):format("nginx proxy_pass -> HTTP JSON upstream (ceiling)", p.rate, p.p99))
  print(("  %-48s %9.0f %9.2f"):format("nginx + protocall gateway -> C++ gRPC upstream", g.rate, g.p99))
  print(("  gateway / proxy_pass: %.2fx (goal >= 0.8x)"):format(g.rate / p.rate))
end)
os.remove(script)
N.stop(front)
N.stop(answer)
helper.stop(grpc)
if not ok then error(err, 0) end
