/**
 * Bounded labels: requests naming many unique, long models the config does not know (the case
 * that grew RSS to 3.1 GB and made `/skeid/metrics` answer 500) are counted under one
 * `_unknown` label, every label value is cut to `MAX_LABEL_CHARS`, and the exposition stays small.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { cappedLabel, GatewayMetrics, MAX_LABEL_CHARS } from "../../src/admin/metrics.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { startGateway } from "../integration/helpers.ts";

Deno.test("metrics: 1200 unique 10 KB model names leave one _unknown series; /skeid/metrics 200", async () => {
  const t = await startGateway({
    nodes: [{ id: "n1", url: "http://127.0.0.1:9/v1", model: "m1" }],
    admin: { api_key: "admin-secret" },
  });
  try {
    for (let i = 0; i < 1200; i++) {
      const model = `${i}-${"x".repeat(10_000)}`;
      const res = await fetch(`${t.base}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
      await res.body?.cancel();
      assert(res.status >= 400, `refused: ${res.status}`);
    }
    const res = await fetch(`${t.base}/skeid/metrics`, {
      headers: { authorization: "Bearer admin-secret" },
    });
    const text = await res.text();
    assertEquals(res.status, 200, "/skeid/metrics answers");
    assert(text.length < 16_384, `the exposition stays small: ${text.length} chars`);
    assertStringIncludes(text, 'model="_unknown"');
    assert(!text.includes("x".repeat(MAX_LABEL_CHARS)), "no client name at full length");
  } finally {
    await t.stop();
  }
});

Deno.test("metrics: a known model keeps its name; label values are cut to MAX_LABEL_CHARS", () => {
  const skeid = new RoutingCore({ now: () => 0, env: () => undefined });
  skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m1" });
  const metrics = new GatewayMetrics((m) => m === "m1");
  metrics.refusal("m1", 429, "no_capacity");
  metrics.refusal("nope", 403, "model_not_permitted");
  metrics.attemptFailed("n".repeat(1000), "connect");
  const text = metrics.render(skeid);
  assertStringIncludes(
    text,
    'skeid_refusals_total{model="m1",status="429",reason="no_capacity"} 1',
  );
  assertStringIncludes(text, 'model="_unknown",status="403"');
  assertEquals(cappedLabel("n".repeat(1000)).length, MAX_LABEL_CHARS);
  assertStringIncludes(text, `node="${cappedLabel("n".repeat(1000))}"`);
});
