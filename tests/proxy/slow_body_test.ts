/**
 * Slow and stalled client bodies through a running server (raw TCP clients): bytes count against
 * the buffered-bytes cap as they arrive, so bodies that trickle hold no one else back, and a body
 * that stops sending is cut after the body timeout (408) with its connection closed.
 */
import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { stringify } from "yaml";
import { until } from "../_helpers/poll.ts";
import { closeConn, readToClose } from "../_helpers/raw_conn.ts";
import { tempDir } from "../_helpers/temp.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { memoryLogger } from "../../src/log.ts";

const enc = new TextEncoder();
const MiB = 1024 * 1024;
const CHAT_PREFIX = '{"model":"m","messages":[{"role":"user","content":"';

/** A server over one fake node with exactly `env` as its environment; `fn` runs against it. */
async function withServer(
  env: Record<string, string>,
  fn: (server: RunningServer) => Promise<void>,
): Promise<void> {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0 });
  const configPath = `${tmp.dir}/skeid.yaml`;
  await Deno.writeTextFile(
    configPath,
    stringify({ nodes: [{ id: "n", url: fake.url, model: "m" }] }),
  );
  const server = await startServer({
    hostname: "127.0.0.1",
    port: 0,
    configPath,
    env: (name) => env[name],
    logger: memoryLogger("error"),
    spillPath: `${tmp.dir}/spill.jsonl`,
    watch: false,
  });
  try {
    await fn(server);
  } finally {
    await server.stop(0);
    await fake.close();
    await tmp.cleanup();
  }
}

/**
 * Opens a connection and sends a chat request's head declaring `length` body bytes (and the
 * header lines `more`), and `first`.
 */
async function startBody(
  port: number,
  length: number,
  first: string,
  more = "",
): Promise<Deno.Conn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(
    enc.encode(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
        `${more}content-length: ${length}\r\n\r\n${first}`,
    ),
  );
  return conn;
}

/** The values of the answer head's `connection` header lines, in order. */
function connectionHeaders(text: string): string[] {
  const head = text.split("\r\n\r\n")[0];
  return head.split("\r\n").filter((l) => /^connection:/i.test(l)).map((l) =>
    l.slice(l.indexOf(":") + 1).trim()
  );
}

/** Connections whose request head the server handed to the gateway (busy, not idle). */
function busy(server: RunningServer): number {
  const s = server.listener.stats();
  return s.open - s.idle;
}

Deno.test("slow body: 4 bodies declaring 64 MiB and trickling hold no one back (default limits)", async () => {
  await withServer({}, async (server) => {
    const port = server.addr.port;
    const slow = await Promise.all(
      Array.from({ length: 4 }, () => startBody(port, 64 * MiB, CHAT_PREFIX)),
    );
    try {
      await until(() => busy(server) === 4, () => `4 bodies being read, ${busy(server)}`);
      // A byte a connection every 20 ms for as long as the other request runs.
      let trickling = true;
      const trickle = (async () => {
        while (trickling) {
          for (const c of slow) await c.write(enc.encode("a"));
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      let res: Response;
      try {
        res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
        });
        const text = await res.text();
        assertEquals(res.status, 200, text);
        const held = server.gateway.buffered.used;
        assert(held < 4096, `the trickling bodies hold what they sent, not 256 MiB: ${held}`);
      } finally {
        trickling = false;
        await trickle;
      }
    } finally {
      for (const c of slow) closeConn(c);
    }
    await until(() => server.gateway.buffered.used === 0, "the cap given back");
  });
});

Deno.test("slow body: a body that stops sending is cut after SKEID_BODY_TIMEOUT_MS with 408, its connection closed", async () => {
  await withServer({ SKEID_BODY_TIMEOUT_MS: "300" }, async (server) => {
    const port = server.addr.port;
    // Read chunk by chunk (past 64 KiB) and at once (a small body): both are watched.
    for (const length of [200_000, 1_000]) {
      const conn = await startBody(port, length, CHAT_PREFIX);
      try {
        const { text, closed } = await readToClose(conn, 10_000);
        assertMatch(text, /^HTTP\/1\.1 408 /, `${length}: ${JSON.stringify(text)}`);
        assert(text.includes("SKEID_BODY_TIMEOUT_MS"), `${length}: names the setting: ${text}`);
        assert(closed, `${length}: the connection closed after the 408: ${JSON.stringify(text)}`);
        assertEquals(connectionHeaders(text), ["close"], `${length}: one connection header`);
      } finally {
        closeConn(conn);
      }
    }
    assertEquals(server.gateway.buffered.used, 0, "nothing held in the cap");
    // A body that keeps coming is read, however long it takes in all (the timeout is between
    // reads: ten bytes 100 ms apart, a second in all).
    const tail = '"}]}';
    const length = 100_000;
    const conn = await startBody(port, length, CHAT_PREFIX, "connection: close\r\n");
    try {
      for (let i = 0; i < 10; i++) {
        await new Promise((r) => setTimeout(r, 100));
        await conn.write(enc.encode("a"));
      }
      await conn.write(
        enc.encode("a".repeat(length - CHAT_PREFIX.length - 10 - tail.length) + tail),
      );
      const { text } = await readToClose(conn, 10_000);
      assertMatch(text, /^HTTP\/1\.1 200 /, text);
    } finally {
      closeConn(conn);
    }
  });
});

Deno.test("slow body: a declared body over a limit is refused at once (413), its connection closed", async () => {
  // Over the buffered-bytes cap: the body is never read, so the connection cannot carry another
  // request and closes after the answer, not at the idle timeout (75 s, past this read's bound).
  await withServer({ SKEID_MAX_BUFFERED_BYTES: "1000" }, async (server) => {
    const conn = await startBody(server.addr.port, 5_000, CHAT_PREFIX);
    try {
      const { text, closed } = await readToClose(conn, 10_000);
      assertMatch(text, /^HTTP\/1\.1 413 /, JSON.stringify(text));
      assert(text.includes("SKEID_MAX_BUFFERED_BYTES"), `names the setting: ${text}`);
      assert(closed, `the connection closed after the 413: ${JSON.stringify(text)}`);
      assertEquals(connectionHeaders(text), ["close"], "one connection header");
    } finally {
      closeConn(conn);
    }
    assertEquals(server.gateway.buffered.used, 0, "nothing held in the cap");
  });
});
