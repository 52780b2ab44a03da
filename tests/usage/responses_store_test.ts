/**
 * The response store (ADR 0028) on SQLite and PostgreSQL, with an injected clock: a kept response
 * is found only by the key that owns it, expires after `ttl_s`, a key keeps at most
 * `max_per_key` (the oldest go), and a jsonlog usage store cannot keep responses.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_assert.ts";
import {
  type KeptResponse,
  openResponseStore,
  ResponseLimitError,
  RESPONSES_DEFAULTS,
  type ResponseStore,
} from "../../src/responses/response_store.ts";
import { connectPostgres } from "../../src/usage/postgres.ts";
import { DatabaseSync } from "node:sqlite";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { tempDir } from "../_helpers/temp.ts";

const gate = await pgTestGate();
const SETTINGS = { ...RESPONSES_DEFAULTS, store: true, ttl_s: 60, max_per_key: 2 };

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
function rulesOn(usage: Record<string, unknown>): Promise<void> {
  return runOn(usage, SETTINGS, storeRules);
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

/** A turn of `apiKeyId` with its own input and output, continuing `previousId`. */
function turn(
  id: string,
  apiKeyId: string,
  createdMs: number,
  previousId?: string,
): KeptResponse {
  return {
    id,
    apiKeyId,
    createdMs,
    input: [{ type: "message", role: "user", content: `question ${id}` }],
    ...(previousId !== undefined ? { previousId } : {}),
    response: {
      id,
      object: "response",
      status: "completed",
      output: [{ type: "message", role: "assistant", content: `answer ${id}` }],
    },
  };
}

const ask = (id: string) => ({ type: "message", role: "user", content: `question ${id}` });
const answer = (id: string) => ({ type: "message", role: "assistant", content: `answer ${id}` });

/** Linked turns: each row holds its own items, the walk gives the conversation, key by key. */
async function chainRules(store: ResponseStore, clock: { ms: number }): Promise<void> {
  await store.put(turn("resp_1", "k_one", clock.ms));
  clock.ms += 40_000;
  await store.put(turn("resp_2", "k_one", clock.ms, "resp_1"));
  await store.put(turn("resp_3", "k_one", clock.ms, "resp_2"));
  assertEquals(await store.conversation("k_one", "resp_3"), {
    found: true,
    items: [
      ask("resp_1"),
      answer("resp_1"),
      ask("resp_2"),
      answer("resp_2"),
      ask("resp_3"),
      answer("resp_3"),
    ],
  });
  const third = await store.get("k_one", "resp_3");
  assertEquals(third?.input, [ask("resp_3")], "a row holds its own input only");
  assertEquals(third?.previousId, "resp_2");
  // Each turn is stored once: what the key keeps is the sum of its rows, not of their histories.
  const one = JSON.stringify(turn("resp_1", "k_one", 0).input).length +
    JSON.stringify(turn("resp_1", "k_one", 0).response).length;
  assertEquals(await store.keptBytes("k_one"), 3 * one);

  // Another key never walks into k_one's turns, nor finds them.
  await store.put(turn("resp_x", "k_two", clock.ms, "resp_2"));
  assertEquals(await store.conversation("k_two", "resp_x"), { found: false, missing: "resp_2" });
  assertEquals(await store.conversation("k_two", "resp_3"), { found: false, missing: "resp_3" });

  // ttl_s 60: resp_1 was kept 40 s before resp_2, which continued it: at 70 s it still lives.
  clock.ms += 30_000;
  const later = await store.conversation("k_one", "resp_3");
  assert(later.found, "the earlier turns live as long as the newest");
  assertEquals(later.items.length, 6);

  // A turn deleted from the middle: continuing after it names what is gone.
  assertEquals(await store.delete("k_one", "resp_2"), true);
  assertEquals(await store.conversation("k_one", "resp_3"), { found: false, missing: "resp_2" });
}

/** Byte caps: a response over max_response_bytes, or a key over max_bytes_per_key, is not kept. */
async function capRules(store: ResponseStore, clock: { ms: number }): Promise<void> {
  const big = turn("resp_big", "k_one", clock.ms);
  big.input = [{ type: "message", role: "user", content: "x".repeat(600) }];
  const tooBig = await assertRejects(() => store.put(big), ResponseLimitError);
  assertEquals(tooBig.setting, "max_response_bytes");
  assertEquals(await store.get("k_one", "resp_big"), undefined, "nothing was kept");
  // Each small turn is ~200 bytes; the key may keep 1,000.
  let kept = 0;
  for (let i = 0; i < 10; i++) {
    try {
      await store.put(turn(`resp_s${i}`, "k_one", clock.ms));
      kept++;
    } catch (err) {
      assert(err instanceof ResponseLimitError && err.setting === "max_bytes_per_key", `${err}`);
      break;
    }
  }
  assert(kept > 0 && kept < 10, `some kept, then the key is full (${kept})`);
  assert((await store.keptBytes("k_one")) <= 1000);
  await store.put(turn("resp_other", "k_two", clock.ms)); // another key is not held back
}

