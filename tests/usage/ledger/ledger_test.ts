import { DatabaseSync } from "node:sqlite";
import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertStringIncludes,
} from "../../_assert.ts";
import { memoryLogger } from "../../../src/log.ts";
import {
  type NormalizedUsageStoreConfig,
  normalizeUsageStoreConfig,
} from "../../../src/usage/config.ts";
import { UsageLedger } from "../../../src/usage/ledger.ts";
import { SqliteStore } from "../../../src/usage/sqlite.ts";
import { JsonlogStore } from "../../../src/usage/jsonlog.ts";
import type { ReportFilters, UsageEvent } from "../../../src/usage/types.ts";
import {
  event,
  FlakyStore,
  hourlySeries,
  MemoryStore,
  recordConcurrently,
  Signal,
} from "../helpers.ts";
import { exists, tempDir } from "../../_helpers/temp.ts";

const env = { env: () => undefined };

/** A config for a store the test wraps itself (only the ledger settings matter). */
function cfg(dir: string, extra: Record<string, unknown> = {}): NormalizedUsageStoreConfig {
  return normalizeUsageStoreConfig({ backend: "jsonlog", path: `${dir}/unused/`, ...extra }, env);
}

function events(n: number, from = 0): UsageEvent[] {
  return Array.from({ length: n }, (_, i) => event({ request_id: `r${from + i}` }));
}

function ids(list: readonly UsageEvent[]): string[] {
  return list.map((e) => e.request_id);
}

Deno.test("ledger without a store: drops events with one warning; report not configured", async () => {
  const log = memoryLogger();
  const ledger = new UsageLedger({ logger: log });
  for (const e of events(3)) ledger.record(e);
  assertEquals([ledger.enabled, ledger.backend], [false, undefined]);
  const warned = log.lines.filter((l) => l.event === "usage_store_not_configured");
  assertEquals(warned.length, 1);
  assertStringIncludes(String(warned[0].error), "usage_store not configured");
  assertEquals(await ledger.report({}), {
    ok: false,
    enabled: false,
    error: "usage_store not configured",
  });
  assertEquals(await ledger.flush(), { ok: true, written: 0 });
  await ledger.close();
});

Deno.test("ledger: record never writes on the caller's turn; a burst is one write", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.installStore(store, cfg(dir));
    for (const e of events(50)) ledger.record(e);
    assertEquals(store.attempts, 0, "nothing written during record()");
    await store.signal.until(() => store.batches.length > 0);
    assertEquals(store.batches, [50]);
    assertEquals(await ledger.flush(), { ok: true, written: 0 });
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger without write-behind: the write waits for the caller's task to end, microtasks included", async () => {
  // A request records its usage event while its answer is being made; a write started in that
  // task's microtasks would put the store's file operations ahead of the answer's write.
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.installStore(store, cfg(dir, { flush_interval_ms: 0 }));
    // The first run also recovers what a previous process left; from the second on the
    // writer goes straight to the store.
    ledger.record(event({ request_id: "r0" }));
    assertEquals((await ledger.flush()).ok, true);
    assertEquals(store.batches, [1]);
    ledger.record(event({ request_id: "r1" }));
    for (let i = 0; i < 50; i++) await Promise.resolve();
    assertEquals(store.attempts, 1, "no write within the caller's microtasks");
    await store.signal.until(() => store.batches.length === 2);
    assertEquals(store.batches, [1, 1]);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger write-behind: N events in an interval → one transaction", async () => {
  const { dir, cleanup } = await tempDir();
  const sqlite = normalizeUsageStoreConfig(
    { path: `${dir}/u.sqlite`, flush_interval_ms: 30 },
    env,
  );
  assert(sqlite.backend === "sqlite");
  const inner = new SqliteStore(sqlite);
  await inner.prepare();
  const store = new FlakyStore(inner);
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.installStore(store, sqlite);
    for (const e of events(30)) ledger.record(e);
    await Promise.resolve();
    assertEquals(store.attempts, 0, "held until the interval ends");
    await store.signal.until(() => store.batches.length > 0, 5000, "the interval write");
    assertEquals(store.batches, [30]);
    const r = await ledger.report({});
    assertEquals(r.totals?.requests, 30);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger write-behind: a full batch is written before the interval ends", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  const ledger = new UsageLedger({
    logger: memoryLogger(),
    spillPath: `${dir}/spill.jsonl`,
    maxBatch: 10,
  });
  try {
    await ledger.installStore(store, cfg(dir, { flush_interval_ms: 3_600_000 }));
    for (const e of events(25)) ledger.record(e);
    await store.signal.until(() => (store.inner as MemoryStore).rows.length === 25);
    assertEquals(store.batches, [10, 10, 5]);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: shutdown writes what write-behind still holds and closes the store", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.installStore(store, cfg(dir, { flush_interval_ms: 3_600_000 }));
    const sent = events(5);
    for (const e of sent) ledger.record(e);
    assertEquals(store.attempts, 0);
    await ledger.close(); // the hour-long flush timer must not outlive this (sanitizer)
    assertEquals(ids((store.inner as MemoryStore).rows), ids(sent));
    assert(store.closed);
  } finally {
    await cleanup();
  }
});

