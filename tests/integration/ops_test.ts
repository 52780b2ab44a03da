import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { createHash } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startFakeModel } from "../../src/fake/model.ts";
import { assertIdle, chat, post, startGateway, until } from "./helpers.ts";
import { closeConn, readToClose } from "../_helpers/raw_conn.ts";

const keyId = (key: string) => "k_" + createHash("sha1").update(key).digest("hex");

Deno.test("ops: a config edit on a running server makes a new node routable", async () => {
  const a = startFakeModel();
  const b = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "a", url: a.url, model: "m" }] });
  try {
    const before = await post(`${t.base}/v1/chat/completions`, chat("new-model"));
    strictEqual(before.status, 503);
    const edited = Date.now();
    await t.writeConfig({
      nodes: [{ id: "a", url: a.url, model: "m" }, { id: "b", url: b.url, model: "new-model" }],
    });
    await until(() => t.gw.skeid.getNode("b") !== undefined, 2000, "the reload");
    await t.group.configApplied();
    ok(Date.now() - edited < 2000, "routable within 2 s of the edit");
    const after = await post(`${t.base}/v1/chat/completions`, chat("new-model"));
    strictEqual(after.status, 200);
    strictEqual(after.headers.get("x-skeid-node"), "b");

    // A broken edit keeps the config in force; /health says so without the message.
    await t.writeConfig({ nodes: [{ id: "a", url: a.url, model: "m", engine: "no-such" }] });
    await until(() => !t.gw.config.status().ok, 2000, "the failed reload");
    const health = await (await fetch(`${t.base}/health`)).json();
    strictEqual(health.status, "ok");
    strictEqual(health.config.ok, false);
    strictEqual(health.config.failures >= 1, true);
    strictEqual(typeof health.config.failed_at, "string");
    strictEqual(Object.keys(health.config).sort().join(","), "failed_at,failures,ok");
    const still = await post(`${t.base}/v1/chat/completions`, chat("new-model"));
    strictEqual(still.status, 200);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("ops: 200 concurrent requests give exactly 200 events, inflight back to 0", async () => {
  const fake = startFakeModel({ ttftMs: 5 });
  const t = await startGateway({
    nodes: [
      { id: "n1", url: fake.url, model: "m", max_conns: 16 },
      { id: "n2", url: fake.url, model: "m", max_conns: 16 },
    ],
    routing: { wait_timeout_ms: 20_000 },
  });
  try {
    const results = await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) =>
          i % 2 === 0
            ? post(`${t.base}/v1/chat/completions`, chat("m"))
            : fetch(`${t.base}/v1/chat/completions`, {
              method: "POST",
              body: JSON.stringify(chat("m", { stream: true })),
            }).then(async (r) => ({ status: r.status, text: await r.text() })),
      ),
    );
    ok(results.every((r) => r.status === 200));
    const events = await t.sink.waitFor(200, 10_000);
    strictEqual(events.length, 200);
    strictEqual(new Set(events.map((e) => e.request_id)).size, 200, "one request id each");
    const m = [(await t.group.nodeMetrics("n1"))!, (await t.group.nodeMetrics("n2"))!];
    strictEqual(m.reduce((s, x) => s + x.ok, 0), 200);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("ops: the provider manifest route — 404 off, 401 no key, 403 no grant, else the JSON", async () => {
  const fake = startFakeModel();
  const nodes = [{ id: "n1", url: fake.url, model: "house-model" }];
  const t = await startGateway({ nodes });
  try {
    strictEqual((await fetch(`${t.base}/.well-known/langertha.json`)).status, 404);
    await t.writeConfig({
      nodes,
      manifest: { enabled: true, public_url: "https://llm.example.com" },
      policies: { p: {} },
      keys: {
        [keyId("sk-alice")]: { policy: "p", manifest: { models: ["house-model"] } },
        [keyId("sk-bob")]: "p",
      },
    });
    await until(() => t.gw.config.manifestEnabled(), 2000, "the reload");
    await t.group.configApplied();
    const anon = await fetch(`${t.base}/.well-known/langertha.json`);
    strictEqual(anon.status, 401);
    await anon.body?.cancel();
    const bob = await fetch(`${t.base}/.well-known/langertha.json`, {
      headers: { authorization: "Bearer sk-bob" },
    });
    strictEqual(bob.status, 403);
    await bob.body?.cancel();
    const alice = await fetch(`${t.base}/.well-known/langertha.json`, {
      headers: { authorization: "Bearer sk-alice" },
    });
    strictEqual(alice.status, 200);
    const text = await alice.text();
    strictEqual(text, t.gw.config.manifestFor(keyId("sk-alice")));
    ok(text.includes("house-model"));
    ok(!text.includes(fake.url), "never a node URL");
  } finally {
    await t.stop();
    await fake.close();
  }
});

/** Reads lines of a child's stdout until one matches; answers the match. */
async function readUntil(
  reader: ReadableStreamDefaultReader<string>,
  re: RegExp,
  timeoutMs: number,
): Promise<RegExpMatchArray> {
  let buf = "";
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<{ done: true; value: undefined }>((r) => {
      timer = setTimeout(() => r({ done: true, value: undefined }), end - Date.now());
    });
    const { value, done } = await Promise.race([reader.read(), timeout]);
    clearTimeout(timer);
    if (done) break;
    buf += value;
    const m = buf.match(re);
    if (m) return m;
  }
  throw new Error(`no line matching ${re} in time; got: ${buf}`);
}

