// An xDS management server for spec/xds_spec.lua: @grpc/grpc-js serving
// envoy.service.discovery.v3.AggregatedDiscoveryService (state of the
// world), every message encoded by protobufjs from the FULL Envoy protos
// that @grpc/grpc-js-xds ships (deps/envoy-api, googleapis, xds,
// protoc-gen-validate):
//   node spec/node/xds_server.mjs LOG [PORT]
// Prints "PORT PID" once listening on 127.0.0.1 (PORT, or a free one) and
// exits when its standard input closes. Scripted by JSON lines on its
// standard input:
//   {"set": "LDS"|"RDS"|"CDS"|"EDS", "version": "1", "resources": [obj, ...]}
// replaces that type's resources (objects in protobufjs's fromObject shape,
// field names as in the .proto; the type's "@type" is added; an Any inside
// gives its own "@type") and pushes them to every stream that asked for
// that type. Each DiscoveryRequest received is appended to the file LOG as
// one JSON line {type_url, version_info, response_nonce, resource_names,
// error_detail, node_id}.
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";

const [log, portArg] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const deps = path.join(path.dirname(require.resolve("@grpc/grpc-js-xds/package.json")), "deps");
const dirs = ["envoy-api", "googleapis", "xds", "protoc-gen-validate"].map((d) => path.join(deps, d));
dirs.push(path.dirname(require.resolve("protobufjs/package.json"))); // google/protobuf/descriptor.proto

const root = new protobuf.Root();
root.resolvePath = (origin, target) => {
  for (const d of dirs) {
    const p = path.join(d, target);
    if (fs.existsSync(p)) return p;
  }
  return protobuf.util.path.resolve(origin, target);
};
root.loadSync([
  "envoy/service/discovery/v3/ads.proto",
  "envoy/config/listener/v3/listener.proto",
  "envoy/config/route/v3/route.proto",
  "envoy/config/cluster/v3/cluster.proto",
  "envoy/config/endpoint/v3/endpoint.proto",
  "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
  "envoy/extensions/filters/http/router/v3/router.proto",
], { keepCase: true });
root.resolveAll();

const Request = root.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const Response = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const URL = {
  LDS: "type.googleapis.com/envoy.config.listener.v3.Listener",
  RDS: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  CDS: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  EDS: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
};

const state = {}; // type_url -> {version, resources}
const streams = new Set();
let nonce = 0;

function push(stream, url) {
  const s = state[url];
  if (!s || !stream.asked.has(url)) return;
  const msg = Response.fromObject({
    version_info: s.version, type_url: url, nonce: String(++nonce),
    resources: s.resources.map((r) => ({ "@type": url, ...r })),
  });
  stream.write(msg);
}

function record(req) {
  const o = Request.toObject(req, { defaults: true });
  const line = {
    type_url: o.type_url, version_info: o.version_info, response_nonce: o.response_nonce,
    resource_names: o.resource_names, node_id: o.node ? o.node.id : "",
    error_detail: req.error_detail ? { code: req.error_detail.code, message: req.error_detail.message } : null,
  };
  fs.appendFileSync(log, JSON.stringify(line) + "\n");
}

function ads(stream) {
  stream.asked = new Set();
  stream.names = new Map();
  streams.add(stream);
  stream.on("data", (req) => {
    record(req);
    const url = req.type_url;
    const names = [...req.resource_names].sort().join(",");
    // a new subscription or changed names: answer with the current state
    const changed = !stream.asked.has(url) || stream.names.get(url) !== names;
    stream.asked.add(url);
    stream.names.set(url, names);
    if (changed) push(stream, url);
  });
  const done = () => streams.delete(stream);
  stream.on("end", () => { done(); stream.end(); });
  stream.on("error", done);
  stream.on("cancelled", done);
}

const service = {
  StreamAggregatedResources: {
    path: "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    requestStream: true, responseStream: true,
    requestSerialize: (m) => Buffer.from(Request.encode(m).finish()),
    requestDeserialize: (b) => Request.decode(b),
    responseSerialize: (m) => Buffer.from(Response.encode(m).finish()),
    responseDeserialize: (b) => Response.decode(b),
  },
};

const server = new grpc.Server();
server.addService(service, { StreamAggregatedResources: ads });
server.bindAsync(`127.0.0.1:${portArg || 0}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(err);
    process.exit(1);
  }
  console.log(`${port} ${process.pid}`);
});

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (text) => {
  if (text.trim() === "") return;
  const cmd = JSON.parse(text);
  const url = URL[cmd.set];
  state[url] = { version: cmd.version, resources: cmd.resources };
  for (const s of streams) push(s, url);
});
lines.on("close", () => process.exit(0));
