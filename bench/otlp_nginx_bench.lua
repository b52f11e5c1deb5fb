-- The OTLP/gRPC export inside nginx (protocall.resty.otlp,
-- doc/openresty.md): one nginx worker queues N spans shaped as
-- request_span makes them (seven attributes) with exporter:span, then
-- sends them with exporter:flush (batches of 512 over the worker's shared
-- connection) to the collector stand-in (spec/otlp_collector.lua served by
-- `protocall serve`, which decodes every span and writes a line per span).
-- Reported: the worker's CPU per span queued (what log_by_lua pays), and
-- the export's spans/s per worker, by the worker's CPU (os.clock of the
-- worker: what the export costs nginx) and by the wall clock (bounded by the
-- collector, which shares the machine). Median of 3 rounds of 50,000 spans
-- (--quick: 1 round of 5,000). Needs the corpus's opentelemetry-proto files.
-- Run: build/release/protocall bench/otlp_nginx_bench.lua [--quick]
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local helper = require "grpc_helper"
local corpus = require "corpus"

local quick = false
for _, a in ipairs(arg or {}) do if a == "--quick" then quick = true end end
local ROUNDS, SPANS = quick and 1 or 3, quick and 5000 or 50000

local absent = N.missing { ["/usr/bin/curl"] = "curl" }
local PROTOS = N.ROOT .. "/" .. corpus.dir .. "/protos/opentelemetry"
if not absent and not N.exists(PROTOS .. "/opentelemetry/proto/collector/trace/v1/trace_service.proto") then
  absent = "the corpus's opentelemetry-proto files (" .. PROTOS .. ")"
end
if absent then
  print("otlp_nginx_bench: skipped, missing: " .. absent)
  return
end

local q = N.quote
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
local out = os.tmpname()
local collector = helper.spawn_command("sh -c " .. q(q(BIN) .. " serve -listen 127.0.0.1:0 spec/otlp_collector.lua -- "
  .. q(PROTOS) .. " " .. q(out) .. " 2>&1 & p=$!; cat >/dev/null; kill $p"),
  "the collector stand-in", "listening on 127%.0%.0%.1:(%d+)")

local CONF = [[
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
master_process on;
worker_processes 1;
pid logs/nginx.pid;
error_log logs/error.log;
events {
    worker_connections 1024;
}
http {
    access_log off;
    client_body_temp_path temp/body;
    lua_package_cpath "@ROOT@/build/luajit/?.so;;";
    init_by_lua_block {
        local pc = require "protocall"
        otlp = require("protocall.resty.otlp").new(pc, {
            target = "127.0.0.1:@COLLECTOR@", protos = "@PROTOS@",
            interval = 3600, batch_size = 512, max_queue = 1000000 })
    }
    init_worker_by_lua_block { assert(otlp:start()) }
    server {
        listen 127.0.0.1:@PORT@;
        location = /bench {
            content_by_lua_block {
                local n = tonumber(ngx.var.arg_n)
                local before = otlp:stats()
                ngx.update_time()
                local now = ngx.now()
                local c0 = os.clock()
                for i = 1, n do
                    otlp:span { name = "GET /item", start = now - 0.001, finish = now,
                        trace_id = string.format("%032x", i), attributes = {
                        ["http.request.method"] = "GET", ["url.path"] = "/item", ["url.scheme"] = "http",
                        ["http.response.status_code"] = 200, ["client.address"] = "127.0.0.1",
                        ["server.address"] = "localhost", ["user_agent.original"] = "curl/7.88.1" } }
                end
                local c1 = os.clock()
                ngx.update_time()
                local t1 = ngx.now()
                otlp:flush()
                ngx.update_time()
                local t2, c2 = ngx.now(), os.clock()
                local after = otlp:stats()
                ngx.say(string.format("%.9f %.9f %.9f %d %d", c1 - c0, c2 - c1, t2 - t1,
                    after.exported - before.exported, after.failed - before.failed))
            }
        }
    }
}
]]

local n = N.start("otlp-bench", (CONF:gsub("@COLLECTOR@", tostring(collector.port)):gsub("@PROTOS@", PROTOS)))
local ok, err = pcall(function()
  local queue_us, cpu_rate, wall_rate = {}, {}, {}
  for r = 1, ROUNDS do
    local p = io.popen("curl -s -m 600 " .. q(n.url .. "/bench?n=" .. SPANS))
    local line = p:read("a")
    p:close()
    local qcpu, ecpu, wall, exported, failed = line:match("^(%S+) (%S+) (%S+) (%d+) (%d+)")
    assert(qcpu and tonumber(exported) == SPANS and tonumber(failed) == 0, "round " .. r .. ": " .. line)
    queue_us[r], cpu_rate[r], wall_rate[r] = qcpu / SPANS * 1e6, SPANS / ecpu, SPANS / wall
  end
  local function median(t)
    table.sort(t)
    return t[(#t + 1) // 2]
  end
  print(("OTLP/gRPC export inside nginx, 1 worker, %d spans of 7 attributes, batches of 512, median of %d")
    :format(SPANS, ROUNDS))
  print(("  queueing a span (exporter:span, log_by_lua's cost)   %8.2f us of worker CPU"):format(median(queue_us)))
  print(("  export, spans/s per worker CPU-second                %8.0f"):format(median(cpu_rate)))
  print(("  export, spans/s per worker by the wall clock         %8.0f (the collector stand-in shares the cores)")
    :format(median(wall_rate)))
end)
N.stop(n)
helper.stop(collector)
os.remove(out)
if not ok then error(err, 0) end
