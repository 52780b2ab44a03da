import assert from "node:assert/strict";
import { countToolCalls, normalizeMetrics, readUsage } from "../../src/core/usage_reading.ts";

const NONE = {
  input_tokens: null,
  output_tokens: null,
  total_tokens: null,
  cached_tokens: null,
  cache_write_tokens: null,
  input_includes_cache: true,
};

Deno.test("OpenAI chat body: prompt/completion/total, cached and cache-write inside input", () => {
  const u = readUsage({
    id: "x",
    choices: [],
    usage: {
      prompt_tokens: 120,
      completion_tokens: 30,
      total_tokens: 150,
      prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 10 },
      completion_tokens_details: { reasoning_tokens: 20 },
    },
  });
  assert.deepEqual(u, {
    input_tokens: 120,
    output_tokens: 30,
    total_tokens: 150,
    cached_tokens: 100,
    cache_write_tokens: 10,
    input_includes_cache: true,
  });
});

Deno.test("OpenAI embeddings: no completion count → output null, total as reported", () => {
  const u = readUsage({ object: "list", usage: { prompt_tokens: 8, total_tokens: 8 } });
  assert.equal(u.input_tokens, 8);
  assert.equal(u.output_tokens, null);
  assert.equal(u.total_tokens, 8);
});

Deno.test("Anthropic: cache counts beside input; flag false", () => {
  const u = readUsage({
    type: "message",
    usage: {
      input_tokens: 10,
      output_tokens: 5,
      cache_read_input_tokens: 200,
      cache_creation_input_tokens: 50,
    },
  });
  assert.deepEqual(u, {
    input_tokens: 10,
    output_tokens: 5,
    total_tokens: 15,
    cached_tokens: 200,
    cache_write_tokens: 50,
    input_includes_cache: false,
  });
});

Deno.test("Anthropic: cache write from the per-TTL breakdown when the flat count is absent", () => {
  const u = readUsage({
    input_tokens: 3,
    output_tokens: 1,
    cache_creation: { ephemeral_5m_input_tokens: 7, ephemeral_1h_input_tokens: 4 },
  });
  assert.equal(u.cache_write_tokens, 11);
  assert.equal(u.input_includes_cache, false);
  assert.equal(u.cached_tokens, null);
});

Deno.test("Ollama final object: top-level counts; 0 = not reported", () => {
  const u = readUsage({ model: "m", done: true, prompt_eval_count: 3, eval_count: 1 });
  assert.deepEqual([u.input_tokens, u.output_tokens, u.total_tokens], [3, 1, 4]);
  const cachedPrompt = readUsage({ done: true, prompt_eval_count: 0, eval_count: 9 });
  assert.deepEqual([cachedPrompt.input_tokens, cachedPrompt.output_tokens], [null, 9]);
  assert.deepEqual(readUsage({ done: true, prompt_eval_count: 0, eval_count: 0 }), NONE);
});

Deno.test("Gemini usageMetadata: sums of prompt+tool-use and candidates+thoughts; cache inside", () => {
  const u = readUsage({
    candidates: [],
    usageMetadata: {
      promptTokenCount: 100,
      toolUsePromptTokenCount: 5,
      candidatesTokenCount: 40,
      thoughtsTokenCount: 10,
      totalTokenCount: 155,
      cachedContentTokenCount: 60,
    },
  });
  assert.deepEqual(u, {
    input_tokens: 105,
    output_tokens: 50,
    total_tokens: 155,
    cached_tokens: 60,
    cache_write_tokens: null,
    input_includes_cache: true,
  });
});

Deno.test("Responses API: response.usage with input_tokens_details", () => {
  const u = readUsage({
    type: "response.completed",
    response: {
      usage: {
        input_tokens: 50,
        output_tokens: 7,
        total_tokens: 57,
        input_tokens_details: { cached_tokens: 40 },
        output_tokens_details: { reasoning_tokens: 3 },
      },
    },
  });
  assert.deepEqual(
    [u.input_tokens, u.output_tokens, u.total_tokens, u.cached_tokens, u.input_includes_cache],
    [50, 7, 57, 40, true],
  );
});

Deno.test("precedence: input_tokens over prompt_tokens, output_tokens over completion_tokens", () => {
  const u = readUsage({
    input_tokens: 1,
    prompt_tokens: 2,
    output_tokens: 3,
    completion_tokens: 4,
  });
  assert.deepEqual([u.input_tokens, u.output_tokens, u.total_tokens], [1, 3, 4]);
});

