/**
 * Skeid's own HTTP/1.1 server (ADR 0053) as clients see it on the wire: framing of request
 * bodies, pipelining, refusals, streamed and bodiless answers, a client that leaves, and real
 * clients (Deno's fetch, Node's `http` with a keep-alive agent).
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { closeConn, readToClose } from "../_helpers/raw_conn.ts";
import { heldRequestBody } from "../../src/edge/inbound_request.ts";
import { type ClientListener, listen, type ServeHandler } from "../../src/edge/listener.ts";
import http from "node:http";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function start(handler: ServeHandler): ClientListener {
  return listen({
    hostname: "127.0.0.1",
    port: 0,
    limits: { headerTimeoutMs: 60_000, idleTimeoutMs: 60_000, maxConnections: 100 },
    handler,
    onError: () => new Response("error", { status: 500 }),
  });
}

/** Echoes method, path and body, with the body's length. */
const echo: ServeHandler = async (req) => {
  const body = await req.text();
  const url = new URL(req.url);
  return Response.json({ method: req.method, path: url.pathname, body, x: req.headers.get("x") });
};

async function withServer(
  handler: ServeHandler,
  fn: (port: number, l: ClientListener) => Promise<void>,
): Promise<void> {
  const l = start(handler);
  try {
    await fn(l.addr.port, l);
  } finally {
    await l.shutdown(1000);
  }
}

/** Sends `raw` on a new connection and reads until the server closes it (or `ms`). */
async function exchange(port: number, raw: string | Uint8Array, ms = 3000) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(typeof raw === "string" ? encoder.encode(raw) : raw);
    return await readToClose(conn, ms);
  } finally {
    closeConn(conn);
  }
}

/** The bodies of the answers in `text`, in order (Content-Length or chunked framing). */
function answers(text: string): { status: number; head: string; body: string }[] {
  const out: { status: number; head: string; body: string }[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const head = rest.slice(0, end);
    rest = rest.slice(end + 4);
    const status = Number(head.split(" ")[1]);
    if (status === 100) continue;
    const len = /content-length: (\d+)/i.exec(head);
    let body = "";
    if (len) {
      body = rest.slice(0, Number(len[1]));
      rest = rest.slice(Number(len[1]));
    } else if (/transfer-encoding: chunked/i.test(head)) {
      for (;;) {
        const lineEnd = rest.indexOf("\r\n");
        const size = parseInt(rest.slice(0, lineEnd), 16);
        rest = rest.slice(lineEnd + 2);
        if (size === 0) {
          rest = rest.slice(2);
          break;
        }
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
    }
    out.push({ status, head, body });
  }
  return out;
}

Deno.test("http server: a chunked request body is decoded, extensions and trailers dropped", async () => {
  await withServer(echo, async (port) => {
    const r = await exchange(
      port,
      "POST /v1/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
        "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer-X: y\r\n\r\n",
    );
    const [a] = answers(r.text);
    assertEquals(a.status, 200);
    assertEquals(JSON.parse(a.body).body, "hello 0123456789");
    assert(r.closed, "closed after `connection: close`");
  });
});

Deno.test("http server: a body sent byte by byte after 100 Continue arrives whole", async () => {
  await withServer(echo, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const body = JSON.stringify({ text: "ünïcode body" });
      const bytes = encoder.encode(body);
      await conn.write(encoder.encode(
        `POST /b HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: ${bytes.length}\r\n` +
          "Connection: close\r\n\r\n",
      ));
      const buf = new Uint8Array(1024);
      const n = await conn.read(buf);
      assertEquals(decoder.decode(buf.subarray(0, n!)), "HTTP/1.1 100 Continue\r\n\r\n");
      for (const b of bytes) await conn.write(Uint8Array.of(b));
      const r = await readToClose(conn);
      const [a] = answers(r.text);
      assertEquals(JSON.parse(a.body).body, body);
    } finally {
      closeConn(conn);
    }
  });
});

Deno.test("http server: a body that came with its head is held once, and stays the request's own", async () => {
  const seen: unknown[] = [];
  const handler: ServeHandler = async (req) => {
    const held = heldRequestBody(req);
    const again = heldRequestBody(req);
    seen.push({
      held: held === undefined ? null : decoder.decode(held),
      again: again === undefined ? null : "twice",
      own: await req.text(),
    });
    return new Response("ok");
  };
  await withServer(handler, async (port) => {
    await exchange(
      port,
      'POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\n{"a":"b"}' +
        "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
        "3\r\nxyz\r\n0\r\n\r\n",
    );
    // The first body came whole with its head; the chunked one is read as a stream.
    assertEquals(seen, [
      { held: '{"a":"b"}', again: null, own: '{"a":"b"}' },
      { held: null, again: null, own: "xyz" },
    ]);
  });
  // A `Request` made elsewhere holds nothing.
  assertEquals(heldRequestBody(new Request("http://a/", { method: "POST", body: "x" })), undefined);
});

