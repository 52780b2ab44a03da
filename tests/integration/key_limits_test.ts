/**
 * Budgets and rate limits per customer key through a real gateway (ADR 0023): refusals, headers,
 * reserve and settle under concurrency, counters across a reload and a restart, periods rolling
 * over on an injected clock.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { type FakeModelOptions, startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { assertIdle, chat, post, startGateway, type TestGateway, until } from "./helpers.ts";

const ALICE = await keyIdForKey("sk-alice");
const AUTH = { authorization: "Bearer sk-alice" };
const ADMIN = { authorization: "Bearer adm" };

/** One node `m1` priced $1000/M in and $2000/M out; alice on policy `std`. */
function config(url: string, std: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    admin_api_key: "adm",
    nodes: [{ id: "n1", url, model: "m1" }],
    pricing: { m1: { input_per_million: 1000, output_per_million: 2000 } },
    policies: { std },
    names: { alice: ALICE },
    keys: { alice: "std" },
    ...extra,
  };
}

/** Runs `fn` against a gateway with alice on `std` in front of a fake model; stops both after. */
async function withGateway(
  std: Record<string, unknown>,
  fn: (t: TestGateway, fakeUrl: string) => Promise<void>,
  opts: { fake?: FakeModelOptions; now?: () => number } = {},
): Promise<void> {
  const fake = startFakeModel(opts.fake);
  const t = await startGateway(config(fake.url, std), { now: opts.now });
  try {
    await fn(t, fake.url);
  } finally {
    await t.stop();
    await fake.close();
  }
}

/** A small Anthropic Messages request of alice. */
function anthropicHi(t: TestGateway) {
  const body = { model: "m1", max_tokens: 8, messages: [{ role: "user", content: "hi" }] };
  return post(`${t.base}/v1/messages`, body, AUTH);
}

/** The admin view of alice. */
async function aliceStatus(t: TestGateway): Promise<Record<string, unknown>> {
  const res = await fetch(`${t.base}/skeid/keys/alice`, { headers: ADMIN });
  assertEquals(res.status, 200, "GET /skeid/keys/alice");
  return await res.json();
}

function budgetOf(status: Record<string, unknown>): Record<string, Record<string, number>> {
  return status.budget as Record<string, Record<string, number>>;
}

