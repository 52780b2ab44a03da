/**
 * The usage store's lifecycle through a running gateway, driven by edits of its config file:
 * a swap (sqlite → jsonlog) while requests flow flushes the old store first and loses nothing;
 * a store that cannot be prepared fails the reload (GET /skeid/config names the error, /health
 * says ok:false, failures:1) while the old store keeps recording; removing usage_store keeps the
 * running store with one warning.
 *
 * Reloads here come from the folder watcher alone (the mtime poll is set to a minute): a poll
 * tick that reads a new version just before the watcher's read does counts one failing version
 * twice in `failures` — a config-manager quirk this test does not pin.
 */
import { assert, assertEquals } from "../../_assert.ts";
import { startFakeModel } from "../../../src/fake/model.ts";
import {
  compareIds,
  pollUntil,
  runLoad,
  startLedgerGateway,
  storedRequestIds,
  type StoreRef,
} from "./helpers.ts";

const ADMIN = "adm-lifecycle-test-key";

Deno.test("ledger lifecycle: store swap, failed prepares, removal — through config edits", async (t) => {
  const fake = startFakeModel({ record: 0 });
  const nodes = [{ id: "n1", url: fake.url, model: "m", max_conns: 32 }];
  let dir = "";
  const gw = await startLedgerGateway((d) => {
    dir = d;
    return {
      nodes,
      admin_api_key: ADMIN,
      // Write-behind with a long interval: at the swap every event is still queued, so only a
      // flush into the old store before it is let go can put them there.
      usage_store: { backend: "sqlite", path: `${d}/usage.sqlite`, flush_interval_ms: 60_000 },
    };
  }, { reloadIntervalMs: 60_000 });
  const sqlite: StoreRef = { backend: "sqlite", path: `${dir}/usage.sqlite` };
  const jsonlog: StoreRef = { backend: "jsonlog-dir", path: `${dir}/events` };
  const jsonlogConfig = {
    nodes,
    admin_api_key: ADMIN,
    usage_store: { backend: "jsonlog", log_path: `${dir}/events/`, mode: "dir" },
  };
  const applied = () => gw.logger.lines.filter((l) => l.event === "config_applied").length;
  const health = async () => (await (await fetch(`${gw.base}/health`)).json()).config;
  const configStatus = async () => {
    const res = await fetch(`${gw.base}/skeid/config`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assertEquals(res.status, 200);
    return await res.json();
  };
  const sent: string[] = [];
  const load = async (prefix: string, count: number) => {
    const r = await runLoad({ base: gw.base, count, concurrency: 16, prefix });
    assertEquals(r.failures, []);
    sent.push(...r.ids);
    return r.ids;
  };
  /** Writes a config whose store cannot be prepared; answers /health once the reload failed. */
  const failingEdit = async (config: Record<string, unknown>) => {
    await gw.writeConfig(config);
    let h = await health();
    await pollUntil(async () => !(h = await health()).ok, 8000, "the failed reload", 10);
    return h;
  };
  const restore = async () => {
    await gw.writeConfig(jsonlogConfig);
    await pollUntil(async () => (await health()).ok, 5000, "the config back in force");
    assertEquals(await health(), { ok: true, failed_at: null, failures: 0 });
  };

  try {
    await t.step(
      "sqlite → jsonlog while requests flow: old store flushed first, none lost",
      async () => {
        // The startup writer run is over: from here on events wait for the interval.
        await gw.gw.ledger.flush();
        const before = await load("before", 200);
        assertEquals((await storedRequestIds(sqlite)).length, 0, "write-behind: all still queued");

        // Requests keep flowing (bounded) while the config is edited and reloaded.
        let flowing = true;
        const during: string[] = [];
        const flow = (async () => {
          for (let round = 0; flowing && round < 200; round++) {
            during.push(...await load(`during${round}`, 16));
          }
        })();
        try {
          const appliedBefore = applied();
          await gw.writeConfig(jsonlogConfig);
          await pollUntil(
            () => gw.gw.ledger.backend === "jsonlog" && applied() > appliedBefore,
            5000,
            "the swap to jsonlog",
          );
        } finally {
          flowing = false;
          await flow;
        }
        assert(during.length > 0, "requests flowed during the swap");
        // The old store got everything recorded before the swap, at the swap (not at shutdown).
        const inSqlite = await storedRequestIds(sqlite);
        assertEquals(compareIds(before, inSqlite).missing, [], "old store flushed at the swap");
        const after = await load("after", 200);
        await pollUntil(
          async () => (await storedRequestIds(jsonlog)).length >= sent.length - inSqlite.length,
          5000,
          "events in the new store",
        );
        const inJsonlog = await storedRequestIds(jsonlog);
        const inNew = new Set(inJsonlog);
        assertEquals(before.filter((id) => inNew.has(id)), [], "nothing of before in the new");
        assertEquals(compareIds(after, inJsonlog).missing, [], "later events in the new store");
        assertEquals(
          compareIds(sent, [...inSqlite, ...inJsonlog]),
          { missing: [], duplicated: [], unexpected: [] },
          "each request once, in one store or the other",
        );
        assertEquals(await health(), { ok: true, failed_at: null, failures: 0 });
        console.log(
          `  swap: ${before.length} before, ${during.length} during, ${after.length} after; ` +
            `${inSqlite.length} in sqlite, ${inJsonlog.length} in jsonlog`,
        );
      },
    );

    await t.step(
      "a sqlite store that cannot be created fails the reload; jsonlog keeps recording",
      async () => {
        // The parent of the database is a regular file: not even root can create it.
        await Deno.writeTextFile(`${dir}/not-a-dir`, "a file, not a directory\n");
        const h = await failingEdit({
          ...jsonlogConfig,
          usage_store: { backend: "sqlite", path: `${dir}/not-a-dir/usage.sqlite` },
        });
        assertEquals({ ok: h.ok, failures: h.failures }, { ok: false, failures: 1 });
        assertEquals(typeof h.failed_at, "string");
        assertEquals(Object.keys(h).sort().join(","), "failed_at,failures,ok");
        const status = await configStatus();
        assertEquals(status.ok, false);
        assert(
          String(status.error).includes(`usage_store sqlite ${dir}/not-a-dir/usage.sqlite`),
          `the error names the store: ${status.error}`,
        );
        assertEquals(gw.gw.ledger.backend, "jsonlog");
        const ids = await load("failed-sqlite", 50);
        await pollUntil(
          async () => compareIds(ids, await storedRequestIds(jsonlog)).missing.length === 0,
          5000,
          "events in the old (jsonlog) store",
        );
        await restore();
      },
    );

    await t.step("postgresql on a closed port fails the reload, no password shown", async () => {
      const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (l.addr as Deno.NetAddr).port;
      l.close();
      const h = await failingEdit({
        ...jsonlogConfig,
        usage_store: {
          dsn: `postgres://skeid:pw-must-not-show@127.0.0.1:${port}/usage`,
          connect_timeout_s: 2,
        },
      });
      assertEquals({ ok: h.ok, failures: h.failures }, { ok: false, failures: 1 });
      const status = await configStatus();
      assert(
        String(status.error).includes(`postgresql skeid@127.0.0.1:${port}/usage`),
        `the error names the store: ${status.error}`,
      );
      assert(!JSON.stringify(status).includes("pw-must-not-show"), "no password in the status");
      assert(!JSON.stringify(gw.logger.lines).includes("pw-must-not-show"), "no password logged");
      assertEquals(gw.gw.ledger.backend, "jsonlog");
      const ids = await load("failed-pg", 50);
      await pollUntil(
        async () => compareIds(ids, await storedRequestIds(jsonlog)).missing.length === 0,
        5000,
        "events in the old (jsonlog) store",
      );
      await restore();
    });

    await t.step("removing usage_store keeps the running store, with one warning", async () => {
      const warned = () => gw.logger.lines.filter((l) => l.event === "usage_store_removed").length;
      assertEquals(warned(), 0);
      let appliedBefore = applied();
      await gw.writeConfig({ nodes, admin_api_key: ADMIN });
      await pollUntil(() => applied() > appliedBefore, 5000, "the reload without usage_store");
      assertEquals(warned(), 1);
      const ids = await load("removed", 50);
      // Another edit, still without usage_store: no second warning.
      appliedBefore = applied();
      await gw.writeConfig({
        nodes: [...nodes, { id: "n2", url: fake.url, model: "m", max_conns: 32 }],
        admin_api_key: ADMIN,
      });
      await pollUntil(() => applied() > appliedBefore, 5000, "the second reload");
      assertEquals(warned(), 1, "warned once");
      const more = await load("removed-again", 50);
      assertEquals(gw.gw.ledger.backend, "jsonlog");
      await pollUntil(
        async () =>
          compareIds([...ids, ...more], await storedRequestIds(jsonlog)).missing.length === 0,
        5000,
        "events still in the running (jsonlog) store",
      );
    });

    await t.step(
      "at the end: every request of the run exactly once across the stores",
      async () => {
        await gw.stop();
        assertEquals(
          compareIds(sent, [
            ...await storedRequestIds(sqlite),
            ...await storedRequestIds(jsonlog),
          ]),
          { missing: [], duplicated: [], unexpected: [] },
        );
        assertEquals(gw.logger.lines.filter((l) => l.event === "usage_lost"), []);
      },
    );
  } finally {
    await gw.cleanup();
    await fake.close();
  }
});
