-- `protocall gateway` (doc/gateway.md, the standalone command): wrk POSTs
-- {"data": base64} as REST/JSON to /v1/echo (a rule given apart with
-- -rules), the gateway transcodes it into bench.Echo/Echo and forwards it
-- over one HTTP/2 connection to the C++ gRPC echo server (bench/grpc_cpp).
-- 64 connections, one wrk thread, 3 rounds of 5 s (--quick: 1 of 1 s), the
-- median reported: requests/s, p99, and the gateway's CPU per request
-- (its utime + stime from /proc over the requests served). The gateway is
-- one process on one core; on a 2-core machine wrk and the upstream share
-- the other.
-- grpc-gateway publishes no benchmark of its own; the nearest figure is a
-- user's (grpc-gateway issue #1458): 17,102 requests/s for a ping through
-- grpc-gateway's runtime with 100 connections, Go on an unstated
-- multi-core machine: of the same order, not a like-for-like comparison.
-- Run: build/release/protocall bench/gateway_bench.lua [--quick]
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local helper = require "grpc_helper"
local G = require "gateway_cases"

local quick = false
for _, a in ipairs(arg or {}) do if a == "--quick" then quick = true end end
local ROUNDS, SECONDS = quick and 1 or 3, quick and 1 or 5
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"

if not N.exists("/usr/bin/wrk") then
  print("gateway_bench: skipped, missing: wrk")
  return
end
assert(os.execute("make -s -C bench/grpc_cpp >/dev/null"), "make -C bench/grpc_cpp failed")

local BODY = '{"data":"aGVsbG8sIHdvcmxkIQ=="}'
local rules = os.tmpname()
N.write(rules, '{"rules": [{"selector": "bench.Echo.Echo", "post": "/v1/echo", "body": "*"}]}')
local script = os.tmpname()
N.write(script, "wrk.method = 'POST'\nwrk.body = '" .. BODY .. "'\nwrk.headers['Content-Type'] = 'application/json'\n")

local grpc = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "C++ echo server")
local gw = G.start_gateway(BIN, grpc.port, "-I bench/grpc_cpp -proto echo.proto -rules " .. N.quote(rules))

local UNIT = { us = 1e-3, ms = 1, s = 1000 }
local TICK = tonumber(io.popen("getconf CLK_TCK"):read("*l")) or 100

-- CPU seconds the gateway process has used.
local function cpu()
  local stat = N.read("/proc/" .. gw.pid .. "/stat")
  local fields = {}
  for f in stat:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = f end
  return (tonumber(fields[12]) + tonumber(fields[13])) / TICK -- utime, stime (fields 14, 15)
end

-- requests/s, p99 in ms, requests, non-2xx count of `seconds` of wrk.
local function drive(seconds)
  local out = io.popen("wrk -t1 -c64 -d" .. seconds .. "s --latency -s " .. N.quote(script) .. " "
    .. N.quote(gw.url .. "/v1/echo") .. " 2>&1")
  local text = out:read("*a")
  out:close()
  local rate = tonumber(text:match("Requests/sec:%s+([%d.]+)"))
  local p99, unit = text:match("\n%s+99%%%s+([%d.]+)(%a+)")
  local n = tonumber(text:match("(%d+) requests in"))
  assert(rate and p99 and n, "wrk said: " .. text)
  return rate, tonumber(p99) * UNIT[unit], n, tonumber(text:match("Non%-2xx or 3xx responses: (%d+)") or 0)
end

local ok, err = pcall(function()
  local p = io.popen("curl -s -d '" .. BODY .. "' " .. N.quote(gw.url .. "/v1/echo"))
  local got = p:read("*a")
  p:close()
  assert(got == BODY, "/v1/echo answered " .. got)
  drive(1) -- warm-up
  local runs = {}
  for _ = 1, ROUNDS do
    local c0 = cpu()
    local rate, p99, n, bad = drive(SECONDS)
    local used = cpu() - c0
    assert(bad == 0, bad .. " answers not 2xx")
    runs[#runs + 1] = { rate = rate, p99 = p99, us = used / n * 1e6, core = used / SECONDS }
  end
  table.sort(runs, function(a, b) return a.rate < b.rate end)
  local m = runs[(#runs + 1) // 2]
  print(("protocall gateway, REST/JSON POST -> C++ gRPC echo, wrk -t1 -c64, median of %d x %d s"):format(ROUNDS,
    SECONDS))
  print(("  %9s %9s %14s %10s"):format("req/s", "p99 ms", "CPU us/req", "cores"))
  print(("  %9.0f %9.2f %14.1f %10.2f"):format(m.rate, m.p99, m.us, m.core))
end)
os.remove(script)
os.remove(rules)
helper.stop(gw)
helper.stop(grpc)
if not ok then error(err, 0) end
