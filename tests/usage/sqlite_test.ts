import { DatabaseSync } from "node:sqlite";
import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import { SQLITE_SCHEMA } from "../../src/usage/ledger_schema.ts";
import { SqliteStore } from "../../src/usage/sqlite.ts";
import { memoryLogger } from "../../src/log.ts";
import {
  assertOneEventReport,
  assertUsageSourceApart,
  event,
  ONE_EVENT,
  recordFilterFixture,
} from "./helpers.ts";
import { exists, tempDir } from "../_helpers/temp.ts";

const env = { env: () => undefined };

function sqliteConfig(raw: Record<string, unknown>) {
  const cfg = normalizeUsageStoreConfig(raw, env);
  assert(cfg.backend === "sqlite");
  return cfg;
}

function count(path: string, where = ""): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number(db.prepare(`SELECT COUNT(*) AS n FROM usage_events ${where}`).get()?.n);
  } finally {
    db.close();
  }
}

Deno.test("sqlite: the file is created when the store is prepared", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new SqliteStore(sqliteConfig({ sqlite_path: `${dir}/sub/u.sqlite` }));
  try {
    await store.prepare();
    assert((await Deno.stat(`${dir}/sub/u.sqlite`)).isFile);
    assertEquals(count(`${dir}/sub/u.sqlite`), 0);
    const db = new DatabaseSync(`${dir}/sub/u.sqlite`, { readOnly: true });
    try {
      assertEquals(db.prepare("PRAGMA journal_mode").get()?.journal_mode, "wal");
    } finally {
      db.close();
    }
  } finally {
    await store.close();
    await cleanup();
  }
});

