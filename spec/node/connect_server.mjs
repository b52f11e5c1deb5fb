// demo.Router (examples/route.proto) served by @connectrpc/connect-node's
// connectNodeAdapter on node:http2 (h2c), which speaks gRPC, gRPC-Web and
// Connect on one port, its messages read from the descriptor set with
// @bufbuild/protobuf (no generated code):
//   node spec/node/connect_server.mjs SET [http1 | https1 CERT KEY]
// With "http1" the same handler runs on node:http (HTTP/1.1: gRPC-Web and
// Connect), with "https1" on node:https with the PEM certificate and key
// (ALPN http/1.1).
// Prints "PORT PID" once listening on 127.0.0.1 (a free port) and exits
// when its standard input closes (spec/node_peer.lua's M.serve).
// The same route names as spec/node/grpcjs_server.mjs: Measure fails twice
// with UNAVAILABLE for each route name, then answers; "details" fails
// INVALID_ARGUMENT with a google.rpc.ErrorInfo; "sleep" waits for its
// cancellation; "slept" answers {length: the seconds of the timeout the
// last "sleep" came with (-1: none), legs: how many "sleep" calls were
// cancelled}; "meta" answers header x-head "hi <x-user>", trailers x-trail
// "t1" and x-echo-bin (the request's x-raw-bin); "gzip" answers {legs: 1
// when the request came gzipped}. Every response is gzipped when the client
// accepts gzip (compressMinBytes 0).
import * as fs from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as https from "node:https";
import { Code, ConnectError, encodeBinaryHeader, decodeBinaryHeader } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

const [set, mode, certFile, keyFile] = process.argv.slice(2);
const registry = peer.loadRegistry(set);
const ErrorInfo = peer.messageType(registry, "google.rpc.ErrorInfo");

const failures = new Map();
let sleepTimeout = 0;
let cancelled = 0;

const gzipped = (h) =>
  [h.get("content-encoding"), h.get("connect-content-encoding"), h.get("grpc-encoding")].includes("gzip");

const impl = {
  async measure(r, ctx) {
    if (r.name === "details") {
      throw new ConnectError("too far: 100% ✓", Code.InvalidArgument, undefined, [
        { desc: ErrorInfo, value: { reason: "TOO_FAR", domain: "demo", metadata: { limit: "10" } } },
      ]);
    }
    if (r.name === "sleep") {
      const ms = ctx.timeoutMs();
      sleepTimeout = ms === undefined ? -1 : ms / 1000;
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
      cancelled += 1;
      throw new ConnectError("cancelled", Code.Canceled);
    }
    if (r.name === "slept") return { length: sleepTimeout, legs: cancelled };
    if (r.name === "gzip") return { length: 0, legs: gzipped(ctx.requestHeader) ? 1 : 0 };
    if (r.name === "meta") {
      const user = ctx.requestHeader.get("x-user");
      const raw = ctx.requestHeader.get("x-raw-bin");
      ctx.responseHeader.set("x-head", `hi ${user}`);
      ctx.responseTrailer.set("x-trail", "t1");
      ctx.responseTrailer.set("x-echo-bin", encodeBinaryHeader(raw ? decodeBinaryHeader(raw) : new Uint8Array()));
      return { length: 1 };
    }
    const n = failures.get(r.name) || 0;
    if (n < 2) {
      failures.set(r.name, n + 1);
      throw new ConnectError("flaky server", Code.Unavailable);
    }
    let length = 0;
    for (let i = 1; i < r.points.length; i++) {
      const a = r.points[i - 1], b = r.points[i];
      length += Math.hypot(a.x - b.x, a.y - b.y);
    }
    return { length, legs: Math.max(r.points.length - 1, 0) };
  },
  async *walk(r) {
    for (const p of r.points) yield p;
  },
  async record(points) {
    let length = 0, legs = 0, prev = null;
    for await (const p of points) {
      if (prev) { length += Math.hypot(p.x - prev.x, p.y - prev.y); legs += 1; }
      prev = p;
    }
    return { length, legs };
  },
  async *follow(points) {
    let prev = null;
    for await (const p of points) {
      if (prev) yield { x: p.x - prev.x, y: p.y - prev.y };
      prev = p;
    }
  },
};

const handler = connectNodeAdapter({
  routes: (router) => router.service(peer.serviceType(registry, "demo.Router"), impl),
  compressMinBytes: 0,
});
const server =
  mode === "http1" ? http.createServer(handler)
  : mode === "https1" ? https.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) }, handler)
  : http2.createServer(handler);
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${server.address().port} ${process.pid}\n`);
});
process.stdin.on("data", () => {});
process.stdin.on("end", () => {
  server.close();
  process.exit(0);
});