/** Opens a store with `settings` on `usage`, runs `rules`, closes. */
async function runOn(
  usage: Record<string, unknown>,
  settings: typeof SETTINGS,
  rules: (store: ResponseStore, clock: { ms: number }) => Promise<void>,
): Promise<void> {
  const clock = { ms: 1_800_000_000_000 };
  const cfg = normalizeUsageStoreConfig(usage, { env: () => undefined });
  const store = await openResponseStore(cfg, settings, () => clock.ms);
  try {
    await rules(store, clock);
  } finally {
    await store.close();
  }
}

const LINKED = { ...SETTINGS, max_per_key: 10 };
const CAPPED = { ...LINKED, max_response_bytes: 500, max_bytes_per_key: 1000 };

/** The table as it was before responses were linked, with one row holding a whole conversation. */
const OLD_TABLE = (n: string) =>
  `CREATE TABLE responses (n ${n}, id TEXT NOT NULL UNIQUE, api_key_id TEXT NOT NULL, ` +
  "created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, input TEXT NOT NULL, " +
  "response TEXT NOT NULL)";
const OLD_ROW = "INSERT INTO responses (id, api_key_id, created_ms, expires_ms, input, response) " +
  `VALUES ('resp_old', 'k_one', 1, 9000000000000, '${
    JSON.stringify([ask("resp_0"), answer("resp_0"), ask("resp_old")])
  }', '${JSON.stringify({ id: "resp_old", status: "completed", output: [answer("resp_old")] })}')`;

/** A row of the old shape is continued: its whole input, its output, then the new turn. */
async function oldRowRules(store: ResponseStore, clock: { ms: number }): Promise<void> {
  await store.put(turn("resp_new", "k_one", clock.ms, "resp_old"));
  assertEquals(await store.conversation("k_one", "resp_new"), {
    found: true,
    items: [
      ask("resp_0"),
      answer("resp_0"),
      ask("resp_old"),
      answer("resp_old"),
      ask("resp_new"),
      answer("resp_new"),
    ],
  });
  assert((await store.keptBytes("k_one")) > 0, "the old row's size was filled in");
  assertEquals(await store.conversation("k_two", "resp_old"), {
    found: false,
    missing: "resp_old",
  });
}

Deno.test("response store (sqlite): linked turns, the walk per key, byte caps, old rows", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await runOn({ backend: "sqlite", sqlite_path: `${dir}/a.sqlite` }, LINKED, chainRules);
    await runOn({ backend: "sqlite", sqlite_path: `${dir}/b.sqlite` }, CAPPED, capRules);
    const old = new DatabaseSync(`${dir}/c.sqlite`);
    old.exec(OLD_TABLE("INTEGER PRIMARY KEY AUTOINCREMENT"));
    old.exec(OLD_ROW);
    old.close();
    await runOn({ backend: "sqlite", sqlite_path: `${dir}/c.sqlite` }, LINKED, oldRowRules);
  } finally {
    await cleanup();
  }
});

Deno.test({
  name: "response store (postgresql): linked turns, the walk per key, byte caps, old rows",
  ignore: gate.ignore,
  async fn() {
    const dbs = [await freshPgDatabase(), await freshPgDatabase(), await freshPgDatabase()];
    try {
      await runOn({ backend: "postgresql", dsn: dbs[0].dsn }, LINKED, chainRules);
      await runOn({ backend: "postgresql", dsn: dbs[1].dsn }, CAPPED, capRules);
      const cfg = normalizeUsageStoreConfig({ backend: "postgresql", dsn: dbs[2].dsn }, {
        env: () => undefined,
      });
      if (cfg.backend !== "postgresql") throw new Error("a postgresql store");
      const sql = await connectPostgres(cfg);
      await sql.unsafe(OLD_TABLE("BIGSERIAL PRIMARY KEY"));
      await sql.unsafe(OLD_ROW);
      await sql.end();
      await runOn({ backend: "postgresql", dsn: dbs[2].dsn }, LINKED, oldRowRules);
    } finally {
      for (const db of dbs) await db.drop();
    }
  },
});
