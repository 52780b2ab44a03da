import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert/strict";
import { fetchUpstream, UpstreamTransportError } from "../../src/proxy/call.ts";
import { IdleWatch } from "../../src/proxy/idle_watch.ts";
import { relayedResponse, upstreamHeaders, upstreamUrl } from "../../src/proxy/upstream.ts";
import { nodeKeyFromEnv } from "../../src/keys/node_key.ts";
import { assertEquals } from "../_assert.ts";

Deno.test("upstream url: /v1 added only when missing; trailing slashes removed", () => {
  strictEqual(upstreamUrl("http://a:1/v1", "/chat/completions"), "http://a:1/v1/chat/completions");
  strictEqual(upstreamUrl("http://a:1", "/chat/completions"), "http://a:1/v1/chat/completions");
  strictEqual(upstreamUrl("http://a:1/v1/", "/embeddings"), "http://a:1/v1/embeddings");
  strictEqual(upstreamUrl("http://a:1/openai//", "/embeddings"), "http://a:1/openai/v1/embeddings");
});

Deno.test("upstream headers: hop-by-hop, host, content-length, accept-encoding dropped", () => {
  const client = new Headers({
    "Authorization": "Bearer client-key",
    "x-api-key": "client-key",
    "Connection": "keep-alive",
    "Keep-Alive": "timeout=5",
    "TE": "trailers",
    "Host": "gateway",
    "Content-Length": "12",
    "Accept-Encoding": "gzip",
    "x-request-id": "r1",
    "OpenAI-Organization": "org",
  });
  const out = new Headers(upstreamHeaders(client, undefined));
  deepStrictEqual([...out.keys()].sort(), [
    "authorization",
    "content-type",
    "openai-organization",
    "x-request-id",
    "x-skeid-hops",
  ]);
  strictEqual(out.get("x-skeid-hops"), "1");
  strictEqual(out.get("authorization"), "Bearer client-key");
});

Deno.test("upstream headers: Anthropic-only headers never reach a node; x-api-key as Bearer", () => {
  const client = new Headers({
    "x-api-key": "client-key",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219",
    "anthropic-dangerous-direct-browser-access": "true",
    "x-app": "cli",
  });
  const out = new Headers(upstreamHeaders(client, undefined));
  deepStrictEqual([...out.keys()].sort(), [
    "authorization",
    "content-type",
    "x-app",
    "x-skeid-hops",
  ]);
  strictEqual(out.get("authorization"), "Bearer client-key");
});

Deno.test("upstream headers: a node key replaces Authorization and drops x-api-key", () => {
  const client = new Headers({ "authorization": "Bearer client-key", "X-Api-Key": "client-key" });
  const out = new Headers(upstreamHeaders(client, "node-secret"));
  strictEqual(out.get("authorization"), "Bearer node-secret");
  strictEqual(out.has("x-api-key"), false);
});

Deno.test("node key: env var set, unset, empty; no key source forwards the client's", () => {
  const env = (n: string) => ({ SET: "k1", EMPTY: "" } as Record<string, string>)[n];
  strictEqual(nodeKeyFromEnv({ api_key_env: "SET" }, env), "k1");
  strictEqual(nodeKeyFromEnv({ api_key_env: "UNSET" }, env), null);
  strictEqual(nodeKeyFromEnv({ api_key_env: "EMPTY" }, env), null);
  strictEqual(nodeKeyFromEnv({}, env), undefined);
  strictEqual(nodeKeyFromEnv({ api_key_ref: "secret/x" }, env), null);
  strictEqual(nodeKeyFromEnv({ api_key_ref: "secret/x", api_key_env: "SET" }, env), "k1");
  strictEqual(nodeKeyFromEnv({ api_key_ref: "secret/x" }, env, "broker"), "broker");
});

Deno.test("response headers: framing and encoding headers dropped", () => {
  const upstream: [string, string][] = [];
  new Headers({
    "content-type": "application/json",
    "content-length": "5",
    "content-encoding": "gzip",
    "transfer-encoding": "chunked",
    "x-ratelimit-remaining-requests": "3",
  }).forEach((value, name) => upstream.push([name, value]));
  const out = relayedResponse(200, null, upstream, "n1", "r1").headers;
  deepStrictEqual([...out.keys()].sort(), [
    "content-type",
    "x-ratelimit-remaining-requests",
    "x-request-id",
    "x-skeid-node",
  ]);
});

Deno.test("fetchUpstream: refused connection is a transport error of kind connect", async () => {
  const port = 1; // below the ephemeral range; nothing listens there
  await rejects(
    fetchUpstream({
      url: `http://127.0.0.1:${port}/v1/chat/completions`,
      headers: new Headers(),
      body: "{}",
      timeoutMs: 5000,
    }),
    (err: unknown) => err instanceof UpstreamTransportError && err.kind === "connect",
  );
});

