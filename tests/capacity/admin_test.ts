/** A running gateway shows its capacity probes and their readings on the admin plane. */
import { assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { startGateway } from "../integration/helpers.ts";

Deno.test("admin: GET /skeid/metrics/nodes lists each probe's state beside the node's reading", async () => {
  const fake = startFakeModel();
  fake.setMetrics({ running: 3, waiting: 1 });
  const t = await startGateway({
    admin_api_key: "adm-probe-test",
    nodes: [
      {
        id: "gpu-1",
        url: fake.url,
        model: "m",
        engine: "vllm",
        max_conns: 8,
        capacity: { probe: "prometheus", interval_ms: 60_000 },
      },
      { id: "gpu-2", url: fake.url, model: "m" },
    ],
  });
  try {
    await t.gw.probes.pollNow("gpu-1");
    const res = await fetch(`${t.base}/skeid/metrics/nodes`, {
      headers: { authorization: "Bearer adm-probe-test" },
    });
    assertEquals(res.status, 200);
    const body = await res.json();
    const probes = body.probes as { node_id: string; probe: string; state: string }[];
    assertEquals(probes.map((p) => [p.node_id, p.probe, p.state]), [["gpu-1", "prometheus", "ok"]]);
    const gpu1 = (body.metrics as { node_id: string; capacity?: unknown }[])
      .find((m) => m.node_id === "gpu-1");
    const cap = gpu1?.capacity as { used: number; limit: number; source: string };
    assertEquals(
      [cap.used, cap.limit, cap.source],
      [4, 8, "prometheus"],
      "running 3 + waiting 1 of 8",
    );
  } finally {
    await t.stop();
    await fake.close();
  }
});
