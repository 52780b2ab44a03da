/**
 * W3C trace context through the gateway: what a node receives (the request's trace, a span id
 * per attempt, the client's own header never as it is) and what the usage event says, over the
 * HTTP/1.1 client and over fetch.
 */
import { assert, assertEquals, assertNotEquals } from "../_assert.ts";
import { chat, chatAnswer as answer, post, scriptedUpstream, startGateway } from "./helpers.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const SENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

/** The trace id, parent id and flags of the traceparent a node got (asserted well-formed). */
function sent(headers: Headers): { trace: string; parent: string; flags: string } {
  const value = headers.get("traceparent") ?? "";
  const m = SENT.exec(value);
  assert(m !== null, `a valid traceparent upstream, got ${JSON.stringify(value)}`);
  return { trace: m[1], parent: m[2], flags: m[3] };
}

for (const client of ["http1", "fetch"] as const) {
  const env: Record<string, string> = client === "fetch" ? { SKEID_UPSTREAM_CLIENT: "fetch" } : {};

  Deno.test(`trace context (${client}): an inbound traceparent is continued`, async () => {
    const up = scriptedUpstream(answer);
    const t = await startGateway({ nodes: [{ id: "n", url: up.url, model: "m" }] }, {
      env,
      logLevel: "debug",
    });
    try {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
        traceparent: `00-${TRACE}-${PARENT}-01`,
        tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
      });
      assertEquals(r.status, 200);
      const h = up.requests[0].headers;
      const got = sent(h);
      assertEquals(got.trace, TRACE, "the same trace");
      assertNotEquals(got.parent, PARENT, "the parent is Skeid's span, not the client's");
      assertEquals(got.flags, "01", "the sampled flag carried");
      assertEquals(h.get("tracestate"), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
      const [event] = await t.sink.waitFor(1);
      assertEquals(event.trace_id, TRACE);
      assert(/^[0-9a-f]{16}$/.test(event.span_id ?? ""), "the request span's id");
      assertNotEquals(event.span_id, PARENT);
      assertNotEquals(event.span_id, got.parent, "the attempt has a span of its own");
      const line = t.logger.lines.find((l) => l.event === "request");
      assertEquals(
        [line?.request_id, line?.trace_id, line?.span_id],
        [event.request_id, TRACE, event.span_id],
        "the request log line names the trace and the request span",
      );
    } finally {
      await t.stop();
      await up.close();
    }
  });

  Deno.test(`trace context (${client}): a failover's attempts are two spans of one trace`, async () => {
    // Whichever node is tried first answers 503; the other answers.
    let calls = 0;
    const script = () =>
      scriptedUpstream(() =>
        calls++ === 0
          ? Response.json({ error: { message: "busy", type: "server_error" } }, { status: 503 })
          : answer()
      );
    const a = script();
    const b = script();
    const t = await startGateway({
      routing: { max_attempts: 2 },
      nodes: [{ id: "a", url: a.url, model: "m" }, { id: "b", url: b.url, model: "m" }],
    }, { env });
    try {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
        traceparent: `00-${TRACE}-${PARENT}-00`,
      });
      assertEquals(r.status, 200);
      const [event] = await t.sink.waitFor(1);
      assertEquals(event.attempts, 2);
      const attempts = [...a.requests, ...b.requests].map((q) => sent(q.headers));
      assertEquals(attempts.length, 2);
      assertEquals(attempts.map((x) => x.trace), [TRACE, TRACE]);
      assertEquals(attempts.map((x) => x.flags), ["00", "00"], "not sampled: carried as is");
      assertNotEquals(attempts[0].parent, attempts[1].parent, "a span id per attempt");
      assertEquals(event.trace_id, TRACE);
      assert(!attempts.some((x) => x.parent === event.span_id || x.parent === PARENT));
    } finally {
      await t.stop();
      await Promise.all([a.close(), b.close()]);
    }
  });

  Deno.test(`trace context (${client}): invalid or no traceparent → a fresh trace`, async () => {
    const up = scriptedUpstream(answer);
    const t = await startGateway({ nodes: [{ id: "n", url: up.url, model: "m" }] }, { env });
    const invalid = [
      `00-${TRACE}-${PARENT}-1`, // wrong length
      `00-${"0".repeat(32)}-${PARENT}-01`, // all-zero trace id
      `00-${TRACE}-${"0".repeat(16)}-01`, // all-zero parent id
      `ff-${TRACE}-${PARENT}-01`, // bad version
      `00-${TRACE.toUpperCase()}-${PARENT}-01`, // uppercase hex
    ];
    try {
      for (const traceparent of invalid) {
        const headers = { traceparent, tracestate: "rojo=1" };
        assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m"), headers)).status, 200);
      }
      assertEquals((await post(`${t.base}/v1/chat/completions`, chat("m"))).status, 200);
      const events = await t.sink.waitFor(invalid.length + 1);
      const traces = up.requests.map((q) => sent(q.headers));
      assertEquals(traces.length, invalid.length + 1);
      for (const [i, got] of traces.entries()) {
        assertNotEquals(got.trace.toLowerCase(), TRACE, `request ${i}: a new trace`);
        assertEquals(got.flags, "01", `request ${i}: a trace Skeid starts is sampled`);
        assertEquals(up.requests[i].headers.has("tracestate"), false, `request ${i}: no state`);
      }
      assertEquals(new Set(traces.map((x) => x.trace)).size, traces.length, "one trace each");
      assertEquals(
        new Set(events.map((e) => e.trace_id)),
        new Set(traces.map((x) => x.trace)),
        "each usage event names the trace its node saw",
      );
    } finally {
      await t.stop();
      await up.close();
    }
  });
}

Deno.test("trace context: the Anthropic face continues the trace too", async () => {
  const up = scriptedUpstream(answer);
  const t = await startGateway({ nodes: [{ id: "n", url: up.url, model: "m" }] });
  try {
    const r = await post(`${t.base}/v1/messages`, {
      model: "m",
      max_tokens: 8,
      messages: [{ role: "user", content: "hi" }],
    }, { traceparent: `00-${TRACE}-${PARENT}-01` });
    assertEquals(r.status, 200);
    assertEquals(sent(up.requests[0].headers).trace, TRACE);
    assertEquals((await t.sink.waitFor(1))[0].trace_id, TRACE);
  } finally {
    await t.stop();
    await up.close();
  }
});
