import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { createHash } from "node:crypto";
import { type FakeModel, startFakeModel } from "../../src/fake/model.ts";
import {
  assertIdle,
  assertNothingForwarded,
  chat,
  post,
  startGateway,
  type TestGateway,
  until,
} from "./helpers.ts";

const keyId = (key: string) => "k_" + createHash("sha1").update(key).digest("hex");

Deno.test("routing: weighted round-robin 1:2:3 over 60 requests", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [
      { id: "a", url: fake.url, model: "m", weight: 1 },
      { id: "b", url: fake.url, model: "m", weight: 2 },
      { id: "c", url: fake.url, model: "m", weight: 3 },
    ],
  });
  try {
    const counts: Record<string, number> = {};
    for (let i = 0; i < 60; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      strictEqual(r.status, 200);
      const node = r.headers.get("x-skeid-node")!;
      counts[node] = (counts[node] ?? 0) + 1;
    }
    deepStrictEqual(counts, { a: 10, b: 20, c: 30 });
    const events = await t.sink.waitFor(60);
    strictEqual(events.length, 60);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

function tiered(localUrl: string, cloudUrl: string, localWait = 0) {
  return {
    nodes: [
      { id: "local-1", url: localUrl, model: "qwen", tags: ["local"], max_conns: 1 },
      { id: "cloud-1", url: cloudUrl, model: "llama", tags: ["cloud"] },
    ],
    aliases: {
      house: {
        tiers: [
          { tags: ["local"], model: "qwen", wait_ms: localWait },
          { tags: ["cloud"], model: "llama" },
        ],
      },
    },
    routing: { wait_timeout_ms: 120, wait_poll_ms: 20 },
  };
}

/** A gateway over `tiered()` with a local and a cloud fake model; everything closed after `fn`. */
async function withTiers(
  localWait: number,
  fn: (g: { t: TestGateway; local: FakeModel; cloud: FakeModel }) => Promise<void>,
): Promise<void> {
  const local = startFakeModel();
  const cloud = startFakeModel();
  const t = await startGateway(tiered(local.url, cloud.url, localWait));
  try {
    await fn({ t, local, cloud });
  } finally {
    await t.stop();
    await local.close();
    await cloud.close();
  }
}

Deno.test("routing: alias serves from the first tier; event has served and requested model", async () => {
  await withTiers(0, async ({ t, local }) => {
    const r = await post(`${t.base}/v1/chat/completions`, chat("house"));
    strictEqual(r.status, 200);
    strictEqual(r.headers.get("x-skeid-node"), "local-1");
    strictEqual((local.requests[0].body as Record<string, unknown>).model, "qwen");
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.model, "qwen");
    strictEqual(e.requested_model, "house");
    assertIdle(t.gw);
  });
});

Deno.test("routing: first tier saturated with wait 0 → next tier at once", async () => {
  await withTiers(0, async ({ t, cloud }) => {
    ok(t.gw.skeid.startRequest("local-1"), "the test holds local-1's only slot");
    const started = Date.now();
    const r = await post(`${t.base}/v1/chat/completions`, chat("house"));
    strictEqual(r.status, 200);
    strictEqual(r.headers.get("x-skeid-node"), "cloud-1");
    ok(Date.now() - started < 300, "no wait in a tier with wait_ms 0");
    strictEqual((cloud.requests[0].body as Record<string, unknown>).model, "llama");
    const [e] = await t.sink.waitFor(1);
    strictEqual(e.requested_model, "house");
    strictEqual(e.model, "llama");
    t.gw.skeid.finishRequest("local-1", { ok: true });
    assertIdle(t.gw);
  });
});

Deno.test("routing: a slot freed while waiting admits the waiter (event-driven, same tier)", async () => {
  await withTiers(5000, async ({ t, cloud }) => {
    ok(t.gw.skeid.startRequest("local-1"));
    const pending = post(`${t.base}/v1/chat/completions`, chat("house"));
    await until(async () => await t.group.waiters() === 1, 3000, "the request to wait");
    const freedAt = Date.now();
    t.gw.skeid.finishRequest("local-1", { ok: true });
    const r = await pending;
    strictEqual(r.status, 200);
    strictEqual(r.headers.get("x-skeid-node"), "local-1");
    ok(Date.now() - freedAt < 1000, "admitted on the release, not at the end of the wait");
    strictEqual(cloud.requests.length, 0);
    assertIdle(t.gw);
  });
});

