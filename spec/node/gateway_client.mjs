// A client of gw.Library (spec/fixtures/protos/gateway/library.proto)
// written with @connectrpc/connect-node, run through `protocall gateway`
// in front of spec/gateway_upstream.py (python3-grpcio):
//   node spec/node/gateway_client.mjs SET PORT TRANSPORT
// SET: a FileDescriptorSet holding library.proto. TRANSPORT: "grpc",
// "connect" or "grpc-web", then after a comma "json" (the JSON codec) and "h1"
// (HTTP/1.1). Prints one line per step; spec/rest_gateway_spec.lua checks them.
import { createClient, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport, createConnectTransport } from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

const TRANSPORTS = { grpc: createGrpcTransport, "grpc-web": createGrpcWebTransport, connect: createConnectTransport };

peer.main(async ([set, port, transportSpec]) => {
  const registry = peer.loadRegistry(set);
  const [protocol, ...options] = transportSpec.split(",");
  const transport = TRANSPORTS[protocol]({
    baseUrl: `http://127.0.0.1:${port}`, httpVersion: options.includes("h1") ? "1.1" : "2",
    useBinaryFormat: !options.includes("json"),
  });
  const client = createClient(peer.serviceType(registry, "gw.Library"), transport);
  const lines = [];
  const book = await client.getBook({ name: "shelves/1/books/2", view: "v", pages: 7n });
  lines.push(`book ${book.name} ${book.title} ${book.pages}`);
  try {
    for await (const b of client.listBooks({ parent: "shelves/3", count: 2, fail: "ABORTED" })) lines.push(`listed ${b.name}`);
    lines.push("no error");
  } catch (e) {
    lines.push(`stream error ${peer.CODES[e.code]} ${e.rawMessage}`);
  }
  try {
    await client.fail({ code: "NOT_FOUND", reason: "r9" });
    lines.push("no error");
  } catch (e) {
    const err = ConnectError.from(e);
    const details = err.findDetails(peer.messageType(registry, "gw.Detail"));
    lines.push(`error ${peer.CODES[err.code]} ${err.rawMessage} ${details.map((d) => d.reason).join(",")} `
      + `x-failed=${err.metadata.get("x-failed")}`);
  }
  const trailers = [];
  const headers = [];
  const reply = await client.headers({}, {
    headers: { "x-user": "ann" },
    onHeader: (h) => headers.push(h.get("x-answer")),
    onTrailer: (t) => trailers.push(t.get("x-done")),
  });
  lines.push(`headers ${reply.metadata["x-user"]} header=${headers[0]} trailer=${trailers[0]}`);
  return lines;
});
