/**
 * `deno task bench:admin`: the console's data calls on a large ledger. Writes N usage events
 * (default 1,000,000, spread over 30 days, 100 customer keys, 8 models, 4 nodes) into a fresh
 * SQLite file — and into a fresh PostgreSQL database when one answers — opens the store (its
 * roll-ups built once), then times, each `--runs` times: the Requests page's first screen
 * (`events`, limit 50), a page half a million rows deep, a page filtered by one customer key,
 * and the Usage page's 30-day series by served model (whole days, and from 13:00 to 13:00). Prints a Markdown table of p50/p95 (ms)
 * and the first page's query plan.
 *
 * Usage: deno task bench:admin [--events N] [--runs R] [--no-pg]
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { SqliteStore } from "../../src/usage/sqlite.ts";
import { PostgresStore } from "../../src/usage/postgres.ts";
import type { UsageStore } from "../../src/usage/types.ts";
import { encodeCursor, parseEventsQuery } from "../../src/usage/events_page.ts";
import { parseSeriesQuery, rollupSeriesSql } from "../../src/usage/rollup.ts";

const args = Deno.args;
const flag = (name: string, dflt: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const EVENTS = flag("--events", 1_000_000);
const RUNS = flag("--runs", 50);
const WITH_PG = !args.includes("--no-pg");
const DAY_S = 86_400;
const END_S = Math.floor(Date.parse("2026-09-30T00:00:00Z") / 1000);
const START_S = END_S - 30 * DAY_S;

/** The columns the bench fills, as SQL over a row number `i` (the same in both dialects). */
function selectList(dialect: "sqlite" | "postgresql"): string {
  const ts = dialect === "sqlite"
    ? `strftime('%Y-%m-%dT%H:%M:%SZ', ${START_S} + (i * ${30 * DAY_S} / ${EVENTS}), 'unixepoch')`
    : `to_timestamp(${START_S} + (i::bigint * ${30 * DAY_S} / ${EVENTS}))`;
  const mod = (n: number) => dialect === "sqlite" ? `(i % ${n})` : `(i % ${n})`;
  const okTrue = dialect === "sqlite" ? "1" : "TRUE";
  const okFalse = dialect === "sqlite" ? "0" : "FALSE";
  return [
    ts,
    `'req_' || i`,
    `'openai'`,
    `'/v1/chat/completions'`,
    `'k_' || ${mod(100)}`,
    `'skeid'`,
    `'vllm'`,
    `'model-' || ${mod(8)}`,
    `'model-' || ${mod(8)}`,
    `'node-' || ${mod(4)}`,
    `'http://10.0.0.1:8000/v1'`,
    `CASE WHEN ${mod(50)} = 0 THEN 500 ELSE 200 END`,
    `CASE WHEN ${mod(50)} = 0 THEN ${okFalse} ELSE ${okTrue} END`,
    `100 + ${mod(900)}`,
    `${mod(2000)}`,
    `${mod(500)}`,
    `${mod(2000)} + ${mod(500)}`,
    `0`,
    `0.000001 * ${mod(2000)}`,
    `0.000002 * ${mod(500)}`,
    `0.000001 * ${mod(2000)} + 0.000002 * ${mod(500)}`,
    `CASE WHEN ${mod(50)} = 0 THEN 'upstream_error' ELSE '' END`,
    `''`,
    `${mod(100)}`,
    `'ev-' || i`,
  ].join(", ");
}

const COLUMNS = "created_at, request_id, api_format, endpoint, api_key_id, provider, engine, " +
  "model, requested_model, node_id, route_url, status_code, ok, duration_ms, input_tokens, " +
  "output_tokens, total_tokens, tool_calls, cost_input_usd, cost_output_usd, cost_total_usd, " +
  "error_type, error_message, cached_tokens, event_id";

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}

async function time(fn: () => Promise<unknown>): Promise<{ p50: number; p95: number }> {
  await fn(); // warm
  const t: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  t.sort((a, b) => a - b);
  return { p50: pct(t, 0.5), p95: pct(t, 0.95) };
}

const q = (params: Record<string, string>) =>
  parseEventsQuery((n) => params[n] === undefined ? undefined : params[n]);

/** What the console asks for "30 days" at 13:xx: partial first and last days. */
const edges = parseSeriesQuery((n) =>
  ({ from: "2026-08-30T13:00:00Z", to: "2026-09-29T13:00:00Z", by: "model", step: "day" })[
    n as "from"
  ]
);

async function measure(store: UsageStore, deepTs: string, deepId: number) {
  const series = parseSeriesQuery((n) =>
    ({ from: "2026-08-31T00:00:00Z", to: "2026-09-30T00:00:00Z", by: "model", step: "day" })[
      n as "from"
    ]
  );
  const deep = encodeCursor({ ts: deepTs, id: deepId });
  return {
    first: await time(() => store.events!(q({ limit: "50" }))),
    deep: await time(() => store.events!(q({ limit: "50", before: deep }))),
    key: await time(() => store.events!(q({ limit: "50", api_key_id: "k_7" }))),
    series: await time(() => store.series!(series)),
    edges: await time(() => store.series!(edges)),
  };
}

