import { assert, assertEquals, assertMatch, assertThrows } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { fakeModelOptions } from "../../src/cli/fake_model.ts";
import { parseMetrics } from "../../src/capacity/prometheus.ts";
import { postJson, sseData } from "./helpers.ts";

const system = Array.from({ length: 64 }, (_, i) => `sys${i}`).join(" ");
const ask = (q: string, stream = false) => ({
  model: "m",
  stream,
  stream_options: stream ? { include_usage: true } : undefined,
  messages: [{ role: "system", content: system }, { role: "user", content: q }],
});

Deno.test("simulated engine: cached_tokens in usage, vLLM gauges and counters on /metrics", async () => {
  const fake = startFakeModel({
    tokens: 2,
    engine: { blockSize: 16, numBlocks: 64, ttftBaseMs: 1, prefillMsPerToken: 0, itlMs: 1 },
  });
  try {
    const first = await (await postJson(`${fake.url}/chat/completions`, ask("one"))).json();
    assertEquals(first.usage.prompt_tokens, 65);
    assertEquals(first.usage.prompt_tokens_details, { cached_tokens: 0 });
    const res = await postJson(`${fake.url}/chat/completions`, ask("two", true));
    const frames = sseData(await res.text());
    const usage = JSON.parse(frames[frames.length - 2]).usage;
    assertEquals(usage.prompt_tokens_details, { cached_tokens: 64 });
    const metrics = await (await fetch(fake.url.replace(/\/v1$/, "/metrics"))).text();
    const values = parseMetrics(metrics);
    assertEquals(values.get("vllm:prefix_cache_queries_total"), 130);
    assertEquals(values.get("vllm:prefix_cache_hits_total"), 64);
    assertEquals(values.get("vllm:num_requests_running"), 0);
    assertEquals(values.get("vllm:num_requests_waiting"), 0);
    assert(values.has("vllm:kv_cache_usage_perc") && values.has("vllm:gpu_cache_usage_perc"));
    assertMatch(metrics, /vllm:cache_config_info\{[^}]*block_size="16",num_gpu_blocks="64"\} 1/);
  } finally {
    await fake.close();
  }
});

Deno.test("simulated engine: a request beyond max_running waits for a slot", async () => {
  const fake = startFakeModel({
    tokens: 3,
    engine: { maxRunning: 1, ttftBaseMs: 0, prefillMsPerToken: 0, itlMs: 60 },
  });
  try {
    const a = postJson(`${fake.url}/chat/completions`, ask("a"));
    const b = postJson(`${fake.url}/chat/completions`, ask("b"));
    const started = Date.now();
    await Promise.all([(await a).json(), (await b).json()]);
    // Two answers of 2 × 60 ms each, one after the other (timers fire late, never early).
    assert(Date.now() - started >= 230, `took ${Date.now() - started} ms`);
    assertEquals(fake.engine?.counters().finished, 2);
  } finally {
    await fake.close();
  }
});

Deno.test("fake-model flags: engine flags turn the engine on; --nodes counts nodes", () => {
  const parsed = fakeModelOptions([
    "--listen",
    "127.0.0.1:0",
    "--max-running",
    "4",
    "--kv-blocks",
    "512",
    "--itl-ms",
    "5",
    "--nodes",
    "3",
  ])!;
  assertEquals(parsed.nodes, 3);
  assertEquals(parsed.opts.engine, { maxRunning: 4, numBlocks: 512, itlMs: 5 });
  assertEquals(fakeModelOptions(["--itl-ms", "5"])!.opts.engine, undefined);
  assertEquals(fakeModelOptions(["--sim"])!.opts.engine, {});
  assertEquals(fakeModelOptions(["--help"]), null);
  assertThrows(() => fakeModelOptions(["--max-running", "0"]), Error, "--max-running");
  assertThrows(() => fakeModelOptions(["--nodes", "1.5"]), Error, "--nodes");
});