Deno.test("http server: pipelined requests are answered in order on one connection", async () => {
  await withServer(echo, async (port) => {
    const r = await exchange(
      port,
      "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" +
        "GET /two HTTP/1.1\r\nHost: a\r\n\r\n" +
        "POST /three HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nConnection: close\r\n\r\nz",
    );
    const got = answers(r.text).map((a) => JSON.parse(a.body));
    assertEquals(got.map((g) => [g.path, g.body]), [["/one", "abc"], ["/two", ""], [
      "/three",
      "z",
    ]]);
    assert(r.closed);
  });
});

Deno.test("http server: heads that cannot be framed are refused and the connection closed", async () => {
  let reached = 0;
  await withServer(() => {
    reached++;
    return new Response("served");
  }, async (port) => {
    const cases: [string, number, string][] = [
      [
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        "both",
      ],
      ["POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\nabc", 400, "conflicting"],
      ["POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, "decimal"],
      ["POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "chunked"],
      ["GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400, "obs-fold"],
      ["GET / HTTP/1.1\r\n\r\n", 400, "Host"],
      ["GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "request line"],
      ["GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "protocol"],
      ["GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target"],
      ["GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "Host"],
      [`GET / HTTP/1.1\r\nHost: a\r\nX: ${"y".repeat(70_000)}\r\n\r\n`, 431, "larger"],
    ];
    for (const [raw, status, why] of cases) {
      const r = await exchange(port, raw);
      const [a] = answers(r.text);
      assertEquals(
        a?.status,
        status,
        `${JSON.stringify(raw.slice(0, 60))}: ${r.text.slice(0, 200)}`,
      );
      assertStringIncludes(JSON.parse(a.body).error.message, why);
      assert(r.closed, `closed after ${status}`);
    }
  });
  assertEquals(reached, 0, "no refused head reached the handler");
});

Deno.test("http server: a streamed answer is chunked and each piece is sent as it comes", async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => release = r);
  await withServer(() => {
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(encoder.encode("data: first\n\n"));
        await held;
        c.enqueue(encoder.encode("data: second\n\n"));
        c.close();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  }, async (port) => {
    const res = await fetch(`http://127.0.0.1:${port}/s`);
    assertEquals(res.headers.get("transfer-encoding"), "chunked");
    const reader = res.body!.getReader();
    const first = await reader.read();
    assertEquals(decoder.decode(first.value), "data: first\n\n", "before the stream ended");
    release!();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      rest += decoder.decode(r.value);
    }
    assertEquals(rest, "data: second\n\n");
  });
});

Deno.test("http server: a client that leaves aborts its request's signal and stops its stream", async () => {
  let aborted = false;
  let cancelled = false;
  let entered: (() => void) | undefined;
  const inHandler = new Promise<void>((r) => entered = r);
  await withServer((req) => {
    if (new URL(req.url).pathname === "/wait") {
      entered!();
      return new Promise<Response>((resolve) => {
        req.signal.addEventListener("abort", () => {
          aborted = true;
          resolve(new Response("late"));
        });
      });
    }
    return new Response(
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(encoder.encode("data: x\n\n"));
        },
        cancel() {
          cancelled = true;
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  }, async (port) => {
    const a = await Deno.connect({ hostname: "127.0.0.1", port });
    await a.write(encoder.encode("GET /wait HTTP/1.1\r\nHost: a\r\n\r\n"));
    await inHandler;
    a.close();
    await until(() => aborted, "the handler saw its client leave");

    const b = await Deno.connect({ hostname: "127.0.0.1", port });
    await b.write(encoder.encode("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n"));
    const n = await b.read(new Uint8Array(4096));
    assert(n !== null && n > 0, "the stream started");
    b.close();
    await until(() => cancelled, "the stream's source was cancelled");
  });
});

Deno.test("http server: HEAD, 204 and 304 carry no body; HTTP/1.0 closes unless kept alive", async () => {
  await withServer((req) => {
    const p = new URL(req.url).pathname;
    if (p === "/204") return new Response(null, { status: 204 });
    if (p === "/304") return new Response(null, { status: 304 });
    return new Response("twelve bytes");
  }, async (port) => {
    const head = await exchange(port, "HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assertStringIncludes(head.text, "content-length: 12\r\n");
    assert(head.text.endsWith("\r\n\r\n"), "no body after a HEAD answer's head");
    for (const s of ["204", "304"]) {
      const r = await exchange(port, `GET /${s} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`);
      assert(r.text.startsWith(`HTTP/1.1 ${s} `), r.text);
      assert(!/content-length|transfer-encoding/i.test(r.text), r.text);
    }
    const old = await exchange(port, "GET / HTTP/1.0\r\n\r\n");
    assert(old.closed, "HTTP/1.0 without keep-alive closes");
    assertEquals(answers(old.text)[0].body, "twelve bytes");
    const kept = await exchange(port, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 300);
    assert(!kept.closed, "HTTP/1.0 keep-alive stays open");
    assertStringIncludes(kept.text, "connection: keep-alive\r\n");
  });
});

Deno.test("http server: an answer to an unread 2 MB body arrives whole before the close", async () => {
  await withServer((req) => {
    // A refusal that leaves the body unread (as the intake's 413).
    void req;
    return new Response("too large", { status: 413, headers: { connection: "close" } });
  }, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const size = 2 * 1024 * 1024;
      await conn.write(encoder.encode(
        `POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${size}\r\n\r\n`,
      ));
      // The client goes on sending while the answer comes (and fails once the server closed).
      const sending = conn.write(new Uint8Array(size)).catch(() => 0);
      const r = await readToClose(conn);
      await sending;
      const [a] = answers(r.text);
      assertEquals([a?.status, a?.body], [413, "too large"]);
      assert(r.closed);
    } finally {
      closeConn(conn);
    }
  });
});

Deno.test("http server: a client uploading a refused 24 MB body sends it all, then reads the 413", async () => {
  await withServer(() => {
    return new Response("too large", { status: 413, headers: { connection: "close" } });
  }, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const size = 24 * 1024 * 1024;
      await conn.write(encoder.encode(
        `POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${size}\r\n\r\n`,
      ));
      // As an HTTP library does: the whole body first, the answer after. A server that closed
      // while it was still coming would fail these writes (reset, broken pipe).
      const piece = new Uint8Array(256 * 1024);
      let sent = 0;
      let failed: unknown;
      try {
        while (sent < size) {
          sent += await conn.write(piece.subarray(0, Math.min(piece.length, size - sent)));
        }
      } catch (err) {
        failed = err;
      }
      assertEquals([sent, failed], [size, undefined]);
      const r = await readToClose(conn);
      const [a] = answers(r.text);
      assertEquals([a?.status, a?.body], [413, "too large"]);
      assert(r.closed);
    } finally {
      closeConn(conn);
    }
  });
});

Deno.test("http server: a Latin-1 header value reaches the handler and the client byte for byte", async () => {
  await withServer((req) => {
    return new Response(req.headers.get("x") ?? "", {
      headers: { "x-back": req.headers.get("x")! },
    });
  }, async (port) => {
    const raw = new Uint8Array([
      ...encoder.encode("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX: caf"),
      0xe9,
      ...encoder.encode("\r\n\r\n"),
    ]);
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await conn.write(raw);
      const bytes: number[] = [];
      const buf = new Uint8Array(4096);
      for (let n = await conn.read(buf); n !== null; n = await conn.read(buf)) {
        bytes.push(...buf.subarray(0, n));
      }
      const head = String.fromCharCode(...bytes);
      assertStringIncludes(head, "x-back: caf\u00e9\r\n");
    } finally {
      closeConn(conn);
    }
  });
});

Deno.test("http server: Deno's fetch and Node's http keep-alive agent reuse connections", async () => {
  await withServer(echo, async (port, l) => {
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/f${i}`, {
        method: "POST",
        body: "x".repeat(i * 1000),
        headers: { x: String(i) },
      });
      const got = await res.json();
      assertEquals([got.path, got.body.length, got.x], [`/f${i}`, i * 1000, String(i)]);
    }
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 20; i++) {
        const text = await new Promise<string>((resolve, reject) => {
          const req = http.request({
            host: "127.0.0.1",
            port,
            path: `/n${i}`,
            method: "POST",
            agent,
            headers: { "content-type": "application/json" },
          }, (res) => {
            let t = "";
            res.setEncoding("utf8");
            res.on("data", (d: string) => t += d);
            res.on("end", () => resolve(t));
          });
          req.on("error", reject);
          // Chunked (no length given), in two writes.
          req.write(`{"i":${i},`);
          req.end(`"pad":"${"p".repeat(i * 500)}"}`);
        });
        assertEquals(JSON.parse(JSON.parse(text).body).i, i);
      }
    } finally {
      agent.destroy();
    }
    assert(l.stats().accepted <= 3, `connections reused (${l.stats().accepted} accepted)`);
  });
});
