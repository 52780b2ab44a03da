/**
 * `periodTotals(since)` on every store: what budgets read as spent at start and on refresh.
 * PostgreSQL runs against the local server in a fresh database (ignored when unreachable,
 * unless SKEID_REQUIRE_PG=1).
 */
import { assertEquals } from "../_assert.ts";
import { memoryLogger } from "../../src/log.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import type { KeyPeriodTotals } from "../../src/usage/types.ts";
import { event } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";

const gate = await pgTestGate();
const A = "k_" + "a".repeat(40);
const B = "k_" + "b".repeat(40);

/** Events before and after the start of December; the same for every store. */
const EVENTS = [
  {
    created_at: "2026-11-30T23:59:59Z",
    api_key_id: A,
    cost_total_usd: 5,
    input_tokens: 1000,
    output_tokens: 1000,
  },
  {
    created_at: "2026-12-01T00:00:00Z",
    api_key_id: A,
    cost_total_usd: 0.25,
    input_tokens: 100,
    output_tokens: 20,
  },
  {
    created_at: "2026-12-03T10:00:00Z",
    api_key_id: A,
    cost_total_usd: 0.5,
    input_tokens: 10,
    output_tokens: 5,
  },
  {
    created_at: "2026-12-02T08:00:00Z",
    api_key_id: B,
    cost_total_usd: 1,
    input_tokens: 7,
    output_tokens: 3,
  },
];

function plain(totals: Map<string, KeyPeriodTotals> | undefined): Record<string, KeyPeriodTotals> {
  return Object.fromEntries([...(totals ?? new Map())].sort(([a], [b]) => a.localeCompare(b)));
}

async function checkStore(raw: Record<string, unknown>, dir: string): Promise<void> {
  const cfg = normalizeUsageStoreConfig(raw, { env: () => undefined });
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(cfg);
    for (const e of EVENTS) ledger.record(event(e));
    // No explicit flush: periodTotals writes what the ledger holds first.
    assertEquals(plain(await ledger.periodTotals("2026-12-01T00:00:00Z")), {
      [A]: { usd: 0.75, tokens: 135 },
      [B]: { usd: 1, tokens: 10 },
    }, `${cfg.backend}: this month`);
    assertEquals(plain(await ledger.periodTotals("1970-01-01T00:00:00Z")), {
      [A]: { usd: 5.75, tokens: 2135 },
      [B]: { usd: 1, tokens: 10 },
    }, `${cfg.backend}: total`);
    assertEquals(plain(await ledger.periodTotals("2027-01-01T00:00:00Z")), {}, "nothing yet");
  } finally {
    await ledger.close();
  }
}

Deno.test("periodTotals: jsonlog file, jsonlog dir and sqlite sum per key since a moment", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await checkStore({ backend: "jsonlog", mode: "file", path: `${dir}/u.jsonl` }, dir);
    await checkStore({ backend: "jsonlog", mode: "dir", path: `${dir}/events` }, dir);
    await checkStore({ backend: "sqlite", path: `${dir}/u.sqlite` }, dir);
  } finally {
    await cleanup();
  }
});

Deno.test({
  name: "periodTotals: postgresql sums per key since a moment",
  ignore: gate.ignore,
  async fn() {
    const db = await freshPgDatabase();
    const { dir, cleanup } = await tempDir();
    try {
      await checkStore({ backend: "postgresql", dsn: db.dsn }, dir);
    } finally {
      await cleanup();
      await db.drop();
    }
  },
});

Deno.test("periodTotals: no store configured → undefined", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    assertEquals(await ledger.periodTotals("2026-12-01T00:00:00Z"), undefined);
  } finally {
    await ledger.close();
    await cleanup();
  }
});