Deno.test("sqlite: record + report (totals, by_key, by_model, recent)", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(sqliteConfig({ path: `${dir}/u.sqlite` }));
    ledger.record(event({ ...ONE_EVENT, content_bytes: 99 }));
    const r = await ledger.report({});
    assertEquals([r.ok, r.enabled, r.backend, r.db_path], [
      true,
      true,
      "sqlite",
      `${dir}/u.sqlite`,
    ]);
    assertOneEventReport(r);
    const row = r.recent?.[0];
    assertEquals(row?.id, 1);
    assertEquals([row?.model, row?.requested_model, row?.ok], ["gpt-x", "fast", true]);
    assertMatch(String(row?.created_at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const db = new DatabaseSync(`${dir}/u.sqlite`, { readOnly: true });
    try {
      const stored = db.prepare("SELECT content_bytes, event_id, ok FROM usage_events").get();
      assertEquals(stored?.content_bytes, 99);
      assertEquals(stored?.ok, 1);
      assertMatch(String(stored?.event_id), /^[0-9a-f-]{36}$/);
    } finally {
      db.close();
    }
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("sqlite: report filters, ordering and limit default/cap", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(sqliteConfig({ path: `${dir}/u.sqlite` }));
    recordFilterFixture(ledger);
    const all = await ledger.report({});
    assertEquals(all.recent?.length, 20, "default limit");
    assertEquals(all.recent?.[0].id, 600, "newest first");
    assertEquals((await ledger.report({ limit: 0 })).recent?.length, 20);
    assertEquals((await ledger.report({ limit: 10_000 })).recent?.length, 500, "cap");
    assertEquals((await ledger.report({ limit: 3 })).recent?.length, 3);
    assertEquals(all.by_key?.map((g) => g.api_key_id), ["k_big", "k_small"]);
    assertEquals((await ledger.report({ since: "2026-09-01" })).totals?.requests, 300);
    assertEquals((await ledger.report({ model: "m1", since: "" })).totals?.requests, 300);
    const big = await ledger.report({ api_key_id: "k_big", model: "m2" });
    assertEquals(big.totals?.requests, 100);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("sqlite: an old table without requested_model or trace_id is migrated; both round-trip", async () => {
  const { dir, cleanup } = await tempDir();
  const path = `${dir}/old.sqlite`;
  const old = new DatabaseSync(path);
  old.exec(`CREATE TABLE usage_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL, request_id TEXT,
    api_format TEXT, endpoint TEXT, api_key_id TEXT, provider TEXT, engine TEXT, model TEXT,
    node_id TEXT, route_url TEXT, status_code INTEGER, ok INTEGER NOT NULL DEFAULT 0,
    duration_ms INTEGER, input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0, total_tokens INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0, cost_input_usd REAL NOT NULL DEFAULT 0,
    cost_output_usd REAL NOT NULL DEFAULT 0, cost_total_usd REAL NOT NULL DEFAULT 0,
    error_type TEXT, error_message TEXT)`);
  old.exec(`INSERT INTO usage_events (created_at, model, ok, input_tokens)
            VALUES ('2026-01-01T00:00:00Z', 'legacy', 1, 5)`);
  old.close();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(sqliteConfig({ path }));
    ledger.record(event({
      model: "served",
      requested_model: "asked",
      trace_id: "0af7651916cd43dd8448eb211c80319c",
      span_id: "b7ad6b7169203331",
    }));
    const r = await ledger.report({});
    assertEquals(r.totals?.requests, 2);
    assertEquals(r.recent?.map((x) => [x.model, x.requested_model]), [
      ["served", "asked"],
      ["legacy", "legacy"],
    ]);
    assertEquals(r.recent?.map((x) => [x.trace_id, x.span_id]), [
      ["0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"],
      ["", ""],
    ], "the trace columns were added; an old row has none");
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const cols = db.prepare("PRAGMA table_info(usage_events)").all().map((c) => c.name);
      const added = ["requested_model", "cached_tokens", "event_id", "ttft_ms", "attempts"];
      for (const c of [...added, "usage_source", "trace_id", "span_id"]) {
        assert(cols.includes(c), c);
      }
      const idx = db.prepare("PRAGMA index_list(usage_events)").all().map((i) => i.name);
      assert(idx.includes("usage_events_requested_model_idx"));
      assert(idx.includes("usage_events_event_id_idx"));
    } finally {
      db.close();
    }
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("sqlite: the same event written twice is one row (event_id)", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new SqliteStore(sqliteConfig({ path: `${dir}/u.sqlite` }));
  try {
    await store.prepare();
    const batch = [event(), event(), event()];
    await store.write(batch);
    await store.write([batch[1], event()]);
    assertEquals(count(`${dir}/u.sqlite`), 4);
  } finally {
    await store.close();
    await cleanup();
  }
});

Deno.test("sqlite: shipped schema; schema_file and auto_migrate off", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    assertMatch(SQLITE_SCHEMA, /CREATE TABLE IF NOT EXISTS usage_events/);
    await Deno.writeTextFile(`${dir}/schema.sql`, SQLITE_SCHEMA);
    const withFile = new SqliteStore(
      sqliteConfig({ path: `${dir}/a.sqlite`, schema_file: `${dir}/schema.sql` }),
    );
    await withFile.prepare();
    await withFile.write([event()]);
    await withFile.close();
    assertEquals(count(`${dir}/a.sqlite`), 1);

    const noMigrate = new SqliteStore(sqliteConfig({ path: `${dir}/b.sqlite`, auto_migrate: 0 }));
    const err = await assertRejects(() => noMigrate.prepare());
    assertMatch(err.message, /^usage_store sqlite .*b\.sqlite: table usage_events does not exist/);
    await noMigrate.close();

    const missingFile = new SqliteStore(
      sqliteConfig({ path: `${dir}/c.sqlite`, schema_file: `${dir}/nope.sql` }),
    );
    assertMatch((await assertRejects(() => missingFile.prepare())).message, /nope\.sql/);
  } finally {
    await cleanup();
  }
});

Deno.test("sqlite: read-only open of a missing database fails clearly, creates nothing", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const store = new SqliteStore(sqliteConfig({ path: `${dir}/none.sqlite` }), {
      readOnly: true,
    });
    const err = await assertRejects(() => store.prepare());
    assertMatch(err.message, /^usage_store sqlite .*none\.sqlite: /);
    assertEquals(await exists(`${dir}/none.sqlite`), false, "no database created");
  } finally {
    await cleanup();
  }
});

Deno.test("sqlite: usage_source round-trips and is shown apart; bill_estimated: false prices 0", async () => {
  for (const bill of [true, false]) {
    const { dir, cleanup } = await tempDir();
    const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
    try {
      await ledger.configure(sqliteConfig({ path: `${dir}/u.sqlite`, bill_estimated: bill }));
      await assertUsageSourceApart(ledger, bill);
    } finally {
      await ledger.close();
      await cleanup();
    }
  }
});

Deno.test("sqlite: a pick's route is stored as JSON; a round_robin row has NULL", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new SqliteStore(sqliteConfig({ path: `${dir}/u.sqlite` }));
  try {
    await store.prepare();
    const route = { pick: "affinity", key_kind: "user", hit: true, spilled: false };
    await store.write([
      event({ ...ONE_EVENT, event_id: "e1", route }),
      event({ ...ONE_EVENT, event_id: "e2" }),
    ]);
    const db = new DatabaseSync(`${dir}/u.sqlite`, { readOnly: true });
    try {
      const rows = db.prepare("SELECT event_id, route FROM usage_events ORDER BY event_id").all();
      assertEquals(rows.map((r) => [r.event_id, r.route]), [["e1", JSON.stringify(route)], [
        "e2",
        null,
      ]]);
    } finally {
      db.close();
    }
  } finally {
    await store.close();
    await cleanup();
  }
});