Deno.test("routing: a waiting tier falls through to the next after its wait", async () => {
  await withTiers(250, async ({ t }) => {
    ok(t.gw.skeid.startRequest("local-1"));
    const started = Date.now();
    const r = await post(`${t.base}/v1/chat/completions`, chat("house"));
    strictEqual(r.headers.get("x-skeid-node"), "cloud-1");
    ok(Date.now() - started >= 240, `waited ${Date.now() - started} ms`);
    t.gw.skeid.finishRequest("local-1", { ok: true });
    assertIdle(t.gw);
  });
});

Deno.test("routing: a tier with no eligible node is skipped at once despite its wait", async () => {
  const cloud = startFakeModel();
  const t = await startGateway({
    nodes: [
      { id: "local-1", url: cloud.url, model: "qwen", tags: ["local"], healthy: false },
      { id: "cloud-1", url: cloud.url, model: "llama", tags: ["cloud"] },
    ],
    aliases: {
      house: [{ tags: ["local"], model: "qwen", wait_ms: 5000 }, {
        tags: ["cloud"],
        model: "llama",
      }],
    },
  });
  try {
    const started = Date.now();
    const r = await post(`${t.base}/v1/chat/completions`, chat("house"));
    strictEqual(r.headers.get("x-skeid-node"), "cloud-1");
    ok(Date.now() - started < 1000);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await cloud.close();
  }
});

Deno.test("routing: 503 no node, 429 saturated after the wait — no events", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "n1", url: fake.url, model: "m", max_conns: 1 }],
    routing: { wait_timeout_ms: 120, wait_poll_ms: 20 },
  });
  try {
    let started = Date.now();
    const unknown = await post(`${t.base}/v1/chat/completions`, chat("nobody-serves-this"));
    strictEqual(unknown.status, 503);
    deepStrictEqual(unknown.json, {
      error: {
        message: "No healthy node available for model 'nobody-serves-this'",
        type: "model_not_found",
      },
    });
    ok(Date.now() - started < 500, "503 at once, no wait");

    ok(t.gw.skeid.startRequest("n1"));
    started = Date.now();
    const full = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(full.status, 429);
    strictEqual((full.json.error as Record<string, string>).type, "rate_limit_error");
    strictEqual(full.headers.get("retry-after"), "1", "a hint: capacity frees as requests end");
    ok(Date.now() - started >= 100, "answered after the wait");
    t.gw.skeid.finishRequest("n1", { ok: true });
    await assertNothingForwarded(t, fake);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("routing: a client that disconnects while waiting is dropped, takes no slot", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "n1", url: fake.url, model: "m", max_conns: 1 }],
    routing: { wait_timeout_ms: 10_000 },
  });
  try {
    ok(t.gw.skeid.startRequest("n1"));
    const ac = new AbortController();
    const pending = fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m")),
      signal: ac.signal,
    }).catch((e) => e);
    await until(async () => await t.group.waiters() === 1, 3000, "the request to wait");
    ac.abort();
    await pending;
    await until(async () => await t.group.waiters() === 0, 3000, "the waiter to leave");
    t.gw.skeid.finishRequest("n1", { ok: true });
    await until(async () => await t.group.inflight() === 0, 3000, "the request to end");
    await assertNothingForwarded(t, fake);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("policies: 403 vs 429 vs 503 never stand in for each other", async () => {
  const local = startFakeModel();
  const cloud = startFakeModel();
  const config = {
    ...tiered(local.url, cloud.url),
    policies: { standard: { deny_tags: ["cloud"] }, burstable: {}, narrow: { models: ["house"] } },
    default_policy: "standard",
    keys: { [keyId("sk-burst")]: "burstable", [keyId("sk-narrow")]: "narrow" },
  };
  const t = await startGateway(config);
  const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
  try {
    // Local-only key, local free → local, billed under its derived id.
    const r1 = await post(`${t.base}/v1/chat/completions`, chat("house"), bearer("sk-local"));
    strictEqual(r1.headers.get("x-skeid-node"), "local-1");
    // The raw model of a denied node → 403, node not contacted.
    const r2 = await post(`${t.base}/v1/chat/completions`, chat("llama"), bearer("sk-local"));
    strictEqual(r2.status, 403);
    deepStrictEqual(r2.json, {
      error: { message: "Model 'llama' is not available for this key", type: "permission_error" },
    });
    strictEqual(cloud.requests.length, 0);
    // A cloud-allowed key may.
    const r3 = await post(`${t.base}/v1/chat/completions`, chat("llama"), bearer("sk-burst"));
    strictEqual(r3.headers.get("x-skeid-node"), "cloud-1");
    // Model not in the allow list → 403; served by nobody → 503 even under a policy.
    const r4 = await post(`${t.base}/v1/chat/completions`, chat("qwen"), bearer("sk-narrow"));
    strictEqual(r4.status, 403);
    const r5 = await post(`${t.base}/v1/chat/completions`, chat("ghost"), bearer("sk-burst"));
    strictEqual(r5.status, 503);
    // Local-only key, local saturated → 429, cloud untouched; the burstable key gets cloud.
    ok(t.gw.skeid.startRequest("local-1"));
    const r6 = await post(`${t.base}/v1/chat/completions`, chat("house"), bearer("sk-local"));
    strictEqual(r6.status, 429);
    strictEqual(cloud.requests.length, 1);
    const r7 = await post(`${t.base}/v1/chat/completions`, chat("house"), bearer("sk-burst"));
    strictEqual(r7.headers.get("x-skeid-node"), "cloud-1");
    t.gw.skeid.finishRequest("local-1", { ok: true });

    const events = await t.sink.waitFor(3);
    deepStrictEqual(events.map((e) => e.api_key_id), [
      keyId("sk-local"),
      keyId("sk-burst"),
      keyId("sk-burst"),
    ]);
    // /v1/models is narrowed by the policy.
    const models = await (await fetch(`${t.base}/v1/models`, { headers: bearer("sk-local") }))
      .json();
    deepStrictEqual(models.data.map((m: { id: string }) => m.id), ["house", "qwen"]);
    const all = await (await fetch(`${t.base}/v1/models`, { headers: bearer("sk-burst") })).json();
    deepStrictEqual(all.data.map((m: { id: string }) => m.id), ["house", "llama", "qwen"]);
    strictEqual(all.object, "list");
    strictEqual(all.data[0].owned_by, "skeid");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await local.close();
    await cloud.close();
  }
});