Deno.test("a flat usage hash is read as such; canonical cached_tokens is inside input", () => {
  const u = readUsage({ prompt_tokens: 10, completion_tokens: 2, cached_tokens: 4 });
  assert.deepEqual([u.input_tokens, u.cached_tokens, u.input_includes_cache], [10, 4, true]);
});

Deno.test("an explicit input_includes_cache overrides the inferred flag", () => {
  const u = readUsage({ input_tokens: 10, cache_read_input_tokens: 5, input_includes_cache: true });
  assert.equal(u.input_includes_cache, true);
  const v = readUsage({ prompt_tokens: 10, cached_tokens: 5, input_includes_cache: 0 });
  assert.equal(v.input_includes_cache, false);
});

Deno.test("a Usage round-trips through readUsage", () => {
  const first = readUsage({ input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 5 });
  assert.deepEqual(readUsage(first), first);
});

Deno.test("unreported counts are null, not 0; non-objects read as nothing", () => {
  assert.deepEqual(readUsage({ id: "x", choices: [] }), NONE);
  assert.deepEqual(readUsage({ usage: {} }), NONE);
  assert.deepEqual(readUsage(null), NONE);
  assert.deepEqual(readUsage("usage"), NONE);
  assert.deepEqual(readUsage([1, 2]), NONE);
  const onlyInput = readUsage({ usage: { prompt_tokens: 4, completion_tokens: "many" } });
  assert.deepEqual([onlyInput.input_tokens, onlyInput.output_tokens, onlyInput.total_tokens], [
    4,
    null,
    4,
  ]);
});

Deno.test("AKI native counters", () => {
  const u = readUsage({ prompt_length: 12, num_generated_tokens: 3, num_cached_tokens: 2 });
  assert.deepEqual([u.input_tokens, u.output_tokens, u.cached_tokens], [12, 3, 2]);
});

Deno.test("countToolCalls: {function:{name}}, {name}, strings; unnamed calls still count", () => {
  assert.deepEqual(countToolCalls([{ function: { name: "lookup" } }]), {
    count: 1,
    names: ["lookup"],
  });
  assert.deepEqual(
    countToolCalls([
      { id: "c1", function: { name: "a" } },
      { name: "b" },
      "c",
      { id: "c4" },
      5,
      "",
    ]),
    { count: 4, names: ["a", "b", "c"] },
  );
  assert.deepEqual(countToolCalls(undefined), { count: 0, names: [] });
});

Deno.test("normalizeMetrics: priced, null counts 0, total falls back to input + output", () => {
  const m = normalizeMetrics({
    model: "gpt-4o-mini",
    usage: readUsage({ usage: { prompt_tokens: 1000, completion_tokens: 200 } }),
    rule: { input_per_million: 0.15, output_per_million: 0.6 },
    tool_calls: [{ function: { name: "lookup" } }, { function: { name: "add" } }],
    duration_ms: 840,
    engine: "openaibase",
    route: "/v1/chat/completions",
    provider: "skeid",
  });
  assert.deepEqual(m, {
    provider: "skeid",
    engine: "openaibase",
    model: "gpt-4o-mini",
    route: "/v1/chat/completions",
    duration_ms: 840,
    input_tokens: 1000,
    output_tokens: 200,
    total_tokens: 1200,
    cached_tokens: 0,
    cache_write_tokens: 0,
    tool_calls: 2,
    tool_names: ["lookup", "add"],
    cost_input_usd: 0.00015,
    cost_output_usd: 0.00012,
    cost_cache_read_usd: 0,
    cost_cache_write_usd: 0,
    cost_total_usd: 0.00027,
    currency: "USD",
  });
});

Deno.test("normalizeMetrics: nothing reported → zeros and defaults", () => {
  const m = normalizeMetrics({
    model: "m",
    usage: readUsage({}),
    rule: { input_per_million: 1, output_per_million: 1 },
  });
  assert.deepEqual(
    [m.input_tokens, m.output_tokens, m.total_tokens, m.tool_calls, m.cost_total_usd],
    [0, 0, 0, 0, 0],
  );
  assert.deepEqual([m.provider, m.engine, m.route, m.duration_ms], ["", "", "", 0]);
});

Deno.test("normalizeMetrics: a reported total is kept even when it differs from the sum", () => {
  const m = normalizeMetrics({
    model: "m",
    usage: readUsage({ prompt_tokens: 10, completion_tokens: 2, total_tokens: 15 }),
    rule: { input_per_million: 0, output_per_million: 0 },
  });
  assert.equal(m.total_tokens, 15);
});
