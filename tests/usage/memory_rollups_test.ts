/**
 * jsonlog's in-memory roll-ups answer a day-step series as the daily rows of a SQLite ledger do
 * for the same events: their days are the sums of their hours.
 */
import { assertEquals } from "../_assert.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { SqliteStore } from "../../src/usage/sqlite.ts";
import { MemoryRollups } from "../../src/usage/memory_rollups.ts";
import { parseSeriesQuery, type SeriesAnswer } from "../../src/usage/rollup.ts";
import { event, hourlySeries } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

/** Events over four days, every few hours, three models and two keys. */
const events = Array.from({ length: 200 }, (_, i) =>
  event({
    created_at: new Date(Date.parse("2026-09-01T00:00:00Z") + (i * 37 % 96) * 3_600_000)
      .toISOString(),
    api_key_id: i % 2 ? "k_a" : "k_b",
    model: `m${i % 3}`,
    status_code: i % 9 ? 200 : 500,
    usage: { prompt_tokens: i, completion_tokens: 2 * i },
    cost_total_usd: (i % 4) * 0.5,
  }));

/** The buckets with their groups in name order (the SQL orders them; the memory fold does not). */
function sorted(a: SeriesAnswer) {
  return a.buckets.map((b) => ({
    start: b.start,
    groups: [...b.groups].sort((x, y) => x.name < y.name ? -1 : 1),
  }));
}

Deno.test("memory roll-ups: a day-step series equals SQLite's daily rows for the same events", async () => {
  const tmp = await tempDir();
  const cfg = normalizeUsageStoreConfig({ backend: "sqlite", path: `${tmp.dir}/u.db` }, {
    env: () => undefined,
  });
  if (cfg.backend !== "sqlite") throw new Error("sqlite config");
  const store = new SqliteStore(cfg);
  try {
    await store.prepare();
    await store.rollupsBuilt();
    await store.write(events);
    const memory = new MemoryRollups();
    memory.add(events);
    for (
      const [from, to] of [
        ["2026-09-01T00:00:00Z", "2026-09-05T00:00:00Z"],
        ["2026-09-01T05:00:00Z", "2026-09-04T19:00:00Z"],
      ]
    ) {
      for (const by of ["model", "key"]) {
        const q = parseSeriesQuery((n) =>
          ({ from, to, by, step: "day" } as Record<string, string>)[n]
        );
        assertEquals(sorted(memory.series(q, "jsonlog")), sorted(await store.series(q)));
      }
    }
  } finally {
    await store.close();
    await tmp.cleanup();
  }
});

Deno.test("memory roll-ups: past the row bound the oldest hours go, the newest stays", () => {
  const memory = new MemoryRollups(4);
  const at = (hour: number, model: string) =>
    event({ created_at: `2026-09-01T${String(hour).padStart(2, "0")}:10:00Z`, model });
  memory.add([at(1, "a"), at(1, "b"), at(2, "a"), at(3, "a"), at(3, "b")]);
  const q = hourlySeries("2026-09-01T00:00:00Z", "2026-09-01T05:00:00Z");
  const kept = memory.series(q, "jsonlog").buckets.filter((b) => b.groups.length > 0)
    .map((b) => b.start);
  assertEquals(kept, ["2026-09-01T02:00:00Z", "2026-09-01T03:00:00Z"]);
  // One hour alone over the bound is kept whole: the series never goes empty.
  const busy = new MemoryRollups(2);
  busy.add(["a", "b", "c"].map((m) => at(4, m)));
  const groups = busy.series(q, "jsonlog").buckets.flatMap((b) => b.groups);
  assertEquals(groups.length, 3);
});
