/**
 * The hourly and daily roll-ups on SQLite and PostgreSQL: after batches, after a replay of events
 * already stored, and after the build of a ledger that had none (or only hourly ones), they equal
 * a direct aggregation of the stored events; the report and the series read from them are the
 * ones read from the events.
 */
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { assert, assertEquals } from "../_assert.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { SqliteStore } from "../../src/usage/sqlite.ts";
import { PostgresStore } from "../../src/usage/postgres.ts";
import { parseSeriesQuery, rollupSeriesSql } from "../../src/usage/rollup.ts";
import type { UsageEvent, UsageStore } from "../../src/usage/types.ts";
import { event } from "./helpers.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import { memoryLogger } from "../../src/log.ts";
import { tempDir } from "../_helpers/temp.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";

const gate = await pgTestGate();

/** Events over three hours, two keys, two aliases, two models, two nodes, errors, estimates. */
function batch(n: number, offset = 0): UsageEvent[] {
  return Array.from({ length: n }, (_, j) => {
    const i = j + offset;
    return event({
      created_at: `2026-09-01T${String(10 + (i % 3)).padStart(2, "0")}:${
        String(i % 60).padStart(2, "0")
      }:07Z`,
      api_key_id: i % 2 ? "k_a" : "k_b",
      requested_model: i % 4 < 2 ? "fast" : "smart",
      model: i % 5 ? "m1" : "m2",
      node_id: i % 3 ? "n1" : "n2",
      status_code: i % 7 ? 200 : 502,
      usage: {
        prompt_tokens: 10 + i,
        completion_tokens: i % 9,
        prompt_tokens_details: { cached_tokens: i % 4 },
      },
      cost_total_usd: (i % 5) * 0.25,
      usage_source: i % 6 ? "reported" : "estimated",
    });
  });
}

type Row = Record<string, unknown>;

/** The roll-up rows a direct aggregation of `events` gives (the test's own arithmetic). */
function aggregateEvents(events: readonly Row[], timeLength = 13): Row[] {
  const out = new Map<string, Row>();
  for (const e of events) {
    const keys = [
      String(e.created_at).slice(0, timeLength),
      e.api_key_id ?? "",
      e.requested_model ?? "",
      e.model ?? "",
      e.node_id ?? "",
    ];
    const k = JSON.stringify(keys);
    const r = out.get(k) ?? {
      key: keys.join("|"),
      requests: 0,
      errors: 0,
      input_tokens: 0,
      output_tokens: 0,
      cached_tokens: 0,
      cost: 0,
      estimated: 0,
    };
    const n = (c: string) => Number(e[c] ?? 0);
    r.requests = Number(r.requests) + 1;
    r.errors = Number(r.errors) + (e.ok === true || e.ok === 1 ? 0 : 1);
    for (const c of ["input_tokens", "output_tokens", "cached_tokens"]) r[c] = Number(r[c]) + n(c);
    r.cost = Math.round((Number(r.cost) + n("cost_total_usd")) * 1e6) / 1e6;
    r.estimated = Number(r.estimated) + (e.usage_source === "estimated" ? 1 : 0);
    out.set(k, r);
  }
  return [...out.values()].sort((a, b) => String(a.key).localeCompare(String(b.key)));
}

function rollupRows(rows: readonly Row[], time = "hour"): Row[] {
  return rows.map((r) => ({
    key: [r[time], r.api_key_id, r.requested_model, r.model, r.node_id].join("|"),
    requests: Number(r.requests),
    errors: Number(r.errors),
    input_tokens: Number(r.input_tokens),
    output_tokens: Number(r.output_tokens),
    cached_tokens: Number(r.cached_tokens),
    cost: Math.round(Number(r.cost_total_usd) * 1e6) / 1e6,
    estimated: Number(r.estimated_requests),
  })).sort((a, b) => String(a.key).localeCompare(String(b.key)));
}

/** How a test reads one database: its events and its roll-ups, and runs a statement. */
interface Db {
  events(): Promise<Row[]>;
  rollups(): Promise<Row[]>;
  daily(): Promise<Row[]>;
  exec(sql: string): Promise<void>;
  open(opts?: { readOnly?: boolean }): Promise<UsageStore & { rollupsBuilt(): Promise<void> }>;
}

