import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert/strict";
import { Http1Client } from "../../src/proxy/http1.ts";

const enc = new TextEncoder();

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

/** A raw TCP server answering each connection with `script(conn)`. */
function rawServer(script: (conn: Deno.TcpConn, n: number) => Promise<void>) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const tasks: Promise<void>[] = [];
  const loop = (async () => {
    let n = 0;
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
    close: async () => {
      listener.close();
      await loop.catch(() => {});
      await Promise.all(tasks);
    },
  };
}

/** Reads one request head (and a Content-Length body) from a raw connection. */
async function readRequest(conn: Deno.TcpConn): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) return text;
    text += new TextDecoder().decode(buf.subarray(0, n));
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const len = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0);
      if (text.length >= end + 4 + len) return text;
    }
  }
}

Deno.test("http1: keep-alive reuses one connection; headers and body go through", async () => {
  const s = server(async (req) =>
    Response.json({ got: await req.json(), auth: req.headers.get("authorization") })
  );
  const client = new Http1Client();
  try {
    for (let i = 0; i < 3; i++) {
      const res = await client.fetch(`${s.url}/v1/x?a=1`, {
        method: "POST",
        headers: [["authorization", "Bearer k"], ["content-type", "application/json"]],
        body: JSON.stringify({ i }),
      });
      strictEqual(res.status, 200);
      deepStrictEqual(await res.json(), { got: { i }, auth: "Bearer k" });
    }
    strictEqual(new Set(s.ports).size, 1, "one connection for three requests");
    strictEqual(client.openConnections, 1);
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
    const res = await client.fetch(`${s.url}/s`, { method: "POST", body: "{}" });
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    const first = await reader.read();
    strictEqual(
      dec.decode(first.value),
      "data: one\n\n",
      "the first piece before the second exists",
    );
    next();
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += dec.decode(value);
    }
    strictEqual(rest, "data: two\n\n");
    // Read to the end: the connection is reused.
    const again = await client.fetch(`${s.url}/s2`, { method: "POST", body: "{}" });
    await again.body?.cancel();
    strictEqual(s.ports[0], s.ports[1]);
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
    const res = await client.fetch(`${s.url}/big`, { method: "POST", body: "" });
    deepStrictEqual(new Uint8Array(await res.arrayBuffer()), big);
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
    const res = await client.fetch(`${s.url}/a`, { method: "POST", body: "x" });
    strictEqual(res.status, 200);
    strictEqual(res.headers.get("x-a"), "1");
    strictEqual(await res.text(), "to the end");
    const empty = await client.fetch(`${s.url}/b`, { method: "POST", body: "x" });
    strictEqual(empty.status, 204);
    strictEqual(empty.body, null);
  } finally {
    client.close();
    await s.close();
  }
});

Deno.test("http1: a stale idle connection (closed by the server) is retried on a new one", async () => {
  const closed = Promise.withResolvers<void>();
  const s = rawServer(async (conn, n) => {
    await readRequest(conn);
    // Keep-alive promised, then the server closes the idle connection anyway.
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
    if (n === 0) {
      conn.close();
      closed.resolve();
    }
  });
  const client = new Http1Client();
  try {
    strictEqual(
      await (await client.fetch(`${s.url}/1`, { method: "POST", body: "x" })).text(),
      "ok",
    );
    await closed.promise; // the pooled connection is now closed at the server
    strictEqual(
      await (await client.fetch(`${s.url}/2`, { method: "POST", body: "x" })).text(),
      "ok",
    );
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
    const ac = new AbortController();
    const res = await client.fetch(`${s.url}/s`, { method: "POST", body: "", signal: ac.signal });
    const reader = res.body!.getReader();
    ok((await reader.read()).value);
    ac.abort();
    await rejects(async () => {
      for (;;) if ((await reader.read()).done) break;
    });
    strictEqual(client.openConnections, 0);
    const res2 = await client.fetch(`${s.url}/s`, { method: "POST", body: "" });
    await res2.body!.cancel();
    strictEqual(client.openConnections, 0, "a cancelled body's connection is not reused");
    await rejects(client.fetch(`${s.url}/s`, { method: "POST", body: "", signal: ac.signal }));
  } finally {
    client.close();
    await s.close();
  }
  const port = 1; // below the ephemeral range; nothing listens there
  const c2 = new Http1Client();
  await rejects(c2.fetch(`http://127.0.0.1:${port}/x`, { method: "POST", body: "" }), /refused/i);
  c2.close();
});

Deno.test("http1: header bytes >= 0x80 pass unchanged both ways (one byte each)", async () => {
  const note = "Z\u00fcrich"; // "ü" is the single byte 0xFC in a header
  const s = server((req) =>
    new Response("ok", { headers: { "x-echo": req.headers.get("x-note") ?? "" } })
  );
  const client = new Http1Client();
  try {
    const res = await client.fetch(`${s.url}/h`, {
      method: "POST",
      headers: [["x-note", note]],
      body: "",
    });
    strictEqual(res.headers.get("x-echo"), note);
    await res.body?.cancel();
    await rejects(
      client.fetch(`${s.url}/h`, { method: "POST", headers: [["x-bad", "\u20ac"]], body: "" }),
      /byte string/,
    );
  } finally {
    client.close();
    await s.close();
  }
});