Deno.test("identity: x-api-key, trust_key_id_header off and on, require_known_keys", async () => {
  const fake = startFakeModel();
  const base = { nodes: [{ id: "n1", url: fake.url, model: "m" }] };
  const t = await startGateway({
    ...base,
    policies: { p: {} },
    keys: { [keyId("sk-known")]: "p" },
  });
  try {
    await post(`${t.base}/v1/chat/completions`, chat("m"), { "x-api-key": "sk-known" });
    await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "bearer sk-known",
      "x-skeid-key-id": "k_forged",
    });
    let events = await t.sink.waitFor(2);
    deepStrictEqual(events.map((e) => e.api_key_id), [keyId("sk-known"), keyId("sk-known")]);

    await t.writeConfig({
      ...base,
      policies: { p: {} },
      keys: { [keyId("sk-known")]: "p" },
      routing: { trust_key_id_header: true, require_known_keys: true },
    });
    await until(() => t.gw.skeid.routing.require_known_keys, 3000, "the reload");
    await t.group.configApplied();
    const trusted = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      "x-skeid-key-id": keyId("sk-known"),
    });
    strictEqual(trusted.status, 200);
    const anon = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(anon.status, 401);
    strictEqual((anon.json.error as Record<string, string>).type, "authentication_error");
    const unknown = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer sk-stranger",
    });
    strictEqual(unknown.status, 401);
    const models = await fetch(`${t.base}/v1/models`);
    strictEqual(models.status, 401);
    await models.body?.cancel();
    events = await t.sink.waitFor(3);
    strictEqual(events.length, 3);
    strictEqual(events[2].api_key_id, keyId("sk-known"));
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("routing: a 200's Retry-After holds no one back; a 503's is capped by max_retry_after_ms", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "a", url: fake.url, model: "m" }],
    routing: { max_retry_after_ms: 300, wait_timeout_ms: 2000 },
  });
  try {
    const hinted = await post(
      `${t.base}/v1/chat/completions`,
      chat("m", { fake_headers: { "retry-after": "3600" } }),
    );
    strictEqual(hinted.status, 200);
    const started = Date.now();
    strictEqual((await post(`${t.base}/v1/chat/completions`, chat("m"))).status, 200);
    ok(Date.now() - started < 1500, "the next request did not wait for a backoff");

    const busy = await post(
      `${t.base}/v1/chat/completions`,
      chat("m", { fake_status: 503, fake_retry_after: 3600 }),
    );
    strictEqual(busy.status, 503);
    // The node is backed off for 300 ms, not an hour: a request now waits that long, then goes.
    const after = await post(`${t.base}/v1/chat/completions`, chat("m"));
    strictEqual(after.status, 200);
    strictEqual(after.headers.get("x-skeid-node"), "a");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});
