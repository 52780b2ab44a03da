import http from "node:http";
import type { AddressInfo } from "node:net";
import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { Http1Abort, Http1Client } from "../../src/proxy/http1.ts";
import { bodyBytes, bodyText, header, rawServer, readRequest } from "./http1_helpers.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A Deno.serve test server that records the client port of each request. */
function server(handler: (req: Request) => Response | Promise<Response>) {
  const ac = new AbortController();
  const ports: number[] = [];
  const s = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    (req, info) => {
      ports.push(info.remoteAddr.port);
      return handler(req);
    },
  );
  return {
    url: `http://127.0.0.1:${s.addr.port}`,
    ports,
    close: async () => {
      ac.abort();
      await s.finished;
    },
  };
}

Deno.test("http1: keep-alive reuses one connection; headers and body go through", async () => {
  const s = server(async (req) =>
    Response.json({ got: await req.json(), auth: req.headers.get("authorization") })
  );
  const client = new Http1Client();
  try {
    for (let i = 0; i < 3; i++) {
      const res = await client.send(
        `${s.url}/v1/x?a=1`,
        "POST",
        [["authorization", "Bearer k"], ["content-type", "application/json"]],
        enc.encode(JSON.stringify({ i })),
      );
      assertEquals(res.status, 200);
      assertEquals(JSON.parse(await bodyText(res)), { got: { i }, auth: "Bearer k" });
    }
    assertEquals(new Set(s.ports).size, 1, "one connection for three requests");
    assertEquals(client.openConnections, 1);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: a chunked stream is handed on as it arrives", async () => {
  let next!: () => void;
  const gate = new Promise<void>((r) => (next = r));
  const s = server(() => {
    let step = 0;
    return new Response(
      new ReadableStream<Uint8Array>({
        async pull(c) {
          if (step === 0) c.enqueue(enc.encode("data: one\n\n"));
          else if (step === 1) {
            await gate;
            c.enqueue(enc.encode("data: two\n\n"));
          } else c.close();
          step++;
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  });
  const client = new Http1Client();
  try {
    const res = await client.send(`${s.url}/s`, "POST", [], enc.encode("{}"));
    const body = res.body;
    assert(body !== null && !(body instanceof Uint8Array), "a streamed body");
    const first = await body.read();
    assertEquals(dec.decode(first!), "data: one\n\n", "the first piece before the second exists");
    next();
    let rest = "";
    for (let piece = await body.read(); piece !== null; piece = await body.read()) {
      rest += dec.decode(piece);
    }
    assertEquals(rest, "data: two\n\n");
    // Read to the end: the connection is reused.
    const again = await client.send(`${s.url}/s2`, "POST", [], enc.encode("{}"));
    await bodyText(again);
    assertEquals(s.ports[0], s.ports[1]);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: a large Content-Length body arrives intact", async () => {
  const big = new Uint8Array(300_000).map((_, i) => i % 251);
  const s = server(() => new Response(big));
  const client = new Http1Client();
  try {
    const res = await client.send(`${s.url}/big`, "POST", [], new Uint8Array(0));
    assertEquals(await bodyBytes(res), big);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: 100 Continue skipped; body to the end of a closing connection; 204", async () => {
  const s = rawServer(async (conn, n) => {
    await readRequest(conn);
    if (n === 0) {
      await conn.write(enc.encode("HTTP/1.1 100 Continue\r\n\r\n"));
      await conn.write(
        enc.encode("HTTP/1.1 200 OK\r\nconnection: close\r\nx-a: 1\r\n\r\nto the end"),
      );
    } else {
      await conn.write(enc.encode("HTTP/1.1 204 No Content\r\n\r\n"));
    }
  });
  const client = new Http1Client();
  try {
    const res = await client.send(`${s.url}/a`, "POST", [], enc.encode("x"));
    assertEquals(res.status, 200);
    assertEquals(header(res, "x-a"), "1");
    assertEquals(await bodyText(res), "to the end");
    const empty = await client.send(`${s.url}/b`, "POST", [], enc.encode("x"));
    assertEquals(empty.status, 204);
    assertEquals(empty.body, null);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: abort mid-body and cancel close the connection; refused is an error", async () => {
  const s = server(() =>
    new Response(
      new ReadableStream<Uint8Array>({
        pull(c) {
          c.enqueue(enc.encode("data: x\n\n"));
          return new Promise((r) => setTimeout(r, 5));
        },
      }),
    )
  );
  const client = new Http1Client();
  try {
    const abort = new Http1Abort();
    const res = await client.send(`${s.url}/s`, "POST", [], new Uint8Array(0), abort);
    const body = res.body;
    assert(body !== null && !(body instanceof Uint8Array), "a streamed body");
    assert(await body.read(), "a first piece");
    abort.abort();
    await assertRejects(async () => {
      for (let i = 0; i < 10_000; i++) if ((await body.read()) === null) break;
    });
    assertEquals(client.openConnections, 0);
    const res2 = await client.send(`${s.url}/s`, "POST", [], new Uint8Array(0));
    assert(res2.body !== null && !(res2.body instanceof Uint8Array), "a streamed body");
    res2.body.cancel();
    assertEquals(client.openConnections, 0, "a cancelled body's connection is not reused");
    await assertRejects(() => client.send(`${s.url}/s`, "POST", [], new Uint8Array(0), abort));
  } finally {
    client.close();
    await s.close();
  }
  const port = 1; // below the ephemeral range; nothing listens there
  const c2 = new Http1Client();
  const err = await assertRejects(() =>
    c2.send(`http://127.0.0.1:${port}/x`, "POST", [], new Uint8Array(0))
  );
  assertMatch(err.message, /refused/i);
  c2.close();
});

Deno.test("http1: header bytes >= 0x80 pass unchanged both ways (one byte each)", async () => {
  const note = "Z\u00fcrich"; // "ü" is the single byte 0xFC in a header
  const s = server((req) =>
    new Response("ok", { headers: { "x-echo": req.headers.get("x-note") ?? "" } })
  );
  const client = new Http1Client();
  try {
    const res = await client.send(`${s.url}/h`, "POST", [["x-note", note]], new Uint8Array(0));
    assertEquals(header(res, "x-echo"), note);
    await bodyText(res);
    const err = await assertRejects(() =>
      client.send(`${s.url}/h`, "POST", [["x-bad", "\u20ac"]], new Uint8Array(0))
    );
    assertMatch(err.message, /byte string/);
  } finally {
    client.close();
    await s.close();
  }
});

// --- The pool against servers that close idle connections ---

Deno.test("http1: Node's http server with a 1 s keep-alive: bursts after idle never fail", async () => {
  // The idle gaps are the subject: each round waits past the server's keep-alive on purpose.
  const SERVERS = 10;
  const ROUNDS = 5; // 10 servers × 5 rounds = 50 tries: a burst of 8, idle, then again
  const BURST = 8;
  const AFTER = 2;
  const servers = await Promise.all(
    Array.from({ length: SERVERS }, async () => {
      const srv = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          res.setHeader("content-type", "application/json");
          res.end('{"ok":true}');
        });
      });
      srv.keepAliveTimeout = 1000;
      await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
      return srv;
    }),
  );
  const client = new Http1Client();
  const failures: string[] = [];
  let answered = 0;
  const call = async (url: string) => {
    try {
      const res = await client.send(url, "POST", [], enc.encode("{}"));
      if (res.status === 200 && (await bodyText(res)) === '{"ok":true}') answered++;
      else failures.push(`status ${res.status}`);
    } catch (err) {
      failures.push(String(err));
    }
  };
  try {
    await Promise.all(servers.map(async (srv, i) => {
      const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1/chat/completions`;
      for (let round = 0; round < ROUNDS; round++) {
        // A burst leaves BURST connections in the pool.
        await Promise.all(Array.from({ length: BURST }, () => call(url)));
        // Idle across the server's close (Node closes idle connections 1–2 s after the last
        // answer), with gaps that vary so some land right on it.
        await new Promise((r) => setTimeout(r, 1000 + ((round + i) % 5) * 300));
        // Then requests one at a time: each would find the pool full of closed connections.
        for (let k = 0; k < AFTER; k++) await call(url);
      }
    }));
    assertEquals(failures, [], "no request failed");
    assertEquals(answered, SERVERS * ROUNDS * (BURST + AFTER));
  } finally {
    client.close();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
});

/** A raw keep-alive server answering `ok` (no Keep-Alive header) to each request. */
async function answerEach(conn: Deno.TcpConn, until: () => boolean = () => false) {
  const carry = { text: "" };
  while (!until()) {
    if ((await readRequest(conn, carry)) === "") return;
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
  }
}

Deno.test("http1: idle connections the server closed are dropped before reuse", async () => {
  const closeAll = Promise.withResolvers<void>();
  const arrived = { n: 0 };
  const bothIn = Promise.withResolvers<void>();
  const s = rawServer(async (conn, n) => {
    if (n >= 2) return answerEach(conn);
    await readRequest(conn);
    // Both first requests are in flight together: two connections go idle in the pool.
    if (++arrived.n === 2) bothIn.resolve();
    await bothIn.promise;
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
    await closeAll.promise; // then the server closes them, silently, while they are idle
  });
  const client = new Http1Client();
  try {
    const first = await Promise.all(
      [1, 2].map(() => client.send(`${s.url}/a`, "GET", [], new Uint8Array(0))),
    );
    assertEquals(await Promise.all(first.map(bodyText)), ["ok", "ok"]);
    assertEquals(client.idleConnections, 2, "two idle connections");
    closeAll.resolve();
    await until(() => client.idleConnections === 0, "the closed connections to leave the pool");
    const res = await client.send(`${s.url}/b`, "GET", [], new Uint8Array(0));
    assertEquals(await bodyText(res), "ok");
    assertEquals(s.connections(), 3, "a new connection for the request after the closes");
  } finally {
    client.close();
    await s.close();
  }
});

/**
 * Answers `ok` to each request on a connection, noting `connection path` in `seen`; a request
 * `dies` picks is read whole, held a while and left unanswered as the connection closes.
 */
async function noteEach(
  conn: Deno.TcpConn,
  n: number,
  seen: string[],
  dies: (req: string) => boolean = () => false,
): Promise<void> {
  const carry = { text: "" };
  // Bounded by the connection: every round reads a request or returns.
  for (;;) {
    const req = await readRequest(conn, carry);
    if (req === "") return;
    seen.push(`${n} ${req.split(" ")[1]}`);
    if (dies(req)) {
      await new Promise((r) => setTimeout(r, 200));
      return;
    }
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
  }
}

Deno.test("http1: a reused connection closed after reading the request: sent once, the call fails", async () => {
  const seen: string[] = [];
  // The whole request to /work is read; the engine works on it, then dies without answering.
  const s = rawServer((conn, n) => noteEach(conn, n, seen, (req) => req.includes("/work")));
  const client = new Http1Client();
  try {
    assertEquals(
      await bodyText(await client.send(`${s.url}/a`, "POST", [], enc.encode("x"))),
      "ok",
    );
    assertEquals(client.idleConnections, 1);
    const err = await assertRejects(() =>
      client.send(`${s.url}/work`, "POST", [], enc.encode("x"))
    );
    assertMatch(String(err), /closed before answering/);
    assertEquals(seen, ["0 /a", "0 /work"], "the request the server read went out once");
    assertEquals(s.connections(), 1, "no second connection was opened for it");
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: a reused connection the server had already reset: the request goes on a new one", async () => {
  const seen: string[] = [];
  const first = Promise.withResolvers<Deno.TcpConn>();
  const reset = Promise.withResolvers<void>();
  const s = rawServer(async (conn, n) => {
    if (n === 0) {
      // Reads only the start of the first request and answers it: the rest stays unread, so
      // closing the connection resets it (RST) instead of ending it.
      const buf = new Uint8Array(16);
      await conn.read(buf);
      seen.push(`0 ${dec.decode(buf).split(" ")[1]}`);
      await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
      first.resolve(conn);
      return await reset.promise; // the test closes it
    }
    await noteEach(conn, n, seen);
  });
  const client = new Http1Client();
  try {
    const body = enc.encode("x".repeat(1000));
    assertEquals(await bodyText(await client.send(`${s.url}/a`, "POST", [], body)), "ok");
    assertEquals(client.idleConnections, 1);
    const conn = await first.promise;
    // The reset and the next request in one turn: the client has not seen the close yet, so
    // the pooled connection is taken and its write is what fails.
    conn.close();
    reset.resolve();
    const res = await client.send(`${s.url}/b`, "POST", [], body);
    assertEquals(await bodyText(res), "ok", "answered on a new connection");
    assertEquals(seen, ["0 /a", "1 /b"], "the request reached the server once");
    assertEquals(s.connections(), 2);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: Keep-Alive timeout=N is honoured; without it idle connections retire early", async () => {
  let clock = 1_000_000;
  const s = rawServer(async (conn) => {
    const carry = { text: "" };
    for (;;) {
      const req = await readRequest(conn, carry);
      if (req === "") return;
      const ka = req.includes("/ka") ? "keep-alive: timeout=5, max=100\r\n" : "";
      await conn.write(enc.encode(`HTTP/1.1 200 OK\r\n${ka}content-length: 2\r\n\r\nok`));
    }
  });
  const client = new Http1Client({ now: () => clock });
  const get = async (path: string) =>
    await bodyText(await client.send(`${s.url}${path}`, "GET", [], new Uint8Array(0)));
  try {
    await get("/ka");
    clock += 4000; // within timeout=5 minus the margin: reused
    await get("/plain");
    assertEquals(s.connections(), 1, "reused within the server's keep-alive");
    clock += 1600; // past the default idle limit (1.5 s) without a Keep-Alive header
    await get("/ka");
    assertEquals(s.connections(), 2, "retired after the default idle limit");
    clock += 4600; // past timeout=5 minus the margin
    await get("/ka");
    assertEquals(s.connections(), 3, "retired before the server's keep-alive timeout");
  } finally {
    client.close();
    await s.close();
  }
});
