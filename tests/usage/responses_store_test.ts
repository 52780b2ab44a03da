/**
 * The response store (ADR 0028) on SQLite and PostgreSQL, with an injected clock: a kept response
 * is found only by the key that owns it, expires after `ttl_s`, a key keeps at most
 * `max_per_key` (the oldest go), and a jsonlog usage store cannot keep responses.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_assert.ts";
import {
  type KeptResponse,
  openResponseStore,
  type ResponseStore,
} from "../../src/responses/response_store.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { tempDir } from "../_helpers/temp.ts";

const gate = await pgTestGate();
const SETTINGS = { store: true, ttl_s: 60, max_per_key: 2 };

function kept(id: string, apiKeyId: string, createdMs: number): KeptResponse {
  return {
    id,
    apiKeyId,
    createdMs,
    input: [{ type: "message", role: "user", content: `question ${id}` }],
    response: { id, object: "response", status: "completed", output: [] },
  };
}

/** The rules every backend keeps; `clock.ms` is the store's clock. */
async function storeRules(store: ResponseStore, clock: { ms: number }): Promise<void> {
  await store.put(kept("resp_a", "k_one", clock.ms));
  const a = await store.get("k_one", "resp_a");
  assert(a !== undefined, "the owner finds its response");
  assertEquals(a.input, [{ type: "message", role: "user", content: "question resp_a" }]);
  assertEquals(a.response.id, "resp_a");
  assertEquals(await store.get("k_two", "resp_a"), undefined, "another key does not");
  assertEquals(await store.delete("k_two", "resp_a"), false, "nor may it delete it");
  assertEquals(await store.get("k_one", "resp_unknown"), undefined);

  // max_per_key 2: a third response drops the oldest of that key only.
  await store.put(kept("resp_other", "k_two", clock.ms));
  clock.ms += 1000;
  await store.put(kept("resp_b", "k_one", clock.ms));
  clock.ms += 1000;
  await store.put(kept("resp_c", "k_one", clock.ms));
  assertEquals(await store.get("k_one", "resp_a"), undefined, "the oldest of k_one was dropped");
  assert(await store.get("k_one", "resp_b"), "resp_b kept");
  assert(await store.get("k_one", "resp_c"), "resp_c kept");
  assert(await store.get("k_two", "resp_other"), "another key's response is untouched");

  // ttl_s 60: at 60 s after it was kept a response is gone.
  clock.ms += 58_000; // resp_b is 59 s old, resp_c 58 s
  assert(await store.get("k_one", "resp_b"), "59 s old: still there");
  clock.ms += 1000;
  assertEquals(await store.get("k_one", "resp_b"), undefined, "60 s old: expired");
  assertEquals(await store.delete("k_one", "resp_b"), false, "an expired one cannot be deleted");
  assert(await store.get("k_one", "resp_c"), "resp_c is 59 s old");

  assertEquals(await store.delete("k_one", "resp_c"), true, "the owner deletes");
  assertEquals(await store.get("k_one", "resp_c"), undefined, "deleted");
}

/** Opens the store on `usage` (raw `usage_store`), runs the rules with a settable clock, closes. */
async function rulesOn(usage: Record<string, unknown>): Promise<void> {
  const clock = { ms: 1_800_000_000_000 };
  const cfg = normalizeUsageStoreConfig(usage, { env: () => undefined });
  const store = await openResponseStore(cfg, SETTINGS, () => clock.ms);
  try {
    await storeRules(store, clock);
  } finally {
    await store.close();
  }
}

Deno.test("response store (sqlite): owner only, max_per_key drops the oldest, ttl_s expires", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await rulesOn({ backend: "sqlite", sqlite_path: `${dir}/u.sqlite` });
  } finally {
    await cleanup();
  }
});

Deno.test({
  name: "response store (postgresql): owner only, max_per_key drops the oldest, ttl_s expires",
  ignore: gate.ignore,
  async fn() {
    const db = await freshPgDatabase();
    try {
      await rulesOn({ backend: "postgresql", dsn: db.dsn });
    } finally {
      await db.drop();
    }
  },
});

Deno.test("response store: a jsonlog usage store cannot keep responses", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const usage = normalizeUsageStoreConfig({ backend: "jsonlog", path: `${dir}/events/` }, {
      env: () => undefined,
    });
    const err = await assertRejects(() => openResponseStore(usage, SETTINGS, Date.now));
    assertStringIncludes(err.message, "jsonlog");
  } finally {
    await cleanup();
  }
});

Deno.test({
  name: "response store (postgresql): several workers opening it at once all get the table",
  ignore: gate.ignore,
  async fn() {
    const db = await freshPgDatabase();
    const usage = normalizeUsageStoreConfig({ backend: "postgresql", dsn: db.dsn }, {
      env: () => undefined,
    });
    const opened = await Promise.allSettled(
      Array.from({ length: 4 }, () => openResponseStore(usage, SETTINGS, Date.now)),
    );
    try {
      assertEquals(opened.map((o) => o.status), Array(4).fill("fulfilled"));
      const stores = opened.map((o) => (o as PromiseFulfilledResult<ResponseStore>).value);
      await stores[0].put(kept("resp_w", "k_one", Date.now()));
      assert(await stores[3].get("k_one", "resp_w"), "one table, seen by every worker");
    } finally {
      for (const o of opened) if (o.status === "fulfilled") await o.value.close();
      await db.drop();
    }
  },
});
