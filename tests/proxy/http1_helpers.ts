/**
 * Servers and readers for the HTTP/1.1 client tests: a raw TCP server that scripts each
 * connection, a request reader for it, and the body of an answer as text.
 *
 * @module
 */
import type { Http1Answer } from "../../src/proxy/http1.ts";

const dec = new TextDecoder();

/** A raw TCP server answering each connection with `script(conn, n)` (n counts connections). */
export function rawServer(script: (conn: Deno.TcpConn, n: number) => Promise<void>): {
  url: string;
  connections: () => number;
  close: () => Promise<void>;
} {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const tasks: Promise<void>[] = [];
  let n = 0;
  const loop = (async () => {
    for await (const conn of listener) {
      tasks.push(
        script(conn, n++).catch(() => {}).finally(() => {
          try {
            conn.close();
          } catch {
            // closed by the script
          }
        }),
      );
    }
  })();
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    connections: () => n,
    close: async () => {
      listener.close();
      await loop.catch(() => {});
      await Promise.all(tasks);
    },
  };
}

/**
 * Reads one request (head and Content-Length body) from a raw connection; "" when it closed
 * first. `carry` holds bytes read past the request (the next one on the connection).
 */
export async function readRequest(conn: Deno.TcpConn, carry = { text: "" }): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  let text = carry.text;
  // Bounded by the connection: every round reads or returns.
  for (;;) {
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const len = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0);
      if (text.length >= end + 4 + len) {
        carry.text = text.slice(end + 4 + len);
        return text.slice(0, end + 4 + len);
      }
    }
    const n = await conn.read(buf);
    if (n === null) return "";
    text += dec.decode(buf.subarray(0, n));
  }
}

/** An answer's body as bytes. */
export async function bodyBytes(answer: Http1Answer): Promise<Uint8Array> {
  const body = answer.body;
  if (body === null) return new Uint8Array(0);
  if (body instanceof Uint8Array) return body;
  const parts: Uint8Array[] = [];
  // Bounded by the body: every round reads a piece or ends.
  for (;;) {
    const piece = await body.read();
    if (piece === null) break;
    parts.push(piece);
  }
  return concat(...parts);
}

/** Byte arrays one after the other. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** An answer's body as text. */
export async function bodyText(answer: Http1Answer): Promise<string> {
  return dec.decode(await bodyBytes(answer));
}

/** An answer's header (repeated lines joined), or undefined. */
export function header(answer: Http1Answer, name: string): string | undefined {
  const values = answer.headers.filter(([n]) => n === name).map(([, v]) => v);
  return values.length === 0 ? undefined : values.join(", ");
}

/**
 * A listener that never accepts, its backlog filled with raw connects first: a connect to it
 * gets no answer (the kernel drops the SYN), as with a host that drops packets.
 */
export async function fullListener(): Promise<{ url: string; close: () => void }> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const filled: Deno.TcpConn[] = [];
  const late: Promise<void>[] = [];
  // Bounded: stops at the first connect that is not answered at once (the backlog is full).
  for (let i = 0; i < 4096; i++) {
    const connecting = Deno.connect({ hostname: "127.0.0.1", port });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stalled = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 200)));
    const conn = await Promise.race([connecting, stalled]);
    clearTimeout(timer);
    if (conn === undefined) {
      late.push(connecting.then((c) => c.close(), () => {}));
      break;
    }
    filled.push(conn);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      for (const c of filled) c.close();
      listener.close();
    },
  };
}
