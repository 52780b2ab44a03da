import assert from "node:assert/strict";
import { costFor, PricingTable, validatePricingRule } from "../../src/core/pricing.ts";
import { readUsage } from "../../src/core/usage_reading.ts";
import type { Usage } from "../../src/core/types.ts";

function usage(p: Partial<Usage>): Usage {
  return {
    input_tokens: null,
    output_tokens: null,
    total_tokens: null,
    cached_tokens: null,
    cache_write_tokens: null,
    input_includes_cache: true,
    ...p,
  };
}

Deno.test("example: 1000 prompt + 200 completion at 0.15/0.60 → 0.00027 exactly", () => {
  const cost = costFor(
    readUsage({ prompt_tokens: 1000, completion_tokens: 200 }),
    validatePricingRule("gpt-4o-mini", { input_per_million: 0.15, output_per_million: 0.6 }),
  );
  assert.equal(cost.input_cost_usd, 0.00015);
  assert.equal(cost.output_cost_usd, 0.00012);
  assert.equal(cost.total_cost_usd, 0.00027);
  assert.equal(cost.cache_read_cost_usd, 0);
  assert.equal(cost.cache_write_cost_usd, 0);
  assert.equal(cost.currency, "USD");
});

Deno.test("example with cache: 65 input (64 cached inside), 10 output, 2/0.5/8 → 0.000114", () => {
  const u = readUsage({
    prompt_tokens: 65,
    completion_tokens: 10,
    prompt_tokens_details: { cached_tokens: 64 },
  });
  const cost = costFor(u, {
    input_per_million: 2,
    cached_input_per_million: 0.5,
    output_per_million: 8,
  });
  assert.equal(cost.input_cost_usd, 1 / 1e6 * 2);
  assert.equal(cost.cache_read_cost_usd, 64 / 1e6 * 0.5);
  assert.equal(cost.output_cost_usd, 10 / 1e6 * 8);
  assert.equal(cost.total_cost_usd, 0.000114);
});

Deno.test("no cache rate: OpenAI cached tokens bill at the input rate as part of input", () => {
  const u = usage({ input_tokens: 100, output_tokens: 0, cached_tokens: 80 });
  const cost = costFor(u, { input_per_million: 1, output_per_million: 2 });
  assert.equal(cost.input_cost_usd, 100 / 1e6);
  assert.equal(cost.cache_read_cost_usd, 0);
});

Deno.test("no cache rate: Anthropic cache tokens (beside input) are not billed at all", () => {
  const u = readUsage({
    input_tokens: 10,
    output_tokens: 5,
    cache_read_input_tokens: 1000,
    cache_creation_input_tokens: 500,
  });
  const cost = costFor(u, { input_per_million: 3, output_per_million: 15 });
  assert.equal(cost.input_cost_usd, 10 / 1e6 * 3);
  assert.equal(cost.total_cost_usd, 10 / 1e6 * 3 + 5 / 1e6 * 15);
});

Deno.test("cache rates on Anthropic usage: input is already uncached, cache amounts added", () => {
  const u = readUsage({
    input_tokens: 10,
    output_tokens: 5,
    cache_read_input_tokens: 1000,
    cache_creation_input_tokens: 500,
  });
  const cost = costFor(u, {
    input_per_million: 3,
    output_per_million: 15,
    cached_input_per_million: 0.3,
    cache_write_per_million: 3.75,
  });
  assert.equal(cost.input_cost_usd, 10 / 1e6 * 3);
  assert.equal(cost.cache_read_cost_usd, 1000 / 1e6 * 0.3);
  assert.equal(cost.cache_write_cost_usd, 500 / 1e6 * 3.75);
  assert.equal(
    cost.total_cost_usd,
    cost.input_cost_usd + cost.output_cost_usd + cost.cache_read_cost_usd +
      cost.cache_write_cost_usd,
  );
});

