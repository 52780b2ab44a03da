/**
 * Fair share from `startServer` with the fake model (ADR 0024): two customer keys contend for a
 * node with `max_conns: 4`, key A offering 4× B's load (closed loops, each request ~100 ms), and
 * the served output tokens are counted per key once the queue is warm.
 */
import { createHash } from "node:crypto";
import { assert, assertEquals } from "../_assert.ts";
import { type FakeModel, startFakeModel } from "../../src/fake/model.ts";
import { assertIdle, post, startGateway, type TestGateway, until } from "./helpers.ts";

const keyId = (key: string) => "k_" + createHash("sha1").update(key).digest("hex");
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const admin = { headers: bearer("admin-secret") };

/** One request of ~100 ms on the fake model: 8 output tokens, 20 ms to the first, 10 ms apart. */
const body = (model: string, tag = "") => ({
  model,
  max_tokens: 8,
  messages: [{ role: "user", content: `hello ${tag}` }],
  fake_ttft_ms: 20,
  fake_itl_ms: 10,
  fake_tokens: 8,
});

/** Config: one node `gpu` of `maxConns`, keys a and b (and more) named, on policy `p`. */
function config(
  fake: FakeModel,
  keys: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  const names = Object.fromEntries(Object.keys(keys).map((k) => [k, keyId(`sk-${k}`)]));
  return {
    nodes: [{ id: "gpu", url: fake.url, model: "m", max_conns: 4 }],
    policies: { p: {} },
    names,
    keys,
    routing: { wait_timeout_ms: 10_000, wait_poll_ms: 50 },
    admin: { api_key: "admin-secret" },
    ...extra,
  };
}

interface Served {
  at: number;
  output: number;
  node: string;
}

/** `loops` closed loops of key `key` until `end` (epoch ms); answers every completion. */
async function load(
  t: TestGateway,
  key: string,
  loops: number,
  end: number,
  model = "m",
): Promise<Served[]> {
  const served: Served[] = [];
  await Promise.all(Array.from({ length: loops }, async () => {
    for (let i = 0; i < 1000 && Date.now() < end; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, body(model), bearer(`sk-${key}`));
      assertEquals(r.status, 200, `key ${key}: ${r.text}`);
      const usage = r.json.usage as { completion_tokens: number };
      served.push({
        at: Date.now(),
        output: usage.completion_tokens,
        node: r.headers.get("x-skeid-node")!,
      });
    }
  }));
  return served;
}

/** Output tokens served in [from, to). */
function tokens(served: Served[], from: number, to: number): number {
  return served.filter((s) => s.at >= from && s.at < to).reduce((n, s) => n + s.output, 0);
}

/** A offers 4× B's load for `ms`; answers the output tokens of each from the warm-up on. */
async function contend(t: TestGateway, ms: number): Promise<{ a: number; b: number }> {
  const start = Date.now();
  const end = start + ms;
  // B keeps 8 loops, four times the 2 slots its share needs, so its queue never runs dry while a
  // client sends its next request: a key whose queue empties loses its turn (idle time banks no
  // credit). With 4 loops, one CI run on a busy machine measured 1.15.
  const [a, b] = await Promise.all([load(t, "a", 32, end), load(t, "b", 8, end)]);
  const from = start + 500;
  return { a: tokens(a, from, end), b: tokens(b, from, end) };
}

