// A gRPC-Web or Connect client of gw.Library
// (spec/fixtures/protos/gateway/library.proto) written with
// @connectrpc/connect-node over HTTP/1.1, as a browser's fetch speaks
// them, for spec/nginx_gateway_spec.lua: nginx's protocall gateway
// forwards its calls to a plain gRPC upstream (python3-grpcio).
//   node spec/node/gateway_web_client.mjs SET BASE_URL TRANSPORT CASE...
// SET: a FileDescriptorSet holding library.proto and what it imports.
// TRANSPORT: "grpc-web" or "connect", then ",json" for the JSON codec
// (else binary). Prints the lines of each CASE (below).
import { createClient, ConnectError } from "@connectrpc/connect";
import { createGrpcWebTransport, createConnectTransport } from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

const code = (e) => (e instanceof ConnectError ? peer.CODES[e.code] : `not a ConnectError: ${e}`);

const TRANSPORTS = { "grpc-web": createGrpcWebTransport, connect: createConnectTransport };

peer.main(async ([set, baseUrl, transportSpec, ...cases]) => {
  const registry = peer.loadRegistry(set);
  const [protocol, ...options] = transportSpec.split(",");
  if (!TRANSPORTS[protocol]) throw new Error(`unknown transport ${transportSpec}`);
  const transport = TRANSPORTS[protocol]({
    baseUrl, httpVersion: "1.1", useBinaryFormat: !options.includes("json"),
  });
  const client = createClient(peer.serviceType(registry, "gw.Library"), transport);
  const lines = [];
  const run = {
    // unary: a request with repeated, enum and int64 fields, answered whole
    async unary() {
      const b = await client.getBook({ name: "shelves/1/books/2", view: "full", tags: ["a", "b"], kind: 1, pages: 12n });
      lines.push(`book ${b.name} | ${b.title} | ${b.pages} | ${b.tags.join(",")} | ${b.kind}`);
    },
    // a server stream: its messages one by one, then its end
    async server_stream() {
      for await (const b of client.listBooks({ parent: "shelves/3", count: 3 })) lines.push(`book ${b.name} ${b.pages}`);
      lines.push("end");
    },
    // a server stream failing after one message
    async stream_error() {
      try {
        for await (const b of client.listBooks({ parent: "shelves/3", count: 1, fail: "ABORTED" })) {
          lines.push(`book ${b.name} ${b.pages}`);
        }
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} ${e.rawMessage}`);
      }
    },
    // an error with a google.rpc.Status detail (grpc-status-details-bin) and a trailer
    async details() {
      try {
        await client.fail({ code: "NOT_FOUND", reason: "gone" }, {
          onTrailer: (t) => lines.push(`trailer x-failed ${t.get("x-failed")}`),
        });
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} ${e.rawMessage}`);
        for (const d of e.findDetails(peer.messageType(registry, "gw.Detail"))) {
          lines.push(`detail ${d.reason} ${d.domain}`);
        }
        lines.push(`error trailer x-failed ${e.metadata.get("x-failed")}`);
      }
    },
    // request headers as metadata; the response's headers and trailers
    async metadata() {
      const seen = [];
      const r = await client.headers({}, {
        headers: { "x-user": "ann", authorization: "Bearer t" },
        onHeader: (h) => seen.push(`header x-answer ${h.get("x-answer")}`),
        onTrailer: (t) => seen.push(`trailer x-done ${t.get("x-done")}`),
      });
      const md = Object.keys(r.metadata).sort().map((k) => `${k}=${r.metadata[k]}`);
      lines.push(...seen, `metadata ${md.join(" ")}`);
    },
    // the client's deadline (grpc-timeout / connect-timeout-ms) ends a long stream
    async deadline() {
      let n = 0;
      try {
        for await (const _ of client.listBooks({ parent: "shelves/3", count: 100 }, { timeoutMs: 300 })) n++;
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} after ${n > 0 && n < 100 ? "some" : n}`);
      }
    },
    // a client stream (half-duplex: its messages all in the request body)
    async client_stream() {
      async function* books() { yield { title: "a" }; yield { title: "b" }; }
      try {
        const r = await client.createBooks(books());
        lines.push(`calls ${r.calls}`);
      } catch (e) {
        lines.push(`error ${code(e)}`);
      }
    },
  };
  for (const c of cases) {
    if (!run[c]) throw new Error(`unknown case ${c}`);
    await run[c]();
  }
  return lines;
});
