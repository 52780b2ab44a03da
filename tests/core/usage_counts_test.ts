import { readUsage, usageProblem } from "../../src/core/usage_reading.ts";
import { assertEquals } from "../_assert.ts";

Deno.test("usage counts: only non-negative safe integers count; others read as not reported", () => {
  const u = readUsage({
    usage: { prompt_tokens: 1e308, completion_tokens: 2.5, total_tokens: -3 },
  });
  assertEquals([u.input_tokens, u.output_tokens, u.total_tokens], [null, null, null]);
  const s = readUsage({ usage: { prompt_tokens: "99999999999999999999", completion_tokens: "7" } });
  assertEquals([s.input_tokens, s.output_tokens], [null, 7], "digits past 2^53 are no count");
  const ok = readUsage({ usage: { prompt_tokens: 12, completion_tokens: 3 } });
  assertEquals([ok.input_tokens, ok.output_tokens, ok.total_tokens], [12, 3, 15]);
});

Deno.test("usage counts: cached and cache-write tokens never exceed the input", () => {
  const u = readUsage({
    prompt_tokens: 10,
    completion_tokens: 1,
    prompt_tokens_details: { cached_tokens: 50, cache_write_tokens: 9 },
  });
  assertEquals([u.input_tokens, u.cached_tokens, u.cache_write_tokens], [10, 10, 0]);
  const w = readUsage({ prompt_tokens: 10, cached_tokens: 4, cache_write_tokens: 9 });
  assertEquals([w.cached_tokens, w.cache_write_tokens], [4, 6], "together within the input");
  // Anthropic's flat cache counts sit beside the input: not clamped by it.
  const a = readUsage({ input_tokens: 5, output_tokens: 1, cache_read_input_tokens: 100 });
  assertEquals([a.input_tokens, a.cached_tokens], [5, 100]);
});

Deno.test("usageProblem names the bad count, or the cache count above the input", () => {
  assertEquals(
    usageProblem({ usage: { prompt_tokens: 1e308 } }),
    "prompt_tokens is 1e+308, not a token count",
  );
  assertEquals(
    usageProblem({ prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 8 } }),
    "cached tokens (8) exceed the input (3)",
  );
  assertEquals(usageProblem({ usage: { prompt_tokens: 3, completion_tokens: 1 } }), undefined);
  assertEquals(usageProblem({ choices: [] }), undefined);
});
