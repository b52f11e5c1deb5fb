// A client of demo.Router (examples/route.proto) written with the npm
// package grpc-web (GrpcWebClientBase, the runtime generated gRPC-Web
// clients use in browsers), without generated code (MethodDescriptor with
// @bufbuild/protobuf's encoding):
//   node spec/node/grpcweb_client.mjs SET PORT FORMAT CASE...
// FORMAT: "text" (application/grpc-web-text, base64) or "binary"
// (application/grpc-web+proto). Prints the lines of each CASE as
// connect_client.mjs does (peer.mjs says what the cases send).
//
// grpc-web makes its requests with the browser's XMLHttpRequest, which
// Node.js does not have; no npm package of package.json provides one, so
// this script defines the part grpc-web's XhrIo uses (open,
// setRequestHeader, send, abort, readyState and onreadystatechange with
// the body as it streams in, status, response/responseText,
// getResponseHeader, getAllResponseHeaders) over node:http, HTTP/1.1
// keep-alive, as a browser's XHR would carry it.
import * as http from "node:http";
import { create, toBinary, fromBinary } from "@bufbuild/protobuf";
import grpcWeb from "grpc-web";
import * as peer from "./peer.mjs";

const agent = new http.Agent({ keepAlive: true });

class XMLHttpRequest {
  constructor() {
    this.readyState = 0;
    this.status = 0;
    this.statusText = "";
    this.responseType = "";
    this.responseText = "";
    this.response = "";
    this.withCredentials = false;
    this.timeout = 0;
    this.onreadystatechange = null;
    this.headers = {};
    this.chunks = [];
  }
  open(method, url) {
    this.method = method;
    this.url = url;
    this.state(1);
  }
  setRequestHeader(k, v) { this.headers[k] = v; }
  getResponseHeader(k) {
    const v = this.res && this.res.headers[k.toLowerCase()];
    return v === undefined ? null : String(v);
  }
  getAllResponseHeaders() {
    if (!this.res) return "";
    return Object.entries(this.res.headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  }
  state(n) {
    this.readyState = n;
    if (this.onreadystatechange) this.onreadystatechange();
  }
  // As a browser's: an "arraybuffer" response is there once it is whole
  // (readyState 4), a text one grows as it comes.
  body(done) {
    const all = Buffer.concat(this.chunks);
    if (this.responseType === "arraybuffer") {
      this.response = done ? all.buffer.slice(all.byteOffset, all.byteOffset + all.length) : null;
    } else {
      this.responseText = all.toString("latin1");
      this.response = this.responseText;
    }
  }
  send(data) {
    const body = data == null ? Buffer.alloc(0) : Buffer.from(data);
    this.req = http.request(this.url, { method: this.method, headers: this.headers, agent }, (res) => {
      this.res = res;
      this.status = res.statusCode;
      this.statusText = res.statusMessage;
      this.state(2);
      res.on("data", (c) => {
        this.chunks.push(c);
        this.body(false);
        this.state(3);
      });
      res.on("end", () => {
        this.body(true);
        this.state(4);
      });
    });
    this.req.on("error", () => {
      this.status = 0;
      this.state(4);
    });
    this.req.end(body);
  }
  abort() { if (this.req) this.req.destroy(); }
}
globalThis.XMLHttpRequest = XMLHttpRequest;

const { GrpcWebClientBase, MethodDescriptor, MethodType } = grpcWeb;

peer.main(async ([set, port, format, ...cases]) => {
  const registry = peer.loadRegistry(set);
  const service = peer.serviceType(registry, "demo.Router");
  const method = (name) => service.methods.find((m) => m.name === name);
  const descriptor = (name, type) => {
    const m = method(name);
    return new MethodDescriptor(`/demo.Router/${name}`, type, Object, Object,
      (v) => toBinary(m.input, create(m.input, v)), (b) => fromBinary(m.output, b));
  };
  const MEASURE = descriptor("Measure", MethodType.UNARY);
  const WALK = descriptor("Walk", MethodType.SERVER_STREAMING);
  const client = new GrpcWebClientBase({ format });
  const base = `http://127.0.0.1:${port}`;
  const code = (e) => peer.CODES[e.code] || `code ${e.code}`;
  // A unary call: the response, and the call (its metadata and status events).
  const unary = (request, metadata = {}, events = {}) => new Promise((resolve, reject) => {
    const call = client.rpcCall(`${base}/demo.Router/Measure`, request, metadata, MEASURE,
      (err, resp) => (err ? reject(err) : resolve(resp)));
    for (const [k, f] of Object.entries(events)) call.on(k, f);
  });
  const lines = [];
  const run = {
    async unary() {
      for (let i = 0; i < 3; i++) {
        try {
          const d = await unary(peer.ROUTE);
          lines.push(`measure ${d.length} ${d.legs}`);
        } catch (e) {
          lines.push(`error ${code(e)} ${e.message}`);
        }
      }
    },
    async server_stream() {
      await new Promise((resolve, reject) => {
        const s = client.serverStreaming(`${base}/demo.Router/Walk`, peer.WALK, {}, WALK);
        s.on("data", (p) => lines.push(`point ${p.x} ${p.y}`));
        s.on("error", reject);
        s.on("end", () => { lines.push("end"); resolve(); });
      });
    },
    async details() {
      try {
        await unary({ name: "details" });
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)} ${e.message}`);
        const bin = e.metadata && e.metadata["grpc-status-details-bin"];
        const st = peer.decodeStatus(registry, Buffer.from(bin || "", "base64"));
        for (const any of st.details) {
          const d = peer.unpack(registry, any);
          lines.push(`detail ErrorInfo ${d.reason} ${d.domain} limit=${d.metadata.limit}`);
        }
      }
    },
    async deadline() {
      try {
        await unary({ name: "sleep" }, { deadline: String(Date.now() + peer.DEADLINE_MS) });
        lines.push("no error");
      } catch (e) {
        lines.push(`error ${code(e)}`);
      }
    },
    async metadata() {
      // grpc-web emits a unary call's "metadata" (the headers) after its
      // "status" (the trailers): printed in the order the spec expects
      let head = "no headers", trail = ["no trailers"];
      const d = await unary({ name: "meta" },
        { "x-user": peer.USER, "x-raw-bin": Buffer.from(peer.RAW).toString("base64") },
        {
          metadata: (h) => { head = `header x-head ${h["x-head"]}`; },
          status: (st) => {
            trail = [`trailer x-trail ${st.metadata["x-trail"]}`,
              `trailer x-echo-bin ${peer.hex(Buffer.from(st.metadata["x-echo-bin"], "base64"))}`];
          },
        });
      lines.push(head, ...trail, `measure ${d.length} ${d.legs}`);
    },
  };
  for (const c of cases) {
    if (!run[c]) throw new Error(`unknown case ${c}`);
    await run[c]();
  }
  return lines;
});
