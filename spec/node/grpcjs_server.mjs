// demo.Router (examples/route.proto) served by @grpc/grpc-js over h2c, its
// messages encoded with @bufbuild/protobuf:
//   node spec/node/grpcjs_server.mjs SET
// Prints "PORT PID" once listening on 127.0.0.1 (a free port) and exits
// when its standard input closes (spec/node_peer.lua's M.serve).
// The handlers of examples/route_services.lua (Measure fails twice with
// UNAVAILABLE for each route name, then answers) with the route names of
// spec/interop_node_spec.lua's router(): "details", "sleep", "meta"; and
// "slept", which answers {length: the seconds of grpc-timeout the last
// "sleep" call came with, legs: how many "sleep" calls were cancelled}.
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import * as peer from "./peer.mjs";

const [set] = process.argv.slice(2);
const registry = peer.loadRegistry(set);
const Status = peer.messageType(registry, "google.rpc.Status");
const ErrorInfo = peer.messageType(registry, "google.rpc.ErrorInfo");

const failures = new Map();
let sleepTimeout = 0;
let cancelled = 0;

function detailsError() {
  const message = "too far: 100% ✓";
  const info = create(ErrorInfo, { reason: "TOO_FAR", domain: "demo", metadata: { limit: "10" } });
  const status = create(Status, { code: grpc.status.INVALID_ARGUMENT, message, details: [anyPack(ErrorInfo, info)] });
  const metadata = new grpc.Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(toBinary(Status, status)));
  return { code: grpc.status.INVALID_ARGUMENT, details: message, metadata };
}

const handlers = {
  Measure(call, callback) {
    const r = call.request;
    if (r.name === "details") return callback(detailsError());
    if (r.name === "sleep") {
      const deadline = Number(call.getDeadline()); // a Date or a number of ms, Infinity without grpc-timeout
      sleepTimeout = Number.isFinite(deadline) ? (deadline - Date.now()) / 1000 : -1;
      call.on("cancelled", () => { cancelled += 1; });
      return undefined; // never answers
    }
    if (r.name === "slept") return callback(null, { length: sleepTimeout, legs: cancelled });
    if (r.name === "meta") {
      const [user] = call.metadata.get("x-user");
      const [raw] = call.metadata.get("x-raw-bin");
      const header = new grpc.Metadata();
      header.set("x-head", `hi ${user}`);
      call.sendMetadata(header);
      const trailer = new grpc.Metadata();
      trailer.set("x-trail", "t1");
      trailer.set("x-echo-bin", raw || Buffer.alloc(0));
      return callback(null, { length: 1 }, trailer);
    }
    const n = failures.get(r.name) || 0;
    if (n < 2) {
      failures.set(r.name, n + 1);
      return callback({ code: grpc.status.UNAVAILABLE, details: "flaky server" });
    }
    let length = 0;
    for (let i = 1; i < r.points.length; i++) {
      const a = r.points[i - 1], b = r.points[i];
      length += Math.hypot(a.x - b.x, a.y - b.y);
    }
    return callback(null, { length, legs: Math.max(r.points.length - 1, 0) });
  },
  Walk(call) {
    for (const p of call.request.points) call.write(p);
    call.end();
  },
  Record(call, callback) {
    let length = 0, legs = 0, prev = null;
    call.on("data", (p) => {
      if (prev) { length += Math.hypot(p.x - prev.x, p.y - prev.y); legs += 1; }
      prev = p;
    });
    call.on("end", () => callback(null, { length, legs }));
  },
  Follow(call) {
    let prev = null;
    call.on("data", (p) => {
      if (prev) call.write({ x: p.x - prev.x, y: p.y - prev.y });
      prev = p;
    });
    call.on("end", () => call.end());
  },
};

const server = new grpc.Server();
server.addService(peer.grpcDefinition(registry, "demo.Router"), handlers);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    process.stdout.write(`error ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${port} ${process.pid}\n`);
});
process.stdin.on("data", () => {});
process.stdin.on("end", () => server.tryShutdown(() => process.exit(0)));
