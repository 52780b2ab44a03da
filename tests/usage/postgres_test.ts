/**
 * PostgreSQL usage store against the local server, in a database made fresh for this run and
 * dropped at the end. Unreachable server: ignored with the reason printed, unless
 * SKEID_REQUIRE_PG=1 (CI), where these tests fail.
 */
import postgres from "postgres";
import {
  assert,
  assertEquals,
  assertMatch,
  assertNotIncludes,
  assertRejects,
  assertStringIncludes,
} from "../_assert.ts";
import { memoryLogger } from "../../src/log.ts";
import { normalizeUsageStoreConfig, type PostgresStoreConfig } from "../../src/usage/config.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import { PostgresStore } from "../../src/usage/postgres.ts";
import { sinceTimestamp } from "../../src/usage/report_since.ts";
import { POSTGRES_SCHEMA } from "../../src/usage/ledger_schema.ts";
import {
  assertOneEventReport,
  assertUsageSourceApart,
  event,
  ONE_EVENT,
  recordConcurrently,
  recordFilterFixture,
  TcpProxy,
} from "./helpers.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { tempDir } from "../_helpers/temp.ts";

const gate = await pgTestGate();

function pgConfig(raw: Record<string, unknown>): PostgresStoreConfig {
  const cfg = normalizeUsageStoreConfig(raw, { env: () => undefined });
  assert(cfg.backend === "postgresql");
  return cfg;
}

Deno.test("sinceTimestamp: ISO prefixes become full timestamps; other text does not", () => {
  assertEquals(sinceTimestamp("2026-09"), "2026-09-01T00:00:00Z");
  assertEquals(sinceTimestamp("2026-09-01T10:00"), "2026-09-01T10:00:00Z");
  assertEquals(sinceTimestamp("2026-09-01T10:00:00+02:00"), "2026-09-01T10:00:00+02:00");
  assertEquals(sinceTimestamp("2026-02-30"), undefined);
  assertEquals(sinceTimestamp("yesterday"), undefined);
});

Deno.test("postgresql: a password never appears in an error (unreachable server)", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close(); // nothing listens there now
  const store = new PostgresStore(pgConfig({
    dsn: `postgres://skeid:hunter2-pg-secret@127.0.0.1:${port}/x`,
    connect_timeout_s: 2,
  }));
  const err = await assertRejects(() => store.prepare());
  assertNotIncludes(err.message, "hunter2-pg-secret");
  assertStringIncludes(err.message, `postgresql skeid@127.0.0.1:${port}/x`);
  assertNotIncludes(store.description, "hunter2");
  await store.close();
});

