/**
 * The ledger under load through the real gateway: 1,000 requests (half of them streams) at
 * concurrency 64 over real HTTP on the OpenAI face, each with its own x-request-id, must leave
 * exactly one event per request in the store — on every backend, written at once and
 * write-behind. Then `skeid usage` reads the same store, from the config and from flags, as text
 * and as JSON, and its totals count exactly those requests.
 */
import { assert, assertEquals, assertMatch } from "../../_assert.ts";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeModel } from "../../../src/fake/model.ts";
import {
  compareIds,
  freshPgDatabase,
  pgGate,
  pollUntil,
  runLoad,
  startLedgerGateway,
  storedRequestIds,
  type StoreRef,
  tempDir,
  usageCommand,
} from "./helpers.ts";

const REQUESTS = 1000;
const CONCURRENCY = 64;
const pg = await pgGate("PostgreSQL ledger load tests");

/** One backend under test: its `usage_store`, how to read it, how `skeid usage` names it. */
interface Case {
  name: string;
  pg?: boolean;
  usageStore(dir: string, dsn: string): Record<string, unknown>;
  ref(dir: string, dsn: string): StoreRef;
  /** `skeid usage` flags naming the same store. */
  flags(dir: string, dsn: string): string[];
}

const CASES: Case[] = [
  {
    name: "jsonlog dir",
    usageStore: (dir) => ({ backend: "jsonlog", log_path: `${dir}/events/`, mode: "dir" }),
    ref: (dir) => ({ backend: "jsonlog-dir", path: `${dir}/events` }),
    flags: (dir) => ["--backend", "jsonlog", "--db", `${dir}/events`],
  },
  {
    name: "jsonlog file",
    usageStore: (dir) => ({ backend: "jsonlog", log_path: `${dir}/events.jsonl`, mode: "file" }),
    ref: (dir) => ({ backend: "jsonlog-file", path: `${dir}/events.jsonl` }),
    flags: (dir) => ["--backend", "jsonlog", "--db", `${dir}/events.jsonl`],
  },
  ...[0, 200].map((flush): Case => ({
    name: `sqlite flush_interval_ms ${flush}`,
    usageStore: (dir) => ({
      backend: "sqlite",
      path: `${dir}/usage.sqlite`,
      flush_interval_ms: flush,
    }),
    ref: (dir) => ({ backend: "sqlite", path: `${dir}/usage.sqlite` }),
    flags: (dir) => ["--backend", "sqlite", "--db", `${dir}/usage.sqlite`],
  })),
  ...[0, 200].map((flush): Case => ({
    name: `postgresql flush_interval_ms ${flush}`,
    pg: true,
    usageStore: (dir, dsn) => ({
      dsn,
      flush_interval_ms: flush,
      spill_path: join(dir, "pg-spill.jsonl"),
    }),
    ref: (_dir, dsn) => ({ backend: "postgresql", dsn }),
    flags: (_dir, dsn) => ["--dsn", dsn],
  })),
];

for (const c of CASES) {
  Deno.test({
    name:
      `ledger load: ${REQUESTS} requests at concurrency ${CONCURRENCY} → exactly one event each (${c.name}); skeid usage agrees`,
    ignore: c.pg === true && pg.ignore,
    async fn() {
      const fake = startFakeModel({ record: 0 });
      const db = c.pg ? await freshPgDatabase() : undefined;
      const dsn = db?.dsn ?? "";
      const dir = await tempDir();
      let t: Awaited<ReturnType<typeof startLedgerGateway>> | undefined;
      try {
        t = await startLedgerGateway(() => ({
          nodes: [
            { id: "n1", url: fake.url, model: "m", max_conns: 64 },
            { id: "n2", url: fake.url, model: "m", max_conns: 64 },
          ],
          usage_store: c.usageStore(dir, dsn),
        }), { dir });
        const ref = c.ref(dir, dsn);
        const prefix = `load-${crypto.randomUUID().slice(0, 8)}`;
        const started = Date.now();
        const load = await runLoad({
          base: t.base,
          count: REQUESTS,
          concurrency: CONCURRENCY,
          prefix,
        });
        assertEquals(load.failures, [], "every request answered 200 with its own request id");
        assertEquals(load.streams, REQUESTS / 2);
        // While the gateway still runs: every event reaches the store on its own (no shutdown).
        let stored: string[] = [];
        await pollUntil(
          async () => {
            stored = await storedRequestIds(ref);
            return stored.length >= REQUESTS;
          },
          15_000,
          () => `${REQUESTS} events in the ${c.name} store (have ${stored.length})`,
          50,
        );
        const ms = Date.now() - started;
        await t.stop();
        // After the flush on stop, still exactly one per request: nothing late, nothing twice.
        stored = await storedRequestIds(ref);
        assertEquals(compareIds(load.ids, stored), {
          missing: [],
          duplicated: [],
          unexpected: [],
        });
        assertEquals(stored.length, REQUESTS);
        const lost = t.logger.lines.filter((l) =>
          l.event === "usage_lost" || l.event === "usage_spill"
        );
        assertEquals(lost, [], "nothing spilled, nothing lost");
        console.log(`  ${c.name}: ${REQUESTS} requests stored in ${ms} ms`);

        // skeid usage, from the config and from flags, as JSON and as text.
        for (const source of [["--config", t.configPath], c.flags(dir, dsn)]) {
          const json = await usageCommand([...source, "--json"]);
          assertEquals(json.code, 0, json.err);
          const report = JSON.parse(json.out);
          assertEquals(report.ok, true);
          assertEquals(report.totals.requests, REQUESTS, `${source.join(" ")}: totals.requests`);
          assertEquals(
            report.by_model.reduce((s: number, g: { requests: number }) => s + g.requests, 0),
            REQUESTS,
          );
          assert(report.totals.total_tokens > 0, "tokens were counted");
          const text = await usageCommand(source);
          assertEquals(text.code, 0, text.err);
          assertMatch(text.out, new RegExp(`^\\s*requests\\s+${REQUESTS}$`, "m"));
          assertMatch(text.out, new RegExp(`^\\s*anonymous\\s+${REQUESTS}\\s`, "m"));
        }
      } finally {
        await t?.cleanup();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
        await db?.drop();
        await fake.close();
      }
    },
  });
}

Deno.test({
  name: "ledger load: `scripts/skeid usage` (the real command line) reads the store the load left",
  async fn() {
    const fake = startFakeModel({ record: 0 });
    const dir = await tempDir();
    const db = `${dir}/usage.sqlite`;
    const t = await startLedgerGateway(() => ({
      nodes: [{ id: "n1", url: fake.url, model: "m", max_conns: 64 }],
      usage_store: { backend: "sqlite", path: db },
    }), { dir });
    try {
      const load = await runLoad({ base: t.base, count: 100, concurrency: 16, prefix: "cli" });
      assertEquals(load.failures, []);
      await t.stop();
      const launcher = fileURLToPath(new URL("../../../scripts/skeid", import.meta.url));
      const out = await new Deno.Command(launcher, {
        args: ["usage", "--config", t.configPath, "--json"],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const dec = new TextDecoder();
      assertEquals(out.code, 0, dec.decode(out.stderr));
      assertEquals(JSON.parse(dec.decode(out.stdout)).totals.requests, 100);
      const text = await new Deno.Command(launcher, {
        args: ["usage", "--backend", "sqlite", "--db", db],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assertEquals(text.code, 0, dec.decode(text.stderr));
      assertMatch(dec.decode(text.stdout), /^\s*requests\s+100$/m);
    } finally {
      await t.cleanup();
      await fake.close();
    }
  },
});
