/**
 * No single request stalls the others: a 10 MB body of nested arrays with an aliased model (the
 * case that kept `/health` waiting 16 s) is refused by the JSON depth check before it is parsed,
 * and `/health` answers within 200 ms throughout. The body goes in pieces, each after a `/health`
 * probe has answered, and no stretch between two probes costs the serving thread 200 ms of CPU
 * (tests/_helpers/serving_thread.ts).
 */
import { assert, assertEquals } from "../_assert.ts";
import { spawnServe, startUpstream } from "./serve_helpers.ts";
import { ServingThreadProber } from "../_helpers/serving_thread.ts";

Deno.test("edge: a 10 MB body of nested arrays never stalls /health", async () => {
  const upstream = startUpstream();
  const serve = await spawnServe({
    nodes: [{ id: "n1", url: upstream.url, model: "m1" }],
    aliases: { house: [{ model: "m1" }] },
  });
  try {
    // One ordinary request first: what a first request costs (compiling the handler's code)
    // is not the hostile body's.
    const warm = await fetch(`${serve.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "house", messages: [{ role: "user", content: "hi" }] }),
    });
    assertEquals(warm.status, 200, await warm.text());

    const depth = 5_000_000;
    const body = new TextEncoder().encode(
      `{"model":"house","messages":[{"role":"user","content":${"[".repeat(depth)}${
        "]".repeat(depth)
      }}]}`,
    );
    const pieces = 10;
    const size = Math.ceil(body.length / pieces);
    const prober = await ServingThreadProber.start(serve.base, serve.pid);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await prober.probe();
        if (sent >= body.length) return controller.close();
        controller.enqueue(body.subarray(sent, sent + size));
        sent += size;
      },
    });
    const res = await fetch(`${serve.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(body.length) },
      body: stream,
    });
    const text = await res.text();
    await prober.probe(); // and after the refusal
    const report = await prober.report();
    assertEquals(res.status, 400, `refused: ${text}`);
    assert(text.includes("nested deeper than 128"), `names the limit: ${text}`);
    assert(report.probes >= pieces, `/health answered between the pieces (${report.probes})`);
    assert(
      report.longestStepMs < 200,
      `the serving thread spent ${report.longestStepMs} ms of CPU between two /health probes`,
    );
    console.log(
      `/health during a 10 MB nested body: ${report.probes} probes, worst ` +
        `${Math.round(report.worstMs)} ms; at most ${report.longestStepMs} ms of CPU between two`,
    );
  } finally {
    await serve.stop();
    await upstream.close();
  }
});
