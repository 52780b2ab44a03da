/**
 * The floor of a Deno proxy, for `deno task bench --gateway-url bare`: `Deno.serve` in front of
 * the same HTTP/1.1 upstream client Skeid uses, and nothing else — no routing, admission, usage
 * events, ledger, metrics or header rules. Bodies and statuses pass through; streams are relayed
 * chunk for chunk. What Skeid costs above this line is Skeid's; what this costs is the runtime's.
 *
 *   deno run --allow-net scripts/bench/bare_proxy.ts --upstream http://127.0.0.1:8000/v1
 *
 * Prints its base URL (`http://127.0.0.1:PORT/v1`) on the first stdout line; stops on SIGTERM.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { BodySource, Http1Client } from "../../src/proxy/http1.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { upstream: { type: "string" }, listen: { type: "string", default: "127.0.0.1:0" } },
});
if (!values.upstream) {
  console.error("bare_proxy.ts: --upstream URL is required");
  Deno.exit(2);
}
const upstream = values.upstream.replace(/\/$/, "");
const [hostname, port] = values.listen!.split(":");
const client = new Http1Client();
const ac = new AbortController();

const server = Deno.serve({
  hostname,
  port: Number(port),
  signal: ac.signal,
  onListen: (addr) => console.log(`http://${addr.hostname}:${addr.port}/v1`),
}, async (req) => {
  const path = new URL(req.url).pathname.replace(/^\/v1/, "");
  const body = new Uint8Array(await req.arrayBuffer());
  const answer = await client.send(
    `${upstream}${path}`,
    req.method,
    [["content-type", "application/json"]],
    body,
  );
  const headers = answer.headers.filter(([n]) =>
    n !== "content-length" && n !== "transfer-encoding"
  );
  const source = answer.body;
  if (source instanceof BodySource) {
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const piece = await source.read();
        if (piece === null) controller.close();
        else controller.enqueue(piece);
      },
      cancel: () => source.cancel(),
    });
    return new Response(stream, { status: answer.status, headers });
  }
  return new Response(source, { status: answer.status, headers });
});

Deno.addSignalListener("SIGTERM", () => ac.abort());
await server.finished;
client.close();