Deno.test({
  name: "postgresql store (fresh database)",
  ignore: gate.ignore,
  async fn(t) {
    const db = await freshPgDatabase();
    const admin = postgres(db.dsn, { max: 1, onnotice: () => {} });
    const { dir, cleanup } = await tempDir();
    const count = async (where = "") =>
      Number((await admin.unsafe(`SELECT COUNT(*)::int AS n FROM usage_events ${where}`))[0].n);
    try {
      await t.step("an old table without requested_model or trace_id is migrated", async () => {
        await admin.unsafe(`CREATE TABLE usage_events (
          id BIGSERIAL PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
          request_id TEXT, api_format TEXT, endpoint TEXT, api_key_id TEXT, provider TEXT,
          engine TEXT, model TEXT, node_id TEXT, route_url TEXT, status_code INTEGER,
          ok BOOLEAN NOT NULL DEFAULT FALSE, duration_ms INTEGER,
          input_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0,
          total_tokens BIGINT NOT NULL DEFAULT 0, tool_calls BIGINT NOT NULL DEFAULT 0,
          cost_input_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
          cost_output_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
          cost_total_usd DOUBLE PRECISION NOT NULL DEFAULT 0, error_type TEXT, error_message TEXT)`);
        await admin.unsafe(`INSERT INTO usage_events (created_at, model, ok, input_tokens)
                            VALUES ('2026-01-01T00:00:00Z', 'legacy', TRUE, 5)`);
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s1.jsonl` });
        try {
          await ledger.configure(pgConfig({ dsn: db.dsn }));
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
          const cols = (await admin.unsafe(
            `SELECT column_name FROM information_schema.columns WHERE table_name = 'usage_events'`,
          )).map((c) => c.column_name);
          assertEquals(r.recent?.[1].usage_source, "reported", "an old row reads as reported");
          for (
            const c of [
              "requested_model",
              "cached_tokens",
              "event_id",
              "ttft_ms",
              "usage_source",
              "trace_id",
              "span_id",
            ]
          ) {
            assert(cols.includes(c), c);
          }
          const idx = (await admin.unsafe(
            `SELECT indexname FROM pg_indexes WHERE tablename = 'usage_events'`,
          )).map((i) => i.indexname);
          assert(idx.includes("usage_events_requested_model_idx"));
          assert(idx.includes("usage_events_event_id_idx"));
        } finally {
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("prepare is idempotent; record + report", async () => {
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s2.jsonl` });
        const again = new PostgresStore(pgConfig({ dsn: db.dsn }));
        try {
          await again.prepare(); // a second process migrating the same table
          await ledger.configure(pgConfig({ dsn: db.dsn, pool_size: 2 }));
          assertEquals(ledger.backend, "postgresql");
          const e = event({
            ...ONE_EVENT,
            created_at: "2026-09-01T10:20:30Z",
            content_bytes: 12,
            error_message: "nul\u0000byte",
          });
          ledger.record(e);
          const r = await ledger.report({});
          assertEquals([r.ok, r.enabled, r.backend, r.db_path], [true, true, "postgresql", ""]);
          assertOneEventReport(r);
          const row = r.recent?.[0];
          assertEquals(typeof row?.id, "number");
          assertEquals(row?.created_at, "2026-09-01T10:20:30Z");
          assertEquals([row?.requested_model, row?.ok, row?.event_id], ["fast", true, e.event_id]);
          // The same event again (a replay) adds nothing.
          await again.write([e]);
          assertEquals(await count(), 1);
        } finally {
          await again.close();
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("usage_source round-trips and is shown apart (ADR 0027)", async () => {
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s9.jsonl` });
        try {
          await ledger.configure(pgConfig({ dsn: db.dsn, pool_size: 1, bill_estimated: false }));
          await assertUsageSourceApart(ledger, false);
        } finally {
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("report filters, ordering, limit default and cap", async () => {
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s3.jsonl` });
        try {
          await ledger.configure(pgConfig({ dsn: db.dsn }));
          recordFilterFixture(ledger);
          const all = await ledger.report({});
          assertEquals(all.totals?.requests, 600);
          assertEquals(all.recent?.length, 20);
          assert(Number(all.recent?.[0].id) > Number(all.recent?.[1].id), "newest first");
          assertEquals((await ledger.report({ limit: 10_000 })).recent?.length, 500);
          assertEquals(all.by_key?.map((g) => g.api_key_id), ["k_big", "k_small"]);
          assertEquals((await ledger.report({ since: "2026-09-01" })).totals?.requests, 300);
          assertEquals(
            (await ledger.report({ since: "2026-09-01T00:00:00Z" })).totals?.requests,
            300,
          );
          assertEquals((await ledger.report({ model: "m1" })).totals?.requests, 300);
          const big = await ledger.report({ api_key_id: "k_big", model: "m2" });
          assertEquals(big.totals?.requests, 100);
        } finally {
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("1,000 events recorded concurrently → exactly 1,000 rows", async () => {
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s4.jsonl` });
        try {
          await ledger.configure(pgConfig({ dsn: db.dsn }));
          await recordConcurrently(ledger, 1000);
          assertEquals((await ledger.flush()).ok, true);
          assertEquals(await count(), 1000);
          assertEquals(
            Number((await admin`SELECT COUNT(DISTINCT event_id)::int AS n FROM usage_events`)[0].n),
            1000,
          );
        } finally {
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("write-behind: the events of one interval are one transaction", async () => {
        const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/s5.jsonl` });
        try {
          await ledger.configure(pgConfig({ dsn: db.dsn, flush_interval_ms: 3_600_000 }));
          for (let i = 0; i < 40; i++) ledger.record(event({ request_id: `wb${i}` }));
          assertEquals(await count(), 0, "held until the interval ends");
          await ledger.close(); // shutdown flushes
          assertEquals(await count(), 40);
          const tx = await admin`SELECT COUNT(DISTINCT xmin::text)::int AS n FROM usage_events`;
          assertEquals(Number(tx[0].n), 1);
        } finally {
          await ledger.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("an outage mid-run loses nothing and duplicates nothing", async () => {
        const url = new URL(db.dsn);
        const proxy = new TcpProxy({ hostname: url.hostname, port: Number(url.port || 5432) });
        url.host = `127.0.0.1:${proxy.port}`;
        const log = memoryLogger();
        const ledger = new UsageLedger({
          logger: log,
          spillPath: `${dir}/s6.jsonl`,
          retry: { baseMs: 3_600_000, maxMs: 3_600_000 }, // this test drives the retries
          writeTimeoutMs: 5_000,
        });
        try {
          await ledger.configure(pgConfig({ dsn: url.toString(), connect_timeout_s: 2 }));
          for (let i = 0; i < 100; i++) ledger.record(event({ request_id: `o${i}` }));
          assertEquals((await ledger.flush()).ok, true);

          proxy.down();
          for (let i = 100; i < 200; i++) ledger.record(event({ request_id: `o${i}` }));
          assertEquals((await ledger.flush()).ok, false, "the store is down");
          for (let i = 200; i < 250; i++) ledger.record(event({ request_id: `o${i}` }));
          assertEquals((await ledger.flush()).ok, false, "still down");
          assertEquals(await count(), 100);

          proxy.up();
          assertEquals((await ledger.flush()).ok, true, "back: spill replayed");
          assertEquals(await count(), 250);
          const order = (await admin`SELECT request_id FROM usage_events ORDER BY id`).map((r) =>
            r.request_id
          );
          assertEquals(order, Array.from({ length: 250 }, (_, i) => `o${i}`));
          assertEquals(log.lines.filter((l) => l.event === "usage_lost").length, 0);
          assertEquals(log.lines.filter((l) => l.event === "usage_spill").length, 1);
        } finally {
          await ledger.close();
          await proxy.close();
        }
        await admin.unsafe("TRUNCATE usage_events, usage_rollups, usage_rollups_daily");
      });

      await t.step("schema_file runs instead of the shipped schema; auto_migrate off", async () => {
        await admin.unsafe("DROP TABLE usage_events");
        const off = new PostgresStore(pgConfig({ dsn: db.dsn, auto_migrate: false }));
        const err = await assertRejects(() => off.prepare());
        assertMatch(err.message, /table usage_events does not exist/);
        await Deno.writeTextFile(`${dir}/schema.sql`, POSTGRES_SCHEMA);
        const withFile = new PostgresStore(
          pgConfig({ dsn: db.dsn, schema_file: `${dir}/schema.sql` }),
        );
        try {
          await withFile.prepare();
          await withFile.write([event(), event()]);
          assertEquals(await count(), 2);
        } finally {
          await withFile.close();
        }
      });
    } finally {
      await admin.end({ timeout: 5 });
      await db.drop();
      await cleanup();
    }
  },
});
