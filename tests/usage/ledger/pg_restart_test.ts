/**
 * A PostgreSQL restart in the middle of a load run loses nothing and duplicates nothing: the
 * local cluster is stopped and started from the test while requests flow through the real
 * gateway; events of the outage wait in the spill file and are replayed once the server is back.
 * The cluster is started again whatever happens (finally). Fresh database per run, dropped at
 * the end. Unreachable PostgreSQL: ignored with the reason, unless SKEID_REQUIRE_PG=1.
 */
import { assert, assertEquals } from "../../_assert.ts";
import { startFakeModel } from "../../../src/fake/model.ts";
import {
  assertNoUncaught,
  catchingUncaught,
  compareIds,
  freshPgDatabase,
  lineCount,
  localCluster,
  pgGate,
  pollUntil,
  runLoad,
  startLedgerGateway,
  storedRequestIds,
} from "./helpers.ts";

const REQUESTS = 1000;
const CONCURRENCY = 64;
/** Requests from this index on are sent only once the server is being stopped… */
const STOPPING_FROM = 300;
/** …from this index on only once it is down… */
const OUTAGE_FROM = 500;
/** …and from this index on only once it is being started again. */
const BACK_FROM = 800;

const gate = await pgGate("PostgreSQL restart test");
const cluster = gate.ignore ? undefined : await localCluster();
if (typeof cluster === "string" && Deno.env.get("SKEID_REQUIRE_PG") !== "1") {
  console.error(`IGNORED PostgreSQL restart test: ${cluster}`);
}

for (const flush of [0, 200]) {
  Deno.test({
    name:
      `ledger: a PostgreSQL restart mid-run loses nothing and duplicates nothing (flush_interval_ms ${flush})`,
    ignore: gate.ignore ||
      (typeof cluster === "string" && Deno.env.get("SKEID_REQUIRE_PG") !== "1"),
    // An error escaping from the PostgreSQL client while the server goes away would end the
    // process (the gateway, in production): caught, it fails the test, and the finally in
    // restartRun still starts the server again.
    fn: () => catchingUncaught((uncaught) => restartRun(flush, uncaught)),
  });
}

/** One run: load through the gateway, stop PostgreSQL mid-run, start it, check the store. */
async function restartRun(flush: number, uncaught: readonly unknown[]): Promise<void> {
  if (cluster === undefined || typeof cluster === "string") {
    throw new Error(`no local PostgreSQL cluster to restart: ${cluster ?? "unreachable"}`);
  }
  const fake = startFakeModel({ record: 0 });
  let db: Awaited<ReturnType<typeof freshPgDatabase>> | undefined;
  let t: Awaited<ReturnType<typeof startLedgerGateway>> | undefined;
  let stoppedServer = false;
  try {
    db = await freshPgDatabase();
    const dsn = db.dsn;
    // The gateway's spill file is `t.spillPath` (in the test's temp directory).
    t = await startLedgerGateway(() => ({
      nodes: [{ id: "n1", url: fake.url, model: "m", max_conns: 64 }],
      usage_store: { dsn, connect_timeout_s: 2, flush_interval_ms: flush },
    }));
    const gw = t;
    const spillLines = async () =>
      await lineCount(gw.spillPath) + await lineCount(`${gw.spillPath}.replay`);
    const ref = { backend: "postgresql" as const, dsn };

    const stopping = Promise.withResolvers<void>();
    const down = Promise.withResolvers<void>();
    const starting = Promise.withResolvers<void>();
    let completed = 0;
    let completedAtStop = -1;
    let completedAtStart = -1;
    const prefix = `restart-${crypto.randomUUID().slice(0, 8)}`;
    const load = runLoad({
      base: t.base,
      count: REQUESTS,
      concurrency: CONCURRENCY,
      prefix,
      before: async (i) => {
        if (i >= BACK_FROM) await starting.promise;
        else if (i >= OUTAGE_FROM) await down.promise;
        else if (i >= STOPPING_FROM) await stopping.promise;
      },
      after: () => completed++,
    });
    const control = (async () => {
      await pollUntil(() => completed >= STOPPING_FROM, 15_000, "requests before the stop", 5);
      // The store was in use before the outage (write-behind: within an interval).
      await pollUntil(
        async () => (await storedRequestIds(ref)).length > 0,
        5000,
        "events in PostgreSQL before the stop",
      );
      // Requests flow while the server shuts down (fast: sessions are cut mid-write)…
      stoppedServer = true;
      const stop = cluster.stop();
      stopping.resolve();
      await stop;
      completedAtStop = completed;
      assertEquals(await cluster.answers(), false, "PostgreSQL is down");
      down.resolve();
      // …and while it is down: their events must wait in the spill file.
      await pollUntil(() => completed >= BACK_FROM, 15_000, "requests during the outage", 5);
      await pollUntil(async () => await spillLines() > 0, 10_000, "events in the spill file");
      assert(!gw.gw.ledger.healthy, "the ledger knows the store is down");
      // …and while it starts again.
      completedAtStart = completed;
      const start = cluster.start();
      starting.resolve();
      await start;
      stoppedServer = false;
    })();
    // Whatever the controller does, the paced requests must not wait forever.
    control.catch(() => {
      stopping.resolve();
      down.resolve();
      starting.resolve();
    });
    const [result] = await Promise.all([load, control]);
    assertEquals(result.failures, [], "the gateway answered every request, store down or not");
    assertNoUncaught(uncaught);
    const duringOutage = completedAtStart - completedAtStop;
    assert(duringOutage >= BACK_FROM - OUTAGE_FROM, `requests during the outage: ${duringOutage}`);

    // The replay: poll the store (bounded) until every event is there.
    let stored: string[] = [];
    await pollUntil(
      async () => {
        stored = await storedRequestIds(ref);
        return stored.length >= REQUESTS;
      },
      30_000,
      () => `${REQUESTS} events after the restart (have ${stored.length})`,
      100,
    );
    await pollUntil(async () => await spillLines() === 0, 10_000, "the spill file replayed");
    await t.stop();
    stored = await storedRequestIds(ref);
    assertEquals(compareIds(result.ids, stored), {
      missing: [],
      duplicated: [],
      unexpected: [],
    });
    assertEquals(stored.length, REQUESTS);
    assertNoUncaught(uncaught);
    const events = t.logger.lines.map((l) => String(l.event));
    assertEquals(events.filter((e) => e === "usage_lost"), [], "no event lost");
    assert(events.includes("usage_store_failed"), "the outage was logged");
    assert(events.includes("usage_spill"), "the spill was logged");
    assert(events.includes("usage_store_recovered"), "the recovery was logged");
    console.log(
      `  restart (flush ${flush}): ${completedAtStop - STOPPING_FROM} requests answered while ` +
        `it stopped, ${duringOutage} while down; ${REQUESTS} stored once each`,
    );
  } finally {
    // Start the server again whatever failed above (other tests share it) — only if this
    // test stopped it: a server found down is not ours to start.
    if (stoppedServer && !(await cluster.answers())) {
      await cluster.start().catch((err) => console.error(`could not restart PostgreSQL: ${err}`));
    }
    await t?.cleanup();
    await db?.drop();
    await fake.close();
  }
}
