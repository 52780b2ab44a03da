/**
 * A PostgreSQL connection cut in the middle of a batch write (the server going away — a restart,
 * a failover, a proxy) must cost a retry, never the process: the write fails, the ledger retries,
 * every event lands exactly once, and no error escapes to the top level.
 *
 * The cut is made deterministic by a TCP relay in front of the local server that closes both
 * sides the moment the client sends its INSERT into usage_events (once).
 */
import { assert, assertEquals } from "../../_assert.ts";
import { memoryLogger } from "../../../src/log.ts";
import { normalizeUsageStoreConfig } from "../../../src/usage/config.ts";
import { UsageLedger } from "../../../src/usage/ledger.ts";
import { PostgresStore } from "../../../src/usage/postgres.ts";
import { UsageWriteError } from "../../../src/usage/write_error.ts";
import { event } from "../helpers.ts";
import {
  assertNoUncaught,
  catchingUncaught,
  compareIds,
  freshPgDatabase,
  pgGate,
  pollUntil,
  storedRequestIds,
  tempDir,
} from "./helpers.ts";

const gate = await pgGate("PostgreSQL connection-cut test");

/**
 * Relays 127.0.0.1:port ↔ the server; cuts the connection when the client sends the `cutAt`-th
 * statement containing `marker` (once).
 */
class CuttingRelay {
  readonly port: number;
  cuts = 0;
  /** Statements with the marker seen (the cut one included). */
  seen = 0;
  readonly #cutAt: number;
  readonly #marker: Uint8Array;
  readonly #listener: Deno.Listener;
  readonly #target: Deno.ConnectOptions;
  readonly #tasks = new Set<Promise<void>>();
  readonly #conns = new Set<Deno.Conn>();

