import { assertEquals } from "../_assert.ts";
import { Conn } from "../../src/proxy/http1_conn.ts";
import { parseHead } from "../../src/proxy/http1_head.ts";
import { Http1Client } from "../../src/proxy/http1.ts";
import { bodyText, rawServer, readRequest } from "./http1_helpers.ts";

const enc = new TextEncoder();

/** A connection whose reads hand out `pieces` one at a time (one piece per read at most). */
function piecesConn(pieces: Uint8Array[]): Deno.Conn {
  let at = 0;
  let off = 0;
  const fake = {
    read(into: Uint8Array): Promise<number | null> {
      while (at < pieces.length && off >= pieces[at].length) [at, off] = [at + 1, 0];
      if (at >= pieces.length) return Promise.resolve(null);
      const n = Math.min(into.length, pieces[at].length - off);
      into.set(pieces[at].subarray(off, off + n));
      off += n;
      return Promise.resolve(n);
    },
    write: (bytes: Uint8Array) => Promise.resolve(bytes.length),
    close: () => {},
  };
  return fake as unknown as Deno.Conn;
}

/** Heads read off `c` until the final (non-1xx) one: their statuses. */
async function statuses(c: Conn): Promise<number[]> {
  const out: number[] = [];
  // Bounded by the bytes given: each round reads a head or the fake connection ends.
  for (;;) {
    const status = parseHead(await c.head()).status;
    out.push(status);
    if (status >= 200) return out;
  }
}

const HINT = `HTTP/1.1 103 Early Hints\r\nlink: <${"/s".repeat(100)}>; rel=preload\r\n\r\n`;
const ANSWER = enc.encode(
  `HTTP/1.1 100 Continue\r\n\r\n${HINT}${HINT}HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok`,
);

Deno.test("http1 conn: 1xx heads then the final one, split at every byte", async () => {
  for (let k = 1; k < ANSWER.length; k++) {
    const c = new Conn(piecesConn([ANSWER.subarray(0, k), ANSWER.subarray(k)]), "h");
    assertEquals(await statuses(c), [100, 103, 103, 200], `split at byte ${k}`);
  }
  const bytes = Array.from(ANSWER, (b) => Uint8Array.of(b));
  assertEquals(await statuses(new Conn(piecesConn(bytes), "h")), [100, 103, 103, 200]);
});

Deno.test("http1 conn: a buffer that compacts between reads keeps the head scan in place", async () => {
  // After a 103 the buffer is part-read; when it fills up, what is buffered moves to the front.
  // The final head ends at each byte around that moment (the first buffer is 2 KiB), arriving in
  // pieces of a few sizes.
  const fixed = `${HINT}HTTP/1.1 200 OK\r\nx-pad: \r\ncontent-length: 0\r\n\r\n`.length;
  for (const size of [1, 64, 300]) {
    for (let total = 2040; total <= 2120; total++) {
      const bytes = enc.encode(
        `${HINT}HTTP/1.1 200 OK\r\nx-pad: ${
          "p".repeat(total - fixed)
        }\r\ncontent-length: 0\r\n\r\n`,
      );
      const pieces: Uint8Array[] = [];
      for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
      const c = new Conn(piecesConn(pieces), "h");
      assertEquals(await statuses(c), [103, 200], `${total} bytes in pieces of ${size}`);
    }
  }
});

Deno.test("http1: a 103 with its final head in a later packet is answered, not hung on", async () => {
  const s = rawServer(async (conn) => {
    conn.setNoDelay(true);
    await readRequest(conn);
    await conn.write(enc.encode(HINT));
    // The engine sends its hints first and the answer when it is done.
    await new Promise((r) => setTimeout(r, 50));
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
  });
  const client = new Http1Client();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const hung = new Promise<string>((r) => timer = setTimeout(() => r("hung"), 3000));
    const answered = client.send(`${s.url}/a`, "POST", [], enc.encode("x")).then(bodyText);
    assertEquals(await Promise.race([answered, hung]), "ok");
  } finally {
    clearTimeout(timer);
    client.close();
    await s.close();
  }
});
