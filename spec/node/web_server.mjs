// web.Calc (spec/web/calc.proto) served by @connectrpc/connect-node's
// connectNodeAdapter, for protocall's Connect GET client:
//   node spec/node/web_server.mjs SET h1|h2
// (node:http or node:http2 without TLS). Prints "PORT PID" once listening
// on 127.0.0.1 and exits when its standard input closes
// (spec/node_peer.lua's M.serve). Mul answers note = the request's HTTP
// method ("GET" for a Connect GET), so the spec sees which one came.
import * as http from "node:http";
import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

const [set, version] = process.argv.slice(2);
const registry = peer.loadRegistry(set);
const ErrorInfo = peer.messageType(registry, "google.rpc.ErrorInfo");

const impl = {
  async add(p) {
    return { total: BigInt(p.x + p.y) };
  },
  async mul(p, ctx) {
    if (p.x < 0) {
      throw new ConnectError("negative x", Code.InvalidArgument, undefined, [
        { desc: ErrorInfo, value: { reason: "NEGATIVE", domain: "web" } },
      ]);
    }
    return { total: BigInt(p.x * p.y), note: ctx.requestMethod };
  },
  async *count(p) {
    for (let i = 1; i <= p.x; i++) yield { x: i, y: i * p.y };
  },
};

const handler = connectNodeAdapter({
  routes: (router) => router.service(peer.serviceType(registry, "web.Calc"), impl),
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
