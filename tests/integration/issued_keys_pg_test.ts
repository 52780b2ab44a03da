/**
 * Two frontends — two `skeid serve` processes — on one PostgreSQL ledger share the issued keys
 * (ADR 0029): a key made on one is accepted by the other, and a revocation made on one is in force
 * on the other within `routing.budget_refresh_ms`, and stays so.
 */
import { assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { until as poll } from "../_helpers/poll.ts";
import { chat, post } from "./helpers.ts";
import { spawnServe } from "../edge/serve_helpers.ts";

const ADMIN = { authorization: "Bearer adm" };
const REFRESH_MS = 200;

Deno.test({
  name: "issued keys: a revocation on one frontend is in force on the other within the refresh",
  ...(await pgTestGate()),
  fn: async () => {
    const fake = startFakeModel({});
    const db = await freshPgDatabase();
    const cfg = {
      admin_api_key: "adm",
      nodes: [{ id: "n1", url: fake.url, model: "m1" }],
      routing: { budget_refresh_ms: REFRESH_MS },
      usage_store: { backend: "postgresql", dsn: db.dsn },
    };
    const env = { SKEID_KEY_PEPPER: "pepper-for-tests-0123456789" };
    const a = await spawnServe(cfg, env);
    const b = await spawnServe(cfg, env);
    try {
      const made = await post(`${a.base}/skeid/keys`, { name: "alice" }, ADMIN);
      assertEquals(made.status, 200, made.text);
      const key = { authorization: `Bearer ${made.json.key}` };
      const send = async (base: string) =>
        (await post(`${base}/v1/chat/completions`, chat("m1"), key)).status;
      assertEquals(await send(a.base), 200, "a made it");
      assertEquals(await send(b.base), 200, "b reads it from the shared database");

      const del = await fetch(`${a.base}/skeid/keys/${made.json.id}`, {
        method: "DELETE",
        headers: ADMIN,
      });
      assertEquals(del.status, 200);
      await del.body?.cancel();
      const at = Date.now();
      assertEquals(await send(a.base), 401, "refused at once where it was revoked");
      await poll(async () => await send(b.base) === 401, "b refuses it", 10 * REFRESH_MS);
      const took = Date.now() - at;
      for (let i = 0; i < 5; i++) {
        assertEquals(await send(b.base), 401, `still refused (${took} ms)`);
      }
    } finally {
      await a.stop();
      await b.stop();
      await fake.close();
      await db.drop();
    }
  },
});
