/**
 * The Live page through a real gateway (ADR 0036): `GET /skeid/live/snapshot` shows a held
 * request's inflight, the waiter behind it and the node's last minute; `GET /skeid/live` streams
 * `event: live` about every second and ends cleanly when the client leaves. With
 * SKEID_TEST_WORKERS=2 the figures are the group's (every worker's merged).
 */
import { assert, assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { chat, post, startGateway } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";
import type { LiveSnapshot } from "../../src/admin/live.ts";

const ADMIN = { authorization: "Bearer adm-live-0123456789" };

Deno.test("live snapshot: inflight of a held request, its waiter, the last minute after", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    admin_api_key: "adm-live-0123456789",
    nodes: [{ id: "a", url: `http://u:p@${fake.url.slice(7)}`, model: "m", max_conns: 1 }],
    aliases: { house: { tiers: [{ model: "m", wait_ms: 5000 }] } },
  });
  try {
    const snap = async (): Promise<LiveSnapshot> => {
      const res = await fetch(`${t.base}/skeid/live/snapshot`, { headers: ADMIN });
      assertEquals(res.status, 200);
      return await res.json();
    };
    const first = post(`${t.base}/v1/chat/completions`, chat("house", { fake_ttft_ms: 700 }));
    await until(async () => (await snap()).nodes[0]?.inflight === 1, "the first in flight");
    const second = post(`${t.base}/v1/chat/completions`, chat("house"));
    let s = await snap();
    await until(async () => (s = await snap()).tiers.length === 1, "the second waiting");
    const n = s.nodes[0];
    assertEquals(
      [n.id, n.models, n.healthy, n.draining, n.inflight, n.max_conns],
      ["a", ["m"], true, false, 1, 1],
    );
    assert(!n.url.includes("u:p@"), `no credentials in ${n.url}`);
    assertEquals([s.tiers[0].alias, s.tiers[0].tier, s.tiers[0].queue_length], ["house", "m", 1]);
    assertEquals(s.tiers[0].waiting.length, 1);
    assert(s.workers.length >= 1 && typeof s.at === "string");
    assertEquals([(await first).status, (await second).status], [200, 200]);
    await until(async () => (s = await snap()).nodes[0].last_minute.requests === 2, "2 counted");
    const m = s.nodes[0].last_minute;
    assertEquals([m.errors, m.error_rate, s.tiers.length, s.nodes[0].inflight], [0, 0, 0, 0]);
    assert(m.ttft_p90_ms !== null && m.ttft_p90_ms >= 600, JSON.stringify(m));
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("live stream: two events read with a real fetch, then the client leaves", async () => {
  const t = await startGateway({
    admin_api_key: "adm-live-0123456789",
    nodes: [{ id: "a", url: "http://127.0.0.1:9/v1", model: "m" }],
  });
  try {
    const ctl = new AbortController();
    const res = await fetch(`${t.base}/skeid/live`, { headers: ADMIN, signal: ctl.signal });
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const started = Date.now();
    for (let i = 0; i < 20 && (text.match(/event: live\n/g) ?? []).length < 2; i++) {
      text += (await reader.read()).value ?? "";
    }
    const took = Date.now() - started;
    const frames = text.split("\n\n").filter((f) => f.startsWith("event: live\n"));
    assert(frames.length >= 2, text);
    const data = JSON.parse(frames[0].split("\ndata: ")[1]) as LiveSnapshot;
    assertEquals(data.nodes.map((n) => n.id), ["a"]);
    assert(took >= 700 && took < 5000, `two events ~1 s apart took ${took} ms`);
    ctl.abort();
    await reader.cancel().catch(() => {});
    // The producer stops once its last stream ended (one process: the gateway's own feed).
    if (Deno.env.get("SKEID_TEST_WORKERS") === undefined) {
      await until(() => t.gw.live.clients === 0 && !t.gw.live.running, "the feed idle");
    }
  } finally {
    await t.stop();
  }
});

Deno.test("live stream: a gateway that stops ends the open streams (no wait for the grace)", async () => {
  const t = await startGateway({
    admin_api_key: "adm-live-0123456789",
    nodes: [{ id: "a", url: "http://127.0.0.1:9/v1", model: "m" }],
  });
  let stopped = false;
  try {
    const res = await fetch(`${t.base}/skeid/live`, { headers: ADMIN });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    for (let i = 0; i < 10 && !text.includes("event: live"); i++) {
      text += (await reader.read()).value ?? "";
    }
    const began = Date.now();
    const stopping = t.stop();
    stopped = true;
    for (let i = 0; i < 100; i++) {
      if ((await reader.read().catch(() => ({ done: true }))).done) break;
    }
    await stopping;
    // The stop's grace is 2 s: ending the stream first lets the connection close well before.
    const took = Date.now() - began;
    assert(took < 1800, `stopped in ${took} ms`);
  } finally {
    if (!stopped) await t.stop();
  }
});
