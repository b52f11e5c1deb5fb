-- Serving (pc.listen) against the other servers of bench.Echo
-- (bench/grpc_cpp/echo.proto), in one run: protocall's server (this file
-- with --serve, in its own process), a python3-grpcio server
-- (bench/grpc_py/echo.py) and the C++ gRPC echo server (bench/grpc_cpp) in
-- two configurations: `echo_server 0`, every method on grpc++'s sync API
-- with its defaults (one completion queue, 1-2 polling threads), and
-- `echo_server -async 1 0`, Echo on the async API with one completion
-- queue driven by one thread (its streaming methods stay on the sync API,
-- so its streaming rows measure that API again). Each is driven by the same
-- C++ gRPC client (bench/grpc_cpp/echo_client):
-- unary calls/s with 1 and 64 calls in flight, streaming messages/s of
-- Stream (server streaming), Collect (client streaming) and Chat
-- (bidirectional, sending and reading at once), 10-byte messages; the
-- server process's CPU seconds (utime + stime of /proc/PID/stat, every
-- thread) per 10,000 calls or messages, around each client run; its memory
-- per idle connection (VmRSS before and after 200 more connections, each
-- idle after one call, opened while 200 such are already open). Rates are
-- the best of 3 alternating runs, CPU the least of them; the load average
-- is printed beside them. The goal rows against C++ take, for each figure,
-- the better of the two C++ configurations (the lesser CPU per call, the
-- lesser memory per connection), and name which one it was; the table's
-- "protocall/C++ best" column is the same for every row (the greater rate,
-- the lesser CPU or memory of the two).
--
--   build/release/protocall bench/server_bench.lua [--quick]
--
-- --quick: one run of each, shorter (a check that everything works).
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

assert(pc.load_file("bench/grpc_cpp/echo.proto", { import_paths = { "bench/grpc_cpp" } }))

if arg[1] == "--serve" then
  local Msg = pc.type("bench.Msg")
  local l = pc.listen(pc.server { ["bench.Echo"] = {
    Echo = function(m) return m end,
    Stream = function(req, ctx)
      local m, send = Msg { data = string.rep("x", req.size) }, ctx.send
      for _ = 1, req.count do send(m) end
    end,
    Collect = function(ctx)
      local n = 0
      while ctx:recv() do n = n + 1 end
      return { messages = n }
    end,
    Chat = function(ctx)
      local send = ctx.send
      while true do
        local m = ctx:recv()
        if m == nil then return end
        send(m)
      end
    end,
  } }, "127.0.0.1:0", { max_connections = 10000 })
  H.serve(l)
  return
end

local quick = false
for _, a in ipairs(arg) do if a == "--quick" then quick = true end end
local RUNS, SECONDS, COUNT, IDLE = 3, 1, 50000, 200
if quick then RUNS, SECONDS, COUNT, IDLE = 1, 0.3, 5000, 50 end