Deno.test("key limits: 64 concurrent requests against a budget that fits 10 → 10 served, spend under the cap", async () => {
  const fake = startFakeModel({ ttftMs: 50 });
  // "hello there": 3 tokens estimated in + max_tokens 8 out → $0.019 reserved; the fake answers
  // 2 in + 8 out → $0.018 spent. 10 reservations fit $0.19; an 11th never does.
  const t = await startGateway(config(fake.url, { budget: { usd: 0.19, period: "month" } }));
  try {
    const results = await Promise.all(
      Array.from(
        { length: 64 },
        () => post(`${t.base}/v1/chat/completions`, chat("m1", { max_tokens: 8 }), AUTH),
      ),
    );
    const served = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 403);
    assertEquals(served, 10, "exactly the requests that fit are served");
    assertEquals(refused.length, 54, "the rest are refused with 403");
    const err = refused[0].json.error as Record<string, string>;
    assertEquals(err.type, "budget_exceeded");
    assertStringIncludes(err.message, "this month");
    assertStringIncludes(err.message, "resets at");
    const events = await t.sink.waitFor(10);
    await t.group.flushUsage();
    assertEquals(t.sink.events.length, 10, "no usage event for a refusal");
    const spent = events.reduce((s, e) => s + e.cost_total_usd, 0);
    assert(spent <= 0.19, `spend ${spent} within the cap`);
    const budget = budgetOf(await aliceStatus(t));
    assertEquals(budget.reserved, { usd: 0, tokens: 0 }, "nothing reserved once settled");
    assert(Math.abs(budget.spent.usd - spent) < 1e-9, `spent ${budget.spent.usd} = ${spent}`);
    // $0.19 − 10 × $0.018 shown as a price is written, not with float noise (0.0100000000000000x).
    assertEquals(budget.remaining.usd, 0.01, "remaining in plain figures");
    const metrics = await (await fetch(`${t.base}/skeid/metrics`, { headers: ADMIN })).text();
    assertStringIncludes(metrics, 'skeid_key_limit_refusals_total{limit="budget"} 54');
    assertStringIncludes(metrics, 'reason="budget_exceeded"} 54');
    const remaining = metrics.match(
      /skeid_key_budget_remaining_usd\{key="alice",period="month"\} (\S+)/,
    );
    assert(remaining !== null, "the remaining gauge of alice");
    assert(Math.abs(Number(remaining[1]) - 0.01) < 1e-9, `remaining $${remaining[1]}`);
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("key limits: rpm 60 → the 61st request gets 429 with Retry-After; waited, it is admitted", async () => {
  let clock = Date.UTC(2026, 0, 15, 12, 0, 0, 250);
  await withGateway({ limits: { rpm: 60, tpm: 1_000_000 } }, async (t) => {
    for (let i = 0; i < 60; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH);
      assertEquals(r.status, 200, `request ${i + 1}`);
      assertEquals(r.headers.get("x-ratelimit-limit-requests"), "60");
      assertEquals(r.headers.get("x-ratelimit-remaining-requests"), String(59 - i));
      clock += 500; // 60 requests over 30 s
    }
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH);
    assertEquals(r.status, 429, "the 61st request in the minute");
    assertEquals(r.json.error, {
      message: (r.json.error as Record<string, string>).message,
      type: "rate_limit_error",
      code: "key_rate_limited",
    });
    for (const kind of ["requests", "tokens"]) {
      for (const h of ["limit", "remaining", "reset"]) {
        assert(r.headers.get(`x-ratelimit-${h}-${kind}`) !== null, `x-ratelimit-${h}-${kind}`);
      }
    }
    assertEquals(r.headers.get("x-ratelimit-remaining-requests"), "0");
    // An anthropic client gets the same refusal in its own shape.
    const a = await anthropicHi(t);
    assertEquals(a.status, 429);
    assertEquals((a.json.error as Record<string, string>).type, "rate_limit_error");
    assertEquals(a.json.type, "error");
    const o = await post(`${t.base}/api/chat`, {
      model: "m1",
      stream: false,
      messages: [{ role: "user", content: "hi" }],
    }, AUTH);
    assertEquals(o.status, 429);
    assertEquals(typeof o.json.error, "string", "ollama: {error: message}");
    const retryAfter = Number(r.headers.get("retry-after"));
    assert(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    clock += (retryAfter - 1) * 1000;
    const early = await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH);
    assertEquals(early.status, 429, "one second before Retry-After it still does not fit");
    clock += 1000;
    const again = await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH);
    assertEquals(again.status, 200, "after Retry-After the request is admitted");
    await t.group.flushUsage();
    assertEquals(t.sink.events.length, 61, "refusals write no usage event");
  }, { now: () => clock });
});

Deno.test("key limits: tpm counts max_tokens at admission; a request larger than tpm is refused outright", async () => {
  await withGateway({ limits: { tpm: 10_000 } }, async (t) => {
    const big = chat("m1", { max_tokens: 8000 });
    const [a, b] = await Promise.all([
      post(`${t.base}/v1/chat/completions`, big, AUTH),
      post(`${t.base}/v1/chat/completions`, big, AUTH),
    ]);
    assertEquals([a.status, b.status].sort(), [200, 429], "the second burst request does not fit");
    const refused = a.status === 429 ? a : b;
    assertStringIncludes(
      (refused.json.error as Record<string, string>).message,
      "tokens per minute",
    );
    // Settled: the window holds the real 10 tokens, not the 8003 reserved.
    const served = a.status === 200 ? a : b;
    assertEquals(served.headers.get("x-ratelimit-limit-tokens"), "10000");
    const status = await aliceStatus(t);
    assertEquals(
      (status.windows as Record<string, number>).tokens,
      10,
      "settled to the real count",
    );
    const huge = await post(
      `${t.base}/v1/chat/completions`,
      chat("m1", { max_tokens: 20_000 }),
      AUTH,
    );
    assertEquals(huge.status, 429);
    const hugeMessage = (huge.json.error as Record<string, string>).message;
    assertStringIncludes(hugeMessage, "no wait lets it through; lower max_tokens");
    assertEquals(huge.headers.get("retry-after"), null, "no Retry-After: waiting would not help");
    assertEquals(huge.headers.get("x-ratelimit-limit-tokens"), "10000", "the limit is still said");
    assertIdle(t.gw);
  }, { fake: { ttftMs: 300 } });
});

