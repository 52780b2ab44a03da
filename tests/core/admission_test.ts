import assert from "node:assert/strict";
import { workerShare } from "../../src/core/admission.ts";
import { core, spec } from "./routing_helpers.ts";

Deno.test("finish ok with a duration counts ok and duration_ms_total", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  assert.equal(skeid.startRequest("a"), true);
  assert.equal(skeid.finishRequest("a", { ok: true, duration_ms: 12 }), true);
  assert.deepEqual(skeid.nodeMetrics("a"), {
    node_id: "a",
    inflight: 0,
    started: 1,
    ok: 1,
    error: 0,
    aborted: 0,
    duration_ms_total: 12,
  });
});

Deno.test("outcomes: aborted wins over ok; neither is a failure in the window", () => {
  const { skeid, clock } = core();
  skeid.addNode(spec("a"));
  for (let i = 0; i < 3; i++) skeid.startRequest("a");
  skeid.finishRequest("a", { ok: true, aborted: true });
  skeid.finishRequest("a", { aborted: true });
  skeid.finishRequest("a", {});
  const m = skeid.nodeMetrics("a")!;
  assert.deepEqual([m.ok, m.aborted, m.error, m.inflight], [0, 2, 1, 0]);
  assert.deepEqual(skeid.nodeFailures("a"), {
    errors_in_window: 1,
    last_failure_at: clock.t,
  });
});

Deno.test("failures are counted in 1-s buckets over the error window, then age out", () => {
  const { skeid, clock } = core({ errorWindowS: 60 });
  skeid.addNode(spec("a"));
  skeid.finishRequest("a", { ok: false });
  clock.t += 30_000;
  skeid.finishRequest("a", { ok: false });
  skeid.finishRequest("a", { ok: false });
  assert.equal(skeid.nodeFailures("a").errors_in_window, 3);
  clock.t += 31_000;
  assert.equal(skeid.nodeFailures("a").errors_in_window, 2, "the first one left the window");
  clock.t += 120_000;
  assert.deepEqual(skeid.nodeFailures("a"), {
    errors_in_window: 0,
    last_failure_at: clock.t - 151_000,
  });
  assert.deepEqual(skeid.nodeFailures("nobody"), { errors_in_window: 0, last_failure_at: null });
});

Deno.test("finish never goes below 0 and never touches health", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  skeid.finishRequest("a", { ok: false });
  skeid.finishRequest("a", { ok: false });
  assert.equal(skeid.nodeMetrics("a")?.inflight, 0);
  assert.equal(skeid.getNode("a")?.healthy, true);
  assert.equal(skeid.finishRequest("unknown", { ok: true }), true);
});

Deno.test("start refuses an unknown or unhealthy node", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { healthy: false }));
  assert.equal(skeid.startRequest("a"), false);
  assert.equal(skeid.startRequest("nobody"), false);
  skeid.setNodeHealth("a", true);
  assert.equal(skeid.startRequest("a"), true);
});

Deno.test("worker share of max_conns: 8 → 8, 2 (4 workers), 2 (3 workers); 0 stays 0", () => {
  assert.equal(core({ workerCount: 1 }).skeid.workerMaxConns({ max_conns: 8 }), 8);
  assert.equal(core({ workerCount: 4 }).skeid.workerMaxConns({ max_conns: 8 }), 2);
  assert.equal(core({ workerCount: 3 }).skeid.workerMaxConns({ max_conns: 8 }), 2);
  assert.equal(core({ workerCount: 4 }).skeid.workerMaxConns({ max_conns: 0 }), 0);
  const { skeid } = core({ workerCount: 4 });
  skeid.addNode(spec("n", { max_conns: 8 }));
  assert.deepEqual(skeid.workerShareWarnings(), [], "8 splits across 4 without a warning");
  assert.equal(workerShare(8, 16), 1, "never below 1 when a limit is set");
});

Deno.test("max_conns 2 across 4 workers: share 1 and one warning naming node, 4 and the fix", () => {
  const { skeid } = core({ workerCount: 4 });
  skeid.addNode(spec("tiny", { max_conns: 2 }));
  assert.equal(skeid.workerMaxConns(skeid.getNode("tiny")!), 1);
  const warnings = skeid.workerShareWarnings();
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /'tiny'/);
  assert.match(warnings[0], /max_conns 2/);
  assert.match(warnings[0], /\b4\b/);
  assert.match(warnings[0], /fewer workers or raise max_conns/);
});

