// test.Test/Echo (the request bytes back, no schema) served by @grpc/grpc-js
// over TLS, for spec/driver_tls_spec.lua:
//   node spec/node/grpcjs_tls_server.mjs CERT KEY [CLIENT_CA]
// With CLIENT_CA a client certificate signed by it is required (mutual
// TLS). Node's HTTP/2 over TLS refuses a client that does not negotiate
// ALPN h2. Prints "PORT PID" once listening on 127.0.0.1 (a free port) and
// exits when its standard input closes (spec/node_peer.lua's M.serve).
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";

const [cert, key, clientCa] = process.argv.slice(2);
const bytes = { serialize: (b) => b, deserialize: (b) => b };
const service = {
  Echo: {
    path: "/test.Test/Echo", requestStream: false, responseStream: false,
    requestSerialize: bytes.serialize, requestDeserialize: bytes.deserialize,
    responseSerialize: bytes.serialize, responseDeserialize: bytes.deserialize,
  },
};

const server = new grpc.Server();
server.addService(service, { Echo: (call, callback) => callback(null, call.request) });
const creds = grpc.ServerCredentials.createSsl(
  clientCa ? readFileSync(clientCa) : null,
  [{ cert_chain: readFileSync(cert), private_key: readFileSync(key) }],
  Boolean(clientCa),
);
server.bindAsync("127.0.0.1:0", creds, (err, port) => {
  if (err) {
    process.stdout.write(`error ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${port} ${process.pid}\n`);
});
process.stdin.on("data", () => {});
process.stdin.on("end", () => server.tryShutdown(() => process.exit(0)));