  constructor(target: Deno.ConnectOptions, cutAt = 1, marker = "INSERT INTO usage_events") {
    this.#target = target;
    this.#cutAt = cutAt;
    this.#marker = new TextEncoder().encode(marker);
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#listener = listener;
    this.port = (listener.addr as Deno.NetAddr).port;
    this.#track((async () => {
      try {
        for await (const c of listener) this.#track(this.#relay(c));
      } catch { /* closed */ }
    })());
  }

  #track(p: Promise<void>): void {
    this.#tasks.add(p);
    p.finally(() => this.#tasks.delete(p));
  }

  async #relay(client: Deno.Conn): Promise<void> {
    const server = await Deno.connect(this.#target).catch(() => undefined);
    if (!server) {
      client.close();
      return;
    }
    this.#conns.add(client);
    this.#conns.add(server);
    const closeBoth = () => {
      for (const c of [client, server]) {
        this.#conns.delete(c);
        try {
          c.close();
        } catch { /* already closed */ }
      }
    };
    const up = (async () => {
      const buf = new Uint8Array(64 * 1024);
      for (;;) {
        const n = await client.read(buf).catch(() => null);
        if (n === null) break;
        const chunk = buf.subarray(0, n);
        if (includes(chunk, this.#marker) && ++this.seen === this.#cutAt) {
          // The statement never reaches the server; the client sees its connection end.
          this.cuts++;
          break;
        }
        let off = 0;
        while (off < n) {
          const w = await server.write(chunk.subarray(off)).catch(() => 0);
          if (w === 0) return;
          off += w;
        }
      }
    })();
    const down = server.readable.pipeTo(client.writable, { preventClose: true }).catch(() => {});
    await up;
    closeBoth();
    await down;
  }

  async close(): Promise<void> {
    this.#listener.close();
    for (const c of this.#conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    for (let i = 0; i < 100 && this.#tasks.size > 0; i++) await Promise.all([...this.#tasks]);
  }
}

function includes(hay: Uint8Array, needle: Uint8Array): boolean {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

Deno.test({
  name: "postgresql: a connection cut mid-write is retried, nothing lost, nothing escapes",
  ignore: gate.ignore,
  fn: () =>
    catchingUncaught(async (uncaught) => {
      const db = await freshPgDatabase();
      const dir = await tempDir();
      const url = new URL(db.dsn);
      const relay = new CuttingRelay({
        hostname: url.hostname,
        port: Number(url.port || "5432"),
      });
      const logger = memoryLogger("info");
      const ledger = new UsageLedger({
        logger,
        spillPath: `${dir}/spill.jsonl`,
        retry: { baseMs: 20, maxMs: 200 },
      });
      try {
        const via = new URL(db.dsn);
        via.port = String(relay.port);
        await ledger.configure(
          normalizeUsageStoreConfig({ dsn: via.toString(), pool_size: 1 }, {
            env: () => undefined,
          }),
        );
        const events = Array.from({ length: 20 }, (_, i) => event({ request_id: `cut-${i}` }));
        for (const e of events) ledger.record(e);
        const ref = { backend: "postgresql" as const, dsn: db.dsn };
        let stored: string[] = [];
        await pollUntil(
          async () => {
            stored = await storedRequestIds(ref);
            return uncaught.length > 0 || stored.length >= events.length;
          },
          10_000,
          () => `the events after the cut (have ${stored.length})`,
        );
        assertNoUncaught(uncaught);
        await ledger.close();
        assertEquals(relay.cuts, 1, "the connection was cut once, at the INSERT");
        assertEquals(
          compareIds(events.map((e) => e.request_id), await storedRequestIds(ref)),
          { missing: [], duplicated: [], unexpected: [] },
        );
        assert(
          logger.lines.some((l) => l.event === "usage_store_failed"),
          "the failed write was logged",
        );
        assertEquals(logger.lines.filter((l) => l.event === "usage_lost"), []);
      } finally {
        await ledger.close();
        await relay.close();
        await db.drop();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
    }),
});

Deno.test({
  name: "postgresql: a batch cut after its first statement names the events written",
  ignore: gate.ignore,
  fn: () =>
    catchingUncaught(async () => {
      const db = await freshPgDatabase();
      const url = new URL(db.dsn);
      // 600 events are two INSERTs (500 + 100): the second one is cut.
      const relay = new CuttingRelay(
        { hostname: url.hostname, port: Number(url.port || "5432") },
        2,
      );
      const via = new URL(db.dsn);
      via.port = String(relay.port);
      const cfg = normalizeUsageStoreConfig({ dsn: via.toString(), pool_size: 1 }, {
        env: () => undefined,
      });
      assert(cfg.backend === "postgresql");
      const store = new PostgresStore(cfg);
      try {
        await store.prepare();
        const events = Array.from({ length: 600 }, (_, i) => event({ request_id: `part-${i}` }));
        let thrown: unknown;
        await store.write(events).catch((err) => (thrown = err));
        assert(thrown instanceof UsageWriteError, `a UsageWriteError, got ${thrown}`);
        assertEquals(thrown.written, 500);
        const ref = { backend: "postgresql" as const, dsn: db.dsn };
        assertEquals((await storedRequestIds(ref)).length, 500, "the first statement stands");
        // The rest, as the ledger retries it: exactly 600, each once.
        await store.write(events.slice(thrown.written));
        assertEquals(
          compareIds(events.map((e) => e.request_id), await storedRequestIds(ref)),
          { missing: [], duplicated: [], unexpected: [] },
        );
      } finally {
        await store.close();
        await relay.close();
        await db.drop();
      }
    }),
});

Deno.test({
  name: "postgresql: a connection cut mid-migration fails prepare cleanly; the next one works",
  ignore: gate.ignore,
  fn: () =>
    catchingUncaught(async (uncaught) => {
      const db = await freshPgDatabase();
      const url = new URL(db.dsn);
      const relay = new CuttingRelay(
        { hostname: url.hostname, port: Number(url.port || "5432") },
        1,
        "CREATE TABLE",
      );
      const via = new URL(db.dsn);
      via.port = String(relay.port);
      const cfg = normalizeUsageStoreConfig({ dsn: via.toString(), pool_size: 1 }, {
        env: () => undefined,
      });
      assert(cfg.backend === "postgresql");
      const first = new PostgresStore(cfg);
      const second = new PostgresStore(cfg);
      try {
        let thrown: unknown;
        await first.prepare().catch((err) => (thrown = err));
        assert(thrown instanceof Error, "prepare failed");
        assert(thrown.message.startsWith(`usage_store ${first.description}`), thrown.message);
        assertEquals(relay.cuts, 1);
        await second.prepare();
        await second.write([event({ request_id: "after-cut" })]);
        const ref = { backend: "postgresql" as const, dsn: db.dsn };
        assertEquals(await storedRequestIds(ref), ["after-cut"]);
        assertNoUncaught(uncaught);
      } finally {
        await first.close();
        await second.close();
        await relay.close();
        await db.drop();
      }
    }),
});