/** A running `skeid serve` child of `withServeChild`. */
interface ServeChild {
  base: string;
  port: number;
  child: Deno.ChildProcess;
  /** Its stderr, once it exited. */
  stderr: Promise<string>;
  /** The usage events stored: how many, how many ok. */
  events(): { n: number; ok: number };
}

/**
 * Runs `fn` against `skeid serve` as a child over one node at `nodeUrl` (and `args`), its usage
 * events written behind to SQLite with a long interval: every event is still queued when SIGTERM
 * arrives. The child is killed and its directory removed afterwards.
 */
async function withServeChild(
  nodeUrl: string,
  args: string[],
  fn: (s: ServeChild) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "skeid-term-" });
  const db = `${dir}/usage.sqlite`;
  await Deno.writeTextFile(
    `${dir}/skeid.yaml`,
    stringify({
      nodes: [{ id: "n1", url: nodeUrl, model: "m" }],
      usage_store: { backend: "sqlite", path: db, flush_interval_ms: 60_000 },
    }),
  );
  const launcher = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));
  const child = new Deno.Command(launcher, {
    args: ["serve", "--config", `${dir}/skeid.yaml`, "--listen", "127.0.0.1:0", ...args],
    stdout: "piped",
    stderr: "piped",
    env: { SKEID_SHUTDOWN_GRACE_MS: "5000", SKEID_LOG_LEVEL: "warn" },
  }).spawn();
  const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  const events = () => {
    const sql = new DatabaseSync(db);
    try {
      const row = sql.prepare("SELECT COUNT(*) AS n, SUM(ok) AS ok FROM usage_events").get() as {
        n: number;
        ok: number;
      };
      return { n: Number(row.n), ok: Number(row.ok) };
    } finally {
      sql.close();
    }
  };
  try {
    const m = await readUntil(stdout, /listening on (http:\/\/127\.0\.0\.1:(\d+))/, 30_000);
    await fn({ base: m[1], port: Number(m[2]), child, stderr, events });
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // already exited
    }
    await child.status;
    await stdout.cancel().catch(() => {});
    await stderr.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("ops: SIGTERM of `skeid serve` drains in-flight requests and loses no write-behind event", async () => {
  const fake = startFakeModel();
  try {
    await withServeChild(fake.url, [], async ({ base, child, stderr, events }) => {
      for (let i = 0; i < 20; i++) {
        const r = await post(`${base}/v1/chat/completions`, chat("m"));
        strictEqual(r.status, 200);
      }
      // One slow stream still running when the signal arrives: it must finish, not be cut.
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify(chat("m", { stream: true, fake_tokens: 10, fake_itl_ms: 50 })),
      });
      const reader = res.body!.getReader();
      const first = await reader.read();
      ok(!first.done);
      child.kill("SIGTERM");
      let rest = "";
      const dec = new TextDecoder();
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) break;
        rest += dec.decode(value);
      }
      ok(rest.includes("data: [DONE]"), "the in-flight stream finished");
      const status = await child.status;
      strictEqual(status.code, 0, await stderr);
      deepStrictEqual(events(), { n: 21, ok: 21 });
    });
  } finally {
    await fake.close();
  }
});

Deno.test("ops: SIGTERM while a non-streamed request is in flight: its full answer and event, then the connection closes", async () => {
  const fake = startFakeModel({ ttftMs: 800 });
  // With SKEID_TEST_WORKERS=2 (scripts/test-workers) through a supervisor and two workers.
  const workers = Deno.env.get("SKEID_TEST_WORKERS") ?? "1";
  let conn: Deno.Conn | undefined;
  try {
    await withServeChild(fake.url, ["--workers", workers], async (s) => {
      conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
      const body = JSON.stringify(chat("m"));
      await conn.write(
        new TextEncoder().encode(
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
            `content-length: ${body.length}\r\n\r\n${body}`,
        ),
      );
      // In flight: the node has it (and answers after its time to first token).
      await until(() => fake.stats.inflight === 1, 10_000, "the request at the node");
      s.child.kill("SIGTERM");
      const { text, closed } = await readToClose(conn, 15_000);
      ok(text.startsWith("HTTP/1.1 200"), `a full answer, got: ${JSON.stringify(text)}`);
      const answer = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4));
      strictEqual(answer.object, "chat.completion");
      ok(closed, "then the connection closes");
      const status = await s.child.status;
      strictEqual(status.code, 0, await s.stderr);
      deepStrictEqual(s.events(), { n: 1, ok: 1 }, "its event");
    });
  } finally {
    closeConn(conn);
    await fake.close();
  }
});
