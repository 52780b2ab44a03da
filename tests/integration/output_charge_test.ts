/**
 * What a request is charged before its usage event, through a real gateway (ADR 0023, ADR 0024):
 * the largest output limit the node honours times its completions, token ids counted as tokens,
 * every client-chosen number either refused (400 naming the field) or charged at most
 * `routing.max_reserve_tokens`.
 */
import { createHash } from "node:crypto";
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import {
  assertIdle,
  assertNothingForwarded,
  chat,
  post,
  scriptedUpstream,
  startGateway,
  type TestGateway,
  until,
} from "./helpers.ts";

const ALICE = await keyIdForKey("sk-alice");
const AUTH = { authorization: "Bearer sk-alice" };
const ADMIN = { authorization: "Bearer adm" };

/** One node `m1`; alice on policy `std`. */
function config(url: string, std: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    admin_api_key: "adm",
    nodes: [{ id: "n1", url, model: "m1" }],
    policies: { std },
    names: { alice: ALICE },
    keys: { alice: "std" },
    ...extra,
  };
}

/** Alice's budget as the admin API shows it. */
async function budgetOf(t: TestGateway): Promise<Record<string, Record<string, number>>> {
  const res = await fetch(`${t.base}/skeid/keys/alice`, { headers: ADMIN });
  assertEquals(res.status, 200, "GET /skeid/keys/alice");
  return (await res.json()).budget;
}

/**
 * Sends `body` four times at once to `path` as alice (2,000-token budget): the requests whose
 * reservation fits are served, the rest refused 403; what was spent stays within the budget.
 */
async function fourAgainstBudget(path: string, body: Record<string, unknown>): Promise<number> {
  const fake = startFakeModel({ ttftMs: 150 });
  const t = await startGateway(config(fake.url, { budget: { tokens: 2000, period: "total" } }));
  try {
    const results = await Promise.all(
      Array.from({ length: 4 }, () => post(`${t.base}${path}`, body, AUTH)),
    );
    const served = results.filter((r) => r.status === 200).length;
    for (const r of results) assert(r.status === 200 || r.status === 403, r.text);
    const events = await t.sink.waitFor(served);
    const spent = events.reduce((s, e) => s + e.input_tokens + e.output_tokens, 0);
    assert(spent <= 2000, `${spent} tokens spent of a 2,000-token budget (${served} served)`);
    const budget = await budgetOf(t);
    assertEquals(budget.reserved.tokens, 0, "nothing reserved once settled");
    assertIdle(t.gw);
    return served;
  } finally {
    await t.stop();
    await fake.close();
  }
}

// The fake model generates `fake_tokens` whatever the limit: each request costs ~902 tokens, so
// a reservation that reads the limit the node honours lets exactly two of four through.
const GENERATES_900 = { fake_tokens: 900, fake_itl_ms: 0 };

Deno.test("output charge: max_completion_tokens over a smaller max_tokens is reserved", async () => {
  const body = chat("m1", { max_tokens: 1, max_completion_tokens: 900, ...GENERATES_900 });
  assertEquals(await fourAgainstBudget("/v1/chat/completions", body), 2);
});

Deno.test("output charge: max_tokens is reserved once per completion (n, best_of)", async () => {
  const n = chat("m1", { max_tokens: 300, n: 3, ...GENERATES_900 });
  assertEquals(await fourAgainstBudget("/v1/chat/completions", n), 2, "n: 3");
  const best = {
    model: "m1",
    prompt: "hello there",
    max_tokens: 300,
    best_of: 3,
    ...GENERATES_900,
  };
  assertEquals(await fourAgainstBudget("/v1/completions", best), 2, "best_of: 3");
});

Deno.test("output charge: a prompt or an embedding input of token ids is counted as tokens", async () => {
  const ids = Array.from({ length: 900 }, (_, i) => i + 1);
  const prompt = { model: "m1", prompt: ids, max_tokens: 1, fake_tokens: 1, fake_itl_ms: 0 };
  assertEquals(await fourAgainstBudget("/v1/completions", prompt), 2, "prompt: [ids]");
  const prompts = { ...prompt, prompt: [ids.slice(0, 450), ids.slice(450)] };
  assertEquals(await fourAgainstBudget("/v1/completions", prompts), 2, "prompt: [[ids], [ids]]");
  const input = { model: "m1", input: ids };
  assertEquals(await fourAgainstBudget("/v1/embeddings", input), 2, "input: [ids]");
  const inputs = { model: "m1", input: [ids.slice(0, 450), ids.slice(450)] };
  assertEquals(await fourAgainstBudget("/v1/embeddings", inputs), 2, "input: [[ids], [ids]]");
});

