-- The goal table of the message-object and connection work (issue 35 and
-- the rows added to it since): bench/goals.lua prints it at the end of
-- `make bench`, and a bench that prints one of its rows beside its own
-- figures takes the goal from here (bench/codec_bench.lua), so the two
-- cannot differ.
--   local GOALS = require "bench.goal_table"
--
-- key: what the benches record; cases: how many values make the row whole
-- (one per message: otlp_traces, test_all_types_proto3); max: the goal, met
-- when every value is at most it (min: at least it); from: the bench that
-- records it.
return {
  { key = "luajit_objects_read", cases = 2, max = 0.5, unit = "x", was = "3.3x-5.0x",
    figure = "LuaJIT: decode + read every field as message objects / lua-protobuf",
    from = "bench/luajit/runtime_bench.lua (lua-protobuf; otlp_traces only)" },
  { key = "lua54_objects_read", cases = 2, max = 0.8, unit = "x", was = "1.31x-1.45x",
    figure = "Lua 5.4: decode + read every field as message objects / lua-protobuf",
    from = "bench/codec_bench.lua (lua-protobuf)" },
  { key = "luajit_scalar_read", cases = 1, max = 1.0, unit = "x", was = "1.3x-1.7x",
    figure = "LuaJIT: a scalar field read of a message object / a table's",
    from = "bench/luajit/fields_bench.lua" },
  { key = "tctor_encode", cases = 2, max = 1.1, unit = "x", was = "2.1x",
    figure = "T{...} + encode / pc.encode(T, table)", from = "bench/codec_bench.lua" },
  { key = "instance_luajit", cases = 1, max = 48, unit = "B", was = "125 B",
    figure = "3 x uint32 T{...} instance, all memory, LuaJIT", from = "bench/luajit/runtime_bench.lua" },
  { key = "instance_lua54", cases = 1, max = 48, unit = "B", was = "56 B",
    figure = "3 x uint32 T{...} instance, all memory, Lua 5.4", from = "bench/message_bench.lua" },
  { key = "server_idle_ratio", cases = 1, max = 1.0, unit = "x", was = "2.1x",
    figure = "idle server connection / the better C++ server's (sync or -async 1)",
    from = "bench/server_bench.lua (the C++ peer: bench/grpc_cpp)" },
  { key = "client_idle_kib", cases = 1, max = 16, unit = "KiB", was = "34 KiB",
    figure = "idle client connection", from = "bench/service_bench.lua (the C++ peer: bench/grpc_cpp)" },
  { key = "table_encode", cases = 2, max = 0.6, unit = "x", was = "0.72x-0.84x",
    figure = "table -> encode / lua-protobuf", from = "bench/codec_bench.lua (lua-protobuf)" },
  { key = "web_connect_node_rate", cases = 1, min = 3, unit = "x", was = "-",
    figure = "Connect unary JSON calls/s, pc.listen / connect-node", from = "bench/web_bench.lua (npm, h2load)" },
  { key = "web_grpcweb_cpu", cases = 1, max = 1.2, unit = "x", was = "-",
    figure = "server CPU per call, gRPC-Web / gRPC (pc.listen)", from = "bench/web_bench.lua (h2load)" },
  { key = "xds_call_ratio", cases = 1, max = 1.1, unit = "x", was = "-",
    figure = "unary call round trip, xds:/// target / static list of the same backends",
    from = "bench/xds_bench.lua" },
  { key = "xds_call_instr_ratio", cases = 1, max = 1.1, unit = "x", was = "-",
    figure = "instructions per unary call (client), xds:/// target / static list",
    from = "bench/xds_fleet_bench.lua (with BENCH_ARGS=--callgrind; valgrind)" },
  { key = "resty_rate_ratio", cases = 1, min = 1.0, unit = "x", was = "-",
    figure = "nginx: requests/s, protocall (resty.call, pool) / grpc_pass",
    from = "bench/resty_bench.lua (wrk, h2load, the C++ peer)" },
  { key = "resty_cpu_ratio", cases = 1, max = 1.0, unit = "x", was = "-",
    figure = "nginx: worker CPU per request, protocall / grpc_pass",
    from = "bench/resty_bench.lua (wrk, h2load, the C++ peer)" },
  { key = "resty_tls_rate_ratio", cases = 1, min = 1.0, unit = "x", was = "-",
    figure = "nginx over TLS: requests/s, protocall / grpc_pass",
    from = "bench/resty_bench.lua (wrk, h2load, the C++ peer)" },
  { key = "resty_tls_cpu_ratio", cases = 1, max = 1.0, unit = "x", was = "-",
    figure = "nginx over TLS: worker CPU per request, protocall / grpc_pass",
    from = "bench/resty_bench.lua (wrk, h2load, the C++ peer)" },
  { key = "resty_load_rss_growth", cases = 1, max = 1.0, unit = "MiB", was = "1.9-6.0 MiB",
    figure = "nginx, full pools under wrk: workers' RSS growth, half-time to end",
    from = "bench/resty_bench.lua (wrk, the C++ peer)" },
  { key = "require_ms", cases = 1, max = 2, unit = "ms", was = "3-6 ms",
    figure = "require \"protocall\" from a stock lua5.4", from = "bench/startup_bench.lua" },
  { key = "gateway_nginx_ratio", cases = 1, min = 0.8, unit = "x", was = "0.63x-0.68x",
    figure = "nginx REST/JSON gateway req/s / proxy_pass of the JSON, median of 1 s pairs (APISIX: 0.47x)",
    from = "bench/gateway_nginx_bench.lua (wrk, nginx, the C++ peer: bench/grpc_cpp)" },
  { key = "transcode_us_per_byte", cases = 6, max = 0.01, unit = "us/B", was = "Envoy 0.03",
    figure = "JSON -> protobuf through the transcoder, 10k-element repeated fields",
    from = "bench/transcode_bench.lua" },
}
