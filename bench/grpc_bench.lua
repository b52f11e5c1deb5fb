-- gRPC over HTTP/2 (pc.grpc): unary round trips over loopback h2c against
-- the python3-grpcio test server (spec/grpc_server.py), one connection,
-- one call at a time, then 64 at a time from pc.spawn tasks. The python
-- server bounds every client here (README "Services"
-- measures ~3,400 calls/s from it); bench/service_bench.lua compares clients
-- against a C++ gRPC server.
-- Baseline: a 10-byte echo; cases vary the payload, compression and shape
-- (wall-clock time per call). Then calls per second next to Debian's
-- python3-grpcio client against the same server.
local pc = require "protocall" -- first: the harness then finds core.monotonic
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

local server = helper.spawn("grpc")
local t = pc.grpc(server.url)
local small, big = string.rep("x", 10), string.rep("y", 10 * 1024)

local ok, err = pcall(function()
  local results = H.run {
    title = "pc.grpc unary round trips over loopback h2c (python3-grpcio server)",
    baseline = {
      name = "unary echo, 10 B",
      callgrind_iters = 300, -- each call is ~1 ms under valgrind
      fn = function(n)
        for _ = 1, n do t:unary("/test.Test/Echo", small) end
      end,
    },
    cases = {
      {
        name = "unary echo, 10 KiB",
        callgrind_iters = 300,
        goal = "(payload cost)",
        fn = function(n)
          for _ = 1, n do t:unary("/test.Test/Echo", big) end
        end,
      },
      {
        name = "unary echo, 10 KiB gzip request",
        callgrind_iters = 300,
        goal = "(compression cost)",
        fn = function(n)
          local s = { compression = "gzip" }
          for _ = 1, n do t:unary("/test.Test/Echo", big, s) end
        end,
      },
      {
        name = "unary echo, 10 B, timeout + metadata",
        callgrind_iters = 300,
        goal = "(grpc-timeout, 2 headers)",
        fn = function(n)
          local s = { timeout = 5, metadata = { { "x-a", "1" }, { "x-b-bin", "\0\1" } } }
          for _ = 1, n do t:unary("/test.Test/Echo", small, s) end
        end,
      },
      {
        name = "server stream, per message",
        callgrind_iters = 3000,
        goal = "(streaming cost)",
        fn = function(n)
          for _ in t:server_stream("/test.Test/Stream", tostring(n)) do end
        end,
      },
    },
  }
  if results == nil then return end -- a --callgrind child: one case only
  -- Alternating runs, best of three each, as the shared machine's load
  -- drifts: about one second of calls per run.
  local ours, py = 0, 0
  for _ = 1, 3 do
    local calls = 3000
    local t0 = helper.now()
    for _ = 1, calls do t:unary("/test.Test/Echo", small) end
    ours = math.max(ours, calls / (helper.now() - t0))
    local f = io.popen("/usr/bin/python3 spec/grpc_server.py client " .. server.port .. " 10 1")
    py = math.max(py, tonumber(f:read("*l")))
    f:close()
  end
  -- 64 calls in flight: 64 tasks of pc.spawn on the one connection.
  local wide = 0
  for _ = 1, 3 do
    local calls, tasks = 6400, 64
    local t0 = helper.now()
    for _ = 1, tasks do
      pc.spawn(function()
        for _ = 1, calls // tasks do t:unary("/test.Test/Echo", small) end
      end)
    end
    pc.run()
    wide = math.max(wide, calls / (helper.now() - t0))
  end
  H.report("unary echo 10 B, wall-clock calls per second, same server, best of 3", {
    { name = "protocall (pc.grpc, engine on nghttp2)", value = ours, unit = "calls/s" },
    { name = "protocall, 64 calls in flight (pc.spawn)", value = wide, unit = "calls/s" },
    { name = "python3-grpcio client", value = py, unit = "calls/s" },
    { name = "protocall / python3-grpcio", value = ours / py, unit = "x" },
  })
end)
t:close()
helper.stop(server)
if not ok then error(err, 0) end
