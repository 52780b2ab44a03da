/**
 * The Requests page's events (`GET /skeid/usage/events`): newest first, paged by keyset
 * (created_at, id) with ties in one second broken by id, filtered, one event by id — the same on
 * SQLite, PostgreSQL and jsonlog (from its ring, `source: "memory"`); bad parameters are 400s
 * naming them.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { normalizeUsageStoreConfig } from "../../src/usage/config.ts";
import { SqliteStore } from "../../src/usage/sqlite.ts";
import { PostgresStore } from "../../src/usage/postgres.ts";
import { JsonlogStore } from "../../src/usage/jsonlog.ts";
import type { UsageStore } from "../../src/usage/types.ts";
import { EventRing, parseEventsQuery } from "../../src/usage/events_page.ts";
import { event } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";
import { adminFixture } from "../admin/helpers.ts";

const gate = await pgTestGate();
const env = { env: () => undefined };

/** Seven events: two pairs in one second each, three keys, two models, a 500. */
function seven() {
  const at = (s: string) => `2026-09-01T10:00:${s}Z`;
  return [
    event({ created_at: at("01"), request_id: "r1", api_key_id: "k_a" }),
    event({ created_at: at("02"), request_id: "r2", api_key_id: "k_b", model: "big" }),
    event({ created_at: at("02"), request_id: "r3", api_key_id: "k_a" }),
    event({ created_at: at("03"), request_id: "r4", api_key_id: "k_c", status_code: 500 }),
    event({ created_at: at("04"), request_id: "r5", api_key_id: "k_a", node_id: "n2" }),
    event({ created_at: at("04"), request_id: "r6", api_key_id: "k_b", model: "big" }),
    event({
      created_at: at("05"),
      request_id: "r7",
      api_key_id: "k_a",
      route_url: "http://user:pw@10.0.0.1:8000/v1",
    }),
  ];
}

async function pages(store: UsageStore, query: string): Promise<string[][]> {
  const out: string[][] = [];
  let before = "";
  for (let i = 0; i < 10; i++) {
    const q = parseEventsQuery((n) =>
      new URLSearchParams(query + (before ? `&before=${before}` : "")).get(n) ?? undefined
    );
    const page = await store.events!(q);
    out.push(page.events.map((e) => String(e.request_id)));
    if (page.next === null) break;
    before = page.next;
  }
  return out;
}

async function scenario(store: UsageStore, source: "database" | "memory") {
  const written = seven();
  await store.write(written.slice(0, 4));
  await store.write(written.slice(4));
  await store.write(written.slice(5)); // a replay: nothing new
  assertEquals(await pages(store, "limit=3"), [["r7", "r6", "r5"], ["r4", "r3", "r2"], ["r1"]]);
  assertEquals(await pages(store, "limit=2&api_key_id=k_a"), [["r7", "r5"], ["r3", "r1"]]);
  assertEquals(await pages(store, "model=big"), [["r6", "r2"]]);
  assertEquals(await pages(store, "node=n2"), [["r5"]]);
  assertEquals(await pages(store, "status=500"), [["r4"]]);
  assertEquals(await pages(store, "status=404"), [[]]);
  const first = await store.events!(parseEventsQuery(() => undefined));
  assertEquals(first.source, source);
  const r7 = first.events[0];
  assertEquals([r7.ok, r7.status_code, r7.created_at], [true, 200, "2026-09-01T10:00:05Z"]);
  assertEquals(r7.route_url, "http://10.0.0.1:8000/v1");
  assert(!("id" in r7) && !("cursor_ts" in r7));
  const one = await store.event!(String(r7.event_id));
  assertEquals(one?.request_id, "r7");
  assertEquals(await store.event!("no-such-event"), undefined);
}

Deno.test("events page on SQLite: keyset pages, ties by id, filters, one event", async () => {
  const tmp = await tempDir();
  const cfg = normalizeUsageStoreConfig({ backend: "sqlite", path: `${tmp.dir}/u.db` }, env);
  assert(cfg.backend === "sqlite");
  const store = new SqliteStore(cfg);
  try {
    await store.prepare();
    await scenario(store, "database");
  } finally {
    await store.close();
    await tmp.cleanup();
  }
});

Deno.test({
  name: "events page on PostgreSQL: keyset pages, ties by id, filters, one event",
  ...gate,
  fn: async () => {
    const db = await freshPgDatabase();
    const cfg = normalizeUsageStoreConfig({ backend: "postgresql", dsn: db.dsn }, env);
    assert(cfg.backend === "postgresql");
    const store = new PostgresStore(cfg);
    try {
      await store.prepare();
      await scenario(store, "database");
    } finally {
      await store.close();
      await db.drop();
    }
  },
});

Deno.test("events page on jsonlog: the ring of events since start, source memory", async () => {
  const tmp = await tempDir();
  const cfg = normalizeUsageStoreConfig({ backend: "jsonlog", path: `${tmp.dir}/ev/` }, env);
  assert(cfg.backend === "jsonlog");
  const store = new JsonlogStore(cfg);
  try {
    await store.prepare();
    await scenario(store, "memory");
  } finally {
    await store.close();
    await tmp.cleanup();
  }
});

Deno.test("event ring: bounded; the oldest leave, and with them their ids", () => {
  const ring = new EventRing(3);
  const evs = seven();
  ring.add(evs);
  const page = ring.page(parseEventsQuery(() => undefined));
  assertEquals(page.events.map((e) => e.request_id), ["r7", "r6", "r5"]);
  assertEquals(ring.get(evs[0].event_id), undefined);
  assertEquals(ring.get(evs[6].event_id)?.request_id, "r7");
});

Deno.test("GET /skeid/usage/events: a bad limit, cursor or status is a 400 naming it", async () => {
  const f = adminFixture();
  f.deps.usageEvents = () => Promise.resolve({ events: [], next: null, source: "memory" });
  for (
    const [query, param] of [
      ["limit=0", "limit"],
      ["limit=201", "limit"],
      ["limit=ten", "limit"],
      ["before=garbage", "before"],
      ["status=abc", "status"],
    ]
  ) {
    const res = await f.req(`/skeid/usage/events?${query}`);
    assertEquals(res.status, 400, query);
    const body = await res.json();
    assertEquals(body.param, param);
    assertStringIncludes(body.error, `${param}: `);
  }
  const ok = await f.req("/skeid/usage/events?limit=200");
  assertEquals([ok.status, await ok.json()], [200, { events: [], next: null, source: "memory" }]);
  const none = adminFixture();
  assertEquals((await none.req("/skeid/usage/events")).status, 404);
  f.deps.usageEvent = () => Promise.resolve(null);
  const missing = await f.req("/skeid/usage/events/ev-1");
  assertEquals([missing.status, (await missing.json()).error], [404, "unknown usage event 'ev-1'"]);
});
