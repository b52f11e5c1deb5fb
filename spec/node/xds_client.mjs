// @grpc/grpc-js-xds's own xDS client as the reference for spec/xds_spec.lua:
//   GRPC_XDS_BOOTSTRAP_CONFIG='{...}' node spec/node/xds_client.mjs NAME METHOD COUNT [HEADER=VALUE]
// Makes COUNT unary calls of /xt.Named/METHOD (request and response xt.Id, field 1 a
// string) on "xds:///NAME", one after the other (with env XDS_PARALLEL=MS, after a
// first Who call that waits for the configuration, one started every MS milliseconds
// without waiting for the others), with the metadata HEADER: VALUE
// if given, and prints a JSON object: how many answers named each backend, and "failed"
// (how many calls failed, with the first error in "error").
import * as grpc from "@grpc/grpc-js";
import { register } from "@grpc/grpc-js-xds";
import * as peer from "./peer.mjs";

register();
const [name, method, count, header] = process.argv.slice(2);

// xt.Id: the request empty, the response's field 1 (spec/node/peer.mjs).
const serialize = peer.encodeEmpty;
const deserialize = peer.decodeName;

const client = new grpc.Client(`xds:///${name}`, grpc.credentials.createInsecure());
const metadata = new grpc.Metadata();
if (header) {
  const [k, v] = header.split("=");
  metadata.set(k, v);
}
const counts = { failed: 0 };
function call() {
  return new Promise((resolve) => {
    client.makeUnaryRequest(`/xt.Named/${method}`, serialize, deserialize, {}, metadata,
      { deadline: Date.now() + 5000 }, (err, who) => {
        if (err) {
          counts.failed++;
          counts.error = counts.error || `${err.code} ${err.details}`;
        } else counts[who] = (counts[who] || 0) + 1;
        resolve();
      });
  });
}
if (process.env.XDS_PARALLEL) {
  const gap = Number(process.env.XDS_PARALLEL);
  await new Promise((resolve) => client.makeUnaryRequest("/xt.Named/Who", serialize, deserialize, {},
    new grpc.Metadata(), { deadline: Date.now() + 5000 }, () => resolve()));
  const calls = [];
  for (let i = 0; i < Number(count); i++) {
    calls.push(call());
    await new Promise((resolve) => setTimeout(resolve, gap));
  }
  await Promise.all(calls);
} else {
  for (let i = 0; i < Number(count); i++) await call();
}
console.log(JSON.stringify(counts));
client.close();
process.exit(0);