Deno.test("key limits: max_inflight 2 with 5 concurrent streams → 2 streamed, 3 refused at once", async () => {
  await withGateway({ limits: { max_inflight: 2 } }, async (t) => {
    const results = await Promise.all(
      Array.from(
        { length: 5 },
        () => post(`${t.base}/v1/chat/completions`, chat("m1", { stream: true }), AUTH),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    assertEquals(statuses, [200, 200, 429, 429, 429]);
    for (const r of results.filter((r) => r.status === 429)) {
      assertStringIncludes((r.json.error as Record<string, string>).message, "concurrent requests");
      assertEquals(r.headers.get("retry-after"), "1");
    }
    for (const r of results.filter((r) => r.status === 200)) assertStringIncludes(r.text, "[DONE]");
    assertEquals((await aliceStatus(t)).windows, { requests: 2, tokens: 20, inflight: 0 });
    const after = await post(`${t.base}/v1/chat/completions`, chat("m1", { stream: true }), AUTH);
    assertEquals(after.status, 200, "the places are free once the streams ended");
    assertIdle(t.gw);
  }, { fake: { ttftMs: 400 } });
});

Deno.test("key limits: a reload keeps the counters; the new numbers apply to the next request", async () => {
  await withGateway({ limits: { rpm: 3 } }, async (t, fakeUrl) => {
    for (let i = 0; i < 3; i++) {
      assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH)).status, 200);
    }
    assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH)).status, 429);
    await t.writeConfig(config(fakeUrl, { limits: { rpm: 4 } }));
    await until(() => t.gw.skeid.keyPolicy(ALICE).limits?.rpm === 4, 5000, "reload applied");
    await t.group.configApplied();
    assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH)).status, 200);
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH);
    assertEquals(r.status, 429, "3 counted before the reload + 1 after reach the new rpm 4");
    assertEquals(r.headers.get("x-ratelimit-limit-requests"), "4");
  });
});

