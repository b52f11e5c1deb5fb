-- Services, in one run:
-- 1. the in-process transport's cost per call: pc.client over pc.inproc
--    (plain, and hedged with throttling) next to a bare callable (pc.wrap_method of a function returning a
--    constant) and a bare Lua function call (the baseline);
-- 2. unary round trips per second over loopback h2c against a C++ gRPC
--    server (bench/grpc_cpp, Debian's libgrpc++-dev, built here with
--    `make -C bench/grpc_cpp`), for protocall (pc.client with messages, and
--    the bare pc.grpc transport with bytes), Debian's python3-grpcio client
--    and the C++ gRPC client, alternating, best of 3 runs of ~1 s each;
--    the CPU seconds each spends per 10,000 calls; server and client
--    streaming messages/s of protocall (100,000 messages of 10 bytes);
-- 3. backpressure of a server stream left unread (python3-grpcio server,
--    spec/grpc_server.py: faults.Faults/Stream, 2,000 replies of 10 kB):
--    the growth of this process's resident memory while the stream waits
--    alone, and while unary calls run on the same connection.
local pc = require "protocall" -- first: the harness then finds core.monotonic
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

assert(pc.load_file("bench/grpc_cpp/echo.proto", { import_paths = { "bench/grpc_cpp" } }))
local Msg = pc.type("bench.Msg")
local small = Msg { data = string.rep("x", 10) }

local server = pc.server { ["bench.Echo"] = { Echo = function(req) return req end } }
local inproc = pc.client("bench.Echo", { transport = pc.inproc(server) })
local hedged = pc.client("bench.Echo", { transport = pc.inproc(server), service_config = {
  methodConfig = { { name = { { service = "bench.Echo" } },
    hedgingPolicy = { maxAttempts = 3, hedgingDelay = "1s", nonFatalStatusCodes = { "UNAVAILABLE" } } } },
  retryThrottling = { maxTokens = 10, tokenRatio = 0.1 } } })
local K = { constant = true }
local function bare() return K end
local callable = pc.wrap_method(bare)

local results = H.run {
  title = "in-process calls: pc.client over pc.inproc (bench.Echo, 10-byte message)",
  baseline = {
    name = "bare Lua function call",
    fn = function(n)
      local f, x = bare, small
      for _ = 1, n do f(x) end
    end,
  },
  cases = {
    {
      name = "bare callable (pc.wrap_method)",
      goal = "(policy layer)",
      fn = function(n)
        local c, x = callable, small
        for _ = 1, n do c(x) end
      end,
    },
    {
      name = "pc.encode + pc.decode of the request",
      goal = "(the codec inside inproc)",
      fn = function(n)
        local encode, decode, x = pc.encode, pc.decode, small
        for _ = 1, n do decode(Msg, encode(x)) end
      end,
    },
    {
      name = "pc.client over pc.inproc, message",
      goal = "(one in-process call)",
      callgrind_iters = 5000,
      fn = function(n)
        local c, x = inproc, small
        for _ = 1, n do c:Echo(x) end
      end,
    },
    {
      name = "pc.client over pc.inproc, hedged and throttled",
      goal = "(hedgingPolicy; the first attempt answers)",
      callgrind_iters = 5000,
      fn = function(n)
        local c, x = hedged, small
        for _ = 1, n do c:Echo(x) end
      end,
    },
    {
      name = "pc.client over pc.inproc, plain table",
      goal = "(+ table to message)",
      callgrind_iters = 5000,
      fn = function(n)
        local c, x = inproc, { data = "xxxxxxxxxx" }
        for _ = 1, n do c:Echo(x) end
      end,
    },
  },
}
if results == nil then return end -- a --callgrind child: one case only

-- Wall-clock calls per second of `calls` protocall calls of fn.
local function rate(calls, fn)
  local t0 = helper.now()
  for _ = 1, calls do fn() end
  return calls / (helper.now() - t0)
end

local function read_rate(command)
  local f = io.popen(command)
  local v = tonumber(f:read("*l"))
  f:close()
  if not v then error("no figure from: " .. command) end
  return v
end

assert(os.execute("make -s -C bench/grpc_cpp >/dev/null"), "make -C bench/grpc_cpp failed "
       .. "(needs libgrpc++-dev and protobuf-compiler-grpc: .ci/install-deps)")
