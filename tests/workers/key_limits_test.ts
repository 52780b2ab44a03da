/**
 * Customer-key limits hold for a group of workers (ADR 0025, ADR 0023): rpm windows and budgets
 * in the supervisor, `max_inflight` in a shared table. Every request comes on its own connection
 * (`connection: close`), so the kernel spreads them over both workers.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { tempDir } from "../_helpers/temp.ts";
import { until } from "../_helpers/poll.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import type { Supervisor } from "../../src/workers/supervisor.ts";
import { group } from "./_group.ts";

const ALICE = await keyIdForKey("sk-alice");

/** Two workers over one fake node, alice on policy `std`, the supervisor's clock `now`. */
async function withGroup(
  std: Record<string, unknown>,
  fn: (base: string, sup: Supervisor) => Promise<void>,
  opts: { ttftMs?: number; now?: () => number } = {},
): Promise<void> {
  const tmp = await tempDir();
  const fake = startFakeModel({ record: 0, ttftMs: opts.ttftMs });
  const { sup } = await group(
    {
      admin_api_key: "adm",
      nodes: [{ id: "n1", url: fake.url, model: "m1", max_conns: 64 }],
      pricing: { m1: { input_per_million: 1000, output_per_million: 2000 } },
      policies: { std },
      names: { alice: ALICE },
      keys: { alice: "std" },
      usage_store: { backend: "jsonlog", path: `${tmp.dir}/events.jsonl` },
    },
    tmp.dir,
    { now: opts.now },
  );
  try {
    await fn(`http://127.0.0.1:${sup.addr.port}`, sup);
  } finally {
    await sup.stop(2000);
    await fake.close();
    await tmp.cleanup();
  }
}

/** `n` chat requests of alice at once, each on its own connection; their statuses and bodies. */
function burst(base: string, n: number, extra: Record<string, unknown> = {}) {
  return Promise.all(Array.from({ length: n }, async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: "Bearer sk-alice",
        "content-type": "application/json",
        connection: "close",
      },
      body: JSON.stringify({
        model: "m1",
        messages: [{ role: "user", content: "hello there" }],
        ...extra,
      }),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }));
}

function count(results: { status: number }[], status: number): number {
  return results.filter((r) => r.status === status).length;
}

Deno.test("workers: rpm 5 lets exactly 5 requests through across both workers in a minute", async () => {
  // The supervisor's clock holds the windows: frozen, the minute never rolls.
  const t0 = Date.UTC(2026, 0, 5, 12, 0, 10);
  await withGroup({ limits: { rpm: 5 } }, async (base, sup) => {
    const results = await burst(base, 12);
    assertEquals(count(results, 200), 5, `served: ${results.map((r) => r.status)}`);
    assertEquals(count(results, 429), 7, "the rest refused");
    const refused = results.find((r) => r.status === 429)!;
    assertStringIncludes(refused.text, "requests per minute");
    assertEquals(refused.headers.get("x-ratelimit-remaining-requests"), "0");
    const more = await burst(base, 4);
    assertEquals(count(more, 429), 4, "still refused within the minute");
    assertEquals(sup.keys.open, 0, "every hold settled");
  }, { now: () => t0 });
});

Deno.test("workers: max_inflight 2 holds across both workers; the places come back", async () => {
  await withGroup({ limits: { max_inflight: 2 } }, async (base, sup) => {
    const results = await burst(base, 8);
    assertEquals(count(results, 200), 2, `served: ${results.map((r) => r.status)}`);
    assertEquals(count(results, 429), 6, "the rest refused at once");
    for (const r of results.filter((r) => r.status === 429)) {
      assertStringIncludes(r.text, "concurrent requests");
      assertEquals(r.headers.get("retry-after"), "1");
    }
    await until(() => sup.keys.open === 0, "holds settled", 3000);
    const after = await burst(base, 2);
    assertEquals(count(after, 200), 2, "both places are free again");
    const keys = await fetch(`${base}/skeid/keys/alice`, {
      headers: { authorization: "Bearer adm" },
    });
    const status = await keys.json();
    assertEquals(status.windows.inflight, 0, "nothing in flight for the group");
    assertEquals(status.windows.requests, 4, "the group's windows counted the 4 served");
  }, { ttftMs: 300 });
});

Deno.test("workers: a budget that fits 3 requests serves exactly 3 across both workers", async () => {
  // "hello there": 3 tokens in + max_tokens 8 out reserved → $0.019 each; 3 fit $0.06.
  await withGroup({ budget: { usd: 0.06, period: "month" } }, async (base, sup) => {
    const results = await burst(base, 12, { max_tokens: 8 });
    assertEquals(count(results, 200), 3, `served: ${results.map((r) => r.status)}`);
    assertEquals(count(results, 403), 9, "the rest refused");
    assertStringIncludes(results.find((r) => r.status === 403)!.text, "budget_exceeded");
    await until(() => sup.keys.open === 0, "holds settled", 3000);
    const again = await burst(base, 4, { max_tokens: 8 });
    assertEquals(count(again, 200), 0, "the spend of the 3 leaves no room for a 4th");
    const status = sup.gateway.tenancy.budgets.status(ALICE, Date.now());
    assert(status !== null, "alice has a budget");
    assert(status.spent.usd <= 0.06, `spent $${status.spent.usd} within the cap`);
    assertEquals(status.reserved.usd, 0, "nothing reserved once settled");
  }, { ttftMs: 200 });
});
