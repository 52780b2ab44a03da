/**
 * Upstream usage counts are read only when they are token counts: fractional, negative or huge
 * counts are not billed (and warned once per node), cache counts never exceed the input.
 */
import { assertEquals } from "../_assert.ts";
import { chat, post, scriptedUpstream, startGateway } from "./helpers.ts";

Deno.test("upstream usage: 1e308, fractions and cached > prompt are not billed as given", async () => {
  const usages = [
    { prompt_tokens: 1e308, completion_tokens: 2.5, total_tokens: 1e308 },
    { prompt_tokens: 1e308, completion_tokens: 4 },
    { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 40 } },
  ];
  let i = 0;
  const node = scriptedUpstream(() =>
    Response.json({
      id: "c",
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
      usage: usages[i++],
    })
  );
  const t = await startGateway({
    nodes: [{ id: "n", url: node.url, model: "m" }],
    pricing: { m: { input_per_million: 1, output_per_million: 1 } },
  });
  try {
    for (let k = 0; k < usages.length; k++) {
      assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m"))).status, 200);
    }
    const [a, b, c] = await t.sink.waitFor(3);
    assertEquals([a.input_tokens, a.output_tokens, a.total_tokens], [0, 0, 0]);
    assertEquals(Number.isFinite(a.cost_total_usd), true, "a finite cost");
    assertEquals([b.input_tokens, b.output_tokens], [0, 4]);
    assertEquals([c.input_tokens, c.cached_tokens], [10, 10], "cached clamped to the input");
    const warnings = t.logger.lines.filter((l) => l.event === "upstream_usage_invalid");
    assertEquals(warnings.length, 1, "warned once per node, not per request");
    assertEquals(warnings[0].node_id, "n");
  } finally {
    await t.stop();
    await node.close();
  }
});
