import assert from "node:assert/strict";
import { CapacityTable } from "../../src/core/capacity.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";

/** A table on a hand-driven clock. */
function table(maxAgeMs = 5000, start = 1_000_000) {
  const clock = { t: start };
  const t = new CapacityTable({ now: () => clock.t, maxAgeMs });
  return { t, clock };
}

Deno.test("no reading: admission allowed, inflight decides", () => {
  const { t } = table();
  assert.equal(t.get("gpu-1"), undefined);
  assert.equal(t.allows("gpu-1"), true);
  assert.equal(t.nextChangeAt(), undefined);
});

Deno.test("a reading keeps used, limit, source and at", () => {
  const { t, clock } = table();
  const r = t.set("gpu-1", { used: 6, limit: 8, source: "prometheus" });
  assert.deepEqual(r, { source: "prometheus", used: 6, limit: 8, at: clock.t });
  assert.deepEqual(t.get("gpu-1"), r);
  assert.equal(t.allows("gpu-1"), true);
});

Deno.test("defaults: source custom, used/limit null, at now; bad numbers become null", () => {
  const { t, clock } = table();
  const r = t.set("n", { used: Number.NaN, interval_ms: 0 });
  assert.deepEqual(r, { source: "custom", used: null, limit: null, at: clock.t });
});

Deno.test("full reading refuses: used 8 of 8", () => {
  const { t } = table();
  t.set("gpu-1", { used: 8, limit: 8 });
  assert.equal(t.allows("gpu-1"), false);
  t.set("gpu-1", { used: 7, limit: 8 });
  assert.equal(t.allows("gpu-1"), true);
});

Deno.test("limit absent or <= 0 does not constrain admission", () => {
  const { t } = table();
  t.set("a", { used: 100, limit: null });
  t.set("b", { used: 100, limit: 0 });
  t.set("c", { used: 100, limit: -3 });
  assert.equal(t.allows("a"), true);
  assert.equal(t.allows("b"), true);
  assert.equal(t.allows("c"), true);
});

Deno.test("a roomy reading allows (0 of 1000)", () => {
  const { t } = table();
  t.set("gpu-1", { used: 0, limit: 1000 });
  assert.equal(t.allows("gpu-1"), true);
});

Deno.test("reading older than max age is gone; a pending backoff outlives it", () => {
  const { t, clock } = table(50);
  t.set("gpu-1", { used: 8, limit: 8 });
  clock.t += 49;
  assert.notEqual(t.get("gpu-1"), undefined);
  clock.t += 1;
  assert.equal(t.get("gpu-1"), undefined);
  assert.equal(t.allows("gpu-1"), true);

  t.set("gpu-1", { retry_after_ms: 30_000, source: "ratelimit" });
  clock.t += 60; // past the age limit, inside the backoff
  const r = t.get("gpu-1");
  assert.equal(r?.retry_after, clock.t - 60 + 30_000);
  assert.equal(t.allows("gpu-1"), false);
  clock.t += 30_000; // backoff over: the aged reading is dropped at last
  assert.equal(t.get("gpu-1"), undefined);
  assert.equal(t.allows("gpu-1"), true);
});

Deno.test("max age 0 disables expiry", () => {
  const { t, clock } = table(0);
  t.set("gpu-1", { used: 8, limit: 8 });
  clock.t += 86_400_000;
  assert.equal(t.allows("gpu-1"), false);
  assert.equal(t.nextChangeAt(), undefined);
});

Deno.test("expires_at drops a reading inside the age limit", () => {
  const { t, clock } = table(5000);
  t.set("gpu-1", { used: 8, limit: 8, source: "registry", expires_at: clock.t + 100 });
  clock.t += 99;
  assert.equal(t.allows("gpu-1"), false);
  clock.t += 1;
  assert.equal(t.get("gpu-1"), undefined);
});

Deno.test("a reading set with an old at is as old as its at", () => {
  const { t, clock } = table(5000);
  const r = t.set("gpu-1", { used: 1, limit: 8, source: "registry", at: clock.t - 6000 });
  assert.equal(r, undefined);
  assert.equal(t.get("gpu-1"), undefined);
});

Deno.test("retry_after_ms is relative; retry_after absolute; the relative one wins", () => {
  const { t, clock } = table();
  assert.equal(t.set("a", { retry_after_ms: 2000 })?.retry_after, clock.t + 2000);
  assert.equal(t.set("b", { retry_after: clock.t + 500 })?.retry_after, clock.t + 500);
  assert.equal(
    t.set("c", { retry_after_ms: 100, retry_after: clock.t + 9999 })?.retry_after,
    clock.t + 100,
  );
  assert.equal(t.set("d", { retry_after_ms: 0 })?.retry_after, undefined);
  assert.equal(t.allows("a"), false);
  clock.t += 2000;
  assert.equal(t.allows("a"), true);
});

