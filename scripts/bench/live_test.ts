import { assert, assertEquals, assertRejects } from "../../tests/_assert.ts";
import { LiveFeed, type LiveSnapshot } from "../../src/admin/live.ts";
import { liveOrder, liveRatios, openLiveClients, producerCostMsPerS, renderLive } from "./live.ts";

const KEY = "live-test-admin-key";

/** A local `GET /skeid/live` behind a Bearer check, fed by a real LiveFeed ticking fast. */
function serveLive(tickMs: number) {
  const snapshot = (): Promise<LiveSnapshot> =>
    Promise.resolve({ at: new Date().toISOString(), nodes: [], tiers: [], workers: [] });
  const feed = new LiveFeed(snapshot, tickMs);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    if (req.headers.get("authorization") !== `Bearer ${KEY}`) {
      return new Response("no", { status: 401 });
    }
    return new Response(feed.open(), { headers: { "content-type": "text/event-stream" } });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    feed,
    async close() {
      feed.close();
      await server.shutdown();
    },
  };
}

Deno.test("openLiveClients reads live events on every stream and closes them all", async () => {
  const live = serveLive(20);
  try {
    const clients = await openLiveClients(live.url, KEY, 3);
    assertEquals(live.feed.clients, 3);
    const at = clients.events();
    assert(at >= 3, `one event each before it resolves, got ${at}`);
    // Bounded poll: more events arrive while the streams stay open.
    for (let i = 0; i < 200 && clients.events() < at + 3; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert(clients.events() >= at + 3);
    await clients.close();
    for (let i = 0; i < 200 && live.feed.clients > 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assertEquals(live.feed.clients, 0);
  } finally {
    await live.close();
  }
});

Deno.test("openLiveClients fails naming the status when the key is refused", async () => {
  const live = serveLive(20);
  try {
    await assertRejects(() => openLiveClients(live.url, "wrong", 1), Error, "answered 401");
  } finally {
    await live.close();
  }
});

Deno.test("liveOrder alternates; liveRatios takes each round against its own none", () => {
  assertEquals(liveOrder([0, 1, 3], 0), [0, 1, 3]);
  assertEquals(liveOrder([0, 1, 3], 1), [3, 1, 0]);
  const side = (clients: number, cpuUs: number, rps: number) => ({
    clients,
    cpuUs,
    rps,
    events: clients * 4,
  });
  const rounds = [
    [side(0, 100, 1000), side(1, 101, 990), side(3, 103, 980)],
    [side(3, 206, 500), side(1, 200, 500), side(0, 200, 500)],
    [side(0, 50, 2000), side(1, 50.5, 2000), side(3, 51, 1900)],
  ];
  const r = liveRatios(rounds);
  assertEquals(r.map((x) => x.clients), [1, 3]);
  assertEquals(r[0].cpu, 1.01);
  assertEquals(r[1].cpu, 1.03);
  assertEquals(r[1].cpuMin, 1.02);
  const idle = [
    { clients: 0, ms: 1000, cpuMs: 2, events: 0 },
    { clients: 3, ms: 1000, cpuMs: 2.5, events: 3 },
    { clients: 0, ms: 1000, cpuMs: 2.2, events: 0 },
    { clients: 3, ms: 1000, cpuMs: 2.7, events: 3 },
  ];
  assertEquals(Math.round(producerCostMsPerS(idle, 3) * 1000) / 1000, 0.5);
  const text = renderLive(rounds, idle, {
    date: "2026-12-02T00:00:00Z",
    machine: "test",
    command: "deno task bench --live",
    load: "1.00 1.00 1.00",
    tickMs: 1000,
  });
  assert(text.includes("| 1 | 1.010 | 1.000–1.010 |"), text);
  assert(text.includes("| 3 | 1.030 | 1.020–1.030 |") && text.includes("missed"), text);
  // 0.5 ms a second against a median 100 ms a second of CPU at c=32 (1,000 req/s × 100 µs).
  assert(text.includes("| 3 | 0.500 | 0.500 % | ≤ 2 % | met |"), text);
});
