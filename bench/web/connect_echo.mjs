// bench.Echo/Echo (bench/grpc_cpp/echo.proto) served by
// @connectrpc/connect-node's connectNodeAdapter, the peer of
// bench/web_bench.lua: each request message back as the response, over
// node:http2 (h2c, "h2") or node:http (HTTP/1.1, "h1"); the messages read
// from a descriptor set with @bufbuild/protobuf (no generated code):
//   node bench/web/connect_echo.mjs SET h2|h1
// Prints "PORT PID" once listening on 127.0.0.1 (a free port) and exits
// when its standard input closes (spec/grpc_helper.lua's spawn_command).
import * as http from "node:http";
import * as http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as peer from "../../spec/node/peer.mjs";

const [set, version = "h2"] = process.argv.slice(2);
const registry = peer.loadRegistry(set);
const handler = connectNodeAdapter({
  routes: (router) => router.service(peer.serviceType(registry, "bench.Echo"), { echo: (m) => m }),
});
const server = version === "h1" ? http.createServer(handler) : http2.createServer(handler);
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${server.address().port} ${process.pid}\n`);
});
process.stdin.on("data", () => {});
process.stdin.on("end", () => {
  server.close();
  process.exit(0);
});