Deno.test("ledger: a failing store spills; once healthy the spill replays in order, no duplicates", async () => {
  const { dir, cleanup } = await tempDir();
  const log = memoryLogger();
  const store = new FlakyStore();
  const rows = (store.inner as MemoryStore).rows;
  const spillPath = `${dir}/spill.jsonl`;
  const ledger = new UsageLedger({
    logger: log,
    spillPath,
    retry: { baseMs: 60_000, maxMs: 60_000 },
  });
  try {
    await ledger.installStore(store, cfg(dir));
    const sent = events(15);
    for (const e of sent.slice(0, 5)) ledger.record(e);
    assertEquals((await ledger.flush()).ok, true);
    assertEquals(rows.length, 5);

    store.failing = true;
    for (const e of sent.slice(5, 10)) ledger.record(e); // the batch that fails
    await store.signal.until(() => !ledger.healthy, 5000, "the failed write");
    for (const e of sent.slice(10)) ledger.record(e); // arrive while unhealthy
    const held = await ledger.flush();
    assertEquals(held.ok, false);
    assert(await exists(`${spillPath}.replay`), "failed batch in the replay file");
    assert(await exists(spillPath), "later events in the spill file");
    const spilled = (await Deno.readTextFile(spillPath)).trim().split("\n").map((l) =>
      JSON.parse(l).request_id
    );
    assertEquals(spilled, ids(sent.slice(10)));
    assertEquals(rows.length, 5);

    store.failing = false;
    const done = await ledger.flush();
    assertEquals(done, { ok: true, written: 10 });
    assertEquals(ids(rows), ids(sent), "every event once, in order");
    assertEquals(new Set(rows.map((e) => e.event_id)).size, 15);
    assert(!await exists(spillPath) || (await Deno.readTextFile(spillPath)) === "");
    assert(!await exists(`${spillPath}.replay`));

    const spillLines = log.lines.filter((l) => l.event === "usage_spill");
    assertEquals(spillLines.length, 1, "spill path logged once");
    assertEquals(spillLines[0].path, spillPath);
    assertEquals(log.lines.filter((l) => l.event === "usage_lost").length, 0);
    assertEquals(log.lines.filter((l) => l.event === "usage_store_recovered").length, 1);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: the retry timer replays the spill by itself once the store is back", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  const rows = (store.inner as MemoryStore).rows;
  const ledger = new UsageLedger({
    logger: memoryLogger(),
    spillPath: `${dir}/spill.jsonl`,
    retry: { baseMs: 2, maxMs: 8 },
  });
  try {
    await ledger.installStore(store, cfg(dir));
    store.failing = true;
    const sent = events(20);
    for (const e of sent) ledger.record(e);
    await store.signal.until(() => store.attempts >= 3, 5000, "three failed attempts");
    assertEquals(rows.length, 0);
    store.failing = false;
    await store.signal.until(() => rows.length === 20, 5000, "the replay");
    assertEquals(ids(rows), ids(sent));
    assertEquals(await ledger.flush(), { ok: true, written: 0 }, "nothing left to write");
    assert(ledger.healthy);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: usage_lost only for events that could not even be spilled", async () => {
  const { dir, cleanup } = await tempDir();
  const log = memoryLogger();
  await Deno.writeTextFile(`${dir}/plain`, "not a directory");
  const lost: string[] = [];
  const store = new FlakyStore();
  const ledger = new UsageLedger({
    logger: log,
    spillPath: `${dir}/plain/spill.jsonl`, // cannot be created
    retry: { baseMs: 60_000, maxMs: 60_000 },
    onLost: (e) => lost.push(e.request_id),
  });
  try {
    await ledger.installStore(store, cfg(dir));
    store.failing = true;
    const sent = events(2);
    for (const e of sent) ledger.record(e);
    await ledger.flush();
    const lines = log.lines.filter((l) => l.event === "usage_lost");
    assertEquals(lines.map((l) => l.request_id), ids(sent));
    assertEquals(lines[0].backend, "jsonlog");
    assertEquals(lost, ids(sent));
    assertEquals(lines[0].level, "error");
  } finally {
    await ledger.close();
    await cleanup();
  }
});

/** A ledger that gives up on a write after 20 ms and retries it only when flushed. */
function timingOutLedger(dir: string): UsageLedger {
  return new UsageLedger({
    logger: memoryLogger(),
    spillPath: `${dir}/spill.jsonl`,
    writeTimeoutMs: 20,
    retry: { baseMs: 60_000, maxMs: 60_000 },
  });
}

Deno.test("ledger: a write that hangs times out and is spilled, then replayed", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new MemoryStore();
  let hang = true;
  const signal = new Signal();
  const hanging = Object.assign(Object.create(store), {
    write: (batch: UsageEvent[]) => {
      signal.notify();
      return hang ? new Promise<void>(() => {}) : store.write(batch);
    },
  }) as MemoryStore;
  const ledger = timingOutLedger(dir);
  try {
    await ledger.installStore(hanging, cfg(dir));
    ledger.record(event({ request_id: "slow" }));
    await signal.until(() => !ledger.healthy, 5000, "the timeout");
    assertEquals((await ledger.flush()).ok, false, "still hanging: times out again");
    assert(await exists(`${dir}/spill.jsonl.replay`));
    hang = false;
    assertEquals((await ledger.flush()).ok, true);
    assertEquals(ids(store.rows), ["slow"]);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger jsonlog: a write that completes after its timeout counts once in the series", async () => {
  const { dir, cleanup } = await tempDir();
  const file = normalizeUsageStoreConfig({ backend: "jsonlog", path: `${dir}/u.jsonl` }, env);
  if (file.backend !== "jsonlog") throw new Error("jsonlog config");
  const store = new JsonlogStore(file);
  await store.prepare();
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let late: Promise<void> | undefined;
  const signal = new Signal();
  // The real store, its first write held past the ledger's timeout and then let through.
  const slow = new Proxy(store, {
    get(target, prop) {
      if (prop === "write") {
        return (batch: UsageEvent[]) => {
          signal.notify();
          if (late !== undefined) return target.write(batch);
          late = gate.then(() => target.write(batch));
          return late;
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  const ledger = timingOutLedger(dir);
  try {
    await ledger.installStore(slow, file);
    const e = event({ request_id: "late", created_at: "2026-09-01T10:00:00Z" });
    ledger.record(e);
    await signal.until(() => !ledger.healthy, 5000, "the timeout");
    open();
    await late;
    assertEquals((await ledger.flush()).ok, true);
    const text = await Deno.readTextFile(`${dir}/u.jsonl`);
    assertEquals(text.trim().split("\n").length, 2, "the late write and the replay both appended");
    const q = hourlySeries("2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z");
    const series = await store.series(q);
    const requests = series.buckets.flatMap((b) => b.groups).reduce((n, g) => n + g.requests, 0);
    assertEquals(requests, 1);
    assertEquals((await store.events({ limit: 10, filters: {} })).events.length, 1);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: a spill left by an earlier process is replayed before new events", async () => {
  const { dir, cleanup } = await tempDir();
  const spillPath = `${dir}/spill.jsonl`;
  const older = events(2, 0);
  const old = events(3, 2);
  await Deno.writeTextFile(`${spillPath}.replay`, older.map((e) => JSON.stringify(e)).join("\n"));
  await Deno.writeTextFile(spillPath, old.map((e) => JSON.stringify(e) + "\n").join("") + "{torn");
  const store = new MemoryStore();
  const log = memoryLogger();
  const ledger = new UsageLedger({ logger: log, spillPath });
  try {
    await ledger.installStore(store, cfg(dir));
    const fresh = events(2, 5);
    for (const e of fresh) ledger.record(e);
    await ledger.flush();
    assertEquals(ids(store.rows), ids([...older, ...old, ...fresh]));
    assert(!await exists(`${spillPath}.replay`));
    assertEquals(log.lines.filter((l) => l.event === "usage_spill_corrupt").length, 1);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: beyond the queue bound events go to the spill file, order kept", async () => {
  const { dir, cleanup } = await tempDir();
  const log = memoryLogger();
  const store = new MemoryStore();
  const ledger = new UsageLedger({
    logger: log,
    spillPath: `${dir}/spill.jsonl`,
    maxQueue: 5,
  });
  try {
    await ledger.installStore(store, cfg(dir, { flush_interval_ms: 3_600_000 }));
    const sent = events(12);
    for (const e of sent) ledger.record(e);
    assertEquals(ledger.queued, 5);
    assertEquals((await ledger.flush()).ok, true);
    assertEquals(ids(store.rows), ids(sent));
    assertEquals(log.lines.filter((l) => l.event === "usage_queue_full").length, 1);
    for (const e of events(3, 12)) ledger.record(e); // back to the queue
    assertEquals(ledger.queued, 3);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: close while backing off spills what is held and leaves no timer", async () => {
  const { dir, cleanup } = await tempDir();
  const store = new FlakyStore();
  store.failing = true;
  const ledger = new UsageLedger({
    logger: memoryLogger(),
    spillPath: `${dir}/spill.jsonl`,
    retry: { baseMs: 3_600_000, maxMs: 3_600_000 },
  });
  try {
    await ledger.installStore(store, cfg(dir));
    ledger.record(event({ request_id: "kept" }));
    await store.signal.until(() => !ledger.healthy);
    ledger.record(event({ request_id: "kept2" }));
    await ledger.close(); // the hour-long retry timer must be gone (sanitizer)
    const text = (await Deno.readTextFile(`${dir}/spill.jsonl.replay`)) +
      (await Deno.readTextFile(`${dir}/spill.jsonl`).catch(() => ""));
    assertEquals(text.trim().split("\n").map((l) => JSON.parse(l).request_id), ["kept", "kept2"]);

    // The next process replays it.
    const next = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
    const mem = new MemoryStore();
    await next.installStore(mem, cfg(dir));
    await next.flush();
    assertEquals(ids(mem.rows), ["kept", "kept2"]);
    await next.close();
  } finally {
    await cleanup();
  }
});

Deno.test("ledger: store swap — a store that fails to prepare leaves the old one working", async () => {
  const { dir, cleanup } = await tempDir();
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  const count = (p: string) => {
    const db = new DatabaseSync(p, { readOnly: true });
    try {
      return Number(db.prepare("SELECT COUNT(*) AS n FROM usage_events").get()?.n);
    } finally {
      db.close();
    }
  };
  try {
    const a = normalizeUsageStoreConfig(
      { path: `${dir}/a.sqlite`, flush_interval_ms: 3_600_000 },
      env,
    );
    await ledger.configure(a);
    ledger.record(event());
    ledger.record(event()); // held by write-behind when the swap starts

    await Deno.writeTextFile(`${dir}/plain`, "x");
    const bad = normalizeUsageStoreConfig({ path: `${dir}/plain/b.sqlite` }, env);
    const err = await assertRejects(() => ledger.configure(bad));
    assertStringIncludes(err.message, "plain/b.sqlite");
    assertEquals(ledger.config, a);
    ledger.record(event());
    await ledger.flush();
    assertEquals(count(`${dir}/a.sqlite`), 3, "old store still takes writes");

    // Same store again: nothing is swapped. A new one: old flushed, later events go to the new.
    await ledger.configure(normalizeUsageStoreConfig({ path: `${dir}/a.sqlite` }, env));
    ledger.record(event());
    const b = normalizeUsageStoreConfig(
      { path: `${dir}/b.sqlite`, flush_interval_ms: 3_600_000 },
      env,
    );
    await ledger.configure(b);
    ledger.record(event());
    ledger.record(event());
    await ledger.flush();
    assertEquals(count(`${dir}/a.sqlite`), 4);
    assertEquals(count(`${dir}/b.sqlite`), 2);
    assertEquals((await ledger.report({})).db_path, `${dir}/b.sqlite`);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger: installStore flushes into the old store before closing it", async () => {
  const { dir, cleanup } = await tempDir();
  const order: string[] = [];
  const oldStore = new FlakyStore();
  const newStore = new FlakyStore();
  const origClose = oldStore.close.bind(oldStore);
  oldStore.close =
    () => (order.push(`old closed after ${(oldStore.inner as MemoryStore).rows.length}`),
      origClose());
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.installStore(oldStore, cfg(dir, { flush_interval_ms: 3_600_000 }));
    for (const e of events(3)) ledger.record(e);
    await ledger.installStore(newStore, cfg(dir));
    assertEquals(order, ["old closed after 3"]);
    ledger.record(event());
    await ledger.flush();
    assertEquals((newStore.inner as MemoryStore).rows.length, 1);
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger callbacks: the sink gets normalized events; report gets the filters", async () => {
  const { dir, cleanup } = await tempDir();
  const got: UsageEvent[] = [];
  const filters: ReportFilters[] = [];
  const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
  try {
    await ledger.configure(normalizeUsageStoreConfig({ path: `${dir}/u.sqlite` }, env));
    ledger.setCallbacks({
      store: (e) => {
        got.push(e);
        return { ok: true };
      },
      report: (f) => {
        filters.push(f);
        const hits = got.filter((e) => !f.model || e.model === f.model);
        return { ok: true, enabled: true, totals: { ...emptyTotals(), requests: hits.length } };
      },
    });
    assertEquals(ledger.backend, "callback");
    ledger.record(event({
      model: "m1",
      status_code: 200,
      metrics: { input_tokens: 100, output_tokens: 25 },
      tool_names: ["a", "b"],
    }));
    ledger.record(event({ model: "m2" }));
    await ledger.flush();
    assertEquals(got.length, 2);
    const e = got[0];
    assertEquals(
      [e.input_tokens, e.output_tokens, e.total_tokens, e.tool_calls, e.status_code, e.ok],
      [100, 25, 125, 2, 200, true],
    );
    assertMatch(e.created_at, /Z$/);
    assertEquals((await ledger.report({ model: "m1" })).totals?.requests, 1);
    assertEquals((await ledger.report({ since: "2026-01-01", limit: 9999 })).totals?.requests, 2);
    // `since` reaches the callback in the stored created_at form, as it reaches every store.
    assertEquals(filters, [{ model: "m1", limit: 20 }, {
      since: "2026-01-01T00:00:00Z",
      limit: 500,
    }]);
    const db = new DatabaseSync(`${dir}/u.sqlite`, { readOnly: true });
    try {
      assertEquals(db.prepare("SELECT COUNT(*) AS n FROM usage_events").get()?.n, 0, "bypassed");
    } finally {
      db.close();
    }
  } finally {
    await ledger.close();
    await cleanup();
  }
});

Deno.test("ledger callbacks: a refusing sink is retried without duplicates", async () => {
  const { dir, cleanup } = await tempDir();
  const got: string[] = [];
  let refuse = "r2";
  const ledger = new UsageLedger({
    logger: memoryLogger(),
    spillPath: `${dir}/spill.jsonl`,
    retry: { baseMs: 60_000, maxMs: 60_000 },
  });
  try {
    ledger.setCallbacks({
      store: (e) => {
        if (e.request_id === refuse) return { ok: false, error: "busy" };
        got.push(e.request_id);
        return { ok: true };
      },
    });
    const sent = events(5);
    for (const e of sent) ledger.record(e);
    assertEquals((await ledger.flush()).ok, false);
    assertEquals(got, ["r0", "r1"]);
    refuse = "";
    assertEquals(await ledger.flush(), { ok: true, written: 3 });
    assertEquals(got, ids(sent));
  } finally {
    await ledger.close();
    await cleanup();
  }
});

for (const backend of ["sqlite", "jsonlog-dir", "jsonlog-file"] as const) {
  Deno.test(`ledger ${backend}: 1,000 events recorded concurrently → exactly 1,000 rows`, async () => {
    const { dir, cleanup } = await tempDir();
    const raw = backend === "sqlite"
      ? { path: `${dir}/u.sqlite` }
      : backend === "jsonlog-dir"
      ? { backend: "jsonlog", path: `${dir}/events/` }
      : { backend: "jsonlog", path: `${dir}/u.jsonl` };
    const ledger = new UsageLedger({ logger: memoryLogger(), spillPath: `${dir}/spill.jsonl` });
    try {
      await ledger.configure(normalizeUsageStoreConfig(raw, env));
      await recordConcurrently(ledger, 1000, { input_tokens: 1 });
      const r = await ledger.report({ limit: 500 });
      assertEquals(r.totals?.requests, 1000);
      assertEquals(r.totals?.input_tokens, 1000);
      assertEquals(r.recent?.length, 500);
      assertEquals(new Set(r.recent?.map((x) => x.event_id)).size, 500);
    } finally {
      await ledger.close();
      await cleanup();
    }
  });
}

function emptyTotals() {
  return {
    requests: 0,
    input_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    cached_tokens: 0,
    cache_write_tokens: 0,
    tool_calls: 0,
    total_cost_usd: 0,
  };
}