Deno.test("key limits: a restart mid-period continues from the ledger (sqlite)", async () => {
  const fake = startFakeModel();
  const dir = await Deno.makeTempDir({ prefix: "skeid-budget-" });
  // Each request: 2 + 8 = 10 tokens spent, 3 + 8 = 11 reserved. Cap 40: three fit, then 30 + 11
  // does not.
  const cfg = config(fake.url, { budget: { tokens: 40, period: "total" } }, {
    usage_store: { backend: "sqlite", path: `${dir}/usage.db`, flush_interval_ms: 50 },
  });
  try {
    const first = await startGateway(cfg, { sink: false });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await post(
          `${first.base}/v1/chat/completions`,
          chat("m1", { max_tokens: 8 }),
          AUTH,
        );
        assertEquals(r.status, 200, `request ${i + 1} before the restart`);
      }
    } finally {
      await first.stop();
    }
    const second = await startGateway(cfg, { sink: false });
    try {
      const budget = budgetOf(await aliceStatus(second));
      assertEquals(budget.spent.tokens, 30, "three requests of 10 tokens, read from the ledger");
      assert(Math.abs(budget.spent.usd - 0.054) < 1e-9, `spent $${budget.spent.usd}`);
      assertEquals(budget.remaining.tokens, 10);
      const r = await post(
        `${second.base}/v1/chat/completions`,
        chat("m1", { max_tokens: 8 }),
        AUTH,
      );
      assertEquals(r.status, 403, "the spend before the restart counts");
      assertStringIncludes((r.json.error as Record<string, string>).message, "does not reset");
      const small = await post(
        `${second.base}/v1/chat/completions`,
        chat("m1", { max_tokens: 5 }),
        AUTH,
      );
      assertEquals(small.status, 200, "a request that fits what is left is served");
    } finally {
      await second.stop();
    }
  } finally {
    await fake.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("key limits: a day budget rolls over at UTC midnight (injected clock)", async () => {
  let clock = Date.UTC(2026, 0, 15, 23, 59, 50);
  await withGateway({ budget: { tokens: 25, period: "day" } }, async (t) => {
    for (let i = 0; i < 2; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m1", { max_tokens: 8 }), AUTH);
      assertEquals(r.status, 200);
    }
    const r = await post(`${t.base}/v1/chat/completions`, chat("m1", { max_tokens: 8 }), AUTH);
    assertEquals(r.status, 403);
    assertStringIncludes((r.json.error as Record<string, string>).message, "2026-01-16T00:00:00");
    const a = await anthropicHi(t);
    assertEquals(a.status, 403);
    assertEquals((a.json.error as Record<string, string>).type, "permission_error");
    clock = Date.UTC(2026, 0, 16, 0, 0, 5);
    const next = await post(`${t.base}/v1/chat/completions`, chat("m1", { max_tokens: 8 }), AUTH);
    assertEquals(next.status, 200, "a new day, a new budget");
    const budget = budgetOf(await aliceStatus(t));
    assertEquals(budget.spent.tokens, 10);
    assertEquals((await aliceStatus(t)).budget, {
      ...budget,
      period: "day",
      period_start: "2026-01-16T00:00:00Z",
      resets_at: "2026-01-17T00:00:00Z",
    });
  }, { now: () => clock });
});

Deno.test("key limits: an aborted stream is settled from the event recorded for it", async () => {
  await withGateway({ budget: { tokens: 100_000 } }, async (t) => {
    const ac = new AbortController();
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...AUTH },
      body: JSON.stringify(chat("m1", { stream: true, max_tokens: 500 })),
      signal: ac.signal,
    });
    assertEquals(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await reader.cancel().catch(() => {});
    const [event] = await t.sink.waitFor(1);
    assertEquals(event.status_code, 499);
    await until(async () => await t.group.inflight() === 0, 3000, "the exchange ended");
    const budget = budgetOf(await aliceStatus(t));
    assertEquals(budget.reserved, { usd: 0, tokens: 0 }, "the reservation is gone");
    assertEquals(budget.spent.tokens, event.input_tokens + event.output_tokens);
    assertEquals(budget.spent.usd, event.cost_total_usd);
  }, { fake: { tokens: 200, itlMs: 10 } });
});

Deno.test("key limits: GET /skeid/keys shows policy, limits, windows and budget; unknown keys 404", async () => {
  await withGateway({
    limits: { rpm: 10, max_inflight: 4 },
    budget: { usd: 50, period: "week", warn_at: 0.5 },
  }, async (t) => {
    assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m1"), AUTH)).status, 200);
    const byName = await aliceStatus(t);
    const byId = await (await fetch(`${t.base}/skeid/keys/${ALICE}`, { headers: ADMIN })).json();
    assertEquals(byId, byName, "by id and by name alike");
    assertEquals(byName.api_key_id, ALICE);
    assertEquals(byName.name, "alice");
    assertEquals(byName.policy, "std");
    assertEquals(byName.limits, { rpm: 10, tpm: null, max_inflight: 4 });
    assertEquals((byName.windows as Record<string, number>).requests, 1);
    const budget = budgetOf(byName);
    assertEquals(budget.cap, { usd: 50, tokens: null });
    assertEquals(budget.period as unknown, "week");
    assertEquals(budget.warn_at as unknown, 0.5);
    const missing = await fetch(`${t.base}/skeid/keys/nobody`, { headers: ADMIN });
    assertEquals(missing.status, 404);
    await missing.body?.cancel();
  });
});
