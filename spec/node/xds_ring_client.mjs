// @grpc/grpc-js-xds's own client as the reference for ring hash affinity (gRFC A42) in
// spec/ring_hash_spec.lua:
//   GRPC_XDS_BOOTSTRAP_CONFIG='{...}' node spec/node/xds_ring_client.mjs NAME HEADER KEYS ROUNDS
// For each key of KEYS (comma-separated), ROUNDS unary calls of /xt.Named/Who (response
// xt.Id, field 1 the backend's name) on "xds:///NAME" with the metadata HEADER: key, one
// after the other, and prints a JSON object: each key's backends, "," joined in call
// order, and "failed" (how many calls failed, with the first error in "error").
import * as grpc from "@grpc/grpc-js";
import { register } from "@grpc/grpc-js-xds";
import * as peer from "./peer.mjs";

register();
const [name, header, keys, rounds] = process.argv.slice(2);

// xt.Id: the request empty, the response's field 1 (spec/node/peer.mjs).
const serialize = peer.encodeEmpty;
const deserialize = peer.decodeName;

const client = new grpc.Client(`xds:///${name}`, grpc.credentials.createInsecure());
const out = { failed: 0 };
function call(key) {
  const metadata = new grpc.Metadata();
  metadata.set(header, key);
  return new Promise((resolve) => {
    client.makeUnaryRequest("/xt.Named/Who", serialize, deserialize, {}, metadata,
      { deadline: Date.now() + 5000 }, (err, who) => {
        if (err) {
          out.failed++;
          out.error = out.error || `${err.code} ${err.details}`;
        } else out[key] = out[key] ? `${out[key]},${who}` : who;
        resolve();
      });
  });
}
for (let r = 0; r < Number(rounds); r++) {
  for (const key of keys.split(",")) await call(key);
}
console.log(JSON.stringify(out));
client.close();
process.exit(0);