local cpp = helper.spawn_command("build/bench-grpc-cpp/echo_server 0", "echo_server")
local t = pc.grpc(cpp.url)
local stub = pc.client("bench.Echo", { transport = t })
local bytes = pc.encode(small)
local ok, err = pcall(function()
  assert(stub:Echo(small).data == small.data)
  local best = { client = 0, transport = 0, py = 0, cpp = 0 }
  for _ = 1, 3 do
    local calls = 3000
    best.client = math.max(best.client, rate(calls, function() stub:Echo(small) end))
    best.transport = math.max(best.transport,
                              rate(calls, function() t:unary("/bench.Echo/Echo", bytes) end))
    best.py = math.max(best.py, read_rate("/usr/bin/python3 spec/grpc_server.py client " .. cpp.port
                                          .. " 10 1 /bench.Echo/Echo"))
    best.cpp = math.max(best.cpp, read_rate("build/bench-grpc-cpp/echo_client " .. cpp.port .. " 10 1"))
  end
  -- CPU seconds per 10,000 calls: this process's own (os.clock) for
  -- protocall, the client process's user + system time (bash's `times`)
  -- for the others, each over its own ~1 s run.
  local function cpu_per_10k(calls, fn)
    local c0 = os.clock()
    for _ = 1, calls do fn() end
    return (os.clock() - c0) / calls * 10000
  end
  local function child_cpu_per_10k(command)
    local f = io.popen("bash -c '" .. command .. "; times'")
    local rate_ = tonumber(f:read("*l"))
    f:read("*l") -- the shell's own times
    local um, us, sm, ss = f:read("*l"):match("(%d+)m([%d.]+)s (%d+)m([%d.]+)s")
    f:close()
    local cpu = tonumber(um) * 60 + tonumber(us) + tonumber(sm) * 60 + tonumber(ss)
    return cpu / rate_ * 10000 -- the clients run for 1 s
  end
  local cpu = {
    client = cpu_per_10k(10000, function() stub:Echo(small) end),
    py = child_cpu_per_10k("/usr/bin/python3 spec/grpc_server.py client " .. cpp.port .. " 10 1 /bench.Echo/Echo"),
    cpp = child_cpu_per_10k("build/bench-grpc-cpp/echo_client " .. cpp.port .. " 10 1"),
  }
  -- Streaming both ways: 100,000 messages of 10 bytes in one call.
  local N = 100000
  local t0 = helper.now()
  local got = 0
  for _ in stub:Stream { count = N, size = 10 } do got = got + 1 end
  local down = got / (helper.now() - t0)
  assert(got == N)
  t0 = helper.now()
  local up_call = stub:Collect()
  for _ = 1, N do up_call:send(small) end
  assert(up_call:close_and_recv().messages == N)
  local up = N / (helper.now() - t0)
  H.report("CPU seconds per 10,000 unary calls (10 bytes, loopback h2c, C++ gRPC server)", {
    { name = "protocall pc.client", value = cpu.client, unit = "s" },
    { name = "python3-grpcio client", value = cpu.py, unit = "s" },
    { name = "C++ gRPC client", value = cpu.cpp, unit = "s" },
    { name = "protocall / C++ gRPC", value = cpu.client / cpu.cpp, unit = "x", goal = "<= 1.5" },
  })
  H.report("streaming 100,000 messages of 10 bytes in one call, C++ gRPC server, messages/s", {
    { name = "server streaming, protocall reading", value = down, unit = "msg/s" },
    { name = "client streaming, protocall sending", value = up, unit = "msg/s" },
  })
  H.report("unary echo of 10 bytes over loopback h2c, C++ gRPC server, calls/s, best of 3", {
    { name = "protocall pc.client (messages)", value = best.client, unit = "calls/s" },
    { name = "protocall pc.grpc transport (bytes)", value = best.transport, unit = "calls/s" },
    { name = "python3-grpcio client", value = best.py, unit = "calls/s" },
    { name = "C++ gRPC client", value = best.cpp, unit = "calls/s" },
    { name = "protocall pc.client / python3-grpcio", value = best.client / best.py, unit = "x" },
    { name = "protocall pc.client / C++ gRPC", value = best.client / best.cpp, unit = "x" },
  })
end)
t:close()
helper.stop(cpp)
if not ok then error(err, 0) end

assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto",
                    { import_paths = { "spec/fixtures/protos" } }))
local py = helper.spawn("grpc")
local faults = pc.client("faults.Faults", { transport = pc.grpc(py.url) })
ok, err = pcall(function()
  faults:Echo { text = "warm up" }
  local function mb(bytes) return bytes / 1e6 end
  collectgarbage()
  local r0 = H.rss()
  local iter = faults:Stream { count = 2000, size = 10000 }
  assert(iter().index == 1)
  os.execute("sleep 1")
  assert(iter().index == 2)
  local alone = H.rss()
  local t0 = helper.now()
  while helper.now() - t0 < 2 do faults:Echo { text = "x" } end
  local shared = H.rss()
  -- HTTP/2 flow control holds the unread stream at its window (1 MiB by
  -- default) while the unary calls run; then it is read to the end.
  local n = 2
  local okr, e = pcall(function() for _ in iter do n = n + 1 end end)
  assert(okr, tostring(e))
  H.report("an unread server stream of 20 MB (2,000 x 10 kB): resident memory growth", {
    { name = "stream alone, 1 s unread", value = mb(alone - r0), unit = "MB" },
    { name = "then 2 s of unary calls on its connection", value = mb(shared - r0), unit = "MB",
      goal = "<= the stream window (1 MiB) + 4 MB", ok = mb(shared - r0) <= 1.05 + 4 },
    { name = "messages read", value = n, unit = "" },
  })
end)
helper.stop(py)
if not ok then error(err, 0) end
