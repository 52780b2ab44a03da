/**
 * Two frontends — two `skeid serve` processes — on one PostgreSQL ledger hold one budget together
 * (ADR 0023): each re-reads the
 * totals of the keys it has seen every `budget_refresh_ms`; what they can overshoot is what the
 * other admits within one refresh, at most (frontends − 1) × what remained.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { until as poll } from "../_helpers/poll.ts";
import { chat, post } from "./helpers.ts";
import { type ServeChild, spawnServe } from "../edge/serve_helpers.ts";

/** A frontend as these tests reach it: its base URL. */
type Frontend = Pick<ServeChild, "base">;

const ALICE = await keyIdForKey("sk-alice");
const AUTH = { authorization: "Bearer sk-alice" };
const ADMIN = { authorization: "Bearer adm" };

async function spentTokens(t: Frontend): Promise<number> {
  const res = await fetch(`${t.base}/skeid/keys/alice`, { headers: ADMIN });
  const body = await res.json();
  return body.budget.spent.tokens;
}

async function send(t: Frontend): Promise<number> {
  return (await post(`${t.base}/v1/chat/completions`, chat("m1", { max_tokens: 8 }), AUTH)).status;
}

Deno.test({
  name:
    "key limits: two frontends on one PostgreSQL ledger hold one cap, within the documented bound",
  ...(await pgTestGate()),
  fn: async () => {
    const fake = startFakeModel({ ttftMs: 100 });
    const db = await freshPgDatabase();
    // Each request reserves 3 + 8 = 11 tokens and spends 2 + 8 = 10. Cap 110.
    const cfg = {
      admin_api_key: "adm",
      nodes: [{ id: "n1", url: fake.url, model: "m1" }],
      pricing: { m1: { input_per_million: 1, output_per_million: 1 } },
      policies: { std: { budget: { tokens: 110, period: "month" } } },
      names: { alice: ALICE },
      keys: { alice: "std" },
      routing: { budget_refresh_ms: 50 },
      usage_store: { backend: "postgresql", dsn: db.dsn, flush_interval_ms: 20 },
    };
    const a = await spawnServe(cfg);
    const b = await spawnServe(cfg);
    try {
      assertEquals(await send(b), 200, "b has seen alice");
      for (let i = 0; i < 5; i++) assertEquals(await send(a), 200, `a: request ${i + 1}`);
      // b learns a's spend from the ledger at its next refresh.
      await poll(async () => await spentTokens(b) === 60, "b reads a's spend: its 10 + a's 50");
      // 50 tokens remain: each frontend alone would admit 4 (44 ≤ 50). A burst on both at once.
      const statuses = await Promise.all(
        Array.from({ length: 20 }, (_, i) => send(i % 2 === 0 ? a : b)),
      );
      const served = statuses.filter((s) => s === 200).length;
      assert(served >= 4, `at least what fits was served (${served})`);
      assert(served <= 8, `each frontend admitted at most what it saw remaining (${served})`);
      assertEquals(
        statuses.filter((s) => s !== 200).every((s) => s === 403),
        true,
        "403 otherwise",
      );
      const bound = 110 + (2 - 1) * 50;
      // Once both refreshed, both see the whole spend and refuse.
      const total = 60 + served * 10;
      for (const t of [a, b]) {
        await poll(async () => await spentTokens(t) === total, "every frontend reads the total");
        assert(
          total <= bound,
          `spend ${total} within cap + (frontends − 1) × remaining = ${bound}`,
        );
        assertEquals(await send(t), 403, "spent: refused on every frontend");
      }
    } finally {
      await a.stop();
      await b.stop();
      await fake.close();
      await db.drop();
    }
  },
});
