/**
 * Two real gateways (after the wiring in gateway.ts/server.ts): B publishes its registry in
 * front of a fake model read by a Prometheus probe; A fronts B through a registry probe.
 */
import { assertEquals } from "../_assert.ts";
import { until } from "../_helpers/poll.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { chat, post, startGateway } from "../integration/helpers.ts";
import { SECRET } from "./helpers.ts";

Deno.test("e2e: front → registry → downstream → prometheus → fake model", async () => {
  await withFakeModel(async (fake) => {
    fake.setMetrics({ running: 1, waiting: 0 });
    const env = { REG_SECRET: SECRET, REG_READ: "read-key-123", ADMIN: "admin-key-123" };
    const b = await startGateway({
      admin: { api_key_env: "ADMIN" },
      registry: { enabled: true, secret_env: "REG_SECRET", read_key_env: "REG_READ" },
      nodes: [{
        id: "gpu-1",
        url: fake.url,
        model: "m",
        max_conns: 4,
        capacity: { probe: "prometheus", interval_ms: 100 },
      }],
    }, { env });
    const a = await startGateway({
      nodes: [{
        id: "skeid-b",
        url: `${b.base}/v1`,
        model: "m",
        max_conns: 64,
        capacity: {
          probe: "registry",
          secret_env: "REG_SECRET",
          read_key_env: "REG_READ",
          interval_ms: 100,
        },
      }],
    }, { env });
    try {
      await until(() => a.gw.skeid.capacityReading("skeid-b")?.used === 1, "A sees B's reading");
      assertEquals(a.gw.skeid.capacityReading("skeid-b")?.limit, 4);
      const ok = await post(`${a.base}/v1/chat/completions`, chat("m"));
      assertEquals(ok.status, 200);
      fake.setMetrics({ running: 4, waiting: 2 });
      await until(() => a.gw.skeid.capacityReading("skeid-b")?.used === 4, "A sees B full");
      assertEquals(a.gw.skeid.routeState({ model: "m" }).has_available, false);
      const snap = await fetch(`${b.base}/skeid/registry/snapshot`, {
        headers: { authorization: "Bearer read-key-123" },
      });
      assertEquals(snap.status, 200);
      assertEquals((await snap.json()).nodes[0].capacity.source, "prometheus");
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});