local function rss_kib(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  local text = f:read("a")
  f:close()
  return tonumber(text:match("VmRSS:%s*(%d+) kB"))
end

assert(os.execute("make -s -C bench/grpc_cpp >/dev/null"), "make -C bench/grpc_cpp failed "
       .. "(needs libgrpc++-dev and protobuf-compiler-grpc: .ci/install-deps)")
local BIN = arg[-1] or "build/release/protocall"
local CLIENT = "build/bench-grpc-cpp/echo_client"
local servers = {}
local ok, err = pcall(function()
  servers[1] = helper.spawn_command(BIN .. " bench/server_bench.lua --serve", "protocall server")
  servers[2] = helper.spawn_command("/usr/bin/python3 bench/grpc_py/echo.py server 0",
                                    "python3-grpcio server")
  servers[3] = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "C++ echo server (sync)")
  servers[4] = helper.spawn_command("build/bench-grpc-cpp/echo_server -async 1 0",
                                    "C++ echo server (-async 1)")
  local modes = {
    { name = "unary calls/s, 1 in flight", args = "unary 10 " .. SECONDS .. " 1", unit = "calls/s",
      cpu = "server CPU s per 10,000 calls, 1 in flight" },
    { name = "unary calls/s, 64 in flight", args = "unary 10 " .. SECONDS .. " 64", unit = "calls/s",
      cpu = "server CPU s per 10,000 calls, 64 in flight" },
    { name = "Stream msgs/s (server streaming)", args = "stream 10 " .. COUNT, unit = "msg/s",
      cpu = "server CPU s per 10,000 msgs, Stream" },
    { name = "Collect msgs/s (client streaming)", args = "collect 10 " .. COUNT, unit = "msg/s",
      cpu = "server CPU s per 10,000 msgs, Collect" },
    { name = "Chat msgs/s (bidirectional)", args = "chat 10 " .. COUNT, unit = "msg/s",
      cpu = "server CPU s per 10,000 msgs, Chat" },
  }
  local rate, cpu = {}, {}
  for m = 1, #modes do rate[m], cpu[m] = {}, {} end
  for _ = 1, RUNS do
    for m, mode in ipairs(modes) do
      for s, server in ipairs(servers) do
        local c0 = H.proc_cpu(server.pid)
        local r, total = H.child(CLIENT .. " " .. server.port .. " " .. mode.args)
        local c = (H.proc_cpu(server.pid) - c0) / total * 10000
        rate[m][s] = math.max(rate[m][s] or 0, r)
        cpu[m][s] = math.min(cpu[m][s] or math.huge, c)
      end
    end
  end
  -- Memory per idle connection: IDLE transports, one call each, kept open,
  -- twice. The first batch takes the heap the rate runs freed, so its
  -- figure moves with how much they left (5-18 KiB per connection for the
  -- same server between runs); the second, opened while the first is still
  -- open, is the figure of the goal.
  local request = pc.encode(pc.type("bench.Msg") { data = string.rep("x", 10) })
  local first, idle = {}, {}
  for s, server in ipairs(servers) do
    local conns = {}
    local function batch()
      local before = rss_kib(server.pid)
      for _ = 1, IDLE do
        local t = pc.grpc(server.url)
        t:unary("/bench.Echo/Echo", request)
        conns[#conns + 1] = t
      end
      return (rss_kib(server.pid) - before) / IDLE
    end
    first[s] = batch()
    idle[s] = batch()
    for i = 1, #conns do conns[i]:close() end
  end
  -- The better C++ configuration of a row: the greater rate, the lesser
  -- CPU or memory; returns its value and "sync" or "async".
  local function best_cpp(values, higher)
    local sync, async = values[3], values[4]
    if (higher and async > sync) or (not higher and async < sync) then return async, "async" end
    return sync, "sync"
  end
  local rows = {}
  local function row(name, values, higher)
    values[5] = best_cpp(values, higher) -- no column of its own: the ratio's denominator
    rows[#rows + 1] = { name = name, values = values }
  end
  for m, mode in ipairs(modes) do row(mode.name, rate[m], true) end
  for m, mode in ipairs(modes) do row(mode.cpu, cpu[m], false) end
  row("server memory per idle connection, KiB, first " .. IDLE, first, false)
  row("server memory per idle connection, KiB, next " .. IDLE, idle, false)
  H.table(("bench.Echo served over loopback h2c, 10-byte messages, C++ gRPC client, %s; "
           .. "streams of %d messages; load average %s"):format(
             quick and "one quick run" or "best of " .. RUNS, COUNT, H.loadavg()),
          { "protocall", "python3-grpcio", "C++ sync", "C++ async 1t" }, rows,
          { { name = "protocall/py", num = 1, den = 2 }, { name = "protocall/C++ best", num = 1, den = 5 } })
  print("C++ sync: `echo_server 0`, every method on grpc++'s sync API with its default threads.\n"
        .. "C++ async 1t: `echo_server -async 1 0`, Echo (the unary rows) on the async API, one completion\n"
        .. "  queue and one thread; Stream, Collect and Chat stay on the sync API, as in C++ sync.\n"
        .. "protocall/C++ best: against the better C++ column of each row (greater rate, lesser CPU or memory).")
  local goals = {}
  for m = 1, 2 do
    local x = rate[m][1] / rate[m][2]
    goals[#goals + 1] = { name = "calls/s protocall/python, " .. modes[m].name:match("%d+ in flight"),
                          value = x, unit = "x", goal = ">= 3 (calls/s)", ok = x >= 3 }
  end
  for m = 1, 2 do
    local c, which = best_cpp(cpu[m], false)
    local x = cpu[m][1] / c
    goals[#goals + 1] = { name = ("CPU per call protocall/better C++ (%s), %s"):format(
                            which, modes[m].name:match("%d+ in flight")),
                          value = x, unit = "x", goal = "<= 1.5", ok = x <= 1.5 }
  end
  local mem, which = best_cpp(idle, false)
  goals[#goals + 1] = { name = ("memory per idle connection protocall/better C++ (%s)"):format(which),
                        value = idle[1] / mem, unit = "x", goal = "<= 1.0", ok = idle[1] <= mem,
                        key = "server_idle_ratio" }
  H.report("goals of the server side", goals)
end)
for _, server in pairs(servers) do helper.stop(server) end
if not ok then error(err, 0) end