Deno.test("max_conns over 3 workers x 2 frontends: share floor(max/6), warned below 6", () => {
  const { skeid } = core({ workerCount: 3, routing: { frontend_count: 2 } });
  skeid.addNode(spec("eight", { max_conns: 8 }));
  skeid.addNode(spec("four", { max_conns: 4 }));
  assert.equal(skeid.workerMaxConns({ max_conns: 8 }), 1);
  assert.equal(skeid.workerMaxConns({ max_conns: 4 }), 1);
  assert.equal(skeid.startRequest("eight"), true);
  assert.equal(skeid.startRequest("eight"), false, "this process's share is 1");
  // 6 processes × 1 never exceeds 8, so only the node that cannot be split is named.
  assert.deepEqual(skeid.workerShareWarnings(), [
    "node 'four': max_conns 4 cannot be split across 2 frontends x 3 workers = 6 processes; " +
    "each process will admit 1, so the node may see up to 6 concurrent requests. " +
    "Use fewer frontends or workers, or raise max_conns.",
  ]);
});

Deno.test("frontends alone split max_conns too, and a change applies at once", () => {
  const { skeid } = core();
  skeid.addNode(spec("n", { max_conns: 2 }));
  assert.equal(skeid.startRequest("n"), true);
  assert.equal(skeid.startRequest("n"), true);
  skeid.finishRequest("n", { ok: true });
  skeid.finishRequest("n", { ok: true });
  skeid.setRouting({ frontend_count: 4 });
  assert.equal(skeid.startRequest("n"), true);
  assert.equal(skeid.startRequest("n"), false, "share 1 of 2 across 4 frontends");
  const [warning] = skeid.workerShareWarnings();
  assert.match(warning, /across 4 frontends;.*fewer frontends or raise max_conns/);
});

Deno.test("4 workers, max_conns 8: 2 admitted, 3rd refused, eligible but unavailable, finish frees", () => {
  const { skeid } = core({ workerCount: 4 });
  skeid.addNode(spec("n1", { max_conns: 8 }));
  assert.equal(skeid.startRequest("n1"), true);
  assert.equal(skeid.startRequest("n1"), true);
  assert.equal(skeid.startRequest("n1"), false);
  const state = skeid.routeState({ model: "m" });
  assert.equal(state.has_available, false);
  assert.equal(state.has_eligible, true);
  assert.equal(skeid.pickNode({ model: "m" }), undefined);
  skeid.finishRequest("n1", { ok: true });
  assert.equal(skeid.routeState({ model: "m" }).has_available, true);
  assert.equal(skeid.startRequest("n1"), true);
});

Deno.test("no reading: inflight decides; a reading keeps used, limit, source and at", () => {
  const { skeid, clock } = core();
  skeid.addNode(spec("gpu-1"));
  assert.equal(skeid.capacityReading("gpu-1"), undefined);
  assert.equal(skeid.startRequest("gpu-1"), true);
  const reading = skeid.setCapacityReading("gpu-1", { used: 6, limit: 8, source: "prometheus" });
  assert.deepEqual(reading, { source: "prometheus", used: 6, limit: 8, at: clock.t });
  assert.deepEqual(skeid.capacityReading("gpu-1"), reading);
});

Deno.test("used 8 of 8: unavailable, still eligible, start refused", () => {
  const { skeid } = core();
  skeid.addNode(spec("gpu-1"));
  skeid.setCapacityReading("gpu-1", { used: 8, limit: 8, source: "prometheus" });
  const state = skeid.routeState({ model: "m" });
  assert.equal(state.has_available, false);
  assert.equal(state.has_eligible, true);
  assert.equal(skeid.startRequest("gpu-1"), false);
});

Deno.test("a roomy reading never widens max_conns: 0/1000 with max_conns 4 admits exactly 4", () => {
  const { skeid } = core();
  skeid.addNode(spec("gpu-1", { max_conns: 4 }));
  skeid.setCapacityReading("gpu-1", { used: 0, limit: 1000, source: "prometheus" });
  let admitted = 0;
  for (let i = 0; i < 10; i++) if (skeid.startRequest("gpu-1")) admitted++;
  assert.equal(admitted, 4);
});

Deno.test("readings are not divided by workers: 32/32 blocks, 0/32 admits the share of 8", () => {
  const { skeid } = core({ workerCount: 4 });
  skeid.addNode(spec("n", { max_conns: 32 }));
  skeid.setCapacityReading("n", { used: 32, limit: 32, source: "registry" });
  assert.equal(skeid.startRequest("n"), false);
  skeid.setCapacityReading("n", { used: 0, limit: 32, source: "registry" });
  let admitted = 0;
  for (let i = 0; i < 20; i++) if (skeid.startRequest("n")) admitted++;
  assert.equal(admitted, 8);
});

Deno.test("an aged-out reading is gone; a pending backoff outlives the age and blocks", () => {
  const { skeid, clock } = core({ capacityMaxAgeMs: 50 });
  skeid.addNode(spec("n"));
  skeid.setCapacityReading("n", { used: 8, limit: 8 });
  clock.t += 60;
  assert.equal(skeid.capacityReading("n"), undefined);
  assert.equal(skeid.startRequest("n"), true, "stale reading ignored, inflight decides");
  skeid.setCapacityReading("n", { retry_after_ms: 30_000, source: "ratelimit" });
  clock.t += 1000;
  assert.ok(skeid.capacityReading("n"), "backoff outlives the age limit");
  assert.equal(skeid.startRequest("n"), false);
  assert.equal(skeid.nextCapacityChangeAt(), clock.t - 1000 + 30_000);
  clock.t += 29_001;
  assert.equal(skeid.startRequest("n"), true);
});