const rows: string[] = [];
const dir = await Deno.makeTempDir({ prefix: "skeid-bench-admin-" });
try {
  // ---- SQLite ----
  const path = `${dir}/usage.db`;
  const env = { env: () => undefined };
  const cfg = normalizeUsageStoreConfig({ backend: "sqlite", path }, env);
  if (cfg.backend !== "sqlite") throw new Error("sqlite config");
  let store = new SqliteStore(cfg);
  await store.prepare(); // the schema
  await store.close();
  let t0 = performance.now();
  const db = new DatabaseSync(path);
  db.exec(
    `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${EVENTS}) ` +
      `INSERT INTO usage_events (${COLUMNS}) SELECT ${selectList("sqlite")} FROM s`,
  );
  db.exec(
    "DELETE FROM usage_rollup_state; DELETE FROM usage_rollups; DELETE FROM usage_rollups_daily",
  );
  const mid = db.prepare(
    `SELECT id, created_at FROM usage_events ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ${
      Math.floor(EVENTS / 2)
    }`,
  ).get() as { id: number; created_at: string };
  const plan = db.prepare(
    "EXPLAIN QUERY PLAN SELECT *, created_at AS cursor_ts FROM usage_events " +
      "ORDER BY usage_events.created_at DESC, usage_events.id DESC LIMIT 51",
  ).all().map((r) => String((r as { detail: string }).detail)).join("; ");
  db.close();
  const insertS = (performance.now() - t0) / 1000;
  t0 = performance.now();
  store = new SqliteStore(cfg);
  await store.prepare();
  await store.rollupsBuilt();
  const buildS = (performance.now() - t0) / 1000;
  const s = await measure(store, mid.created_at, mid.id);
  await store.close();
  const line = (name: string, m: Awaited<ReturnType<typeof measure>>) =>
    `| ${name} | ${m.first.p50.toFixed(2)} / ${m.first.p95.toFixed(2)} | ${
      m.deep.p50.toFixed(2)
    } / ${m.deep.p95.toFixed(2)} | ${m.key.p50.toFixed(2)} / ${m.key.p95.toFixed(2)} | ${
      m.series.p50.toFixed(2)
    } / ${m.series.p95.toFixed(2)} | ${m.edges.p50.toFixed(2)} / ${m.edges.p95.toFixed(2)} |`;
  rows.push(line(`SQLite (insert ${insertS.toFixed(1)} s, roll-ups ${buildS.toFixed(1)} s)`, s));
  console.error(`sqlite first-page plan: ${plan}`);

  // ---- PostgreSQL ----
  if (WITH_PG) {
    const admin = Deno.env.get("SKEID_TEST_PG_DSN") ??
      "postgres://postgres@127.0.0.1:5432/postgres";
    const name = `skeid_bench_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const a = postgres(admin, { max: 1, onnotice: () => {}, connect_timeout: 3 });
    let ok = false;
    try {
      await a.unsafe(`CREATE DATABASE ${name}`);
      ok = true;
    } catch (err) {
      console.error(`PostgreSQL skipped: ${err instanceof Error ? err.message : err}`);
    } finally {
      await a.end({ timeout: 5 });
    }
    if (ok) {
      const url = new URL(admin);
      url.pathname = `/${name}`;
      try {
        const pcfg = normalizeUsageStoreConfig({ backend: "postgresql", dsn: url.toString() }, env);
        if (pcfg.backend !== "postgresql") throw new Error("pg config");
        let pg = new PostgresStore(pcfg);
        await pg.prepare();
        await pg.close();
        const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
        t0 = performance.now();
        await sql.unsafe(
          `INSERT INTO usage_events (${COLUMNS}) SELECT ${
            selectList("postgresql")
          } FROM generate_series(1, ${EVENTS}) AS i`,
        );
        await sql.unsafe("DELETE FROM usage_rollup_state");
        await sql.unsafe("DELETE FROM usage_rollups");
        await sql.unsafe("DELETE FROM usage_rollups_daily");
        await sql.unsafe("ANALYZE usage_events");
        const [m] = await sql.unsafe(
          `SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS ts ` +
            `FROM usage_events ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ${
              Math.floor(EVENTS / 2)
            }`,
        );
        await sql.end({ timeout: 5 });
        const pInsert = (performance.now() - t0) / 1000;
        t0 = performance.now();
        pg = new PostgresStore(pcfg);
        await pg.prepare();
        await pg.rollupsBuilt();
        const pBuild = (performance.now() - t0) / 1000;
        const r = await measure(pg, String(m.ts), Number(m.id));
        await pg.close();
        const ps = postgres(url.toString(), { max: 1, onnotice: () => {} });
        for (const e of rollupSeriesSql(edges, true, (n) => `$${n}`)) {
          const plan = await ps.unsafe(`EXPLAIN (ANALYZE) ${e.text}`, e.args);
          console.error(
            `postgresql edge-days series plan:\n${
              plan.map((p) => String(p["QUERY PLAN"])).join("\n")
            }`,
          );
        }
        await ps.end({ timeout: 5 });
        rows.push(
          line(`PostgreSQL (insert ${pInsert.toFixed(1)} s, roll-ups ${pBuild.toFixed(1)} s)`, r),
        );
      } finally {
        const d = postgres(admin, { max: 1, onnotice: () => {} });
        await d.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await d.end({ timeout: 5 });
      }
    }
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}

console.log(`${EVENTS} usage events over 30 days; ${RUNS} runs each; ms p50 / p95 (store call)\n`);
console.log(
  "| store | Requests first screen (50) | a page half the ledger deep | filtered by one key | Usage 30 days by model | the same, from 13:00 to 13:00 |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const r of rows) console.log(r);