async function assertRollupsMatch(db: Db): Promise<void> {
  const events = await db.events();
  assert(events.length > 0);
  assertEquals(rollupRows(await db.rollups()), aggregateEvents(events));
  assertEquals(rollupRows(await db.daily(), "day"), aggregateEvents(events, 10));
}

/** Drops every roll-up table: a ledger from before them. */
async function dropRollups(db: Db): Promise<void> {
  for (const t of ["usage_rollups", "usage_rollups_daily", "usage_rollup_state"]) {
    await db.exec(`DROP TABLE ${t}`);
  }
}

/** The scenario both databases run. */
async function scenario(db: Db): Promise<void> {
  const store = await db.open();
  await store.rollupsBuilt();
  const first = batch(40);
  await store.write(first);
  await store.write(batch(25, 40));
  await assertRollupsMatch(db);
  // A spill replay: events already stored come again, beside new ones; only new ones count.
  await store.write([...first.slice(5, 30), ...batch(10, 65)]);
  assertEquals((await db.events()).length, 75);
  await assertRollupsMatch(db);
  const viaRollups = await store.report({ limit: 5 });
  const since = await store.report({ since: "2026-09-01T11", api_key_id: "k_a", limit: 5 });
  const query = parseSeriesQuery((n) =>
    ({ from: "2026-09-01T00:00:00Z", to: "2026-09-02T00:00:00Z", by: "alias", step: "day" })[n]
  );
  const series = await store.series!(query);
  await store.close();

  // A ledger from before the roll-ups: none kept. Its report scans the events (read-only open).
  await dropRollups(db);
  const reader = await db.open({ readOnly: true });
  const viaEvents = await reader.report({ limit: 5 });
  const sinceEvents = await reader.report({ since: "2026-09-01T11", api_key_id: "k_a", limit: 5 });
  const seriesEvents = await reader.series!(query);
  await reader.close();
  assertEquals(viaRollups, viaEvents);
  assertEquals(since, sinceEvents);
  assertEquals(series, seriesEvents);
  assertEquals(series.buckets.length, 1);
  assertEquals(
    series.buckets[0].groups.map((g) => [g.name, g.requests]),
    [["fast", 38], ["smart", 37]],
  );

  // First writable open builds them in the background; a batch written meanwhile counts once.
  const reopened = await db.open();
  await reopened.write(batch(9, 100));
  await reopened.rollupsBuilt();
  await reopened.write(batch(4, 200));
  assertEquals((await db.events()).length, 88);
  await assertRollupsMatch(db);
  await reopened.close();

  // A ledger with hourly roll-ups from before the daily ones: only the daily rows are built.
  await db.exec("DROP TABLE usage_rollups_daily");
  await db.exec("DELETE FROM usage_rollup_state WHERE name = 'backfill_daily'");
  await db.exec("UPDATE usage_rollup_state SET done_at = 'kept' WHERE name = 'backfill'");
  const upgraded = await db.open();
  await upgraded.rollupsBuilt();
  await upgraded.write(batch(3, 300));
  await upgraded.close();
  assertEquals((await db.events()).length, 91);
  await assertRollupsMatch(db);
}

/** Events over five days (two partial at the range's edges), every hour of the day. */
function spread(n: number): UsageEvent[] {
  return batch(n).map((e, i) => ({
    ...e,
    created_at: new Date(
      Date.parse("2026-09-01T00:00:00Z") + (i * 97 % 120) * 3_600_000 +
        (i % 60) * 1000,
    ).toISOString().replace(".000Z", "Z"),
  }));
}

/** The series queries whose answers must not depend on which table answers them. */
const SERIES_QUERIES: Record<string, string>[] = [
  { from: "2026-09-01T00:00:00Z", to: "2026-09-06T00:00:00Z", by: "model", step: "day" },
  { from: "2026-09-01T07:30:00Z", to: "2026-09-05T17:00:00Z", by: "key", step: "day" },
  { from: "2026-09-01T07:00:00Z", to: "2026-09-06T00:00:00Z", by: "alias", step: "day" },
  { from: "2026-08-31T00:00:00Z", to: "2026-09-03T05:00:00Z", by: "node", step: "day" },
  { from: "2026-09-02T03:00:00Z", to: "2026-09-02T21:00:00Z", by: "model", step: "day" },
  { from: "2026-09-01T07:00:00Z", to: "2026-09-04T17:00:00Z", by: "model", step: "hour" },
];

