// A client of demo.Router (examples/route.proto) written with
// @connectrpc/connect-node over HTTP/2 (h2c) or HTTP/1.1:
//   node spec/node/connect_client.mjs SET PORT TRANSPORT CASE...
// SET: a FileDescriptorSet holding route.proto and google/rpc's
// status.proto and error_details.proto. TRANSPORT: the protocol, "grpc",
// "grpc-web" or "connect", then the options after a comma: "json" (the
// JSON codec, else binary), "gzip" (requests gzipped, gzip accepted),
// "h1" (HTTP/1.1 instead of HTTP/2).
// Prints the lines of each CASE (peer.mjs says what the cases send);
// spec/interop_node_spec.lua checks them.
import { createClient, ConnectError, encodeBinaryHeader, decodeBinaryHeader } from "@connectrpc/connect";
import {
  createGrpcTransport, createGrpcWebTransport, createConnectTransport, compressionGzip,
} from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

const code = (e) => (e instanceof ConnectError ? peer.CODES[e.code] : `not a ConnectError: ${e}`);

const TRANSPORTS = { grpc: createGrpcTransport, "grpc-web": createGrpcWebTransport, connect: createConnectTransport };

peer.main(async ([set, port, transportSpec, ...cases]) => {
  const registry = peer.loadRegistry(set);
  const [protocol, ...options] = transportSpec.split(",");
  if (!TRANSPORTS[protocol]) throw new Error(`unknown transport ${transportSpec}`);
  const gzip = options.includes("gzip");
  const transport = TRANSPORTS[protocol]({
    baseUrl: `http://127.0.0.1:${port}`, httpVersion: options.includes("h1") ? "1.1" : "2",
    useBinaryFormat: !options.includes("json"),
    sendCompression: gzip ? compressionGzip : undefined,
    acceptCompression: gzip ? [compressionGzip] : undefined,
    compressMinBytes: 0,
  });
  const client = createClient(peer.serviceType(registry, "demo.Router"), transport);
  const lines = [];
  const run = {
    async unary() {
      for (let i = 0; i < 3; i++) {
        try {
          const d = await client.measure(peer.ROUTE);
          lines.push(`measure ${d.length} ${d.legs}`);
        } catch (e) {
          lines.push(`error ${code(e)} ${e.rawMessage}`);
        }
      }
    },
    async server_stream() {
      for await (const p of client.walk(peer.WALK)) lines.push(`point ${p.x} ${p.y}`);
      lines.push("end");
    },
    async client_stream() {
      async function* points() { yield* peer.RECORD; }
      const d = await client.record(points());
      lines.push(`record ${d.length} ${d.legs}`);
    },
    async bidi() {
      const q = new peer.Queue();
      const it = client.follow(q)[Symbol.asyncIterator]();
      q.push(peer.FOLLOW[0]);
      for (const p of peer.FOLLOW.slice(1)) {
        q.push(p);
        const r = await it.next();
        lines.push(r.done ? "end too soon" : `leg ${r.value.x} ${r.value.y}`);
      }
      q.end();
      const r = await it.next();
      lines.push(r.done ? "end" : `more ${r.value.x} ${r.value.y}`);
    },
    async details() {
      try {
        await client.measure({ name: "details" });
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} ${e.rawMessage}`);
        const info = e.findDetails(peer.messageType(registry, "google.rpc.ErrorInfo"));
        for (const d of info) lines.push(`detail ErrorInfo ${d.reason} ${d.domain} limit=${d.metadata.limit}`);
      }
    },
    async deadline() {
      try {
        await client.measure({ name: "sleep" }, { timeoutMs: peer.DEADLINE_MS });
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)}`);
      }
    },
    async gzip() {
      // "gzip": the server gzips its response when the client accepts it
      // (and fails twice first, as for any route name)
      for (let i = 0; i < 3; i++) {
        try {
          const d = await client.measure({ name: "gzip", points: peer.ROUTE.points });
          lines.push(`measure ${d.length} ${d.legs}`);
        } catch (e) {
          lines.push(`error ${code(e)} ${e.rawMessage}`);
        }
      }
    },
    async metadata() {
      const seen = [];
      const d = await client.measure({ name: "meta" }, {
        headers: { "x-user": peer.USER, "x-raw-bin": encodeBinaryHeader(peer.RAW) },
        onHeader: (h) => seen.push(`header x-head ${h.get("x-head")}`),
        onTrailer: (t) => {
          seen.push(`trailer x-trail ${t.get("x-trail")}`);
          seen.push(`trailer x-echo-bin ${peer.hex(decodeBinaryHeader(t.get("x-echo-bin")))}`);
        },
      });
      lines.push(...seen, `measure ${d.length} ${d.legs}`);
    },
  };
  for (const c of cases) {
    if (!run[c]) throw new Error(`unknown case ${c}`);
    await run[c]();
  }
  return lines;
});