Deno.test("one cache rate: the other cache amount bills at the input rate; uncached input", () => {
  const u = usage({
    input_tokens: 100,
    output_tokens: 0,
    cached_tokens: 30,
    cache_write_tokens: 20,
  });
  const cost = costFor(u, {
    input_per_million: 4,
    output_per_million: 0,
    cache_write_per_million: 5,
  });
  assert.equal(cost.input_cost_usd, 50 / 1e6 * 4);
  assert.equal(cost.cache_read_cost_usd, 30 / 1e6 * 4);
  assert.equal(cost.cache_write_cost_usd, 20 / 1e6 * 5);
});

Deno.test("uncached input never goes below 0", () => {
  const u = usage({ input_tokens: 10, cached_tokens: 30 });
  const cost = costFor(u, {
    input_per_million: 4,
    output_per_million: 0,
    cached_input_per_million: 1,
  });
  assert.equal(cost.input_cost_usd, 0);
  assert.equal(cost.cache_read_cost_usd, 30 / 1e6);
});

Deno.test("unreported counts price as 0", () => {
  const cost = costFor(usage({}), { input_per_million: 4, output_per_million: 9 });
  assert.equal(cost.total_cost_usd, 0);
});

Deno.test("validate: missing input/output → 0; cache rates kept only when given", () => {
  assert.deepEqual(validatePricingRule("m", {}), { input_per_million: 0, output_per_million: 0 });
  assert.deepEqual(
    validatePricingRule("m", { input_per_million: 1, cached_input_per_million: 0, other: "x" }),
    { input_per_million: 1, output_per_million: 0, cached_input_per_million: 0 },
  );
  assert.deepEqual(validatePricingRule("m", { output_per_million: "0.6" }), {
    input_per_million: 0,
    output_per_million: 0.6,
  });
});

Deno.test("validate: bad rates name the model and the key", () => {
  const cases: [string, unknown][] = [
    ["cached_input_per_million", -1],
    ["cache_write_per_million", "cheap"],
    ["cache_write_per_million", { rate: 1 }],
    ["input_per_million", -0.5],
    ["output_per_million", "lots"],
    ["output_per_million", [1]],
    ["input_per_million", Number.POSITIVE_INFINITY],
  ];
  for (const [key, value] of cases) {
    assert.throws(
      () => validatePricingRule("gpt-x", { [key]: value }),
      { message: `pricing for 'gpt-x': ${key} must be a number >= 0` },
      `${key}=${String(value)}`,
    );
  }
});

Deno.test("validate: a model name is required and the pricing must be a map", () => {
  assert.throws(() => validatePricingRule("", {}), /model name/);
  assert.throws(() => validatePricingRule("m", 5), /pricing for 'm'/);
  assert.throws(() => validatePricingRule("m", [1, 2]), /pricing for 'm'/);
  assert.throws(() => validatePricingRule("m", null), /pricing for 'm'/);
});

Deno.test("table: exact model, else '*', else all zero; replace; copies", () => {
  const t = new PricingTable();
  assert.deepEqual(t.get("m"), { input_per_million: 0, output_per_million: 0 });
  t.set("m", { input_per_million: 1, output_per_million: 2 });
  t.set("*", { input_per_million: 9, output_per_million: 9 });
  assert.equal(t.get("m").input_per_million, 1);
  assert.equal(t.get("other").input_per_million, 9);
  const rule = t.get("m");
  rule.input_per_million = 100;
  assert.equal(t.get("m").input_per_million, 1);
  assert.throws(() => t.set("bad", { input_per_million: -1 }));
  assert.equal(t.entries().length, 2);
  t.replace(new Map([["n", { input_per_million: 5, output_per_million: 6 }]]));
  assert.deepEqual(t.entries(), [["n", { input_per_million: 5, output_per_million: 6 }]]);
  assert.deepEqual(t.get("m"), { input_per_million: 0, output_per_million: 0 });
});

Deno.test('validate: a quoted rate beyond a double ("1e400") is refused, not Infinity', () => {
  assert.throws(
    () => validatePricingRule("gpt-x", { input_per_million: "1e400" }),
    { message: "pricing for 'gpt-x': input_per_million must be a number >= 0" },
  );
});
