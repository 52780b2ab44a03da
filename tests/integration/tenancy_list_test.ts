/**
 * `GET /skeid/tenancy`: every configured and issued customer key with its policy, limits, this
 * minute's windows, budget, share and last seen; no secret in the answer.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { chat, post, startGateway } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";
import { until } from "../_helpers/poll.ts";

const ALICE = await keyIdForKey("sk-alice");
const BOB = await keyIdForKey("sk-bob");
const ADMIN = { authorization: "Bearer adm-tenancy-0123456789" };

Deno.test("GET /skeid/tenancy: config and issued keys, windows, budget, share, last seen", async () => {
  const fake = startFakeModel();
  const tmp = await tempDir();
  const pepper = "pepper-for-tests-0123456789";
  const t = await startGateway({
    admin_api_key: "adm-tenancy-0123456789",
    nodes: [{ id: "n1", url: fake.url, model: "m1" }],
    pricing: { m1: { input_per_million: 10, output_per_million: 20 } },
    policies: {
      std: {
        limits: { rpm: 100, tpm: 100000 },
        budget: { usd: 5, period: "month" },
        share: { weight: 3, priority: 1 },
      },
      free: {},
    },
    default_policy: "free",
    names: { alice: ALICE },
    keys: { alice: "std", [BOB]: "free" },
    usage_store: { backend: "sqlite", sqlite_path: `${tmp.dir}/usage.db` },
  }, { env: { SKEID_KEY_PEPPER: pepper }, sink: false });
  try {
    const created = await fetch(`${t.base}/skeid/keys`, {
      method: "POST",
      headers: ADMIN,
      body: JSON.stringify({ name: "ci-bot", policy: "std" }),
    });
    assertEquals(created.status, 200);
    const issued = await created.json();
    for (let i = 0; i < 2; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m1"), {
        authorization: "Bearer sk-alice",
      });
      assertEquals(r.status, 200);
    }
    await t.group.flushUsage();
    let body: { keys: Record<string, unknown>[] } = { keys: [] };
    await until(async () => {
      body = await (await fetch(`${t.base}/skeid/tenancy`, { headers: ADMIN })).json();
      return body.keys.find((k) => k.key_id === ALICE)?.last_seen !== null;
    }, "alice seen");
    const text = JSON.stringify(body);
    assert(!text.includes(pepper) && !text.includes(issued.key) && !text.includes("hash"), text);
    const byId = new Map(body.keys.map((k) => [k.key_id, k]));
    const alice = byId.get(ALICE)!;
    assertEquals(
      [alice.name, alice.source, alice.policy, alice.share],
      ["alice", "config", "std", { weight: 3, priority: 1 }],
    );
    assertEquals((alice.limits as Record<string, unknown>).rpm, 100);
    assertEquals((alice.windows as Record<string, number>).requests_this_minute, 2);
    const budget = alice.budget as Record<string, unknown>;
    assertEquals([budget.period, (budget.limit as { usd: number }).usd], ["month", 5]);
    assert((budget.spent as { usd: number }).usd > 0, JSON.stringify(budget));
    assert(typeof budget.resets_at === "string");
    assert(typeof alice.last_seen === "string");
    const bob = byId.get(BOB)!;
    assertEquals([bob.source, bob.policy, bob.budget, bob.last_seen], [
      "config",
      "free",
      null,
      null,
    ]);
    const bot = byId.get(issued.id)!;
    assertEquals([bot.source, bot.name, bot.policy], ["issued", "ci-bot", "std"]);
  } finally {
    await t.stop();
    await fake.close();
    await tmp.cleanup();
  }
});
