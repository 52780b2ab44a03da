/**
 * Bounded per-name tables, measured on the process: 300 requests naming unique 1 MB models the
 * config does not know (600 such took RSS from 163 MB to 3.1 GB) leave `skeid serve`'s peak RSS
 * under 512 MB, and `/skeid/metrics` answers 200, small.
 */
import { assert, assertEquals } from "../_assert.ts";
import { spawnServe, startUpstream } from "./serve_helpers.ts";

const MB = 1024 * 1024;

Deno.test("edge: 300 unique 1 MB model names keep peak RSS under 512 MB", async () => {
  const upstream = startUpstream();
  const serve = await spawnServe({
    nodes: [{ id: "n1", url: upstream.url, model: "m1" }],
    admin: { api_key_env: "SKEID_TEST_ADMIN_KEY" },
  }, { SKEID_TEST_ADMIN_KEY: "admin-secret" });
  try {
    const pad = "x".repeat(MB);
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${serve.base}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: `${i}-${pad}`, messages: [] }),
      });
      await res.body?.cancel();
      assert(res.status >= 400, `an unknown model is refused: ${res.status}`);
    }
    const metrics = await fetch(`${serve.base}/skeid/metrics`, {
      headers: { authorization: "Bearer admin-secret" },
    });
    const text = await metrics.text();
    assertEquals(metrics.status, 200, "/skeid/metrics answers");
    assert(text.length < 16_384, `the exposition stays small: ${text.length} chars`);
    const peak = await serve.peakRss();
    assert(peak > 0, "VmHWM read");
    assert(peak < 512 * MB, `peak RSS ${Math.round(peak / MB)} MB < 512 MB`);
  } finally {
    await serve.stop();
    await upstream.close();
  }
});