Deno.test("output charge: a client that leaves a prompt of token ids is billed its ids", async () => {
  const node = scriptedUpstream(async (req) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5000);
      req.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return Response.json({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } });
  });
  const t = await startGateway({ nodes: [{ id: "n", url: node.url, model: "m" }] });
  try {
    const client = new AbortController();
    const ids = Array.from({ length: 60 }, (_, i) => i + 1);
    const answer = fetch(`${t.base}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", prompt: ids, max_tokens: 5 }),
      signal: client.signal,
    }).catch(() => undefined);
    await until(() => node.requests.length === 1, 3000, "the call reached the node");
    client.abort();
    await answer;
    const [e] = await t.sink.waitFor(1, 3000);
    assertEquals(e.usage_source, "estimated");
    assertEquals(e.input_tokens, 60, "one token a token id");
    await until(() => t.gw.inflight === 0, 3000, "the request ended");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

/** A chat completion of 1 + 1 tokens, whatever was asked. */
function tinyAnswer(): Response {
  return Response.json({
    id: "c1",
    object: "chat.completion",
    created: 1,
    model: "m1",
    choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

/** Every field that feeds an estimate, by the route (face) that reads it, with a valid body. */
const FIELDS: { path: string; field: string; body: (v: unknown) => Record<string, unknown> }[] = [
  { path: "/v1/chat/completions", field: "max_tokens", body: (v) => chat("m1", { max_tokens: v }) },
  {
    path: "/v1/chat/completions",
    field: "max_completion_tokens",
    body: (v) => chat("m1", { max_completion_tokens: v }),
  },
  { path: "/v1/chat/completions", field: "n", body: (v) => chat("m1", { max_tokens: 4, n: v }) },
  {
    path: "/v1/completions",
    field: "best_of",
    body: (v) => ({ model: "m1", prompt: "hi", max_tokens: 4, best_of: v }),
  },
  {
    path: "/v1/messages",
    field: "max_tokens",
    body: (v) => ({ model: "m1", max_tokens: v, messages: [{ role: "user", content: "hi" }] }),
  },
  {
    path: "/v1/responses",
    field: "max_output_tokens",
    body: (v) => ({ model: "m1", input: "hi", max_output_tokens: v, store: false }),
  },
  {
    path: "/api/chat",
    field: "options.num_predict",
    body: (v) => ({
      model: "m1",
      stream: false,
      messages: [{ role: "user", content: "hi" }],
      options: { num_predict: v },
    }),
  },
];

Deno.test("output charge: absurd numbers in every field that feeds an estimate are refused or capped", async () => {
  const node = scriptedUpstream(() => tinyAnswer());
  // A 10,000-token budget: a limit of 1e18 charged as such could never be admitted; capped at
  // max_reserve_tokens it is, and nothing of it is left reserved after.
  const t = await startGateway(
    config(node.url, { budget: { tokens: 10_000, period: "total" } }, {
      routing: { max_reserve_tokens: 1000 },
    }),
  );
  try {
    const refused = [-1, -3, 1.5, 0.5, "900", "1e18", "abc", true, [5], { n: 1 }];
    for (const { path, field, body } of FIELDS) {
      for (const v of refused) {
        if (field === "options.num_predict" && v === -1) continue; // Ollama: no limit
        const r = await post(`${t.base}${path}`, body(v), AUTH);
        const what = `${path} ${field}: ${JSON.stringify(v)}`;
        assertEquals(r.status, 400, `${what}: ${r.text}`);
        assertStringIncludes(r.text, `${field}: must be`, what);
      }
    }
    await assertNothingForwarded(t, node);
    let sent = 0;
    for (const { path, field, body } of FIELDS) {
      for (const v of [1e18, 2 ** 63, Number.MAX_SAFE_INTEGER + 2]) {
        const r = await post(`${t.base}${path}`, body(v), AUTH);
        assertEquals(r.status, 200, `${path} ${field}: ${v}: ${r.text}`);
        sent++;
      }
    }
    await t.sink.waitFor(sent);
    const budget = await budgetOf(t);
    assertEquals(budget.reserved, { usd: 0, tokens: 0 }, "every capped reservation given back");
    assertEquals(budget.spent.tokens, 2 * sent, "each billed what it used");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await node.close();
  }
});

const shareKey = (key: string) => "k_" + createHash("sha1").update(key).digest("hex");

Deno.test("output charge: max_tokens 1e18 leaves fair share working for the next key", async () => {
  // One slot; key a holds it, queues a request asking 1e18 tokens and eight ordinary ones; key
  // b then asks once. Fair share serves b after at most a couple of a's: an uncapped charge
  // would put a's counter at 1e18, where b's and a's later charges vanish in rounding and b
  // waits behind every one of a's requests.
  const fake = startFakeModel();
  const t = await startGateway({
    nodes: [{ id: "gpu", url: fake.url, model: "m", max_conns: 1 }],
    policies: { p: {} },
    names: { a: shareKey("sk-a"), b: shareKey("sk-b") },
    keys: { a: "p", b: "p" },
    routing: { wait_timeout_ms: 10_000 },
  });
  const ask = (key: string, extra: Record<string, unknown>) =>
    post(`${t.base}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 8,
      fake_tokens: 8,
      fake_ttft_ms: 20,
      fake_itl_ms: 10,
      ...extra,
    }, { authorization: `Bearer sk-${key}` });
  try {
    const order: string[] = [];
    const done = (name: string) => (r: { status: number; text: string }) => {
      assertEquals(r.status, 200, `${name}: ${r.text}`);
      order.push(name);
    };
    const first = ask("a", { fake_ttft_ms: 300 }).then(done("a0"));
    await until(() => fake.stats.inflight === 1, 3000, "a's first request holds the slot");
    // The huge request runs long enough that b is surely queued before it ends: b's place is
    // then decided by the counters alone, not by how soon its request reached the gateway (a b
    // that arrived late on a stalled machine came after every a, and proved nothing).
    const queued = [ask("a", { max_tokens: 1e18, fake_ttft_ms: 1500 }).then(done("a-huge"))];
    const waiting = (n: number) => async () => await t.group.waiters() === n;
    await until(waiting(1), 3000, "the huge request waits");
    for (let i = 1; i <= 8; i++) {
      queued.push(ask("a", {}).then(done(`a${i}`)));
      await until(waiting(1 + i), 3000, `a${i} waits`);
    }
    await first;
    await until(waiting(8), 3000, "the huge request was dispatched");
    const b = ask("b", {}).then(done("b"));
    await until(waiting(9), 3000, "b waits while the huge request runs");
    assertEquals(order, ["a0"], "nothing but a0 finished before b queued");
    await Promise.all([...queued, b]);
    const at = order.indexOf("b");
    assert(at <= order.indexOf("a3"), `b served before a3: ${order.join(" ")}`);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});
