// A client of demo.Router (examples/route.proto) written with @grpc/grpc-js
// over h2c, its messages encoded with @bufbuild/protobuf:
//   node spec/node/grpcjs_client.mjs SET PORT CASE...
// The same cases and lines as connect_client.mjs (peer.mjs).
import * as grpc from "@grpc/grpc-js";
import * as peer from "./peer.mjs";

// A promise of a unary or client-streaming call's answer: `start(callback)`
// starts the call and returns it (so its metadata and status events can be
// watched).
const answer = (start) => new Promise((resolve, reject) => {
  start((err, value) => (err ? reject(err) : resolve(value)));
});

const code = (e) => (typeof e.code === "number" ? peer.CODES[e.code] : `not a gRPC error: ${e}`);

peer.main(async ([set, port, ...cases]) => {
  const registry = peer.loadRegistry(set);
  const Router = grpc.makeGenericClientConstructor(peer.grpcDefinition(registry, "demo.Router"), "Router");
  const client = new Router(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const lines = [];
  const run = {
    async unary() {
      for (let i = 0; i < 3; i++) {
        try {
          const d = await answer((cb) => client.Measure(peer.ROUTE, cb));
          lines.push(`measure ${d.length} ${d.legs}`);
        } catch (e) {
          lines.push(`error ${code(e)} ${e.details}`);
        }
      }
    },
    async server_stream() {
      for await (const p of client.Walk(peer.WALK)) lines.push(`point ${p.x} ${p.y}`);
      lines.push("end");
    },
    async client_stream() {
      const d = await answer((cb) => {
        const call = client.Record(cb);
        for (const p of peer.RECORD) call.write(p);
        call.end();
        return call;
      });
      lines.push(`record ${d.length} ${d.legs}`);
    },
    async bidi() {
      const call = client.Follow();
      const it = call[Symbol.asyncIterator]();
      call.write(peer.FOLLOW[0]);
      for (const p of peer.FOLLOW.slice(1)) {
        call.write(p);
        const r = await it.next();
        lines.push(r.done ? "end too soon" : `leg ${r.value.x} ${r.value.y}`);
      }
      call.end();
      const r = await it.next();
      lines.push(r.done ? "end" : `more ${r.value.x} ${r.value.y}`);
    },
    async details() {
      try {
        await answer((cb) => client.Measure({ name: "details" }, cb));
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} ${e.details}`);
        const [bin] = e.metadata.get("grpc-status-details-bin");
        const st = peer.decodeStatus(registry, bin);
        if (peer.CODES[st.code] !== code(e) || st.message !== e.details) lines.push(`status ${st.code} ${st.message}`);
        for (const any of st.details) {
          const d = peer.unpack(registry, any);
          lines.push(`detail ErrorInfo ${d.reason} ${d.domain} limit=${d.metadata.limit}`);
        }
      }
    },
    async deadline() {
      try {
        await answer((cb) => client.Measure({ name: "sleep" }, { deadline: Date.now() + peer.DEADLINE_MS }, cb));
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)}`);
      }
    },
    async metadata() {
      const md = new grpc.Metadata();
      md.set("x-user", peer.USER);
      md.set("x-raw-bin", Buffer.from(peer.RAW));
      const seen = [];
      const d = await answer((cb) => {
        const call = client.Measure({ name: "meta" }, md, cb);
        call.on("metadata", (h) => seen.push(`header x-head ${h.get("x-head")[0]}`));
        call.on("status", (st) => {
          seen.push(`trailer x-trail ${st.metadata.get("x-trail")[0]}`);
          seen.push(`trailer x-echo-bin ${peer.hex(st.metadata.get("x-echo-bin")[0])}`);
        });
        return call;
      });
      lines.push(...seen, `measure ${d.length} ${d.legs}`);
    },
  };
  try {
    for (const c of cases) {
      if (!run[c]) throw new Error(`unknown case ${c}`);
      await run[c]();
    }
  } finally {
    client.close();
  }
  return lines;
});
