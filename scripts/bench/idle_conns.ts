/**
 * `deno run --allow-net scripts/bench/idle_conns.ts --url URL --connections N [--hold-ms MS]
 * [--batch N] [--timeout-ms MS]`
 *
 * The idle-connection load of the memory bench: opens `N` keep-alive connections to the gateway,
 * sends one request on each (a non-streamed chat completion) and reads its whole answer, then
 * keeps every connection open and silent. Prints one JSON line (`{"open", "failed", "openMs",
 * "errorSample"}`) once all are open, holds them for `--hold-ms` (the parent reads the gateway's
 * memory meanwhile; it may stop this process earlier), then closes them and exits. Bounded: each request has
 * a timeout, at most `--batch` requests are outstanding at once.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { buildPost } from "./raw_http.ts";

/** What the holder reports once every connection is open (or failed). */
export interface IdleReport {
  open: number;
  failed: number;
  openMs: number;
  errorSample?: string;
}

const CRLF2 = [13, 10, 13, 10];

/** Index just past the head's CRLFCRLF in `buf[0, len)`, or -1. */
function headEnd(buf: Uint8Array, len: number): number {
  outer: for (let i = 0; i + 3 < len; i++) {
    for (let k = 0; k < 4; k++) if (buf[i + k] !== CRLF2[k]) continue outer;
    return i + 4;
  }
  return -1;
}

/** One request on a new connection, its answer read whole (Content-Length); the open connection. */
async function openOne(
  hostname: string,
  port: number,
  request: Uint8Array,
  timeoutMs: number,
): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname, port });
  const timer = setTimeout(() => conn.close(), timeoutMs);
  try {
    for (let off = 0; off < request.length;) off += await conn.write(request.subarray(off));
    // A small answer: 4 KB is enough for the head and the body of the bench's request.
    const buf = new Uint8Array(4096);
    let len = 0;
    for (;;) {
      const n = await conn.read(buf.subarray(len));
      if (n === null) throw new Error(`connection closed after ${len} bytes`);
      len += n;
      const end = headEnd(buf, len);
      if (end < 0) {
        if (len === buf.length) throw new Error("response head over 4 KB");
        continue;
      }
      const head = new TextDecoder().decode(buf.subarray(0, end));
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      if (status !== "200") throw new Error(`answered ${status ?? head.slice(0, 40)}`);
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      if (!m) throw new Error("answer without content-length");
      if (/\r\nconnection:\s*close/i.test(head)) throw new Error("answer closes the connection");
      if (len >= end + Number(m[1])) return conn;
      if (len === buf.length) throw new Error("answer over 4 KB");
    }
  } catch (e) {
    try {
      conn.close();
    } catch {
      // already closed
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      url: { type: "string" },
      connections: { type: "string", default: "10000" },
      "hold-ms": { type: "string", default: "60000" },
      batch: { type: "string", default: "64" },
      "timeout-ms": { type: "string", default: "30000" },
      body: { type: "string" },
    },
  });
  const count = Number(values.connections);
  const holdMs = Number(values["hold-ms"]);
  const batch = Number(values.batch);
  const timeoutMs = Number(values["timeout-ms"]);
  if (
    !values.url || ![count, holdMs, batch, timeoutMs].every((n) => Number.isInteger(n) && n > 0)
  ) {
    console.error("idle_conns: --url and positive whole --connections/--hold-ms/--batch needed");
    return 2;
  }
  const url = new URL(values.url);
  const body = values.body ??
    JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "hi" }] });
  const request = buildPost(url.host, url.pathname, body, { authorization: "Bearer sk-bench" });
  const conns: Deno.TcpConn[] = [];
  let failed = 0;
  let errorSample: string | undefined;
  const started = performance.now();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      next++;
      try {
        conns.push(await openOne(url.hostname, Number(url.port), request, timeoutMs));
      } catch (e) {
        failed++;
        errorSample ??= e instanceof Error ? e.message : String(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(batch, count) }, lane));
  const report: IdleReport = {
    open: conns.length,
    failed,
    openMs: Math.round(performance.now() - started),
    errorSample,
  };
  console.log(JSON.stringify(report));
  // Hold until the time is up (the parent stops this process by PID once it has read).
  await new Promise((r) => setTimeout(r, holdMs));
  for (const c of conns) {
    try {
      c.close();
    } catch {
      // closed by the server (idle timeout)
    }
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main());
