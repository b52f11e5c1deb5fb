// A static file server for the browser specs (spec/browser.lua), Node.js's
// http module alone (no npm package):
//   node spec/node/static_server.mjs DIR
// Serves the files of DIR on 127.0.0.1 (a free port) with GET and HEAD,
// prints "PORT PID" once listening and exits when its standard input
// closes (spec/node_peer.lua's M.serve).
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json", ".txt": "text/plain; charset=utf-8", ".css": "text/css", ".png": "image/png",
  ".wasm": "application/wasm", ".pb": "application/octet-stream",
};
const root = resolve(process.argv[2] || ".");

const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
  const file = join(root, path);
  if ((req.method !== "GET" && req.method !== "HEAD") || !file.startsWith(root)) {
    res.writeHead(405).end();
    return;
  }
  try {
    const body = await readFile(file);
    res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream", "cache-control": "no-store" });
    res.end(req.method === "HEAD" ? undefined : body);
  } catch {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  }
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`${server.address().port} ${process.pid}\n`));
process.stdin.on("data", () => {});
process.stdin.on("end", () => process.exit(0));