Deno.test("quota and interval_ms are kept; interval_ms <= 0 is not", () => {
  const { t } = table();
  const r = t.set("n", { used: 1, limit: 2, quota: "tokens", interval_ms: 2000 });
  assert.equal(r?.quota, "tokens");
  assert.equal(r?.interval_ms, 2000);
  assert.equal("interval_ms" in (t.set("m", { interval_ms: -1 }) ?? {}), false);
});

Deno.test("forget: one node, by source only when that source wrote it, or all", () => {
  const { t } = table();
  t.set("a", { used: 8, limit: 8, source: "ratelimit" });
  t.set("b", { used: 8, limit: 8, source: "prometheus" });
  t.set("c", { used: 8, limit: 8 });
  t.forget("a", "registry");
  assert.notEqual(t.get("a"), undefined, "another source's reading survives");
  t.forget("a", "ratelimit");
  assert.equal(t.get("a"), undefined);
  t.forget("b");
  assert.equal(t.get("b"), undefined);
  assert.notEqual(t.get("c"), undefined);
  t.forget();
  assert.equal(t.get("c"), undefined);
  t.forget("nope"); // unknown id is fine
});

Deno.test("tighter wins: the same source always replaces, even with a looser reading", () => {
  const { t } = table();
  t.set("n", { used: 8, limit: 8, source: "prometheus", interval_ms: 2000 });
  const r = t.set("n", { used: 0, limit: 8, source: "prometheus", interval_ms: 2000 });
  assert.equal(r?.used, 0);
  assert.equal(t.allows("n"), true);
});

Deno.test("tighter wins: a pending backoff is not lifted by an empty registry snapshot", () => {
  const { t, clock } = table();
  t.set("n", { retry_after_ms: 2000, source: "ratelimit" });
  const r = t.set("n", { used: 0, limit: 10, source: "registry", interval_ms: 100 });
  assert.equal(r?.source, "ratelimit", "set returns the reading in force");
  assert.equal(t.allows("n"), false);
  clock.t += 2000; // backoff over: now the registry may replace it
  assert.equal(t.set("n", { used: 0, limit: 10, source: "registry" })?.source, "registry");
  assert.equal(t.allows("n"), true);
});

Deno.test("tighter wins: a fresh tight probe holds a roomy response off until its next poll", () => {
  const { t, clock } = table();
  t.set("n", { used: 8, limit: 8, source: "prometheus", interval_ms: 2000 });
  clock.t += 1999;
  const held = t.set("n", { used: 1, limit: 100, source: "ratelimit" });
  assert.equal(held?.source, "prometheus");
  assert.equal(t.allows("n"), false);
  clock.t += 1; // age = the probe's interval: the probe had its poll, so it no longer holds
  assert.equal(t.set("n", { used: 1, limit: 100, source: "ratelimit" })?.source, "ratelimit");
  assert.equal(t.allows("n"), true);
});

Deno.test("tighter wins: the longer of the two intervals sets the window", () => {
  const { t, clock } = table(0);
  t.set("n", { used: 8, limit: 8, source: "custom", interval_ms: 500 });
  clock.t += 1000; // older than its own interval, younger than the incoming probe's
  const held = t.set("n", { used: 2, limit: 8, source: "prometheus", interval_ms: 2000 });
  assert.equal(held?.source, "custom");
  clock.t += 1000;
  const replaced = t.set("n", { used: 2, limit: 8, source: "prometheus", interval_ms: 2000 });
  assert.equal(replaced?.source, "prometheus");
});

Deno.test("tighter wins: two passive readings never hold each other off", () => {
  const { t } = table();
  t.set("n", { used: 10, limit: 10, source: "ratelimit" });
  const r = t.set("n", { used: 0, limit: 10, source: "custom" });
  assert.equal(r?.source, "custom");
  assert.equal(t.allows("n"), true);
});

Deno.test("tighter wins: a looser current reading is replaced by a tighter one at once", () => {
  const { t } = table();
  t.set("n", { used: 1, limit: 10, source: "prometheus", interval_ms: 2000 });
  const r = t.set("n", { used: 10, limit: 10, source: "ratelimit" });
  assert.equal(r?.source, "ratelimit");
  assert.equal(t.allows("n"), false);
});

