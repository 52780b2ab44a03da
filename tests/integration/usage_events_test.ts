/**
 * `GET /skeid/usage/events` through a real gateway on SQLite: the requests just served, newest
 * first, paged by `next`, one of them in full by its event id. With SKEID_TEST_WORKERS=2 the
 * supervisor's ledger answers for both workers.
 */
import { assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { chat, post, startGateway } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

const ADMIN = { authorization: "Bearer adm-events-0123456789" };

Deno.test("usage events: newest first, paged by next, one by id", async () => {
  const fake = startFakeModel();
  const tmp = await tempDir();
  const t = await startGateway({
    admin_api_key: "adm-events-0123456789",
    nodes: [{ id: "n1", url: fake.url, model: "m" }],
    usage_store: { backend: "sqlite", sqlite_path: `${tmp.dir}/u.db` },
  }, { sink: false });
  try {
    for (let i = 0; i < 5; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
        "x-request-id": `req-${i}`,
        connection: "close",
      });
      assertEquals(r.status, 200);
    }
    await t.group.flushUsage();
    const get = async (q: string) =>
      await (await fetch(`${t.base}/skeid/usage/events?${q}`, { headers: ADMIN })).json();
    const first = await get("limit=3");
    assertEquals(first.source, "database");
    const second = await get(`limit=3&before=${first.next}`);
    assertEquals(second.next, null);
    const ids = [...first.events, ...second.events].map((e: { request_id: string }) =>
      e.request_id
    );
    assertEquals(ids.sort(), ["req-0", "req-1", "req-2", "req-3", "req-4"]);
    const one = first.events[0];
    const res = await fetch(`${t.base}/skeid/usage/events/${one.event_id}`, { headers: ADMIN });
    assertEquals([res.status, (await res.json()).request_id], [200, one.request_id]);
    const missing = await fetch(`${t.base}/skeid/usage/events/nope`, { headers: ADMIN });
    assertEquals(missing.status, 404);
    await missing.body?.cancel();
    // The report's `since`: a span back from now counts the five; a word is the asker's 400.
    const report = async (since: string) => {
      const r = await fetch(`${t.base}/skeid/usage?since=${encodeURIComponent(since)}`, {
        headers: ADMIN,
      });
      return [r.status, await r.json()];
    };
    const [okStatus, recent] = await report("1h");
    assertEquals([okStatus, recent.totals.requests], [200, 5]);
    assertEquals(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(recent.since), true, recent.since);
    const [badStatus, bad] = await report("yesterday");
    assertEquals(badStatus, 400);
    assertEquals(bad.ok, false);
    assertEquals(String(bad.error).startsWith("since: 'yesterday' is not a time"), true, bad.error);
  } finally {
    await t.stop();
    await fake.close();
    await tmp.cleanup();
  }
});
