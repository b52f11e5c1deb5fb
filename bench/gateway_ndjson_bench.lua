-- A REST client stream of many small messages through `protocall gateway`
-- (doc/gateway.md, "The standalone command"): curl POSTs a body of N lines
-- of LINE (newline-delimited JSON, grpc-gateway's form) to nd.Collector's
-- Count (spec/fixtures/protos/gateway/ndjson.proto), served in Lua by
-- spec/ndjson_gateway.lua; prints the gateway's resident memory before and
-- after (ps), its growth against the body's size, and the gateway's CPU
-- for the request (utime + stime from /proc). Each run starts a fresh
-- gateway and upstream.
-- Run: build/release/protocall bench/gateway_ndjson_bench.lua [--quick] [--lines N] [--line JSON] [--validate]
-- (defaults: 1,300,000 lines of {}, a 3.9 MB body; --quick: 130,000 lines,
-- a check that it works). --callgrind (make bench's BENCH_ARGS) is taken
-- and changes nothing: its figures are memory and CPU time, not
-- instructions. PROTOCALL_BIN names the protocall binary of the gateway
-- (default build/release/protocall).
package.path = "spec/?.lua;" .. package.path
local N = require "nginx_helper"
local helper = require "grpc_helper"
local G = require "gateway_cases"

local lines, line, validate = 1300000, "{}", false
local i = 1
while arg and arg[i] do
  local a = arg[i]
  if a == "--lines" then
    lines = assert(tonumber(arg[i + 1]), "--lines N")
    i = i + 1
  elseif a == "--line" then
    line = assert(arg[i + 1], "--line JSON")
    i = i + 1
  elseif a == "--validate" then
    validate = true
  elseif a == "--quick" then
    lines = 130000
  elseif a ~= "--callgrind" then
    io.stderr:write("gateway_ndjson_bench: unknown flag '" .. a
      .. "' (flags: --quick, --callgrind, --lines N, --line JSON, --validate)\n")
    os.exit(2)
  end
  i = i + 1
end
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"

if not N.exists("/usr/bin/curl") then
  print("gateway_ndjson_bench: skipped, missing: curl")
  return
end

local function capture(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end
local function rss(pid) return assert(tonumber(capture("ps -o rss= -p " .. pid)), "no process " .. pid) end
local function cpu(pid)
  local f = assert(io.open("/proc/" .. pid .. "/stat"))
  local stat = f:read("*a")
  f:close()
  local fields = {}
  for w in stat:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = w end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- utime, stime (fields 14, 15) in ticks
end

local upstream = helper.spawn_command("env LUA_PATH='spec/?.lua;;' sh -c 'PC_PID=$$ exec " .. BIN
  .. " spec/ndjson_gateway.lua upstream'", "ndjson_gateway.lua")
local gateway = G.start_gateway(BIN, upstream.port, (validate and "-validate " or "")
  .. "-I spec/fixtures/protos -proto gateway/ndjson.proto")
local file = os.tmpname()
N.write(file, (line .. "\n"):rep(lines))
local size = lines * (#line + 1)
local before, cpu0 = rss(gateway.pid), cpu(gateway.pid)
local answer = capture("curl -s -m 300 --data-binary @" .. file .. " " .. gateway.url .. "/v1/items:count")
local after, cpu1 = rss(gateway.pid), cpu(gateway.pid)
os.remove(file)
helper.stop(gateway)
helper.stop(upstream)
print(("gateway_ndjson_bench: %d lines of %s (%.2f MB)%s: %s"):format(lines, line, size / 1e6,
  validate and ", -validate" or "", answer))
print(("  gateway RSS %.1f -> %.1f MB (+%.1f MB, %.1fx the body), CPU %.2f s"):format(before / 1024,
  after / 1024, (after - before) / 1024, (after - before) * 1024 / size, cpu1 - cpu0))