Deno.test("tighter wins: an equally tight reading replaces (tighter must be strict)", () => {
  const { t } = table();
  t.set("n", { used: 4, limit: 8, source: "prometheus", interval_ms: 2000 });
  assert.equal(t.set("n", { used: 2, limit: 4, source: "ratelimit" })?.source, "ratelimit");
});

Deno.test("tighter wins: a reading without a limit is the loosest", () => {
  const { t } = table();
  t.set("n", { used: 1, limit: 100, source: "prometheus", interval_ms: 2000 });
  const r = t.set("n", { used: 50, limit: null, source: "custom" });
  assert.equal(r?.source, "prometheus");
});

Deno.test("tighter wins: a stale current reading holds nothing off", () => {
  const { t, clock } = table(1000);
  t.set("n", { used: 8, limit: 8, source: "prometheus", interval_ms: 5000 });
  clock.t += 1000; // aged out under max age even though its interval is longer
  assert.equal(t.set("n", { used: 0, limit: 8, source: "ratelimit" })?.source, "ratelimit");
});

Deno.test("readings are copies: mutating one changes nothing stored", () => {
  const { t } = table();
  const r = t.set("n", { used: 8, limit: 8 });
  if (r) r.used = 0;
  const g = t.get("n");
  if (g) g.limit = 1000;
  assert.equal(t.allows("n"), false);
  assert.deepEqual(t.get("n")?.used, 8);
});

Deno.test("nextChangeAt: earliest backoff end or expiry among refusing readings", () => {
  const { t, clock } = table(5000);
  const t0 = clock.t;
  t.set("roomy", { used: 0, limit: 8 }); // allows: not a candidate
  assert.equal(t.nextChangeAt(), undefined);
  t.set("full", { used: 8, limit: 8 });
  assert.equal(t.nextChangeAt(), t0 + 5000);
  t.set("reg", { used: 3, limit: 3, source: "registry", expires_at: t0 + 800 });
  assert.equal(t.nextChangeAt(), t0 + 800);
  t.set("groq", { retry_after_ms: 300, source: "ratelimit" });
  assert.equal(t.nextChangeAt(), t0 + 300);
  clock.t = t0 + 300; // backoff ended: that reading allows now
  assert.equal(t.allows("groq"), true);
  assert.equal(t.nextChangeAt(), t0 + 800);
  clock.t = t0 + 800;
  assert.equal(t.nextChangeAt(), t0 + 5000);
  clock.t = t0 + 5000;
  assert.equal(t.nextChangeAt(), undefined);
  assert.equal(t.allows("full"), true);
});

Deno.test("nextChangeAt: a backoff longer than the age limit reports the backoff end", () => {
  const { t, clock } = table(50);
  t.set("n", { used: 8, limit: 8, retry_after_ms: 30_000 });
  assert.equal(t.nextChangeAt(), clock.t + 30_000);
});

// ---- the same behaviours through the core's admission (behaviours.md, t/28, t/30) ------------

function gateway(opts: { maxAgeMs?: number; workers?: number } = {}) {
  const clock = { t: 1_700_000_000_000 };
  const skeid = new RoutingCore({
    now: () => clock.t,
    env: () => undefined,
    capacityMaxAgeMs: opts.maxAgeMs ?? 5000,
    workerCount: opts.workers ?? 1,
  });
  return { skeid, clock };
}

const GPU = { id: "gpu-1", url: "http://127.0.0.1:9/v1", model: "m" };

Deno.test("core: no reading → inflight decides; used 8 of 8 → unavailable, still eligible", () => {
  const { skeid } = gateway();
  skeid.addNode({ ...GPU, max_conns: 8 });
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.routeState({ model: "m" }).has_available, true);
  skeid.setCapacityReading("gpu-1", { used: 8, limit: 8, source: "prometheus" });
  const state = skeid.routeState({ model: "m" });
  assert.equal(state.has_eligible, true);
  assert.equal(state.has_available, false);
  assert.equal(skeid.startRequest("gpu-1"), false);
  assert.equal(skeid.pickNode({ model: "m" }), undefined);
});

Deno.test("core: a roomy reading (0/1000) never widens max_conns 4", () => {
  const { skeid } = gateway();
  skeid.addNode({ ...GPU, max_conns: 4 });
  skeid.setCapacityReading("gpu-1", { used: 0, limit: 1000, source: "custom" });
  let admitted = 0;
  for (let i = 0; i < 10; i++) if (skeid.startRequest("gpu-1")) admitted++;
  assert.equal(admitted, 4);
});

