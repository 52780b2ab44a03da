/**
 * A reload of a large config runs off the serving path: `/health` keeps answering within 200 ms
 * while a 5 MB config (tens of thousands of `keys:` entries) is parsed and applied. The gateway
 * runs as `scripts/skeid serve`; the bound is asserted on what its serving thread spends between
 * two probes during the reload (tests/_helpers/serving_thread.ts).
 */
import { assert } from "../_assert.ts";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "../_helpers/temp.ts";
import { probeServingThread } from "../_helpers/serving_thread.ts";

const LAUNCHER = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

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
  const child = new Deno.Command(LAUNCHER, {
    args: ["serve", "--config", configPath, "--listen", "127.0.0.1:0"],
    stdout: "piped",
    stderr: "piped",
    env: { SKEID_LOG_LEVEL: "info" },
  }).spawn();
  const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let logs = "";
  const drain = (async () => {
    for (;;) {
      const { value, done } = await stderr.read();
      if (done) break;
      logs += value;
    }
  })();
  try {
    let out = "";
    let base: string | undefined;
    const startBy = Date.now() + 30_000;
    while (base === undefined && Date.now() < startBy) {
      const { value, done } = await stdout.read();
      if (done) break;
      out += value;
      base = /listening on (http:\/\/\S+)/.exec(out)?.[1];
    }
    assert(base !== undefined, `serve started: ${out}${logs}`);
    const { text } = bigConfig(5_000_000);
    assert(text.length >= 5_000_000, "the config is 5 MB");
    const applied = () => (logs.match(/"config_applied"/g) ?? []).length;
    const before = applied();
    const tmp = join(dir, "next.yaml");
    await Deno.writeTextFile(tmp, text);
    await Deno.rename(tmp, configPath); // read at once: no settle time in the measure
    const { probes, worstMs, longestStepMs, cpuMs } = await probeServingThread(
      base,
      child.pid,
      () => applied() > before,
    );
    assert(applied() > before, `the big config was applied: ${logs.slice(-400)}`);
    assert(probes >= 3, `/health was asked during the reload (${probes} times)`);
    // No stretch between two probes cost the serving thread 200 ms of CPU: no step of the
    // reload held /health that long.
    assert(
      longestStepMs < 200,
      `the serving thread spent ${longestStepMs} ms of CPU between two /health probes`,
    );
    console.log(
      `/health during a 5 MB reload: ${probes} probes, worst ${Math.round(worstMs)} ms; ` +
        `serving thread CPU ${cpuMs} ms in all, at most ${longestStepMs} ms between two probes`,
    );
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await stdout.cancel().catch(() => {});
    await drain.catch(() => {});
    await cleanup();
  }
});
