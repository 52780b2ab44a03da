import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { startFakeModel } from "../../src/fake/model.ts";
import {
  assertIdle,
  chat,
  closedPort,
  post,
  scriptedUpstream,
  startGateway,
  until,
} from "./helpers.ts";

Deno.test("failover: a refused connection goes to the next node; one event with attempts", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [
      { id: "dead", url: `http://127.0.0.1:${closedPort()}/v1`, model: "m" },
      { id: "live", url: fake.url, model: "m" },
    ],
  });
  try {
    for (let i = 0; i < 4; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      strictEqual(r.status, 200);
      strictEqual(r.headers.get("x-skeid-node"), "live");
    }
    const events = await t.sink.waitFor(4);
    strictEqual(events.length, 4, "one event per client request, not per attempt");
    ok(events.every((e) => e.node_id === "live" && e.status_code === 200));
    ok(events.some((e) => e.attempts === 2), "the dead node was tried first at least once");
    const dead = (await t.group.nodeMetrics("dead"))!;
    ok(dead.error >= 1);
    strictEqual(t.gw.skeid.getNode("dead")!.healthy, true, "failures never touch health");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("failover: an upstream 503 goes to the next node, never after the first byte", async () => {
  const fake = startFakeModel();
  const busy = scriptedUpstream(() =>
    Response.json({ error: { message: "overloaded", type: "server_error" } }, { status: 503 })
  );
  const t = await startGateway({
    nodes: [
      { id: "busy", url: busy.url, model: "m" },
      { id: "ok", url: fake.url, model: "m" },
    ],
  });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      strictEqual(r.status, 200);
      strictEqual(r.headers.get("x-skeid-node"), "ok");
    }
    ok(busy.requests.length >= 1);
    const events = await t.sink.waitFor(3);
    strictEqual(events.length, 3);
    // A stream whose upstream broke after the first byte is NOT retried elsewhere.
    const before = fake.requests.length + busy.requests.length;
    const cut = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, fake_cut_after: 2 })),
    });
    const text = await cut.text();
    // Whichever node took it: the busy one failed over before any byte; the cut is final.
    strictEqual(cut.headers.get("x-skeid-node"), "ok");
    ok(text.includes('"type":"upstream_error"'), "the break is said in-band");
    strictEqual(fake.requests.length + busy.requests.length - before <= 2, true);
    const all = await t.sink.waitFor(4);
    strictEqual(all[3].status_code, 502);
    strictEqual(all[3].ok, false);
    ok(all[3].content_bytes! > 0);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
    await busy.close();
  }
});

Deno.test("failover: every attempt failed → the last upstream answer, or 502", async () => {
  const busy = scriptedUpstream(() =>
    new Response(JSON.stringify({ error: { message: "try later", type: "overloaded" } }), {
      status: 503,
      headers: { "content-type": "application/json", "x-upstream": "yes" },
    })
  );
  const t = await startGateway({
    nodes: [
      { id: "busy-1", url: busy.url, model: "m" },
      { id: "busy-2", url: busy.url, model: "m" },
      { id: "busy-3", url: busy.url, model: "m" },
      { id: "dead", url: `http://127.0.0.1:${closedPort()}/v1`, model: "d" },
    ],
    routing: { max_attempts: 2 },
  });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(r.status, 503);
    deepStrictEqual(r.json, { error: { message: "try later", type: "overloaded" } });
    strictEqual(r.headers.get("x-upstream"), "yes");
    ok(r.headers.get("x-skeid-node")!.startsWith("busy-"));
    strictEqual(busy.requests.length, 2, "max_attempts bounds the attempts");

    const d = await post(`${t.base}/v1/chat/completions`, chat("d"));
    strictEqual(d.status, 502);
    strictEqual((d.json.error as Record<string, string>).type, "upstream_error");
    ok(String((d.json.error as Record<string, string>).message).startsWith("Upstream error: "));
    strictEqual(d.headers.get("x-skeid-node"), "dead");

    const events = await t.sink.waitFor(2);
    strictEqual(events[0].status_code, 503);
    strictEqual(events[0].attempts, 2);
    strictEqual(events[1].status_code, 502);
    strictEqual(events[1].error_type, "upstream_error");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await busy.close();
  }
});

Deno.test("node key: replaces Authorization and drops x-api-key; missing env → 503, never called", async () => {
  const fake = startFakeModel();
  const other = startFakeModel();
  const t = await startGateway({
    nodes: [
      { id: "keyed", url: fake.url, model: "m", api_key_env: "NODE_KEY" },
      { id: "open", url: fake.url, model: "o" },
      { id: "unkeyed", url: other.url, model: "k", api_key_env: "MISSING_KEY" },
    ],
  }, { env: { NODE_KEY: "node-secret" } });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer customer-key",
      "x-api-key": "customer-key",
    });
    strictEqual(r.status, 200);
    const seen = fake.requests.at(-1)!.headers;
    strictEqual(seen.authorization, "Bearer node-secret");
    strictEqual(seen["x-api-key"], undefined);

    await post(`${t.base}/v1/chat/completions`, chat("o"), {
      authorization: "Bearer customer-key",
    });
    strictEqual(fake.requests.at(-1)!.headers.authorization, "Bearer customer-key");

    const missing = await post(`${t.base}/v1/chat/completions`, chat("k"), {
      authorization: "Bearer customer-key",
    });
    strictEqual(missing.status, 503);
    strictEqual((missing.json.error as Record<string, string>).type, "upstream_key_unavailable");
    strictEqual(other.requests.length, 0, "the node was never contacted");
    const warned = t.logger.lines.filter((l) => l.event === "upstream_key_unavailable");
    strictEqual(warned.length, 1, "warned once at startup");
    strictEqual(warned[0].node_id, "unkeyed");
    ok(!JSON.stringify(t.logger.lines).includes("node-secret"), "the key is never logged");
    const events = await t.sink.waitFor(2);
    strictEqual(events.length, 2, "the refused request wrote no event");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
    await other.close();
  }
});