/** The series from the daily rows, from the hourly ones alone, and from the events agree. */
async function seriesScenario(db: Db): Promise<void> {
  const store = await db.open();
  await store.rollupsBuilt();
  await store.write(spread(300));
  await store.write(spread(300).slice(0, 40).map((e, i) => ({ ...e, event_id: `x${i}` })));
  await assertRollupsMatch(db);
  const answers = async (s: UsageStore) => {
    const out = [];
    for (const q of SERIES_QUERIES) out.push(await s.series!(parseSeriesQuery((n) => q[n])));
    return out;
  };
  const viaDaily = await answers(store);
  await store.close();
  const readAs = async () => {
    const reader = await db.open({ readOnly: true });
    try {
      return await answers(reader);
    } finally {
      await reader.close();
    }
  };
  await db.exec("DELETE FROM usage_rollup_state WHERE name = 'backfill_daily'");
  const viaHourly = await readAs();
  await db.exec("DELETE FROM usage_rollup_state");
  const viaEvents = await readAs();
  assertEquals(viaDaily, viaHourly);
  assertEquals(viaDaily, viaEvents);
  assertEquals(viaDaily[0].buckets.length, 5);
  assert(viaDaily[1].buckets[0].groups.length > 0 && viaDaily[1].buckets[4].groups.length > 0);
}

Deno.test("sqlite roll-ups equal the events after batches, a replay and a backfill", async () => {
  const tmp = await tempDir();
  const path = `${tmp.dir}/usage.db`;
  const cfg = normalizeUsageStoreConfig({ backend: "sqlite", path }, { env: () => undefined });
  assert(cfg.backend === "sqlite");
  const read = (sql: string) => {
    const db = new DatabaseSync(path);
    try {
      return Promise.resolve(db.prepare(sql).all() as Row[]);
    } finally {
      db.close();
    }
  };
  await scenario(sqliteDb(cfg, read));
  await tmp.cleanup();
});

function sqliteDb(
  cfg: ReturnType<typeof normalizeUsageStoreConfig>,
  read: (sql: string) => Promise<Row[]>,
): Db {
  assert(cfg.backend === "sqlite");
  return {
    events: () => read("SELECT * FROM usage_events"),
    rollups: () => read("SELECT * FROM usage_rollups"),
    daily: () => read("SELECT * FROM usage_rollups_daily"),
    exec: async (sql) => void await read(sql),
    open: async (opts) => {
      const s = new SqliteStore(cfg, opts);
      await s.prepare();
      return s;
    },
  };
}

Deno.test("sqlite series: the daily rows answer what the hourly rows and the events do", async () => {
  const tmp = await tempDir();
  const path = `${tmp.dir}/usage.db`;
  const cfg = normalizeUsageStoreConfig({ backend: "sqlite", path }, { env: () => undefined });
  const read = (sql: string) => {
    const db = new DatabaseSync(path);
    try {
      return Promise.resolve(db.prepare(sql).all() as Row[]);
    } finally {
      db.close();
    }
  };
  await seriesScenario(sqliteDb(cfg, read));
  await tmp.cleanup();
});

Deno.test({
  name: "postgresql roll-ups equal the events after batches, a replay and a backfill",
  ignore: gate.ignore,
  async fn() {
    const fresh = await freshPgDatabase();
    const sql = postgres(fresh.dsn, { max: 1, onnotice: () => {} });
    try {
      const cfg = normalizeUsageStoreConfig({ backend: "postgresql", dsn: fresh.dsn }, {
        env: () => undefined,
      });
      assert(cfg.backend === "postgresql");
      await scenario(pgDb(sql, cfg));
    } finally {
      await sql.end({ timeout: 5 });
      await fresh.drop();
    }
  },
});