Deno.test("core: readings are not divided by workers: 32/32 blocks, 0/32 admits the share 8", () => {
  const { skeid } = gateway({ workers: 4 });
  skeid.addNode({ ...GPU, max_conns: 32 });
  skeid.setCapacityReading("gpu-1", { used: 32, limit: 32, source: "prometheus" });
  assert.equal(skeid.startRequest("gpu-1"), false);
  skeid.setCapacityReading("gpu-1", { used: 0, limit: 32, source: "prometheus" });
  let admitted = 0;
  for (let i = 0; i < 20; i++) if (skeid.startRequest("gpu-1")) admitted++;
  assert.equal(admitted, 8);
});

Deno.test("core: max age 50 drops the reading; a 30 s backoff outlives it and blocks", () => {
  const { skeid, clock } = gateway({ maxAgeMs: 50 });
  skeid.addNode(GPU);
  skeid.setCapacityReading("gpu-1", { used: 8, limit: 8 });
  clock.t += 60;
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.startRequest("gpu-1"), true);
  skeid.finishRequest("gpu-1", { ok: true });
  skeid.setCapacityReading("gpu-1", { retry_after_ms: 30_000, source: "ratelimit" });
  clock.t += 60;
  assert.notEqual(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.startRequest("gpu-1"), false);
});

Deno.test("core: forget drops the reading; remove + re-add starts without one", () => {
  const { skeid } = gateway();
  skeid.addNode(GPU);
  skeid.setCapacityReading("gpu-1", { used: 8, limit: 8 });
  skeid.forgetCapacity("gpu-1");
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  skeid.setCapacityReading("gpu-1", { used: 8, limit: 8 });
  skeid.removeNode("gpu-1");
  skeid.addNode(GPU);
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.startRequest("gpu-1"), true);
});

Deno.test("core: 429 with retry-after 2 → backoff, healthy untouched, still eligible", () => {
  const { skeid, clock } = gateway();
  skeid.addNode(GPU);
  const r = skeid.observeResponseHeaders("gpu-1", { "retry-after": "2" }, 429);
  assert.equal(r?.retry_after, clock.t + 2000);
  assert.equal(skeid.getNode("gpu-1")?.healthy, true);
  const state = skeid.routeState({ model: "m" });
  assert.deepEqual([state.has_eligible, state.has_available], [true, false]);
  assert.equal(skeid.observeResponseHeaders("gpu-1", {}, 429)?.retry_after, clock.t + 1000);
  assert.equal(skeid.observeResponseHeaders("gpu-1", { "content-type": "x" }, 200), undefined);
  clock.t += 1000;
  assert.equal(skeid.routeState({ model: "m" }).has_available, true);
});

Deno.test("core: Retry-After backs off on 429/503 only, capped by routing.max_retry_after_ms", () => {
  const { skeid, clock } = gateway();
  skeid.addNode(GPU);
  const available = () => skeid.routeState({ model: "m" }).has_available;
  assert.equal(skeid.observeResponseHeaders("gpu-1", { "retry-after": "3600" }, 200), undefined);
  assert.equal(available(), true, "a 200's Retry-After holds no one back");
  assert.equal(
    skeid.observeResponseHeaders("gpu-1", { "retry-after": "3600" }, 503)?.retry_after,
    clock.t + 60_000,
    "an hour asked, the default cap given",
  );
  clock.t += 60_000;
  assert.equal(available(), true);
  skeid.setRouting({ max_retry_after_ms: 2500 });
  const date = new Date(clock.t + 3_600_000).toUTCString(); // an IMF-fixdate an hour ahead
  assert.equal(
    skeid.observeResponseHeaders("gpu-1", { "retry-after": date }, 429)?.retry_after,
    clock.t + 2500,
  );
  clock.t += 2500;
  assert.equal(available(), true);
});

Deno.test("core: node metrics show the reading only while it is current", () => {
  const { skeid, clock } = gateway({ maxAgeMs: 100 });
  skeid.addNode(GPU);
  skeid.observeResponseHeaders("gpu-1", {
    "x-ratelimit-limit-requests": "10",
    "x-ratelimit-remaining-requests": "0",
  });
  assert.equal(skeid.nodeMetrics("gpu-1")?.capacity?.source, "ratelimit");
  assert.equal(skeid.nodeMetrics("gpu-1")?.capacity?.used, 10);
  clock.t += 100;
  assert.equal(skeid.nodeMetrics("gpu-1")?.capacity, undefined);
});
