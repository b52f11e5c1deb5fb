// A Connect client of web.Calc (spec/web/calc.proto) written with
// @connectrpc/connect-node, GET for methods without side effects
// (useHttpGet), against protocall's pc.listen:
//   node spec/node/web_client.mjs SET PORT h1|h2 json|proto
// Prints one line per call: "mul TOTAL", "add TOTAL", "error CODE MESSAGE"
// and, for an error's details, "detail TYPE REASON".
import { createClient, ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as peer from "./peer.mjs";

peer.main(async ([set, port, version, codec]) => {
  const registry = peer.loadRegistry(set);
  const ErrorInfo = peer.messageType(registry, "google.rpc.ErrorInfo");
  const transport = createConnectTransport({
    baseUrl: `http://127.0.0.1:${port}`, httpVersion: version === "h1" ? "1.1" : "2",
    useBinaryFormat: codec !== "json", useHttpGet: true,
  });
  const client = createClient(peer.serviceType(registry, "web.Calc"), transport);
  const lines = [];
  const call = async (name, req) => {
    try {
      const r = await client[name](req);
      lines.push(`${name} ${r.total}`);
    } catch (e) {
      if (!(e instanceof ConnectError)) throw e;
      lines.push(`error ${peer.CODES[e.code]} ${e.rawMessage}`);
      for (const d of e.findDetails(ErrorInfo)) lines.push(`detail ErrorInfo ${d.reason}`);
    }
  };
  await call("mul", { x: 6, y: 7 });
  await call("add", { x: 6, y: 7 });
  await call("mul", { x: -1, y: 7 });
  return lines;
});