function pgDb(sql: postgres.Sql, cfg: ReturnType<typeof normalizeUsageStoreConfig>): Db {
  assert(cfg.backend === "postgresql");
  return {
    events: async () => [
      ...await sql.unsafe(
        `SELECT *, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
           AS created_at FROM usage_events`,
      ),
    ],
    rollups: async () => [...await sql.unsafe("SELECT * FROM usage_rollups")],
    daily: async () => [...await sql.unsafe("SELECT * FROM usage_rollups_daily")],
    exec: async (text) => void await sql.unsafe(text),
    open: async (opts) => {
      const s = new PostgresStore(cfg, opts);
      await s.prepare();
      return s;
    },
  };
}

Deno.test({
  name: "postgresql series: the daily rows answer what the hourly rows and the events do",
  ignore: gate.ignore,
  async fn() {
    const fresh = await freshPgDatabase();
    const sql = postgres(fresh.dsn, { max: 1, onnotice: () => {} });
    try {
      const cfg = normalizeUsageStoreConfig({ backend: "postgresql", dsn: fresh.dsn }, {
        env: () => undefined,
      });
      await seriesScenario(pgDb(sql, cfg));
    } finally {
      await sql.end({ timeout: 5 });
      await fresh.drop();
    }
  },
});

Deno.test("ledger.series writes what it holds first, then answers from the roll-ups", async () => {
  const tmp = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${tmp.dir}/spill.jsonl` });
  try {
    const cfg = normalizeUsageStoreConfig(
      { backend: "sqlite", path: `${tmp.dir}/u.db`, flush_interval_ms: 60_000 },
      { env: () => undefined },
    );
    await ledger.configure(cfg);
    for (const e of batch(6)) ledger.record(e);
    const answer = await ledger.series(
      parseSeriesQuery((n) =>
        ({ from: "2026-09-01T10:00:00Z", to: "2026-09-01T13:00:00Z", by: "key" })[n]
      ),
    );
    assertEquals(
      answer?.buckets.map((b) => b.groups.map((g) => [g.name, g.requests])),
      [[["k_a", 1], ["k_b", 1]], [["k_a", 1], ["k_b", 1]], [["k_a", 1], ["k_b", 1]]],
    );
    assertEquals(answer?.since_start, false);
  } finally {
    await ledger.close();
    await tmp.cleanup();
  }
});

Deno.test("a day-step series reads the daily table for whole days, the hourly one for the edges", () => {
  const q = (from: string, to: string, step = "day") =>
    parseSeriesQuery((n) => ({ from, to, by: "model", step })[n]);
  const whole = rollupSeriesSql(q("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z"), true, () => "?");
  assertEquals(whole.length, 1);
  assert(whole[0].text.includes("FROM usage_rollups_daily"));
  assertEquals(whole[0].args, ["2026-09-01", "2026-10-01"]);
  // Partial first and last days: their hours, in bucket order around the whole days.
  const edges = rollupSeriesSql(q("2026-09-01T07:00:00Z", "2026-10-01T05:00:00Z"), true, () => "?");
  assertEquals(edges.map((s) => s.text.match(/FROM (\w+)/)?.[1]), [
    "usage_rollups",
    "usage_rollups_daily",
    "usage_rollups",
  ]);
  assertEquals(edges.map((s) => s.args), [
    ["2026-09-01T07", "2026-09-02T00"],
    ["2026-09-02", "2026-10-01"],
    ["2026-10-01T00", "2026-10-01T05"],
  ]);
  // Hours, a range inside one day, or daily rows not built: the hourly table alone.
  for (
    const [query, daily] of [
      [q("2026-09-01T00:00:00Z", "2026-09-03T00:00:00Z", "hour"), true],
      [q("2026-09-01T03:00:00Z", "2026-09-01T20:00:00Z"), true],
      [q("2026-09-01T00:00:00Z", "2026-09-03T00:00:00Z"), false],
    ] as const
  ) {
    const s = rollupSeriesSql(query, daily, () => "?");
    assertEquals(s.length, 1);
    assert(!s[0].text.includes("usage_rollups_daily"));
  }
});
