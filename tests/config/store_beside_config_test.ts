/**
 * A usage store in the config file's folder loses nothing on `kill -9`: watching the config
 * opens no file but the config. (A folder watcher opened the store's `-wal`/`-shm` on every
 * write; closing them dropped SQLite's POSIX locks, and a reader's close then checkpointed and
 * deleted the WAL under the running store: after `kill -9`, 20 of 30 rows were lost.)
 */
import { assertEquals } from "../_assert.ts";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { stringify } from "yaml";
import { startFakeModel } from "../../src/fake/model.ts";
import { demoConfig } from "../../src/cli/demo.ts";
import {
  pollUntil,
  spawnServe,
  storedRequestIds,
  type StoreRef,
  tempDir,
} from "../usage/ledger/helpers.ts";

const N = 30;

/**
 * The request ids a store holds, read as another process would: a SQLite store is opened
 * read-write (the `sqlite3` shell, a second tool), so its close checkpoints and deletes the WAL
 * whenever it believes itself the last connection.
 */
async function readIds(ref: StoreRef): Promise<string[]> {
  if (ref.backend !== "sqlite") return await storedRequestIds(ref);
  try {
    await Deno.stat(ref.path);
  } catch {
    return [];
  }
  const db = new DatabaseSync(ref.path);
  try {
    return db.prepare("SELECT request_id FROM usage_events").all().map((r) => String(r.request_id));
  } catch (err) {
    if (String(err).includes("no such table")) return [];
    throw err;
  } finally {
    db.close();
  }
}

interface Layout {
  name: string;
  config(dir: string, fakeUrl: string): Record<string, unknown>;
  ref(dir: string): StoreRef;
  model: string;
}

const LAYOUTS: Layout[] = [
  {
    name: "sqlite beside the config",
    config: (dir, url) => ({
      nodes: [{ id: "n1", url, model: "m", max_conns: 8 }],
      usage_store: { backend: "sqlite", path: join(dir, "usage.sqlite") },
    }),
    ref: (dir) => ({ backend: "sqlite", path: join(dir, "usage.sqlite") }),
    model: "m",
  },
  {
    name: "jsonlog file beside the config",
    config: (dir, url) => ({
      nodes: [{ id: "n1", url, model: "m", max_conns: 8 }],
      usage_store: { backend: "jsonlog", log_path: join(dir, "events.jsonl"), mode: "file" },
    }),
    ref: (dir) => ({ backend: "jsonlog-file", path: join(dir, "events.jsonl") }),
    model: "m",
  },
  {
    name: "the demo's layout (its sqlite store beside its config)",
    config: (dir, url) => demoConfig(url, dir),
    ref: (dir) => ({ backend: "sqlite", path: join(dir, "usage.sqlite") }),
    model: "demo",
  },
];

for (const layout of LAYOUTS) {
  Deno.test(`kill -9 with the store in the config's folder: ${layout.name}, ${N} of ${N} rows`, async () => {
    const fake = startFakeModel({ hostname: "127.0.0.1", port: 0 });
    await fake.ready;
    const dir = await tempDir();
    let proc: Awaited<ReturnType<typeof spawnServe>> | undefined;
    try {
      const config = join(dir, "skeid.yaml");
      await Deno.writeTextFile(config, stringify(layout.config(dir, fake.url)));
      proc = await spawnServe(config, dir, { SKEID_LOG_LEVEL: "warn", SKEID_DATA_DIR: dir });
      const ref = layout.ref(dir);
      for (let i = 0; i < N; i++) {
        const id = `beside-${i}`;
        const res = await fetch(`${proc.base}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-request-id": id },
          body: JSON.stringify({
            model: layout.model,
            messages: [{ role: "user", content: `request ${i}` }],
          }),
        });
        await res.text();
        assertEquals(res.status, 200, `${id} answered`);
        // Another reader opens and closes the store while the gateway runs (as `skeid usage`
        // does): with the gateway's locks intact it never takes the WAL away.
        await pollUntil(
          async () => (await readIds(ref)).includes(id),
          10_000,
          `${id} stored`,
        );
      }
      proc.child.kill("SIGKILL"); // the process this test started, by its handle
      await proc.child.status;
      const stored = new Set(await readIds(ref));
      assertEquals(stored.size, N, `${layout.name}: rows after kill -9`);
    } finally {
      await proc?.dispose();
      await fake.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  });
}
