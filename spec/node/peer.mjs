// What the node peers of the specs share (spec/node_peer.lua runs them):
// schemas from a FileDescriptorSet (protoc --include_imports -o), read at
// run time with @bufbuild/protobuf (no generated code); gRPC status names;
// hex; a queue to feed a stream one message at a time; the cases the
// clients run against demo.Router (examples/route.proto) and the lines they
// print, the same for every client so one spec checks them all.
import { readFileSync } from "node:fs";
import { createFileRegistry, fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, anyUnpack } from "@bufbuild/protobuf/wkt";

// registry = loadRegistry(path): every file of the descriptor set at `path`.
export function loadRegistry(path) {
  return createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(path)));
}

// The registry's message type `name`, or an error naming it.
export function messageType(registry, name) {
  const t = registry.getMessage(name);
  if (!t) throw new Error(`${name}: not in the descriptor set`);
  return t;
}

export function serviceType(registry, name) {
  const s = registry.getService(name);
  if (!s) throw new Error(`${name}: not in the descriptor set`);
  return s;
}

// gRPC's status code names by number (what protocall's pc.Error.code says).
export const CODES = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
  "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
];

export const hex = (bytes) => Buffer.from(bytes).toString("hex");

// The message in a google.protobuf.Any, of a type of the registry.
export function unpack(registry, any) {
  const m = anyUnpack(any, registry);
  if (!m) throw new Error(`${any.typeUrl}: not in the descriptor set`);
  return m;
}

// decodeStatus(registry, bytes): the google.rpc.Status in grpc-status-details-bin.
export function decodeStatus(registry, bytes) {
  return fromBinary(messageType(registry, "google.rpc.Status"), bytes);
}

// A service of the registry as @grpc/grpc-js's service definition
// (makeGenericClientConstructor, Server.addService): each method by its
// .proto name, its messages encoded and decoded with @bufbuild/protobuf
// (messages or plain objects of their fields go in, messages come out).
export function grpcDefinition(registry, name) {
  const service = serviceType(registry, name);
  const def = {};
  for (const m of service.methods) {
    const streams = { client_streaming: [true, false], server_streaming: [false, true], bidi_streaming: [true, true] };
    const [requestStream, responseStream] = streams[m.methodKind] || [false, false];
    const serialize = (type) => (v) => Buffer.from(toBinary(type, create(type, v)));
    const deserialize = (type) => (b) => fromBinary(type, b);
    def[m.name] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream,
      responseStream,
      requestSerialize: serialize(m.input),
      requestDeserialize: deserialize(m.input),
      responseSerialize: serialize(m.output),
      responseDeserialize: deserialize(m.output),
      originalName: m.localName,
    };
  }
  return def;
}

// xt.Named's codec for @grpc/grpc-js's makeUnaryRequest, by hand (the xDS
// clients have no descriptor set): the request xt.Id is sent empty; of the
// response xt.Id {string name = 1}, decodeName returns field 1 ("" when absent).
export const encodeEmpty = () => Buffer.alloc(0);
export function decodeName(buf) {
  let i = 0;
  let out = "";
  while (i < buf.length) {
    const tag = buf[i++];
    let len = 0;
    let shift = 0;
    for (;;) {
      const b = buf[i++];
      len |= (b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) break;
    }
    if (tag === 0x0a) out = buf.subarray(i, i + len).toString("utf8");
    i += len;
  }
  return out;
}

// A queue that is an async iterable: push() a message, end() the stream.
// Lets a client send one message, wait for the answer, send the next.
export class Queue {
  constructor() { this.items = []; this.waiting = null; this.done = false; }
  push(v) { this.items.push(v); this.wake(); }
  end() { this.done = true; this.wake(); }
  wake() { if (this.waiting) { const w = this.waiting; this.waiting = null; w(); } }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.items.length) yield this.items.shift();
      else if (this.done) return;
      else await new Promise((r) => { this.waiting = r; });
    }
  }
}

// The route examples/route_services.lua's Measure answers after two
// UNAVAILABLE failures (a fresh name per server).
export const ROUTE = { name: "tri", points: [{ x: 0, y: 0 }, { x: 3, y: 4 }] };
export const WALK = { name: "w", points: [{ x: 1, y: 2 }, { x: 3, y: 4 }, { x: 5, y: 6 }] };
export const RECORD = [{ x: 0, y: 0 }, { x: 3, y: 4 }, { x: 6, y: 8 }];
// Follow answers each point after the first with the step from the one
// before; the client waits for each answer before it sends the next point.
export const FOLLOW = [{ x: 1, y: 1 }, { x: 4, y: 5 }, { x: 4, y: 9 }];
// Request metadata of the "meta" case; the handlers answer with header
// x-head "hi <x-user>" and trailers x-trail "t1", x-echo-bin (x-raw-bin).
export const USER = "ann";
export const RAW = Uint8Array.from([0, 1, 2, 255]);
export const DEADLINE_MS = 300;

// main(run): runs `run(args)` (an async function returning lines), prints
// its lines, exits 0; on an exception prints it to stderr and exits 1.
export function main(run) {
  run(process.argv.slice(2)).then(
    (lines) => { process.stdout.write(lines.map((l) => l + "\n").join("")); process.exit(0); },
    (e) => { process.stderr.write((e && e.stack) || String(e)); process.stderr.write("\n"); process.exit(1); },
  );
}
