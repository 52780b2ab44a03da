/**
 * A reload of a large config runs off the serving path: `/health` keeps answering within 200 ms
 * while a 5 MB config (tens of thousands of `keys:` entries) is parsed and applied.
 */
import { assert, assertEquals } from "../_assert.ts";
import { join } from "node:path";
import { startServer } from "../../src/cli/serve.ts";
import { memoryLogger } from "../../src/log.ts";
import { tempDir } from "../_helpers/temp.ts";

/** A config of about `bytes` bytes, most of it customer keys on two policies. */
function bigConfig(bytes: number): { text: string; keys: number } {
  const lines = [
    "nodes:",
    "  - {id: a, url: 'http://127.0.0.1:9', models: [m]}",
    "policies:",
    "  standard: {models: [m]}",
    "  other: {models: [m, n], deny_tags: [cloud]}",
    "keys:",
  ];
  let size = lines.join("\n").length;
  let keys = 0;
  while (size < bytes) {
    const id = `k_${keys.toString(16).padStart(40, "0")}`;
    const line = keys % 3 === 0
      ? `  ${id}: standard`
      : `  ${id}:\n    policy: other\n    deny_tags: [cloud, gpu]`;
    lines.push(line);
    size += line.length + 1;
    keys++;
  }
  return { text: lines.join("\n") + "\n", keys };
}

Deno.test("a reload of a 5 MB config leaves /health answering within 200 ms", async () => {
  const { dir, cleanup } = await tempDir("skeid-config-big-");
  const configPath = join(dir, "skeid.yaml");
  await Deno.writeTextFile(configPath, "routing: {wait_timeout_ms: 10}\n");
  const server = await startServer({
    hostname: "127.0.0.1",
    port: 0,
    configPath,
    env: () => undefined,
    logger: memoryLogger(),
    spillPath: join(dir, "spill.jsonl"),
    reloadIntervalMs: 50,
  });
  try {
    const base = `http://127.0.0.1:${server.addr.port}`;
    const { text, keys } = bigConfig(5_000_000);
    assert(text.length >= 5_000_000, "the config is 5 MB");
    const tmp = join(dir, "next.yaml");
    await Deno.writeTextFile(tmp, text);
    await Deno.rename(tmp, configPath); // read at once: no settle time in the measure
    const known = () => server.gateway.skeid.policySet.knownKeyIds.size;
    let worst = 0;
    let probes = 0;
    const deadline = Date.now() + 120_000;
    // Bounded by the deadline: one /health at a time until the new config is in force.
    while (known() < keys && Date.now() < deadline) {
      const started = performance.now();
      const res = await fetch(`${base}/health`);
      await res.body?.cancel();
      const took = performance.now() - started;
      worst = Math.max(worst, took);
      probes++;
      assertEquals(res.status, 200);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assertEquals(known(), keys, "the big config was applied");
    assert(probes >= 3, `/health was asked during the reload (${probes} times)`);
    assert(worst < 200, `/health took ${Math.round(worst)} ms at worst during the reload`);
    console.log(`/health during a 5 MB reload: ${probes} probes, worst ${Math.round(worst)} ms`);
  } finally {
    await server.stop(5000);
    await cleanup();
  }
});