Deno.test("fair share: equal weights serve A:B 1:1 though A offers 4× B's load", async () => {
  const fake = startFakeModel();
  const t = await startGateway(config(fake, { a: "p", b: "p" }));
  try {
    const { a, b } = await contend(t, 2500);
    const ratio = a / b;
    const jain = (a + b) ** 2 / (2 * (a * a + b * b));
    assert(ratio > 0.9 && ratio < 1.1, `A:B = ${ratio.toFixed(3)} (${a} / ${b}), want 1 ± 10%`);
    assert(jain >= 0.95, `Jain index ${jain.toFixed(3)}`);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("fair share: weights 2:1 serve A:B 2:1", async () => {
  const fake = startFakeModel();
  const t = await startGateway(
    config(fake, { a: { policy: "p", share: { weight: 2 } }, b: "p" }),
  );
  try {
    const { a, b } = await contend(t, 2500);
    const ratio = a / b;
    assert(ratio > 1.8 && ratio < 2.2, `A:B = ${ratio.toFixed(3)} (${a} / ${b}), want 2 ± 10%`);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("fair share: a priority-1 key's requests overtake every priority-0 waiter", async () => {
  const fake = startFakeModel();
  const t = await startGateway(config(fake, {
    lo1: "p",
    lo2: "p",
    hi: { policy: "p", share: { priority: 1 } },
  }, { nodes: [{ id: "gpu", url: fake.url, model: "m", max_conns: 1 }] }));
  try {
    const send = (key: string, tag: string) =>
      post(`${t.base}/v1/chat/completions`, body("m", tag), bearer(`sk-${key}`));
    const all = [send("lo1", "first")];
    await until(() => fake.stats.inflight === 1, 3000, "the first request holds the slot");
    // One at a time: each waits before the next is sent, so arrival order is send order (with
    // workers, requests sent together may reach the queue in any order).
    const queued: [string, string][] = [
      ["lo1", "lo-a"],
      ["lo2", "lo-b"],
      ["lo1", "lo-c"],
      ["hi", "hi-a"],
      ["hi", "hi-b"],
    ];
    for (const [i, [key, tag]] of queued.entries()) {
      all.push(send(key, tag));
      await until(async () => await t.group.waiters() === i + 1, 3000, `${tag} waits`);
    }
    for (const r of await Promise.all(all)) assertEquals(r.status, 200, r.text);
    const order = fake.requests.map((r) => {
      const messages = (r.body as { messages: { content: string }[] }).messages;
      return messages[0].content.replace("hello ", "");
    });
    assertEquals(order.slice(0, 3), ["first", "hi-a", "hi-b"], "both hi before any lo waiter");
    assertEquals(order.slice(3), ["lo-a", "lo-b", "lo-c"], "then lo1, lo2, lo1 by counter");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("fair share: the heavy key spills to the cloud, the light key stays local; waits bounded", async () => {
  const local = startFakeModel();
  const cloud = startFakeModel();
  const t = await startGateway(config(local, { a: "p", b: "p" }, {
    nodes: [
      { id: "local", url: local.url, model: "m", tags: ["local"], max_conns: 2 },
      { id: "cloud", url: cloud.url, model: "m", tags: ["cloud"] },
    ],
    aliases: {
      house: {
        tiers: [{ tags: ["local"], model: "m", wait_ms: 500 }, { tags: ["cloud"], model: "m" }],
      },
    },
  }));
  try {
    const end = Date.now() + 2500;
    const [a, b] = await Promise.all([
      load(t, "a", 16, end, "house"),
      load(t, "b", 1, end, "house"),
    ]);
    const where = (s: Served[], node: string) => s.filter((x) => x.node === node).length;
    assert(where(a, "cloud") > 0, `A reached the cloud (${where(a, "cloud")} of ${a.length})`);
    assertEquals(where(b, "cloud"), 0, `B stayed local (${b.length} requests)`);
    assert(where(b, "local") > 5, `B was served locally (${where(b, "local")})`);

    const res = await fetch(`${t.base}/skeid/metrics/nodes`, admin);
    const nodes = await res.json() as {
      fair_share: { tiers: { tier: string; waits: { key: string; max_ms: number }[] }[] };
    };
    const tier = nodes.fair_share.tiers.find((x) => x.tier === "m|local");
    assert(tier !== undefined, `the local tier is listed: ${JSON.stringify(nodes.fair_share)}`);
    for (const w of tier.waits) {
      assert(w.max_ms <= 500 + 150, `key ${w.key} waited at most wait_ms (${w.max_ms} ms)`);
    }
    const prom = await (await fetch(`${t.base}/skeid/metrics`, admin)).text();
    assert(prom.includes('skeid_share_wait_seconds_count{tier="m|local",key="a"}'), "A's waits");
    assert(prom.includes('skeid_share_served_tokens_total{key="b",kind="output"}'), "B's tokens");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await local.close();
    await cloud.close();
  }
});

Deno.test("fair share: more than max_queued waiters of a key get 429 key_queue_full at once", async () => {
  const fake = startFakeModel();
  const t = await startGateway(config(fake, {
    a: { policy: "p", share: { max_queued: 2 } },
    b: "p",
  }, { nodes: [{ id: "gpu", url: fake.url, model: "m", max_conns: 1 }] }));
  try {
    const send = (key: string) =>
      post(
        `${t.base}/v1/chat/completions`,
        { ...body("m"), fake_ttft_ms: 200 },
        bearer(`sk-${key}`),
      );
    const held = [send("a")];
    await until(() => fake.stats.inflight === 1, 3000, "the slot is held");
    held.push(send("a"), send("a"));
    await until(async () => await t.group.waiters() === 2, 3000, "two of A wait");
    const full = await send("a");
    assertEquals(full.status, 429, full.text);
    const error = full.json.error as Record<string, unknown>;
    assertEquals(error.code, "key_queue_full");
    assertEquals(error.type, "rate_limit_error");
    assertEquals(full.headers.get("retry-after"), "1", "a place frees as a waiter ends");
    const anthropic = await post(`${t.base}/v1/messages`, {
      model: "m",
      max_tokens: 8,
      messages: [{ role: "user", content: "hi" }],
    }, { "x-api-key": "sk-a" });
    assertEquals(anthropic.status, 429, "the Anthropic face refuses too");
    assertEquals(anthropic.json.type, "error", "in its own shape");
    assertEquals((anthropic.json.error as Record<string, unknown>).type, "rate_limit_error");
    held.push(send("b"));
    await until(async () => await t.group.waiters() === 3, 3000, "another key still queues");
    for (const r of await Promise.all(held)) assertEquals(r.status, 200, r.text);
    assertEquals(fake.requests.length, 4, "the refused request was never forwarded");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});
