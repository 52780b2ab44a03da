/**
 * The Prometheus probe against the fake model's vLLM-format `/metrics` over real HTTP.
 */
import { assert, assertEquals } from "../_assert.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { probeFixture } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { silentLogger } from "../../src/log.ts";
import { startCapacityProbes } from "../../src/capacity/probe_manager.ts";

Deno.test("prometheus: used = running + waiting, limit = max_conns, 12 > 8 blocks with inflight 0", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 3, waiting: 1 });
      f.skeid.addNode({
        id: "gpu-1",
        url: fake.url,
        model: "m",
        max_conns: 8,
        capacity: { probe: "prometheus", interval_ms: 100 },
      });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.capacityReading("gpu-1"), {
        source: "prometheus",
        used: 4,
        limit: 8,
        at: f.time.now,
        interval_ms: 100,
        queue: { running: 3, waiting: 1 },
      });
      assertEquals(f.probes.status()[0].url, fake.url.replace(/\/v1$/, "/metrics"));
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, true);

      fake.setMetrics({ running: 8, waiting: 4 });
      await f.probes.pollNow();
      assertEquals(f.skeid.capacityReading("gpu-1")?.used, 12);
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, false);
      assertEquals(f.skeid.startRequest("gpu-1"), false);
      assertEquals(f.skeid.nodeMetrics("gpu-1")?.inflight, 0, "inflight really is zero");
      assertEquals(fake.stats.metricsRequests, 2);
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: a non-2xx poll forgets (inflight decides), a good one recovers", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 8, waiting: 4 });
      f.skeid.addNode({
        id: "gpu-1",
        url: fake.url,
        model: "m",
        max_conns: 8,
        capacity: { probe: "prometheus" },
      });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, false);

      fake.setMetrics({ status: 503, text: "down" });
      await f.probes.pollNow();
      assertEquals(f.skeid.capacityReading("gpu-1"), undefined);
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, true);
      assertEquals(f.probes.status()[0].state, "unreachable");

      fake.setMetrics({ running: 1, waiting: 0 });
      await f.probes.pollNow();
      assertEquals(f.skeid.capacityReading("gpu-1")?.used, 1);
      assertEquals(
        f.events("capacity_probe_state").map((l) => [l.level, l.state, l.detail]),
        [["warn", "unreachable", "HTTP 503"], ["info", "ok", undefined]],
      );
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: unknown metric names forget; SGLang names on vLLM metrics too", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 5, waiting: 2 });
      f.skeid.addNode({
        id: "gpu-2",
        url: fake.url,
        model: "m",
        max_conns: 4,
        capacity: { probe: "prometheus", running: "nothing:like:this", waiting: "nor:this" },
      });
      f.skeid.addNode({
        id: "gpu-3",
        url: fake.url,
        model: "m",
        max_conns: 4,
        capacity: {
          probe: "prometheus",
          running: "sglang:num_running_reqs",
          waiting: "sglang:num_queue_reqs",
        },
      });
      // A reading left from before must not survive an answer the probe cannot read.
      f.skeid.setCapacityReading("gpu-3", { used: 4, limit: 4, source: "prometheus" });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.capacityReading("gpu-2"), undefined);
      assertEquals(f.skeid.capacityReading("gpu-3"), undefined);
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, true, "inflight decides");
      assertEquals(f.probes.status().map((s) => s.state), ["unknown_metrics", "unknown_metrics"]);
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: overriding running keeps the default waiting (2 + 5)", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 2, waiting: 5 });
      f.skeid.addNode({
        id: "gpu-3",
        url: fake.url,
        max_conns: 4,
        capacity: { probe: "prometheus", running: "vllm:num_requests_running" },
      });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.capacityReading("gpu-3")?.used, 7);
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: SGLang and TGI defaults over HTTP; block limit beats max_conns", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      f.skeid.addNode({
        id: "gpu-1",
        url: fake.url,
        max_conns: 64,
        capacity: { probe: "prometheus", limit: 16 },
      });
      fake.setMetrics({
        text: 'sglang:num_running_reqs{model="x"} 7\nsglang:num_queue_reqs{model="x"} 3\n',
      });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.capacityReading("gpu-1")?.used, 10);
      assertEquals(f.skeid.capacityReading("gpu-1")?.limit, 16);
      fake.setMetrics({ text: "tgi_batch_current_size 4.0\ntgi_queue_size 6.0\n" });
      await f.probes.pollNow();
      assertEquals(f.skeid.capacityReading("gpu-1")?.used, 10);
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: no max_conns and no limit → a reading that does not narrow", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 50, waiting: 50 });
      f.skeid.addNode({
        id: "gpu-1",
        url: fake.url,
        model: "m",
        capacity: { probe: "prometheus" },
      });
      f.probes.refresh();
      await f.probes.settled();
      assertEquals(f.skeid.capacityReading("gpu-1")?.limit, null);
      assertEquals(f.skeid.routeState({ model: "m" }).has_available, true);
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: stop (close, node removal) forgets the probe's reading", async () => {
  await withFakeModel(async (fake) => {
    const f = probeFixture();
    try {
      fake.setMetrics({ running: 3, waiting: 1 });
      for (const id of ["gpu-1", "gpu-2"]) {
        f.skeid.addNode({ id, url: fake.url, max_conns: 8, capacity: { probe: "prometheus" } });
      }
      f.probes.refresh();
      await f.probes.settled();
      assert(f.skeid.capacityReading("gpu-1"), "gpu-1 has a reading before the removal");
      assert(f.skeid.capacityReading("gpu-2"), "gpu-2 has a reading before the removal");
      f.skeid.removeNode("gpu-2");
      f.probes.refresh();
      assertEquals(f.probes.status().map((s) => s.node_id), ["gpu-1"]);
      await f.probes.close();
      assertEquals(f.skeid.capacityReading("gpu-1"), undefined, "close stops and forgets");
      const polls = fake.stats.metricsRequests;
      f.timers.fire();
      await f.probes.pollNow();
      assertEquals(fake.stats.metricsRequests, polls, "a stopped probe polls no more");
    } finally {
      await f.probes.close();
    }
  });
});

Deno.test("prometheus: on the real timer, polls keep coming every period", async () => {
  await withFakeModel(async (fake) => {
    const skeid = new RoutingCore({ env: () => undefined });
    fake.setMetrics({ running: 1, waiting: 1 });
    skeid.addNode({
      id: "gpu-1",
      url: fake.url,
      max_conns: 8,
      capacity: { probe: "prometheus", interval_ms: 100 },
    });
    const probes = startCapacityProbes({ skeid, logger: silentLogger, env: () => undefined });
    try {
      await until(
        () => fake.stats.metricsRequests >= 3,
        () => `3 polls (saw ${fake.stats.metricsRequests})`,
        3000,
      );
      assertEquals(skeid.capacityReading("gpu-1")?.used, 2);
    } finally {
      await probes.close();
    }
  });
});
