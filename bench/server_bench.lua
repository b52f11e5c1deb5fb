-- Serving (pc.listen): unary calls per second served by protocall and by
-- the python3-grpcio server (spec/grpc_server.py), driven by the same
-- clients in the same run: Debian's python3-grpcio client (one call at a
-- time, spec/grpc_server.py client mode) and protocall's client with 1 and
-- 64 calls in flight (pc.spawn tasks); then the protocall server's memory
-- per idle connection (VmRSS of its process before and after 200 more
-- connections, each idle after one call).
--
--   build/release/protocall bench/server_bench.lua
--
-- The protocall server runs in its own process (this file with --serve),
-- so the clients here cannot slow it down by sharing its Lua state.
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

assert(pc.load([[
syntax = "proto3";
package bench;
message Msg { bytes data = 1; }
service Bench { rpc Echo(Msg) returns (Msg); }
]]))

if arg[1] == "--serve" then
  local l = pc.listen(pc.server { ["bench.Bench"] = { Echo = function(m) return m end } },
    "127.0.0.1:0", { max_connections = 10000 })
  local f = io.open("/proc/self/stat")
  local pid = f:read("n")
  f:close()
  print(l.port .. " " .. pid)
  io.stdout:flush()
  l:serve()
  return
end

local function rss_kib(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  local text = f:read("a")
  f:close()
  return tonumber(text:match("VmRSS:%s*(%d+) kB"))
end

local BIN = arg[-1] or "build/release/protocall"
local ours = helper.spawn_command(BIN .. " bench/server_bench.lua --serve", "protocall server")
local py = helper.spawn("grpc")

local ok, err = pcall(function()
  local request = pc.encode(pc.type("bench.Msg") { data = string.rep("x", 10) })
  local function python_client(server, path)
    local f = io.popen("/usr/bin/python3 spec/grpc_server.py client " .. server.port .. " 10 1 "
      .. path)
    local v = tonumber(f:read("*l"))
    f:close()
    return v
  end
  local function protocall_client(server, path, tasks)
    local t = pc.grpc(server.url)
    t:unary(path, request) -- connect first
    local calls = 2000 * tasks // (tasks > 1 and 8 or 1)
    local t0 = helper.now()
    for _ = 1, tasks do
      pc.spawn(function()
        for _ = 1, calls // tasks do t:unary(path, request) end
      end)
    end
    pc.run()
    local rate = calls / (helper.now() - t0)
    t:close()
    return rate
  end
  -- Alternating runs, best of three each, as the shared machine's load drifts.
  local r = { py_ours = 0, py_py = 0, one_ours = 0, one_py = 0, wide_ours = 0, wide_py = 0 }
  for _ = 1, 3 do
    r.py_ours = math.max(r.py_ours, python_client(ours, "/bench.Bench/Echo"))
    r.py_py = math.max(r.py_py, python_client(py, "/test.Test/Echo"))
    r.one_ours = math.max(r.one_ours, protocall_client(ours, "/bench.Bench/Echo", 1))
    r.one_py = math.max(r.one_py, protocall_client(py, "/test.Test/Echo", 1))
    r.wide_ours = math.max(r.wide_ours, protocall_client(ours, "/bench.Bench/Echo", 64))
    r.wide_py = math.max(r.wide_py, protocall_client(py, "/test.Test/Echo", 64))
  end
  -- Memory per idle connection: 200 transports, one call each, kept open.
  local before = rss_kib(ours.pid)
  local conns = {}
  for i = 1, 200 do
    conns[i] = pc.grpc(ours.url)
    conns[i]:unary("/bench.Bench/Echo", request)
  end
  local after = rss_kib(ours.pid)
  for i = 1, #conns do conns[i]:close() end
  H.report("unary echo (10 B field), calls per second, protocall server vs python3-grpcio server, best of 3", {
    { name = "python3-grpcio client -> protocall server", value = r.py_ours, unit = "calls/s" },
    { name = "python3-grpcio client -> python3-grpcio server", value = r.py_py, unit = "calls/s" },
    { name = "protocall client, 1 in flight -> protocall server", value = r.one_ours, unit = "calls/s" },
    { name = "protocall client, 1 in flight -> python3-grpcio server", value = r.one_py, unit = "calls/s" },
    { name = "protocall client, 64 in flight -> protocall server", value = r.wide_ours, unit = "calls/s" },
    { name = "protocall client, 64 in flight -> python3-grpcio server", value = r.wide_py, unit = "calls/s" },
    { name = "protocall / python3-grpcio server, 64 in flight", value = r.wide_ours / r.wide_py, unit = "x" },
    { name = "protocall server memory per idle connection", value = (after - before) / 200, unit = "KiB" },
  })
end)
helper.stop(ours)
helper.stop(py)
if not ok then error(err, 0) end
