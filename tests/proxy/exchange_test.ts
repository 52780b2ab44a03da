/**
 * The Exchange's one release: every admission is paired with exactly one `finishRequest`, made
 * by `release`, whatever the request came to (failed over, answered, streamed); a second release
 * changes nothing and says so.
 */
import { assertEquals } from "../_assert.ts";
import type { Exchange } from "../../src/proxy/handler.ts";
import { assertIdle, chat, post, scriptedUpstream, startGateway } from "../integration/helpers.ts";

const sse = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;

Deno.test("exchange release: one finishRequest per admission; a second release is a no-op", async () => {
  // Both nodes refuse plain requests (503: failover) and stream the others.
  const script = () =>
    scriptedUpstream((_req, body) =>
      body.stream === true
        ? new Response(
          sse({ choices: [{ index: 0, delta: { content: "hi" } }] }) + "data: [DONE]\n\n",
          {
            headers: { "content-type": "text/event-stream" },
          },
        )
        : Response.json({ error: { message: "busy", type: "server_error" } }, { status: 503 })
    );
  const a = script();
  const b = script();
  const t = await startGateway({
    routing: { max_attempts: 2 },
    nodes: [{ id: "a", url: a.url, model: "m" }, { id: "b", url: b.url, model: "m" }],
  });
  const skeid = t.gw.skeid;
  let started = 0;
  let finished = 0;
  const start = skeid.startRequest.bind(skeid);
  const finish = skeid.finishRequest.bind(skeid);
  skeid.startRequest = (id) => {
    const ok = start(id);
    if (ok) started++;
    return ok;
  };
  skeid.finishRequest = (id, outcome) => {
    finished++;
    return finish(id, outcome);
  };
  const exchanges: Exchange[] = [];
  const began = t.gw.exchangeStarted.bind(t.gw);
  t.gw.exchangeStarted = (ex) => {
    exchanges.push(ex);
    began(ex);
  };
  try {
    const failed = await post(`${t.base}/v1/chat/completions`, chat("m"));
    assertEquals(failed.status, 503, "the last upstream answer passes through");
    assertEquals(started, 2, "two admissions (one per attempt)");
    assertEquals(finished, 2, "each admission released once");

    const streamed = await post(`${t.base}/v1/chat/completions`, chat("m", { stream: true }));
    assertEquals(streamed.status, 200);
    await t.sink.waitFor(2);
    assertEquals(started, 3, "one admission for the stream");
    assertEquals(finished, 3, "released once, when the relay ended");

    assertEquals(exchanges.length, 2, "two exchanges");
    for (const ex of exchanges) {
      assertEquals(ex.release({ ok: true }), false, "a second release answers false");
    }
    assertEquals(finished, 3, "and calls no finishRequest");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await a.close();
    await b.close();
  }
});
