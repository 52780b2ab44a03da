/** The Live page's parts: the per-node minute window, the one producer of the live streams. */
import { assert, assertEquals } from "../_assert.ts";
import { MinuteWindow, percentile } from "../../src/core/minute_window.ts";
import { LiveFeed, type LiveSnapshot, mergeLiveSnapshots } from "../../src/admin/live.ts";
import { EMPTY_MINUTE } from "../../src/core/minute_window.ts";

Deno.test("minute window: requests, errors and TTFT percentiles of the last 60 s only", () => {
  const w = new MinuteWindow();
  const t0 = 1_700_000_000_000;
  for (let i = 0; i < 10; i++) w.add(t0 + i * 100, i % 5 === 0, (i + 1) * 10);
  let m = w.read(t0 + 1000);
  assertEquals([m.requests, m.errors, m.error_rate], [10, 2, 0.2]);
  assertEquals([m.ttft_p50_ms, m.ttft_p90_ms], [50, 90]);
  assertEquals(m.rps, Math.round((10 / 60) * 1000) / 1000);
  // 59 s later the first second still counts; at 60 s it has left.
  assertEquals(w.read(t0 + 59_000).requests, 10);
  m = w.read(t0 + 60_000);
  assertEquals([m.requests, m.ttft_p50_ms], [0, null]);
  // A bucket reused a minute later starts from zero.
  w.add(t0 + 60_050, false);
  assertEquals(w.read(t0 + 60_100).requests, 1);
  assertEquals(percentile([], 0.5), null);
});

function snapshot(n: number): LiveSnapshot {
  return {
    at: new Date(0).toISOString(),
    nodes: [],
    tiers: [],
    workers: [{ index: 0, started_at: "x", restarts: 0, requests: n, inflight: 0 }],
  };
}

Deno.test("live feed: one snapshot per tick for every stream; the timer stops with the last", async () => {
  let made = 0;
  const feed = new LiveFeed(() => Promise.resolve(snapshot(++made)), 20);
  const a = feed.open().pipeThrough(new TextDecoderStream()).getReader();
  const b = feed.open().pipeThrough(new TextDecoderStream()).getReader();
  const events = async (r: ReadableStreamDefaultReader<string>, n: number) => {
    let text = "";
    for (let i = 0; i < 50 && (text.match(/event: live/g) ?? []).length < n; i++) {
      text += (await r.read()).value ?? "";
    }
    return text;
  };
  const [ta, tb] = await Promise.all([events(a, 3), events(b, 3)]);
  assert(ta.startsWith("retry: 2000\n\n"), ta);
  assert((ta.match(/event: live\ndata: \{/g) ?? []).length >= 3, ta);
  assert((tb.match(/event: live/g) ?? []).length >= 3, tb);
  // Two streams, one producer: about one snapshot per tick, not one per stream per tick.
  const frames = Math.max((ta.match(/event: live/g) ?? []).length, 3);
  assert(made <= frames + 2, `${made} snapshots for ${frames} ticks`);
  assertEquals(feed.clients, 2);
  await a.cancel();
  assertEquals(feed.clients, 1);
  assert(feed.running);
  await b.cancel();
  assertEquals([feed.clients, feed.running], [0, false]);
  feed.close();
});

Deno.test("live merge: a node's counts summed over workers, TTFT weighted, tiers merged", () => {
  const node = (inflight: number, requests: number, p50: number | null) => ({
    id: "n",
    url: "http://h/v1",
    models: ["m"],
    healthy: true,
    health_reason: null,
    ejected_until: null,
    backoff_until: null,
    draining: false,
    inflight,
    max_conns: 8,
    capacity: null,
    probe: null,
    last_minute: {
      ...EMPTY_MINUTE,
      requests,
      errors: 1,
      ttft_p50_ms: p50,
      ttft_p90_ms: p50 === null ? null : p50 * 2,
    },
  });
  const tier = (queued: number, oldest: number) => ({
    alias: "a",
    tier: "m",
    queue_length: queued,
    oldest_wait_ms: oldest,
    waiting: [{ key_id: "k1", band: 0, queued, oldest_wait_ms: oldest }],
  });
  const merged = mergeLiveSnapshots(
    [
      { at: "", nodes: [node(2, 30, 100)], tiers: [tier(1, 50)], workers: [] },
      { at: "", nodes: [node(3, 10, 200)], tiers: [tier(2, 80)], workers: [] },
    ],
    0,
    [],
    [],
  );
  const n = merged.nodes[0];
  // Inflight is the shared table's, read alike by each worker: the larger reading, not a sum.
  assertEquals([n.inflight, n.last_minute.requests, n.last_minute.errors], [3, 40, 2]);
  assertEquals([n.last_minute.ttft_p50_ms, n.last_minute.ttft_p90_ms], [125, 250]);
  assertEquals(n.last_minute.error_rate, 0.05);
  assertEquals(merged.tiers, [{
    alias: "a",
    tier: "m",
    queue_length: 3,
    oldest_wait_ms: 80,
    waiting: [{ key_id: "k1", band: 0, queued: 3, oldest_wait_ms: 80 }],
  }]);
});
