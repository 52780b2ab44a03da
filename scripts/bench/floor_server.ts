/**
 * The memory floor of an HTTP/1.1 server on this runtime, for `deno task bench:floor`: a server
 * that answers every request with one fixed JSON body, either through `Deno.serve` (the runtime's
 * server, what Skeid's listener sits on) or as a plain loop over `Deno.listen` connections that
 * reads request heads into a small buffer per connection and writes the fixed answer. No
 * routing, no gateway: what it holds per idle connection is what the server kind itself costs.
 *
 *   deno run --allow-net scripts/bench/floor_server.ts --kind serve|listen
 *
 * Prints its base URL (`http://127.0.0.1:PORT/v1`) on the first stdout line; stops on SIGTERM.
 * The `listen` kind understands only what the benchmark's clients send (a head, then a body of
 * its `Content-Length`): it is a measuring stick, not a server for anything else.
 *
 * @module
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { kind: { type: "string" } },
});
const kind = values.kind;
if (kind !== "serve" && kind !== "listen") {
  console.error("floor_server.ts: --kind serve|listen is required");
  Deno.exit(2);
}

const BODY = JSON.stringify({
  id: "chatcmpl-floor",
  object: "chat.completion",
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
/** Bytes a connection reads into at first; a larger head or body grows it. */
const FIRST_READ_BYTES = 512;

if (kind === "serve") {
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: (addr) => console.log(`http://${addr.hostname}:${addr.port}/v1`),
  }, async (req) => {
    await req.arrayBuffer();
    return new Response(BODY, { headers: { "content-type": "application/json" } });
  });
  Deno.addSignalListener("SIGTERM", () => server.shutdown().then(() => Deno.exit(0)));
} else {
  const enc = new TextEncoder();
  const body = enc.encode(BODY);
  const head = enc.encode(
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
  );
  const answer = new Uint8Array(head.length + body.length);
  answer.set(head);
  answer.set(body, head.length);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const addr = listener.addr as Deno.NetAddr;
  console.log(`http://${addr.hostname}:${addr.port}/v1`);
  Deno.addSignalListener("SIGTERM", () => Deno.exit(0));
  for await (const conn of listener) serveConn(conn, answer);
}

/** Index just past the head's CRLFCRLF in `buf[0, len)`, or -1. */
function headEnd(buf: Uint8Array, len: number): number {
  for (let i = 3; i < len; i++) {
    if (buf[i] === 10 && buf[i - 1] === 13 && buf[i - 2] === 10 && buf[i - 3] === 13) return i + 1;
  }
  return -1;
}

/** The head's Content-Length, 0 without one. */
function contentLength(head: string): number {
  const m = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
  return m === null ? 0 : Number(m[1]);
}

/** Answers each request on `conn` with `answer` until the client closes it. */
async function serveConn(conn: Deno.Conn, answer: Uint8Array): Promise<void> {
  const dec = new TextDecoder();
  let buf = new Uint8Array(FIRST_READ_BYTES);
  let used = 0;
  try {
    for (;;) {
      if (used === buf.length) {
        const grown = new Uint8Array(buf.length * 2);
        grown.set(buf);
        buf = grown;
      }
      const n = await conn.read(buf.subarray(used));
      if (n === null) break;
      used += n;
      for (;;) {
        const end = headEnd(buf, used);
        if (end < 0) break;
        const whole = end + contentLength(dec.decode(buf.subarray(0, end)));
        if (used < whole) break;
        for (let off = 0; off < answer.length;) off += await conn.write(answer.subarray(off));
        buf.copyWithin(0, whole, used);
        used -= whole;
      }
    }
  } catch {
    // The client reset the connection: nothing to answer.
  }
  try {
    conn.close();
  } catch {
    // closed already
  }
}
