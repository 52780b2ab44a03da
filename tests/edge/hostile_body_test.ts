/**
 * No single request stalls the others: a 10 MB body of nested arrays with an aliased model (the
 * case that kept `/health` waiting 16 s) is refused by the JSON depth check before it is parsed,
 * and `/health` answers within 200 ms throughout.
 */
import { assert, assertEquals } from "../_assert.ts";
import { healthLatencyDuring, spawnServe, startUpstream } from "./serve_helpers.ts";

Deno.test("edge: a 10 MB body of nested arrays never stalls /health", async () => {
  const upstream = startUpstream();
  const serve = await spawnServe({
    nodes: [{ id: "n1", url: upstream.url, model: "m1" }],
    aliases: { house: [{ model: "m1" }] },
  });
  try {
    const depth = 5_000_000;
    const body = `{"model":"house","messages":[{"role":"user","content":${"[".repeat(depth)}${
      "]".repeat(depth)
    }}]}`;
    let status = 0;
    let text = "";
    const hostile = fetch(`${serve.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    }).then(async (res) => {
      status = res.status;
      text = await res.text();
    });
    const worst = await healthLatencyDuring(serve.base, hostile);
    assertEquals(status, 400, `refused: ${text}`);
    assert(text.includes("nested deeper than 128"), `names the limit: ${text}`);
    assert(worst < 200, `/health answered within 200 ms during the body (worst ${worst} ms)`);
  } finally {
    await serve.stop();
    await upstream.close();
  }
});
