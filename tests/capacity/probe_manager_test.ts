/**
 * The probe manager and runner: which nodes get a probe, the poll period, one poll in flight,
 * failures warned once, restarts only when the probed part of the inventory changes, and the
 * guards that keep a stopped probe from writing.
 */
import { assert, assertEquals, assertThrows } from "../_assert.ts";
import { NodeSpecError } from "../../src/core/inventory.ts";
import { probeKindOf, wantsProbe } from "../../src/capacity/for_node.ts";
import type { ProbeContext } from "../../src/capacity/probe.ts";
import { startCapacityProbes } from "../../src/capacity/probe_manager.ts";
import { ProbeFactories } from "../../src/capacity/custom.ts";
import { probeFixture, turn } from "./helpers.ts";
import { serve } from "../registry/helpers.ts";

/** A deferred promise. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

Deno.test("for_node: no block, inflight, none, ratelimit → no probe; unknown kind → error", () => {
  const f = probeFixture();
  f.skeid.addNode({ id: "plain", url: "http://x/v1" });
  f.skeid.addNode({ id: "explicit", url: "http://x/v1", capacity: { probe: "inflight" } });
  f.skeid.addNode({ id: "none", url: "http://x/v1", capacity: { type: "None" } });
  f.skeid.addNode({ id: "cloud", url: "http://x/v1", capacity: { probe: "ratelimit" } });
  f.probes.refresh();
  assertEquals(f.probes.status(), []);
  assertEquals(f.timers.live.size, 0, "nothing on a timer");
  assertEquals(probeKindOf({ capacity: { probe: " Prometheus ", interval_ms: 1 } }), "prometheus");
  assertThrows(
    () => wantsProbe({ capacity: { probe: "telepathy", interval_ms: 1 } }),
    Error,
    "unknown capacity probe 'telepathy'",
  );
  // The core refuses the kind at node add already: a config error, not a silent fallback.
  assertThrows(
    () => f.skeid.addNode({ id: "bogus", url: "http://x/v1", capacity: { probe: "telepathy" } }),
    NodeSpecError,
    "unknown capacity probe",
  );
});

Deno.test("custom code reports through the same contract (source custom, its period)", async () => {
  const f = probeFixture();
  let calls = 0;
  f.skeid.addNode({
    id: "weird",
    url: "http://x/v1",
    model: "m",
    max_conns: 10,
    capacity: {
      probe: "custom",
      interval_ms: 1000,
      code: (probe: ProbeContext) => {
        calls++;
        probe.report({ used: 9, limit: 10 });
      },
    },
  });
  f.probes.refresh();
  await f.probes.settled();
  assertEquals(calls, 1, "start polls once at once");
  assertEquals(f.skeid.capacityReading("weird"), {
    source: "custom",
    used: 9,
    limit: 10,
    at: f.time.now,
    interval_ms: 1000,
  });
  f.timers.fire();
  await f.probes.settled();
  assertEquals(calls, 2, "then on the timer");
  await f.probes.close();
  assertEquals(f.skeid.capacityReading("weird"), undefined, "stop forgets");
});

Deno.test("custom class: a registered factory runs; bad, unknown or missing ones are not started", async () => {
  const factories = new ProbeFactories();
  factories.register("Acme::QueueDepth", (ctx) => ({
    url: "http://queue/depth",
    poll: () => {
      ctx.report({ used: 2, limit: 4 });
    },
  }));
  assertThrows(
    () => factories.register("Acme::QueueDepth", () => ({ poll() {} })),
    Error,
    "already",
  );
  assertThrows(() => factories.register("../x", () => ({ poll() {} })), Error, "invalid");

  const f = probeFixture({ deps: { factories } });
  const add = (id: string, capacity: Record<string, unknown>) =>
    f.skeid.addNode({ id, url: "http://x/v1", capacity: { probe: "custom", ...capacity } });
  add("good", { class: "Acme::QueueDepth" });
  add("inject", { class: "Foo/../../etc/passwd" });
  add("unknown", { class: "Acme::Other" });
  add("broken", {});
  f.probes.refresh();
  await f.probes.settled();
  assertEquals(f.skeid.capacityReading("good")?.used, 2);
  const status = new Map(f.probes.status().map((s) => [s.node_id, s]));
  assertEquals(status.get("good")?.running, true);
  assertEquals(status.get("good")?.url, "http://queue/depth");
  assertEquals(status.get("inject")?.error, "invalid capacity probe class 'Foo/../../etc/passwd'");
  assertEquals(
    status.get("unknown")?.error,
    "unknown capacity probe class 'Acme::Other' (registered: Acme::QueueDepth)",
  );
  assertEquals(status.get("broken")?.error, "capacity probe 'custom' needs a code or class");
  const notStarted = f.events("capacity_probe_not_started");
  assertEquals(notStarted.map((l) => l.node_id), ["inject", "unknown", "broken"]);
  assertEquals(
    notStarted[2].message,
    "capacity probe for 'broken' not started: capacity probe 'custom' needs a code or class",
  );
  f.probes.refresh();
  assertEquals(f.events("capacity_probe_not_started").length, 3, "said once, not every refresh");
  await f.probes.close();
});

Deno.test("a probe whose first poll throws: start survives, the prior reading is dropped, warned once", async () => {
  const f = probeFixture();
  let mode: "throw" | "reject" | "ok" = "throw";
  f.skeid.addNode({
    id: "crashy",
    url: "http://x/v1",
    max_conns: 2,
    capacity: {
      probe: "custom",
      interval_ms: 100,
      code: (probe: ProbeContext): Promise<void> | void => {
        if (mode === "throw") throw new Error("probe exploded");
        if (mode === "reject") return Promise.reject(new Error("probe exploded later"));
        probe.report({ used: 0, limit: 2 });
        return undefined;
      },
    },
  });
  f.skeid.setCapacityReading("crashy", { used: 2, limit: 2 });
  f.probes.refresh();
  await f.probes.settled();
  assertEquals(f.skeid.capacityReading("crashy"), undefined, "degrades to inflight");
  assertEquals(f.probes.status()[0].state, "failed");
  await f.probes.pollNow();
  mode = "reject";
  await f.probes.pollNow();
  mode = "ok";
  await f.probes.pollNow();
  assertEquals(f.skeid.capacityReading("crashy")?.used, 0);
  mode = "throw";
  await f.probes.pollNow();
  const lines = f.events("capacity_probe_state");
  assertEquals(lines.map((l) => [l.level, l.state]), [
    ["warn", "failed"],
    ["info", "ok"],
    ["warn", "failed"],
  ]);
  assertEquals(lines[0].message, "capacity probe for 'crashy' failed: probe exploded");
  await f.probes.close();
});

Deno.test("poll period: interval_ms × worker_count, floor 100 ms, default 2000", async () => {
  const f = probeFixture({ workerCount: 4 });
  const add = (id: string, interval?: number) =>
    f.skeid.addNode({
      id,
      url: "http://x/v1",
      capacity: { probe: "custom", code: () => {}, ...(interval ? { interval_ms: interval } : {}) },
    });
  add("a", 2000);
  add("b", 10);
  add("c");
  f.probes.refresh();
  assertEquals(f.timers.periods(), [8000, 100, 8000]);
  assertEquals(f.probes.status().map((s) => s.period_ms), [8000, 100, 8000]);
  await f.probes.close();
  assertEquals(f.timers.live.size, 0, "close clears every timer");
});

Deno.test("one poll in flight per probe: ticks while it runs start nothing", async () => {
  const f = probeFixture();
  let calls = 0;
  let gate = deferred();
  f.skeid.addNode({
    id: "slow",
    url: "http://x/v1",
    capacity: {
      probe: "custom",
      code: () => {
        calls++;
        return gate.promise;
      },
    },
  });
  f.probes.refresh();
  f.timers.fire();
  f.timers.fire();
  const manual = f.probes.pollNow();
  assertEquals(calls, 1);
  gate.resolve();
  await manual;
  gate = deferred();
  f.timers.fire();
  assertEquals(calls, 2, "the next tick after it finished polls again");
  gate.resolve();
  await f.probes.close();
});

Deno.test("restarts follow url and capacity block changes, not health flips or same-spec adds", async () => {
  const f = probeFixture();
  const code = () => {};
  const spec = { id: "n1", url: "http://a/v1", capacity: { probe: "custom", code } };
  f.skeid.addNode(spec);
  f.probes.refresh();
  const started = () => f.events("capacity_probe_started").length;
  assertEquals(started(), 1);

  f.skeid.setNodeHealth("n1", false);
  f.skeid.setNodeHealth("n1", true);
  await turn();
  f.skeid.addNode({ ...spec, weight: 3, max_conns: 4 }); // not a probed field
  await turn();
  assertEquals(started(), 1, "health flips and unprobed fields restart nothing");

  f.skeid.addNode({ ...spec, capacity: { probe: "custom", code, interval_ms: 500 } });
  await turn();
  assertEquals(started(), 2, "a changed capacity block restarts (followed on its own)");
  assertEquals(f.timers.periods(), [500]);

  f.skeid.addNode({
    ...spec,
    url: "http://b/v1",
    capacity: { probe: "custom", code, interval_ms: 500 },
  });
  await turn();
  assertEquals(started(), 3, "a changed url restarts");

  f.skeid.addNode({
    ...spec,
    url: "http://b/v1",
    capacity: { probe: "custom", code: () => {}, interval_ms: 500 },
  });
  await turn();
  assertEquals(started(), 4, "another code function is another probe");

  f.skeid.removeNode("n1");
  await turn();
  assertEquals(f.probes.status(), []);
  assertEquals(f.timers.live.size, 0);
  assertEquals(f.events("capacity_probe_stopped").length, 4);
  await f.probes.close();
});

Deno.test("a stopped probe writes nothing: the answer of a poll still out is dropped", async () => {
  const f = probeFixture();
  const gate = deferred();
  let held: ProbeContext | undefined;
  f.skeid.addNode({
    id: "n1",
    url: "http://a/v1",
    capacity: {
      probe: "custom",
      code: async (probe: ProbeContext) => {
        held = probe;
        await gate.promise;
        probe.report({ used: 5, limit: 5 });
      },
    },
  });
  f.probes.refresh();
  f.skeid.addNode({ id: "n1", url: "http://a/v1" }); // the block goes away: the probe stops
  await turn();
  assertEquals(f.probes.status(), []);
  assert(held?.stopped, "the context says it is stopped");
  assert(held.signal.aborted, "and its signal is aborted");
  gate.resolve();
  await f.probes.settled();
  assertEquals(f.skeid.capacityReading("n1"), undefined, "the late answer was not recorded");
  await f.probes.close();
});

Deno.test("close aborts a probe request in flight and waits for it; timeouts are named", async () => {
  const release = deferred();
  const server = serve(async () => {
    await release.promise;
    return new Response("vllm:num_requests_running 1\n");
  });
  const f = probeFixture({ deps: { fetch, timeouts: { connectMs: 60_000, requestMs: 60_000 } } });
  const g = probeFixture({ deps: { fetch, timeouts: { connectMs: 30, requestMs: 60_000 } } });
  try {
    for (const fx of [f, g]) {
      fx.skeid.addNode({
        id: "gpu-1",
        url: `${server.origin}/v1`,
        max_conns: 4,
        capacity: { probe: "prometheus" },
      });
      fx.probes.refresh();
    }
    // g: no headers within 30 ms → unreachable, naming the timeout.
    await g.probes.settled();
    assertEquals(g.probes.status()[0].state, "unreachable");
    assertEquals(
      g.events("capacity_probe_state")[0].detail,
      "connect timed out after 30 ms",
    );
    // f: its request is still out; close aborts it and returns without waiting for the server.
    await f.probes.close();
    assertEquals(f.skeid.capacityReading("gpu-1"), undefined);
  } finally {
    release.resolve();
    await f.probes.close();
    await g.probes.close();
    await server.close();
  }
});

Deno.test("startCapacityProbes starts what the inventory asks for and follows it", async () => {
  const f = probeFixture();
  f.skeid.addNode({
    id: "n1",
    url: "http://a/v1",
    capacity: { probe: "custom", code: (p: ProbeContext) => void p.report({ used: 1, limit: 2 }) },
  });
  const probes = startCapacityProbes({
    skeid: f.skeid,
    logger: f.logger,
    timers: f.timers,
    env: () => undefined,
  });
  try {
    assertEquals(probes.status().map((s) => s.node_id), ["n1"]);
    assertEquals(f.skeid.capacityReading("n1")?.used, 1);
    f.skeid.replaceNodes([{
      id: "n2",
      url: "http://b/v1",
      capacity: { probe: "custom", code: () => {} },
    }]);
    await turn();
    assertEquals(probes.status().map((s) => s.node_id), ["n2"]);
  } finally {
    await probes.close();
    await f.probes.close();
  }
});