Deno.test("rate limits: headers → reading → 429 without an upstream hit; 429 Retry-After → backoff", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "n1", url: fake.url, model: "m" }],
    routing: { wait_timeout_ms: 50, wait_poll_ms: 10 },
  });
  try {
    const first = await post(
      `${t.base}/v1/chat/completions`,
      chat("m", {
        fake_headers: { "x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "0" },
      }),
    );
    strictEqual(first.status, 200);
    const reading = (await t.group.capacityReading("n1"))!;
    strictEqual(reading.source, "ratelimit");
    strictEqual(reading.used, 10);
    strictEqual(reading.limit, 10);
    const hits = fake.requests.length;
    const blocked = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(blocked.status, 429);
    strictEqual((blocked.json.error as Record<string, string>).type, "rate_limit_error");
    strictEqual(fake.requests.length, hits, "no upstream hit");
    await t.group.forgetCapacity("n1");
    const again = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(again.status, 200);

    // An upstream 429 with Retry-After: passed through (nowhere else to go) and a backoff.
    const limited = await post(
      `${t.base}/v1/chat/completions`,
      chat("m", {
        fake_status: 429,
        fake_retry_after: 30,
      }),
    );
    strictEqual(limited.status, 429);
    const backoff = (await t.group.capacityReading("n1"))!;
    ok(backoff.retry_after! > Date.now() + 20_000);
    strictEqual(t.gw.skeid.getNode("n1")!.healthy, true);
    const hits2 = fake.requests.length;
    const held = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(held.status, 429);
    strictEqual(fake.requests.length, hits2);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("node key: a node whose key is missing is skipped like a refused connection", async () => {
  const keyless = startFakeModel();
  const keyed = startFakeModel();
  const t = await startGateway({
    nodes: [
      { id: "a-keyless", url: keyless.url, model: "m", api_key_env: "UNSET_KEY" },
      { id: "b-keyed", url: keyed.url, model: "m", api_key_env: "NODE_KEY" },
    ],
  }, { env: { NODE_KEY: "node-secret" } });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
        authorization: "Bearer customer-key",
      });
      strictEqual(r.status, 200);
      strictEqual(r.headers.get("x-skeid-node"), "b-keyed");
    }
    strictEqual(keyless.requests.length, 0, "the customer key never went to the keyless node");
    ok(keyed.requests.every((q) => q.headers.authorization === "Bearer node-secret"));
    const events = await t.sink.waitFor(3);
    ok(events.every((e) => e.node_id === "b-keyed" && e.attempts === 1));
    const m = (await t.group.nodeMetrics("a-keyless"))!;
    strictEqual(m.error, 0, "a missing key is not the node's failure");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await keyless.close();
    await keyed.close();
  }
});

Deno.test("timeouts: an upstream stream silent past SKEID_UPSTREAM_TIMEOUT is ended, event 502", async () => {
  const enc = new TextEncoder();
  const stalled = Promise.withResolvers<void>();
  const up = scriptedUpstream(() =>
    new Response(
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(enc.encode('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'));
        },
        pull: () => stalled.promise, // then nothing, until the test ends
      }),
      { headers: { "content-type": "text/event-stream" } },
    )
  );
  const t = await startGateway(
    { nodes: [{ id: "n1", url: up.url, model: "m" }] },
    { upstreamTimeoutMs: 200 },
  );
  try {
    const started = Date.now();
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, stream_options: { include_usage: true } })),
    });
    const text = await res.text();
    const took = Date.now() - started;
    ok(took >= 200 && took < 3000, `ended after ${took} ms`);
    ok(text.includes('"content":"hi"'));
    ok(text.includes('"type":"upstream_error"'));
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.status_code, 502);
    strictEqual(e.content_bytes, 2);
    assertIdle(t.gw);
  } finally {
    stalled.resolve();
    await t.stop();
    await up.close();
  }
});

Deno.test("loops: a node pointing back at the gateway ends in 508, not a request storm", async () => {
  const fake = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "n1", url: fake.url, model: "m" }] });
  try {
    await t.group.addNode({ id: "self", url: `${t.base}/v1`, model: "loop" });
    const r = await post(`${t.base}/v1/chat/completions`, chat("loop"));
    strictEqual(r.status, 508);
    strictEqual((r.json.error as Record<string, string>).type, "loop_detected");
    // Each of the 8 gateway passes forwarded one request: 8 events, all 508.
    const events = await t.sink.waitFor(8);
    ok(events.every((e) => e.status_code === 508 && e.node_id === "self"));
    await until(async () => await t.group.inflight() === 0, 3000, "the nested requests to end");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});