Deno.test("fetchUpstream: no headers within the timeout is a timeout", async () => {
  const ac = new AbortController();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    async () => {
      await hold;
      return new Response("late");
    },
  );
  try {
    await rejects(
      fetchUpstream({
        url: `http://127.0.0.1:${server.addr.port}/v1/x`,
        headers: new Headers(),
        body: "{}",
        timeoutMs: 50,
      }),
      (err: unknown) => err instanceof UpstreamTransportError && err.kind === "timeout",
    );
  } finally {
    release();
    ac.abort();
    await server.finished;
  }
});

Deno.test("fetchUpstream: the outer signal aborts the call", async () => {
  const outer = new AbortController();
  outer.abort();
  await rejects(
    fetchUpstream({
      url: "http://127.0.0.1:9/v1/x",
      headers: new Headers(),
      body: "{}",
      timeoutMs: 50,
      signal: outer.signal,
    }),
    (err: unknown) => err instanceof UpstreamTransportError && err.kind === "aborted",
  );
});

Deno.test("idle watch: each sweep ticks the watched streams that are not stopped", () => {
  let now = 0;
  const watch = new IdleWatch(1000, () => now, { keepaliveMs: 40 });
  const ticks: [string, number][] = [];
  const a = { lastActivity: 0, idleTimeout: () => {}, tick: (t: number) => ticks.push(["a", t]) };
  const b = { lastActivity: 0, idleTimeout: () => ticks.push(["b stopped", now]) };
  watch.add(a);
  watch.add(b);
  now = 20;
  watch.sweep();
  now = 1000;
  a.lastActivity = 990;
  watch.sweep();
  deepStrictEqual(ticks, [["a", 20], ["a", 1000], ["b stopped", 1000]]);
  watch.close();
});

Deno.test("idle watch: a silent body is stopped, an active one is not; the timer stops", () => {
  let now = 0;
  const watch = new IdleWatch(1000, () => now);
  const stopped: string[] = [];
  const a = { lastActivity: 0, idleTimeout: () => stopped.push("a") };
  const b = { lastActivity: 0, idleTimeout: () => stopped.push("b") };
  watch.add(a);
  watch.add(b);
  now = 900;
  b.lastActivity = 900;
  watch.sweep();
  deepStrictEqual(stopped, []);
  now = 1000;
  watch.sweep();
  deepStrictEqual(stopped, ["a"]);
  watch.delete(b);
  strictEqual(watch.size, 0);
  // The next sweep that finds nothing stops the interval (the test sanitizer checks it).
  watch.sweep();
});

Deno.test("fetchUpstream: with the shared watch, no headers within the timeout is a timeout", async () => {
  const ac = new AbortController();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    async () => {
      await hold;
      return new Response("late");
    },
  );
  const watch = new IdleWatch(100);
  try {
    const started = Date.now();
    await rejects(
      fetchUpstream({
        url: `http://127.0.0.1:${server.addr.port}/v1/x`,
        headers: [],
        body: "{}",
        timeoutMs: 100,
        watch,
      }),
      (err: unknown) => err instanceof UpstreamTransportError && err.kind === "timeout",
    );
    const took = Date.now() - started;
    ok(took >= 100 && took < 1000, `timed out after ${took} ms`);
  } finally {
    watch.close();
    release();
    ac.abort();
    await server.finished;
  }
});

Deno.test("upstream headers: identity headers never go; the resolved key id only when given", () => {
  const client = new Headers({ "x-skeid-key-id": "k_forged", "x-api-key-id": "k_forged2" });
  assertEquals(new Headers(upstreamHeaders(client, undefined)).has("x-skeid-key-id"), false);
  assertEquals(new Headers(upstreamHeaders(client, undefined)).has("x-api-key-id"), false);
  const opted = new Headers(upstreamHeaders(client, undefined, 1, "k_real"));
  assertEquals(opted.get("x-skeid-key-id"), "k_real");
  assertEquals(opted.has("x-api-key-id"), false);
});

Deno.test("upstream headers: a node key gets no client credential or account header", () => {
  const client = new Headers({
    "authorization": "Bearer c",
    "api-key": "c",
    "x-goog-api-key": "c",
    "openai-organization": "org",
    "openai-project": "proj",
    "cookie": "s=1",
    "x-app": "cli",
  });
  const out = new Headers(upstreamHeaders(client, "node-secret"));
  assertEquals([...out.keys()].sort(), ["authorization", "content-type", "x-app", "x-skeid-hops"]);
  assertEquals(out.get("authorization"), "Bearer node-secret");
});

Deno.test("upstream headers: headers named in Connection are dropped", () => {
  const client = new Headers({
    "connection": "keep-alive, X-Secret-Hop",
    "x-secret-hop": "1",
    "x-a": "1",
  });
  const out = new Headers(upstreamHeaders(client, undefined));
  assertEquals(out.has("x-secret-hop"), false);
  assertEquals(out.get("x-a"), "1");
});
