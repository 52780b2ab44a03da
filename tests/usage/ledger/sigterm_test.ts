/**
 * SIGTERM of a `scripts/skeid serve` subprocess whose usage store writes behind
 * (flush_interval_ms 5000): after N requests the process exits 0 and all N events are in the
 * store — written by the shutdown flush, not by the interval. One subprocess per backend, run
 * side by side.
 */
import { assert, assertEquals } from "../../_assert.ts";
import { join } from "node:path";
import { stringify } from "yaml";
import { startFakeModel } from "../../../src/fake/model.ts";
import {
  compareIds,
  freshPgDatabase,
  pgGate,
  runLoad,
  spawnServe,
  storedRequestIds,
  type StoreRef,
  tempDir,
} from "./helpers.ts";

const N = 100;
const FLUSH_MS = 5000;
const pg = await pgGate("PostgreSQL SIGTERM test");

interface Backend {
  name: string;
  usageStore(dir: string, dsn: string): Record<string, unknown>;
  ref(dir: string, dsn: string): StoreRef;
}

const BACKENDS: Backend[] = [
  {
    name: "jsonlog dir",
    usageStore: (dir) => ({ backend: "jsonlog", log_path: `${dir}/events/`, mode: "dir" }),
    ref: (dir) => ({ backend: "jsonlog-dir", path: `${dir}/events` }),
  },
  {
    name: "jsonlog file",
    usageStore: (dir) => ({ backend: "jsonlog", log_path: `${dir}/events.jsonl`, mode: "file" }),
    ref: (dir) => ({ backend: "jsonlog-file", path: `${dir}/events.jsonl` }),
  },
  {
    name: "sqlite",
    usageStore: (dir) => ({ backend: "sqlite", path: `${dir}/usage.sqlite` }),
    ref: (dir) => ({ backend: "sqlite", path: `${dir}/usage.sqlite` }),
  },
  ...(pg.ignore ? [] : [{
    name: "postgresql",
    usageStore: (_dir: string, dsn: string) => ({ dsn }),
    ref: (_dir: string, dsn: string): StoreRef => ({ backend: "postgresql", dsn }),
  }]),
];

/** One backend: serve, N requests, SIGTERM; answers what a report line needs. */
async function sigtermRun(b: Backend, fakeUrl: string): Promise<string> {
  const dir = await tempDir();
  const db = b.name === "postgresql" ? await freshPgDatabase() : undefined;
  const dsn = db?.dsn ?? "";
  let proc: Awaited<ReturnType<typeof spawnServe>> | undefined;
  try {
    const config = join(dir, "skeid.yaml");
    await Deno.writeTextFile(
      config,
      stringify({
        nodes: [{ id: "n1", url: fakeUrl, model: "m", max_conns: 32 }],
        usage_store: { ...b.usageStore(dir, dsn), flush_interval_ms: FLUSH_MS },
      }),
    );
    proc = await spawnServe(config, dir, {
      SKEID_LOG_LEVEL: "warn",
      SKEID_SHUTDOWN_GRACE_MS: "5000",
      SKEID_DATA_DIR: dir, // the spill file, if one were needed
    });
    const ref = b.ref(dir, dsn);
    const started = Date.now();
    const load = await runLoad({ base: proc.base, count: N, concurrency: 16, prefix: "term" });
    assertEquals(load.failures, [], `${b.name}: every request answered`);
    const storedBefore = (await storedRequestIds(ref)).length;
    const elapsed = Date.now() - started;
    // Within the interval the events are still queued (the first few may have been caught by
    // the writer's startup run): the shutdown flush has work to do.
    if (elapsed < FLUSH_MS - 1000) {
      assert(storedBefore < N, `${b.name}: ${storedBefore} of ${N} stored before SIGTERM`);
    }
    proc.child.kill("SIGTERM");
    const status = await proc.child.status;
    const stderr = await proc.stderr;
    assertEquals(status.code, 0, `${b.name}: exit code; stderr: ${stderr}`);
    assert(!stderr.includes("usage_lost"), `${b.name}: nothing lost: ${stderr}`);
    const stored = await storedRequestIds(ref);
    assertEquals(compareIds(load.ids, stored), {
      missing: [],
      duplicated: [],
      unexpected: [],
    }, b.name);
    return `${b.name}: ${storedBefore} stored before SIGTERM, ${stored.length} after`;
  } finally {
    await proc?.dispose();
    await db?.drop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test(`ledger: SIGTERM of skeid serve with write-behind (${FLUSH_MS} ms) keeps all ${N} events, exit 0`, async () => {
  if (pg.ignore) console.log("  (postgresql left out: unreachable)");
  const fake = startFakeModel({ record: 0 });
  try {
    // Settled, not all: a failing backend must not leave the others running past the test.
    const results = await Promise.allSettled(BACKENDS.map((b) => sigtermRun(b, fake.url)));
    for (const r of results) if (r.status === "fulfilled") console.log(`  ${r.value}`);
    for (const r of results) if (r.status === "rejected") throw r.reason;
  } finally {
    await fake.close();
  }
});
