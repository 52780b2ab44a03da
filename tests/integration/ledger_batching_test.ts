/**
 * Write-behind under load: a ledger run writes what was queued when it began; events recorded
 * while it writes wait for their own trigger (a full batch, the interval, a flush) instead of
 * one small write after another.
 */
import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { memoryLogger } from "../../src/log.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { buildUsageEvent } from "../../src/usage/event.ts";
import { UsageLedger } from "../../src/usage/ledger.ts";
import type { UsageEvent, UsageReport, UsageStore } from "../../src/usage/types.ts";

/** A store whose first write waits on a gate; it records batch sizes. */
class GatedStore implements UsageStore {
  readonly backend = "jsonlog" as const;
  readonly description = "gated test store";
  readonly batches: number[] = [];
  readonly gate = Promise.withResolvers<void>();
  readonly writing = Promise.withResolvers<void>();
  prepare(): Promise<void> {
    return Promise.resolve();
  }
  async write(events: UsageEvent[]): Promise<void> {
    if (this.batches.length === 0) {
      this.writing.resolve();
      await this.gate.promise;
    }
    this.batches.push(events.length);
  }
  report(): Promise<UsageReport> {
    return Promise.resolve({ ok: true, enabled: true, backend: "jsonlog" });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const events = (n: number) =>
  Array.from({ length: n }, (_, i) => buildUsageEvent({ request_id: `r${i}`, model: "m" }));

Deno.test("ledger write-behind: events recorded during a write wait for their trigger", async () => {
  const dir = await Deno.makeTempDir({ prefix: "skeid-ledger-" });
  const store = new GatedStore();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    const cfg = normalizeUsageStoreConfig(
      { backend: "jsonlog", path: `${dir}/unused/`, flush_interval_ms: 3_600_000 },
      { env: () => undefined },
    );
    await ledger.installStore(store, cfg);
    // 600 events: a full batch (500) starts a run at once; it owes these 600.
    for (const e of events(600)) ledger.record(e);
    await store.writing.promise; // the first write is in progress
    for (const e of events(7)) ledger.record(e); // newcomers during the write
    store.gate.resolve();
    // The run writes what it owed (500 + 100) and stops; the 7 would wait for the hour-long
    // interval. The flush (after the run: one writer at a time) writes them as their own batch.
    await ledger.flush();
    deepStrictEqual(store.batches, [500, 100, 7]);
    strictEqual(ledger.queued, 0);
  } finally {
    await ledger.close();
    await Deno.remove(dir, { recursive: true });
  }
});
