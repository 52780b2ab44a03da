import { assert, assertEquals, assertThrows } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { closeConn, readToClose } from "../_helpers/raw_conn.ts";
import {
  bodyTimeoutMs,
  type ClientListener,
  type ConnectionLimits,
  connectionLimits,
  listen,
} from "../../src/edge/listener.ts";

const encoder = new TextEncoder();

function start(limits: Partial<ConnectionLimits>, handler?: () => Response): ClientListener {
  return listen({
    hostname: "127.0.0.1",
    port: 0,
    limits: { headerTimeoutMs: 60_000, idleTimeoutMs: 60_000, maxConnections: 100, ...limits },
    handler: handler ?? (() => new Response("ok")),
    onError: () => new Response("error", { status: 500 }),
  });
}

async function connect(l: ClientListener): Promise<Deno.Conn> {
  return await Deno.connect({ hostname: "127.0.0.1", port: l.addr.port });
}

const GET = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

Deno.test("listener: a connection that sends nothing is closed after the header timeout", async () => {
  const l = start({ headerTimeoutMs: 150 });
  const conn = await connect(l);
  try {
    const t0 = Date.now();
    const r = await readToClose(conn);
    assert(r.closed, "the server closed the silent connection");
    assert(Date.now() - t0 >= 140, "not before the header timeout");
    assertEquals(l.stats().headerTimeouts, 1);
  } finally {
    closeConn(conn);
    await l.shutdown();
  }
});

Deno.test("listener: a slowloris head (never completed) is closed after the header timeout", async () => {
  const l = start({ headerTimeoutMs: 150 });
  const conn = await connect(l);
  try {
    await conn.write(encoder.encode("GET / HTTP/1.1\r\nHost: x\r\n"));
    await conn.write(encoder.encode("X-Slow: 1\r\n"));
    const r = await readToClose(conn);
    assert(r.closed, "closed");
    assertEquals(r.text, "", "no answer to a head that never completed");
  } finally {
    closeConn(conn);
    await l.shutdown();
  }
});

Deno.test("listener: a keep-alive connection idle after a request is closed after the idle timeout", async () => {
  const l = start({ headerTimeoutMs: 60_000, idleTimeoutMs: 200 });
  const conn = await connect(l);
  try {
    await conn.write(encoder.encode(GET));
    const r = await readToClose(conn);
    assert(r.text.startsWith("HTTP/1.1 200"), `answered first: ${r.text.slice(0, 40)}`);
    assert(r.closed, "then closed when idle");
    assertEquals(l.stats().idleTimeouts, 1);
  } finally {
    closeConn(conn);
    await l.shutdown();
  }
});

Deno.test("listener: a response streaming longer than the idle timeout is not cut", async () => {
  const l = start({ idleTimeoutMs: 100, headerTimeoutMs: 100 }, () => {
    let n = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        timer = setInterval(() => {
          c.enqueue(encoder.encode(`tick ${n}\n`));
          if (++n === 8) {
            clearInterval(timer);
            c.close();
          }
        }, 50);
      },
      cancel() {
        clearInterval(timer);
      },
    });
    return new Response(body);
  });
  try {
    const res = await fetch(`http://127.0.0.1:${l.addr.port}/`);
    const text = await res.text();
    assertEquals(text.split("\n").filter(Boolean).length, 8, "all 8 ticks arrived (400 ms)");
  } finally {
    await l.shutdown();
  }
});

Deno.test("listener: at the cap the oldest idle connection makes room for a new one", async () => {
  const l = start({ maxConnections: 3 });
  const idle = [await connect(l), await connect(l), await connect(l)];
  await until(() => l.stats().open === 3, "three connections open");
  const fresh = await connect(l);
  try {
    const oldest = await readToClose(idle[0]);
    assert(oldest.closed, "the oldest idle connection was closed");
    await fresh.write(encoder.encode("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const r = await readToClose(fresh);
    assert(r.text.startsWith("HTTP/1.1 200"), `the new connection is served: ${r.text}`);
    assertEquals(l.stats().evicted, 1);
  } finally {
    for (const c of [...idle, fresh]) closeConn(c);
    await l.shutdown();
  }
});

Deno.test("listener: at the cap with every connection busy a new one is refused, and served once load drops", async () => {
  const release = Promise.withResolvers<void>();
  let held = 0;
  const l = start({ maxConnections: 2 }, () => {
    held++;
    return new Response(
      new ReadableStream({
        async start(c) {
          c.enqueue(encoder.encode("start\n"));
          await release.promise;
          c.close();
        },
      }),
    );
  });
  const busy = [await connect(l), await connect(l)];
  try {
    for (const c of busy) await c.write(encoder.encode(GET));
    await until(() => held === 2, "two requests in flight");
    const refused = await connect(l);
    const r = await readToClose(refused);
    assert(r.closed, "refused at the cap");
    assertEquals(l.stats().refused, 1);
    closeConn(refused);
    release.resolve();
    for (const c of busy) closeConn(c);
    await until(() => l.stats().open === 0, "busy connections ended");
    const res = await fetch(`http://127.0.0.1:${l.addr.port}/`);
    assertEquals(res.status, 200, "serves again at once");
    await res.body?.cancel();
  } finally {
    release.resolve();
    for (const c of busy) closeConn(c);
    await l.shutdown();
  }
});

Deno.test("listener: connectionLimits keeps the cap below the file-descriptor limit", () => {
  const env = (m: Record<string, string>) => (n: string) => m[n];
  assertEquals(connectionLimits(env({}), 1024).maxConnections, 768);
  assertEquals(connectionLimits(env({}), 128).maxConnections, 64);
  assertEquals(connectionLimits(env({}), undefined).maxConnections, 10_000);
  assertEquals(connectionLimits(env({ SKEID_MAX_CONNECTIONS: "50000" }), 1024).maxConnections, 768);
  assertEquals(connectionLimits(env({ SKEID_MAX_CONNECTIONS: "100" }), 1024).maxConnections, 100);
  const l = connectionLimits(
    env({ SKEID_HEADER_TIMEOUT_MS: "500", SKEID_IDLE_TIMEOUT_MS: "9" }),
    4096,
  );
  assertEquals([l.headerTimeoutMs, l.idleTimeoutMs], [500, 9]);
  let message = "";
  try {
    connectionLimits(env({ SKEID_IDLE_TIMEOUT_MS: "soon" }), 4096);
  } catch (err) {
    message = (err as Error).message;
  }
  assertEquals(message, "SKEID_IDLE_TIMEOUT_MS must be a positive number, got 'soon'");
});

Deno.test("listener: SKEID_BODY_TIMEOUT_MS is a positive number of ms, 60 s by default", () => {
  assertEquals(bodyTimeoutMs(() => undefined), 60_000);
  assertEquals(bodyTimeoutMs((n) => n === "SKEID_BODY_TIMEOUT_MS" ? "250" : undefined), 250);
  assertThrows(
    () => bodyTimeoutMs(() => "0"),
    Error,
    "SKEID_BODY_TIMEOUT_MS must be a positive number, got '0'",
  );
});
