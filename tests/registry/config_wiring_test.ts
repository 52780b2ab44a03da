/**
 * Both halves wired as a gateway wires them, from YAML configs: a downstream publishing with its
 * config manager's registry settings and admin key, a fronting Skeid whose config names a
 * registry probe, its probes following config reloads.
 */
import { assertEquals } from "../_assert.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { ConfigManager } from "../../src/config/config_manager.ts";
import { assertRegistryProbeBlock } from "../../src/config/registry_probe_block.ts";
import { memoryLogger } from "../../src/log.ts";
import { registrySnapshotRoute } from "../../src/registry/route.ts";
import { startCapacityProbes } from "../../src/capacity/probe_manager.ts";
import { tempDir } from "../_helpers/temp.ts";
import { envOf, READ_KEY, SECRET, serve } from "./helpers.ts";
import { turn } from "../capacity/helpers.ts";

const NO_TIMER = { setInterval: () => 0, clearInterval: () => {} };

Deno.test("wiring: config-driven downstream and front; reloads restart the probe only on change", async () => {
  const tmp = await tempDir();
  const env = envOf({ REG_SECRET: SECRET, REG_READ: READ_KEY, ADMIN: "admin-key-abcdef" });
  const logger = memoryLogger();

  // Downstream: registry published, one node nearly full.
  const down = new RoutingCore({ env: () => undefined });
  const downPath = `${tmp.dir}/down.yaml`;
  await Deno.writeTextFile(
    downPath,
    `admin: { api_key_env: ADMIN }
registry: { enabled: true, secret_env: REG_SECRET, read_key_env: REG_READ, ttl_s: 30 }
nodes:
  - { id: gpu-1, url: "http://gpu-1:8000/v1", model: m, max_conns: 4 }
`,
  );
  const downConfig = new ConfigManager({
    skeid: down,
    path: downPath,
    env,
    logger,
    hostname: () => "down-host",
    watchEvents: false,
  });
  await downConfig.load();
  down.startRequest("gpu-1");
  down.startRequest("gpu-1");
  down.startRequest("gpu-1");
  const app = registrySnapshotRoute({
    skeid: down,
    registry: () => downConfig.registry(),
    adminKey: () => downConfig.adminApiKey(),
  });
  const server = serve((req) => app.fetch(req));

  // Front: a node standing for the downstream, probed through its read key.
  const front = new RoutingCore({ env: () => undefined, validateNode: assertRegistryProbeBlock });
  const frontPath = `${tmp.dir}/front.yaml`;
  const frontYaml = (interval: number) =>
    `nodes:
  - id: skeid-b
    url: ${server.origin}/v1
    model: m
    max_conns: 64
    capacity:
      probe: registry
      read_key_env: REG_READ
      secret_env: REG_SECRET
      interval_ms: ${interval}
`;
  await Deno.writeTextFile(frontPath, frontYaml(2000));
  const frontConfig = new ConfigManager({
    skeid: front,
    path: frontPath,
    env,
    logger,
    watchEvents: false,
  });
  const probes = startCapacityProbes({ skeid: front, logger, env, timers: NO_TIMER });
  try {
    await frontConfig.load();
    await turn();
    await probes.settled();
    assertEquals(probes.status().map((s) => [s.node_id, s.state]), [["skeid-b", "accepted"]]);
    assertEquals(front.capacityReading("skeid-b")?.used, 3);
    assertEquals(front.capacityReading("skeid-b")?.limit, 4);
    assertEquals(server.requests[0].headers.get("authorization"), `Bearer ${READ_KEY}`);
    const started = () => logger.lines.filter((l) => l.event === "capacity_probe_started").length;
    assertEquals(started(), 1);

    // The same nodes section again (another comment): nothing restarts.
    await Deno.writeTextFile(frontPath, `# touched\n${frontYaml(2000)}`);
    await frontConfig.reload();
    await turn();
    assertEquals(started(), 1);

    // A changed capacity block: the probe restarts with its new period.
    await Deno.writeTextFile(frontPath, frontYaml(500));
    await frontConfig.reload();
    await turn();
    await probes.settled();
    assertEquals(started(), 2);
    assertEquals(probes.status()[0].period_ms, 500);
    assertEquals(front.capacityReading("skeid-b")?.interval_ms, 500);

    // The downstream turns its registry off: the route is gone, the probe forgets.
    await Deno.writeTextFile(
      downPath,
      `admin: { api_key_env: ADMIN }\nnodes:\n  - { id: gpu-1, url: "http://gpu-1:8000/v1", model: m, max_conns: 4 }\n`,
    );
    await downConfig.reload();
    await probes.pollNow();
    assertEquals(probes.status()[0].state, "unreachable");
    assertEquals(front.capacityReading("skeid-b"), undefined);
  } finally {
    await probes.close();
    await frontConfig.close();
    await downConfig.close();
    await server.close();
    await tmp.cleanup();
  }
});