Deno.test("forgetCapacity drops a reading (all, one, or only a given source's)", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  skeid.addNode(spec("b"));
  skeid.setCapacityReading("a", { used: 8, limit: 8, source: "prometheus" });
  skeid.setCapacityReading("b", { used: 8, limit: 8, source: "prometheus" });
  skeid.forgetCapacity("a", "registry");
  assert.ok(skeid.capacityReading("a"), "another source's reading stays");
  skeid.forgetCapacity("a");
  assert.equal(skeid.capacityReading("a"), undefined);
  assert.equal(skeid.startRequest("a"), true);
  skeid.forgetCapacity();
  assert.equal(skeid.capacityReading("b"), undefined);
});

Deno.test("a reading about a node not in the inventory is not kept", () => {
  const { skeid } = core();
  assert.equal(skeid.setCapacityReading("ghost", { used: 1, limit: 1 }), undefined);
  skeid.addNode(spec("ghost"));
  assert.equal(skeid.capacityReading("ghost"), undefined);
});

Deno.test("rate-limit headers become a reading; a 429 backs off without touching health", () => {
  const { skeid } = core();
  skeid.addNode(spec("groq-1"));
  const r = skeid.observeResponseHeaders("groq-1", {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "40",
  });
  assert.deepEqual([r?.limit, r?.used, r?.source], [100, 60, "ratelimit"]);
  assert.equal(skeid.observeResponseHeaders("groq-1", new Headers()), undefined);
  skeid.observeResponseHeaders("groq-1", new Headers({ "retry-after": "2" }), 429);
  assert.equal(skeid.routeState({ model: "m" }).has_available, false);
  assert.equal(skeid.routeState({ model: "m" }).has_eligible, true);
  assert.equal(skeid.getNode("groq-1")?.healthy, true);
});

Deno.test("nodeMetrics shows capacity only while a current reading exists; all nodes in order", () => {
  const { skeid, clock } = core({ capacityMaxAgeMs: 1000 });
  skeid.addNode(spec("b"));
  skeid.addNode(spec("a"));
  skeid.setCapacityReading("a", { used: 1, limit: 4, source: "prometheus" });
  assert.deepEqual(skeid.nodeMetrics("a")?.capacity, {
    source: "prometheus",
    used: 1,
    limit: 4,
    at: clock.t,
  });
  assert.deepEqual(skeid.nodeMetrics().map((m) => [m.node_id, "capacity" in m]), [
    ["b", false],
    ["a", true],
  ]);
  clock.t += 1001;
  assert.equal(skeid.nodeMetrics("a")?.capacity, undefined);
  assert.equal(skeid.nodeMetrics("nobody"), undefined);
});

Deno.test("capacity listeners: told after every change that may admit more", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { max_conns: 1 }));
  const seen: string[] = [];
  let admittedInListener: boolean | undefined;
  const off = skeid.onCapacityChange(() => seen.push("x"));
  const count = () => seen.splice(0).length;

  skeid.startRequest("a");
  assert.equal(count(), 0, "admitting frees nothing");
  const offProbe = skeid.onCapacityChange(() => {
    admittedInListener ??= skeid.startRequest("a");
  });
  skeid.finishRequest("a", { ok: true });
  assert.equal(admittedInListener, true, "the state has changed before listeners run");
  offProbe();
  assert.equal(count(), 1);
  skeid.finishRequest("a", { ok: true });
  assert.equal(count(), 1);
  skeid.setCapacityReading("a", { used: 0, limit: 4 });
  assert.equal(count(), 1);
  skeid.forgetCapacity("a");
  assert.equal(count(), 1);
  skeid.setNodeHealth("a", false);
  assert.equal(count(), 0, "taking a node out frees nothing");
  skeid.setNodeHealth("a", true);
  assert.equal(count(), 1);
  skeid.addNode(spec("b"));
  skeid.replaceNodes([spec("a"), spec("b")]);
  skeid.removeNode("b");
  assert.equal(count(), 3);
  off();
  skeid.finishRequest("a", { ok: true });
  assert.equal(count(), 0, "unsubscribed");
});

Deno.test("a throwing listener breaks neither the core nor the other listeners", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  let told = 0;
  skeid.onCapacityChange(() => {
    throw new Error("waiter bug");
  });
  skeid.onCapacityChange(() => told++);
  skeid.startRequest("a");
  assert.equal(skeid.finishRequest("a", { ok: true }), true);
  assert.equal(told, 1);
  assert.equal(skeid.nodeMetrics("a")?.ok, 1);
});
