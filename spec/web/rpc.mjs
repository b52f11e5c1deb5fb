// The script of spec/web/rpc.html, bundled at test time with npm's esbuild
// (spec/web_rpc_spec.lua; never committed bundled): calls web.Calc
// (spec/web/calc.proto) on protocall's pc.listen at another origin (port
// "port" of the page's query: CORS) with @connectrpc/connect-web, over
// Connect (GET and POST, JSON and binary) and gRPC-Web, unary and server
// streaming, and an error with details; writes one line per result into
// <pre id="out">, then "done". Port "strict" serves Mul without its
// NO_SIDE_EFFECTS mark: a GET there is refused (405), which shows the GET
// was one. The schema comes from calc.pb (a FileDescriptorSet) beside the
// page.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

const out = document.getElementById("out");
const lines = [];
const show = (line) => {
  lines.push(line);
  out.textContent = lines.join("\n");
};

async function main() {
  const query = new URLSearchParams(location.search);
  const base = (port) => `http://127.0.0.1:${port}`;
  const set = new Uint8Array(await (await fetch("calc.pb")).arrayBuffer());
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, set));
  const Calc = registry.getService("web.Calc");
  const ErrorInfo = registry.getMessage("google.rpc.ErrorInfo");
  const clients = {
    "connect-get-json": createConnectTransport({ baseUrl: base(query.get("port")), useHttpGet: true }),
    "connect-post-proto": createConnectTransport({ baseUrl: base(query.get("port")), useBinaryFormat: true }),
    "grpc-web": createGrpcWebTransport({ baseUrl: base(query.get("port")), useBinaryFormat: true }),
    "strict-get": createConnectTransport({ baseUrl: base(query.get("strict")), useHttpGet: true }),
  };
  for (const [name, transport] of Object.entries(clients)) {
    const c = createClient(Calc, transport);
    const attempt = async (what, f) => {
      try {
        show(`${name} ${what} ${await f()}`);
      } catch (e) {
        if (!(e instanceof ConnectError)) throw e;
        const details = e.findDetails(ErrorInfo).map((d) => ` detail ${d.reason}`).join("");
        show(`${name} ${what} error ${Code[e.code]} ${e.rawMessage}${details}`);
      }
    };
    await attempt("mul", async () => (await c.mul({ x: 6, y: 7 })).total);
    if (name === "strict-get") continue;
    await attempt("add", async () => (await c.add({ x: 6, y: 7 })).total);
    await attempt("mul-negative", async () => (await c.mul({ x: -1, y: 7 })).total);
    await attempt("count", async () => {
      const got = [];
      for await (const p of c.count({ x: 3, y: 2 })) got.push(`${p.x},${p.y}`);
      return got.join(" ");
    });
  }
  show("done");
}

main().catch((e) => show(`failed: ${e && e.stack ? e.stack : e}`));
