/**
 * Memory per buffered body stays near its size, and the bytes buffered across all requests at
 * once are capped: 8 concurrent 50 MB chat bodies (which once took `skeid serve` to 2.64 GB peak
 * RSS) stay under 1.5 GB; a body past the cap is refused with 503 and `Retry-After`.
 */
import { assert } from "../_assert.ts";
import { spawnServe, startUpstream } from "./serve_helpers.ts";

const MB = 1024 * 1024;

/** A chat body of exactly `size` bytes (one long user message). */
function chatBody(size: number): Uint8Array<ArrayBuffer> {
  const head = '{"model":"m1","messages":[{"role":"user","content":"';
  const tail = '"}]}';
  const bytes = new Uint8Array(size).fill(0x61); // "a"
  const enc = new TextEncoder();
  bytes.set(enc.encode(head), 0);
  bytes.set(enc.encode(tail), size - tail.length);
  return bytes;
}

Deno.test("edge: 8 concurrent 50 MB bodies stay under 1.5 GB peak RSS", async () => {
  const upstream = startUpstream();
  const serve = await spawnServe({
    nodes: [{ id: "n1", url: upstream.url, model: "m1" }],
    routing: { max_body_bytes: 64 * MB },
  });
  try {
    const body = chatBody(50 * MB);
    const answers = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const res = await fetch(`${serve.base}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        const text = await res.text();
        return { status: res.status, retryAfter: res.headers.get("retry-after"), text };
      }),
    );
    const peak = await serve.peakRss();
    const statuses = answers.map((a) => a.status);
    for (const a of answers) {
      assert(a.status === 200 || a.status === 503, `200 or 503: ${a.status} ${a.text}`);
      if (a.status === 503) {
        assert(a.retryAfter !== null, "a 503 carries Retry-After");
        assert(a.text.includes("SKEID_MAX_BUFFERED_BYTES"), `names the cap: ${a.text}`);
      }
    }
    assert(statuses.includes(200), `some bodies were served: ${statuses}`);
    console.log(`peak RSS ${Math.round(peak / MB)} MB, statuses ${statuses.join(",")}`);
    assert(peak > 0, "VmHWM read");
    assert(peak < 1536 * MB, `peak RSS ${Math.round(peak / MB)} MB < 1.5 GB`);
  } finally {
    await serve.stop();
    await upstream.close();
  }
});
