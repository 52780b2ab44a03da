/**
 * OpenTelemetry through `skeid serve` (ADR 0039, 0050), asserted on what a real OTLP/HTTP
 * receiver decoded of Skeid's protobuf export: one trace per request (the request span as the
 * SERVER span, `skeid.admission`, a CLIENT span per attempt), parent links, a failover's two
 * attempts, a stream's spans ending at its last byte, the node's `traceparent` naming the
 * attempt span, the usage event's ids, the GenAI metrics, the four faces, `--workers 2`, nothing
 * sent when off, and requests answered with the collector down.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { OtlpReceiver, type ReceivedSpan, silentCollector } from "../_helpers/otlp_receiver.ts";
import { chatAnswer, scriptedUpstream } from "../integration/helpers.ts";
import { DURATION_BUCKETS_S, TOKEN_BUCKETS, TTFT_BUCKETS_S } from "../../src/telemetry/genai.ts";
import { otelEnv, type ServedGateway, serveGateway, TEST_ADMIN_KEY } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;

/** POSTs `body` to `path`; answers the status, the request id and the JSON (or text). */
async function send(
  gw: ServedGateway,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; requestId: string; text: string }> {
  const res = await fetch(`${gw.base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, requestId: res.headers.get("x-request-id") ?? "", text };
}

/** The spans of a request's trace once its request span and `attempts` attempt spans arrived. */
async function traceOf(
  receiver: OtlpReceiver,
  traceId: string,
  attempts: number,
): Promise<{ request: ReceivedSpan; spans: ReceivedSpan[] }> {
  const spans = await receiver.waitFor(`trace ${traceId} with ${attempts} attempt(s)`, (r) => {
    const all = r.trace(traceId);
    const request = all.find((s) => s.scope === "skeid" && s.kind === SERVER);
    const n = all.filter((s) => s.kind === CLIENT && s.scope === "skeid").length;
    return request !== undefined && n >= attempts ? all : undefined;
  });
  return { request: spans.find((s) => s.scope === "skeid" && s.kind === SERVER)!, spans };
}

function childrenOf(spans: ReceivedSpan[], parent: ReceivedSpan, kind: number): ReceivedSpan[] {
  return spans.filter((s) => s.parentSpanId === parent.spanId && s.kind === kind)
    .sort((a, b) => Number(a.startNs - b.startNs));
}

/** A gateway in front of a fake model (`m`) and a failover pair (`fo`), exporting to a receiver. */
async function fixture(workers?: number, extraEnv: Record<string, string> = {}) {
  const receiver = new OtlpReceiver();
  const fake = startFakeModel({ tokens: 4 });
  // Whichever of the pair is tried first answers 503; the other answers.
  let calls = 0;
  const script = () =>
    scriptedUpstream(() =>
      calls++ === 0
        ? Response.json({ error: { message: "busy", type: "server_error" } }, { status: 503 })
        : chatAnswer()
    );
  const a = script();
  const b = script();
  const busy = scriptedUpstream(() =>
    Response.json({ error: { message: "busy", type: "server_error" } }, { status: 503 })
  );
  const gw = await serveGateway({
    routing: { max_attempts: 2, wait_timeout_ms: 5000 },
    nodes: [
      { id: "fake", url: fake.url, model: "m", engine: "vllm" },
      { id: "one", url: fake.url, model: "one-at-a-time", max_conns: 1 },
      { id: "a", url: a.url, model: "fo" },
      { id: "b", url: b.url, model: "fo" },
      { id: "busy-1", url: busy.url, model: "busy" },
      { id: "busy-2", url: busy.url, model: "busy" },
    ],
  }, { env: { ...otelEnv(receiver.endpoint), ...extraEnv }, workers });
  return {
    receiver,
    fake,
    a,
    b,
    gw,
    async close() {
      await gw.stop();
      await Promise.all([receiver.close(), fake.close(), a.close(), b.close(), busy.close()]);
    },
  };
}

Deno.test("otel: a request is one trace — request span (SERVER), admission, attempt", async () => {
  const f = await fixture();
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "m",
      max_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      messages: [{ role: "user", content: "a secret prompt" }],
    }, {
      traceparent: `00-${TRACE}-${PARENT}-01`,
      authorization: "Bearer sk-customer-secret-123",
    });
    assertEquals(r.status, 200, r.text);
    const event = await f.gw.event(r.requestId);
    assertEquals(event.trace_id, TRACE, "the client's trace continued");
    const { request, spans } = await traceOf(f.receiver, TRACE, 1);
    assertEquals(request.parentSpanId, PARENT, "the request span continues the client's span");
    assertEquals(spans.filter((s) => s.kind === SERVER).length, 1, "one SERVER span");
    assertEquals(request.name, "POST /v1/chat/completions");
    assertEquals(request.spanId, event.span_id, "the usage event names the request span");
    assertEquals(request.attributes["skeid.requested_model"], "m");
    assertEquals(request.attributes["http.response.status_code"], 200);
    assert(request.events.some((e) => e.name === "skeid.usage_event"), "the usage event");
    assertEquals(request.resource["service.name"], "skeid-test");

    const [admission] = childrenOf(spans, request, INTERNAL);
    assertEquals(admission.name, "skeid.admission");
    assertEquals(admission.attributes["skeid.admission.result"], "admitted");
    assertEquals(admission.attributes["skeid.node.id"], "fake");
    assertEquals(admission.attributes["skeid.pick"], "round_robin");
    assertEquals(admission.attributes["skeid.tier"], "m");
    assertEquals(admission.attributes["skeid.key_step"], "passed");
    assertEquals(typeof admission.attributes["skeid.admission.waited_ms"], "number");

    const [attempt] = childrenOf(spans, request, CLIENT);
    assertEquals(attempt.name, "chat m");
    const at = attempt.attributes;
    assertEquals(at["gen_ai.operation.name"], "chat");
    assertEquals(at["gen_ai.provider.name"], "vllm");
    assertEquals(at["gen_ai.request.model"], "m");
    assertEquals(at["gen_ai.response.model"], "m", "what the node said it served");
    assertEquals(at["gen_ai.request.max_tokens"], 7);
    assertEquals(at["gen_ai.request.temperature"], 0.5);
    assertEquals(at["gen_ai.request.top_p"], 0.9);
    assertEquals(at["gen_ai.usage.input_tokens"], event.input_tokens);
    assertEquals(at["gen_ai.usage.output_tokens"], 4);
    assertEquals(at["gen_ai.usage.cache_read.input_tokens"], undefined, "no cache, no count");
    assertEquals(at["gen_ai.response.finish_reasons"], ["stop"]);
    assertEquals(typeof at["gen_ai.response.id"], "string");
    assertEquals(at["server.address"], "127.0.0.1");
    assertEquals(at["server.port"], f.fake.port);
    assertEquals(at["skeid.node.id"], "fake");
    assertEquals(at["skeid.attempt"], 1);
    assert(attempt.startNs >= admission.endNs, "the attempt follows its admission");
    assert(attempt.endNs <= request.endNs, "the attempt ends within the request");

    const got = f.fake.requests.at(-1)!.headers["traceparent"];
    assertEquals(got, `00-${TRACE}-${attempt.spanId}-01`, "the node continues the attempt span");

    // No prompt text without the opt-in, and never a key.
    const dump = JSON.stringify(
      spans.map((s) => [s.attributes, s.events.map((e) => e.attributes)]),
    );
    assert(!dump.includes("a secret prompt"), "no prompt text");
    assert(!dump.includes("sk-customer-secret"), "no key");
    assert(!("gen_ai.input.messages" in at));

    // The GenAI metrics, per node and model, with the spec's buckets.
    const duration = await f.receiver.waitFor(
      "gen_ai.client.operation.duration",
      (rr) =>
        rr.points.find((p) =>
          p.metric === "gen_ai.client.operation.duration" &&
          p.attributes["skeid.node.id"] === "fake"
        ),
    );
    assertEquals(duration.bounds, DURATION_BUCKETS_S);
    assertEquals(duration.unit, "s");
    assertEquals(duration.attributes["gen_ai.request.model"], "m");
    const tokens = await f.receiver.waitFor(
      "gen_ai.client.token.usage output",
      (rr) =>
        rr.points.find((p) =>
          p.metric === "gen_ai.client.token.usage" && p.attributes["gen_ai.token.type"] === "output"
        ),
    );
    assertEquals(tokens.bounds, TOKEN_BUCKETS);
    assert(tokens.sum >= 4);
  } finally {
    await f.close();
  }
});

Deno.test("otel: a failover shows two attempt spans under one request span", async () => {
  const f = await fixture();
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "fo",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(r.status, 200, r.text);
    const event = await f.gw.event(r.requestId);
    assertEquals(event.attempts, 2);
    const { request, spans } = await traceOf(f.receiver, event.trace_id!, 2);
    const [first, second] = childrenOf(spans, request, CLIENT);
    assertEquals([first.name, second.name], ["chat fo", "chat fo"]);
    assertEquals([first.attributes["skeid.attempt"], second.attributes["skeid.attempt"]], [1, 2]);
    assertEquals(first.attributes["error.type"], "503");
    assertEquals(first.statusCode, 2, "the failed attempt is an error");
    assertEquals(second.attributes["error.type"], undefined);
    assert(first.attributes["skeid.node.id"] !== second.attributes["skeid.node.id"]);
    assertEquals(childrenOf(spans, request, INTERNAL).length, 2, "an admission per walk step");
    // Each node got the traceparent of its own attempt span.
    const sent = [...f.a.requests, ...f.b.requests].map((q) => q.headers.get("traceparent"));
    assertEquals(
      sent.sort(),
      [first, second].map((s) => `00-${event.trace_id}-${s.spanId}-01`).sort(),
    );
  } finally {
    await f.close();
  }
});

Deno.test("otel: every attempt failed — two error attempts, two admissions, a 503", async () => {
  const f = await fixture();
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "busy",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(r.status, 503, r.text);
    const event = await f.gw.event(r.requestId);
    const { request, spans } = await traceOf(f.receiver, event.trace_id!, 2);
    const attempts = childrenOf(spans, request, CLIENT);
    assertEquals(attempts.map((s) => [s.attributes["error.type"], s.statusCode]), [
      ["503", 2],
      ["503", 2],
    ]);
    const admissions = childrenOf(spans, request, INTERNAL);
    assertEquals(
      admissions.map((s) => s.attributes["skeid.admission.result"]),
      ["admitted", "admitted"],
      "no admission span made up at the end",
    );
    assertEquals(request.attributes["http.response.status_code"], 503);
    assertEquals(request.statusCode, 2);
  } finally {
    await f.close();
  }
});

Deno.test("otel: a request that waits for capacity says so on its admission span", async () => {
  const f = await fixture();
  try {
    const messages = [{ role: "user", content: "hi" }];
    // The first holds the node's one slot for 300 ms; the second waits for it.
    const first = send(f.gw, "/v1/chat/completions", {
      model: "one-at-a-time",
      fake_ttft_ms: 300,
      messages,
    });
    await until(() => f.fake.requests.length > 0, "the first request at the node", 5000);
    const second = await send(f.gw, "/v1/chat/completions", { model: "one-at-a-time", messages });
    assertEquals((await first).status, 200);
    assertEquals(second.status, 200);
    const event = await f.gw.event(second.requestId);
    const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
    const [admission] = childrenOf(spans, request, INTERNAL);
    assertEquals(admission.attributes["skeid.admission.queued"], true);
    assert(Number(admission.attributes["skeid.admission.queue_length"]) >= 1);
    const waited = Number(admission.attributes["skeid.admission.waited_ms"]);
    assert(waited >= 100, `waited ${waited} ms`);
    const [attempt] = childrenOf(spans, request, CLIENT);
    assert(attempt.startNs >= admission.endNs, "the attempt starts once admitted");
  } finally {
    await f.close();
  }
});

/** One streamed request, read to its end: its request id and when its first and last bytes came. */
async function stream(
  gw: ServedGateway,
): Promise<{ requestId: string; firstMs: number; endMs: number }> {
  const res = await fetch(`${gw.base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      stream: true,
      fake_ttft_ms: 40,
      fake_itl_ms: 40,
      fake_tokens: 5,
      messages: [{ role: "user", content: "hi" }],
    }),
  });
  assertEquals(res.status, 200);
  const requestId = res.headers.get("x-request-id")!;
  const reader = res.body!.getReader();
  let firstMs = 0;
  for (;;) {
    const { done } = await reader.read();
    if (done) break;
    if (firstMs === 0) firstMs = performance.timeOrigin + performance.now();
  }
  return { requestId, firstMs, endMs: performance.timeOrigin + performance.now() };
}

Deno.test("otel: a stream's spans end at its last byte, with the first chunk marked", async () => {
  const f = await fixture();
  try {
    const ms = (ns: bigint) => Number(ns / 1000n) / 1000;
    // The client's clock reads when its process gets to run: on a busy machine that lags the
    // gateway by a scheduling slice now and then, so the closest of three streams is judged.
    const offs: number[] = [];
    let last:
      | { request: ReceivedSpan; attempt: ReceivedSpan; firstMs: number; ttft?: number }
      | undefined;
    for (let i = 0; i < 3; i++) {
      const got = await stream(f.gw);
      const event = await f.gw.event(got.requestId);
      const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
      const [attempt] = childrenOf(spans, request, CLIENT);
      const durationMs = ms(request.endNs - request.startNs);
      assert(durationMs >= 200, `the request span covers the stream (${durationMs} ms)`);
      // The request span ends when the relay handed the last byte on (before the client read it).
      offs.push(Math.abs(ms(request.endNs) - got.endMs));
      // The attempt span ends with the usage event, just before the request span.
      const gap = ms(request.endNs - attempt.endNs);
      assert(gap >= 0 && gap < 5, `the attempt span ends with the request (${gap.toFixed(2)} ms)`);
      assertEquals(attempt.attributes["skeid.time_to_first_chunk_ms"], event.ttft_ms);
      last = { request, attempt, firstMs: got.firstMs };
    }
    const best = Math.min(...offs);
    assert(best < 5, `the request span ends within 5 ms of the client's last byte (${offs})`);
    assert(Math.max(...offs) < 50, `never far from it (${offs})`);
    const first = last!.attempt.events.find((e) => e.name === "skeid.first_chunk");
    assert(first !== undefined, "an event at the first chunk");
    const early = Math.abs(ms(first.timeNs) - last!.firstMs);
    assert(early < 20, `the first chunk event is when the client got it (${early.toFixed(2)} ms)`);
    const point = await f.receiver.waitFor(
      "gen_ai.server.time_to_first_token",
      (rr) => rr.points.find((p) => p.metric === "gen_ai.server.time_to_first_token"),
    );
    assertEquals(point.bounds, TTFT_BUCKETS_S);
  } finally {
    await f.close();
  }
});

Deno.test("otel: the four faces (and embeddings) each make one trace with their route", async () => {
  const f = await fixture();
  try {
    const messages = [{ role: "user", content: "hi" }];
    const faces: [string, unknown][] = [
      ["/v1/chat/completions", { model: "m", messages }],
      ["/v1/messages", { model: "m", max_tokens: 16, messages }],
      ["/api/chat", { model: "m", stream: false, messages }],
      ["/v1/responses", { model: "m", input: "hi" }],
      ["/v1/embeddings", { model: "m", input: "hi" }],
    ];
    for (const [path, body] of faces) {
      const r = await send(f.gw, path, body);
      assertEquals(r.status, 200, `${path}: ${r.text}`);
      const event = await f.gw.event(r.requestId);
      const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
      assertEquals(request.name, `POST ${path}`);
      assertEquals(request.spanId, event.span_id);
      const [attempt] = childrenOf(spans, request, CLIENT);
      assertEquals(attempt.name, path === "/v1/embeddings" ? "embeddings m" : "chat m", path);
      assertEquals(attempt.attributes["gen_ai.usage.output_tokens"], event.output_tokens, path);
    }
  } finally {
    await f.close();
  }
});

Deno.test("otel: --workers 2 — every worker exports, each span says which worker", async () => {
  const f = await fixture(2);
  try {
    const workers = new Set<unknown>();
    // New connections until both workers answered (the kernel spreads them; bounded).
    for (let i = 0; i < 40 && workers.size < 2; i++) {
      const r = await send(f.gw, "/v1/chat/completions", {
        model: "m",
        messages: [{ role: "user", content: "hi" }],
      }, { connection: "close" });
      assertEquals(r.status, 200, r.text);
      const event = await f.gw.event(r.requestId);
      const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
      assertEquals(request.spanId, event.span_id);
      assertEquals(childrenOf(spans, request, CLIENT).length, 1);
      const worker = request.attributes["skeid.worker"];
      assert(typeof worker === "number", "the request span names its worker");
      workers.add(worker);
    }
    assertEquals(workers.size, 2, "both workers exported spans");
    const point = await f.receiver.waitFor(
      "a worker's duration point",
      (rr) =>
        rr.points.find((p) =>
          p.metric === "gen_ai.client.operation.duration" &&
          p.attributes["skeid.node.id"] === "fake"
        ),
    );
    assert(workers.has(point.attributes["skeid.worker"]), "the metrics name the worker too");
  } finally {
    await f.close();
  }
});

Deno.test("otel: off — nothing is sent, the usage event still has its trace", async () => {
  const receiver = new OtlpReceiver();
  const fake = startFakeModel({ tokens: 2 });
  // The endpoint named, and the spec's switch that turns the SDK off anyway.
  const env = { ...otelEnv(receiver.endpoint), OTEL_SDK_DISABLED: "true" };
  const gw = await serveGateway({ nodes: [{ id: "fake", url: fake.url, model: "m" }] }, { env });
  try {
    const r = await send(gw, "/v1/chat/completions", {
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(r.status, 200);
    const event = await gw.event(r.requestId);
    assert(/^[0-9a-f]{32}$/.test(event.trace_id ?? ""));
    // Ten batch delays and two metric intervals: an exporter that were on would have sent.
    await new Promise((resolve) => setTimeout(resolve, 600));
    assertEquals(receiver.posts, {}, "no export request at all");
  } finally {
    await gw.stop();
    await Promise.all([receiver.close(), fake.close()]);
  }
});

Deno.test("otel: a collector that is down never fails or stalls a request", async () => {
  // A port nobody listens on: every export is refused.
  const down = new OtlpReceiver();
  const endpoint = down.endpoint;
  await down.close();
  const fake = startFakeModel({ tokens: 2 });
  const gw = await serveGateway({ nodes: [{ id: "fake", url: fake.url, model: "m" }] }, {
    env: otelEnv(endpoint),
    admin: true,
  });
  try {
    const started = performance.now();
    let slowest = 0;
    for (let i = 0; i < 40; i++) {
      const t0 = performance.now();
      const r = await send(gw, "/v1/chat/completions", {
        model: "m",
        stream: i % 2 === 0,
        messages: [{ role: "user", content: "hi" }],
      });
      assertEquals(r.status, 200);
      slowest = Math.max(slowest, performance.now() - t0);
    }
    const total = performance.now() - started;
    assert(slowest < 1000, `the slowest request took ${slowest.toFixed(1)} ms`);
    assert(total < 10_000, `40 requests took ${total.toFixed(0)} ms`);
    // The spans were made and exported: each refused export drops its batch, counted.
    const failed = 'skeid_telemetry_spans_dropped_total{reason="export_failed"}';
    await until(async () => await metricSample(gw, failed) > 0, `${failed} > 0`);
  } finally {
    await gw.stop();
    await fake.close();
  }
});

Deno.test("otel: through fetch, the node's one traceparent names its attempt span", async () => {
  const f = await fixture(undefined, { SKEID_UPSTREAM_CLIENT: "fetch" });
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "fo",
      messages: [{ role: "user", content: "hi" }],
    }, { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: "rojo=00f067aa0ba902b7" });
    assertEquals(r.status, 200, r.text);
    const { request, spans } = await traceOf(f.receiver, TRACE, 2);
    const attempts = childrenOf(spans, request, CLIENT);
    assertEquals(attempts.length, 2, "two attempts, as over the HTTP/1.1 client");
    const sent = [...f.a.requests, ...f.b.requests].map((q) => q.headers);
    assertEquals(sent.length, 2);
    const parents = new Set<string>();
    for (const headers of sent) {
      const value = headers.get("traceparent") ?? "";
      assert(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/.test(value), `one traceparent, got ${value}`);
      const [, trace, parent] = value.split("-");
      assertEquals(trace, TRACE);
      assert(attempts.some((at) => at.spanId === parent), "the node's parent is an attempt span");
      parents.add(parent);
      assertEquals(headers.get("tracestate"), "rojo=00f067aa0ba902b7", "the client's tracestate");
    }
    assertEquals(parents.size, 2, "each attempt's own span");
    assertEquals(spans.filter((s) => s.scope !== "skeid"), [], "no span but Skeid's");
  } finally {
    await f.close();
  }
});

Deno.test("otel: prompts and answers go into spans only when the operator opts in", async () => {
  const f = await fixture(undefined, {
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "true",
  });
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "an opted-in prompt" }],
    }, { authorization: "Bearer sk-customer-secret-456" });
    assertEquals(r.status, 200, r.text);
    const event = await f.gw.event(r.requestId);
    const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
    const [attempt] = childrenOf(spans, request, CLIENT);
    const input = String(attempt.attributes["gen_ai.input.messages"]);
    assert(input.includes("an opted-in prompt"), input);
    const output = String(attempt.attributes["gen_ai.output.messages"]);
    assert(output.includes('"role":"assistant"'), output);
    const dump = JSON.stringify(spans.map((s) => s.attributes));
    assert(!dump.includes("sk-customer-secret"), "never a key");
  } finally {
    await f.close();
  }
});

Deno.test("otel: a collector that accepts and never answers does not slow requests", async () => {
  // Accepts every connection and reads nothing: each export hangs until the export timeout.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })().catch(() => {});
  const fake = startFakeModel({ tokens: 2 });
  const gw = await serveGateway({ nodes: [{ id: "fake", url: fake.url, model: "m" }] }, {
    env: otelEnv(`http://127.0.0.1:${listener.addr.port}`),
  });
  try {
    let slowest = 0;
    const started = performance.now();
    for (let i = 0; i < 40; i++) {
      const t0 = performance.now();
      const r = await send(gw, "/v1/chat/completions", {
        model: "m",
        stream: i % 2 === 0,
        messages: [{ role: "user", content: "hi" }],
      });
      assertEquals(r.status, 200);
      slowest = Math.max(slowest, performance.now() - t0);
    }
    const total = performance.now() - started;
    assert(held.length > 0, "the exporter did connect");
    assert(slowest < 1000, `the slowest request took ${slowest.toFixed(1)} ms`);
    assert(total < 10_000, `40 requests took ${total.toFixed(0)} ms`);
  } finally {
    await gw.stop(2000);
    listener.close();
    for (const c of held) c.close();
    await accepting;
    await fake.close();
  }
});

Deno.test("otel: an unsampled client trace is continued unsampled, ids still its own", async () => {
  // The spec's default sampler, named (it is Skeid's default too).
  const f = await fixture(undefined, { OTEL_TRACES_SAMPLER: "parentbased_always_on" });
  try {
    const r = await send(f.gw, "/v1/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    }, { traceparent: `00-${TRACE}-${PARENT}-00` });
    assertEquals(r.status, 200, r.text);
    const event = await f.gw.event(r.requestId);
    assertEquals(event.trace_id, TRACE);
    assert(/^[0-9a-f]{16}$/.test(event.span_id ?? ""), "a span id of its own");
    assert(event.span_id !== PARENT, "not the client's span");
    const sent = f.fake.requests.at(-1)!.headers["traceparent"];
    const [, trace, parent, flags] = sent.split("-");
    assertEquals([trace, flags], [TRACE, "00"], "the client's flag carried");
    assert(parent !== PARENT && parent !== event.span_id, "the attempt has a span id of its own");
    // Not sampled: nothing of this trace is exported.
    await f.receiver.waitFor("a metric export", (rr) => rr.points.length > 0 ? true : undefined);
    assertEquals(f.receiver.trace(TRACE), []);
  } finally {
    await f.close();
  }
});

Deno.test("otel: the admission span says whether the key had limits, request by request", async () => {
  const receiver = new OtlpReceiver();
  const fake = startFakeModel({ tokens: 2 });
  // Both keys reach the same tier and node, each through its own policy: each request's span
  // says its own key's step, whatever the request before it said.
  const gw = await serveGateway({
    nodes: [{ id: "fake", url: fake.url, model: "m" }],
    policies: { limited: { limits: { rpm: 100 } }, open: {} },
    default_policy: "limited",
    names: { free: await keyIdForKey("sk-free") },
    keys: { free: "open" },
  }, { env: otelEnv(receiver.endpoint) });
  try {
    const body = { model: "m", messages: [{ role: "user", content: "hi" }] };
    const sent: [string, string | undefined, string][] = [
      ["1", "sk-free", "passed"],
      ["2", undefined, "passed_limited"],
      ["3", "sk-free", "passed"],
      ["4", undefined, "passed_limited"],
    ];
    for (const [n, key, step] of sent) {
      const trace = TRACE.slice(0, -1) + n;
      const headers: Record<string, string> = { traceparent: `00-${trace}-${PARENT}-01` };
      if (key !== undefined) headers.authorization = `Bearer ${key}`;
      const r = await send(gw, "/v1/chat/completions", body, headers);
      assertEquals(r.status, 200, r.text);
      const { request, spans } = await traceOf(receiver, trace, 1);
      const [admission] = childrenOf(spans, request, INTERNAL);
      assertEquals(admission.attributes["skeid.key_step"], step, `request ${n}`);
      assertEquals(admission.attributes["skeid.admission.result"], "admitted");
      assertEquals(admission.attributes["skeid.tier"], "m");
      assertEquals(admission.attributes["skeid.node.id"], "fake");
    }
  } finally {
    await gw.stop();
    await Promise.all([receiver.close(), fake.close()]);
  }
});

Deno.test("otel: a request its key's limit refuses has an admission span saying so", async () => {
  const receiver = new OtlpReceiver();
  const fake = startFakeModel({ tokens: 2 });
  const gw = await serveGateway({
    nodes: [{ id: "fake", url: fake.url, model: "m" }],
    policies: { tight: { limits: { rpm: 1 } } },
    default_policy: "tight",
  }, { env: otelEnv(receiver.endpoint) });
  try {
    const body = { model: "m", messages: [{ role: "user", content: "hi" }] };
    assertEquals((await send(gw, "/v1/chat/completions", body)).status, 200);
    const refused = await send(gw, "/v1/chat/completions", body, {
      traceparent: `00-${TRACE}-${PARENT}-01`,
    });
    assertEquals(refused.status, 429, refused.text);
    const spans = await receiver.waitFor("the refused request's spans", (rr) => {
      const all = rr.trace(TRACE);
      return all.some((s) => s.name === "skeid.admission") &&
          all.some((s) => s.scope === "skeid" && s.kind === SERVER)
        ? all
        : undefined;
    });
    const request = spans.find((s) => s.scope === "skeid" && s.kind === SERVER)!;
    assertEquals(request.attributes["http.response.status_code"], 429);
    const [admission] = childrenOf(spans, request, INTERNAL);
    assertEquals(admission.attributes["skeid.key_step"], "refused");
    assertEquals(admission.attributes["skeid.admission.result"], "refused");
    assertEquals(typeof admission.attributes["skeid.admission.reason"], "string");
    assertEquals(childrenOf(spans, request, CLIENT), [], "no attempt");
  } finally {
    await gw.stop();
    await Promise.all([receiver.close(), fake.close()]);
  }
});

/** One sample of the gateway's `/skeid/metrics`. */
async function metricSample(gw: ServedGateway, series: string): Promise<number> {
  const res = await fetch(`${gw.base}/skeid/metrics`, {
    headers: { authorization: `Bearer ${TEST_ADMIN_KEY}` },
  });
  const text = await res.text();
  assertEquals(res.status, 200, text);
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert(line !== undefined, `${series} in /skeid/metrics`);
  return Number(line.slice(series.length + 1));
}

Deno.test("otel: spans that do not fit the queue are dropped and counted in /skeid/metrics", async () => {
  const collector = silentCollector();
  const fake = startFakeModel({ tokens: 2 });
  const gw = await serveGateway({ nodes: [{ id: "fake", url: fake.url, model: "m" }] }, {
    admin: true,
    env: {
      ...otelEnv(collector.endpoint),
      // The first batch of four hangs (the collector never answers); the queue holds four more.
      OTEL_BSP_MAX_QUEUE_SIZE: "4",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4",
      OTEL_EXPORTER_OTLP_TIMEOUT: "60000",
    },
  });
  const dropped = 'skeid_telemetry_spans_dropped_total{reason="queue_full"}';
  try {
    assertEquals(await metricSample(gw, dropped), 0);
    for (let i = 0; i < 10; i++) {
      const r = await send(gw, "/v1/chat/completions", {
        model: "m",
        messages: [{ role: "user", content: "hi" }],
      });
      assertEquals(r.status, 200, r.text);
    }
    // Ten requests make 30 spans (request, admission, attempt); at most eight were taken.
    const n = await metricSample(gw, dropped);
    assert(n >= 22 && n <= 30, `dropped ${n}`);
    assertEquals(await metricSample(gw, "skeid_telemetry_spans_exported_total"), 0);
    assert(collector.held.length > 0, "the exporter did connect");
  } finally {
    await gw.stop(3000);
    await collector.close();
    await fake.close();
  }
});

Deno.test("otel: skeid serve exits on SIGTERM within the export timeout of a silent collector", async () => {
  const collector = silentCollector();
  const fake = startFakeModel({ tokens: 2 });
  const gw = await serveGateway({ nodes: [{ id: "fake", url: fake.url, model: "m" }] }, {
    env: {
      ...otelEnv(collector.endpoint),
      OTEL_EXPORTER_OTLP_TIMEOUT: "500",
      // Nothing goes out before the stop: the shutdown flush has spans and metrics to send.
      OTEL_BSP_SCHEDULE_DELAY: "60000",
      OTEL_METRIC_EXPORT_INTERVAL: "60000",
    },
  });
  try {
    for (let i = 0; i < 5; i++) {
      const r = await send(gw, "/v1/chat/completions", {
        model: "m",
        stream: i % 2 === 0,
        messages: [{ role: "user", content: "hi" }],
      });
      assertEquals(r.status, 200, r.text);
      await gw.event(r.requestId);
    }
    assertEquals(collector.held.length, 0, "nothing exported before the stop");
  } finally {
    // SIGTERM to the process by its PID; killed only if it is still there after 10 s.
    const exitMs = await gw.stop(10_000);
    const held = collector.held.length;
    await collector.close();
    await fake.close();
    assertEquals(gw.exitCode(), 0, "exited by itself");
    assert(exitMs < 4000, `exited ${exitMs.toFixed(0)} ms after SIGTERM (export timeout 500 ms)`);
    assert(held > 0, "the shutdown flush did try the collector");
  }
});

Deno.test("otel: a stream's attempt span says its response id, model and finish reasons", async () => {
  const f = await fixture();
  try {
    const cases: [string, unknown][] = [
      ["/v1/chat/completions", {
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }],
      // Translated from the node's chat chunks: the node's facts, not the face's.
      ["/v1/messages", {
        model: "m",
        stream: true,
        max_tokens: 16,
        messages: [{ role: "user", content: "hi" }],
      }],
    ];
    for (const [path, body] of cases) {
      const res = await fetch(`${f.gw.base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assertEquals(res.status, 200, path);
      await res.text();
      const event = await f.gw.event(res.headers.get("x-request-id")!);
      const { request, spans } = await traceOf(f.receiver, event.trace_id!, 1);
      const [attempt] = childrenOf(spans, request, CLIENT);
      // What the node streamed (the fake model's chunks carry these in every chunk).
      const sent = f.fake.requests.at(-1)!;
      assertEquals((sent.body as { stream?: unknown }).stream, true, path);
      const id = attempt.attributes["gen_ai.response.id"];
      assert(typeof id === "string" && id.startsWith("chatcmpl-"), `${path}: id ${id}`);
      assertEquals(attempt.attributes["gen_ai.response.model"], "m", path);
      assertEquals(attempt.attributes["gen_ai.response.finish_reasons"], ["stop"], path);
      assert(typeof attempt.attributes["skeid.time_to_first_chunk_ms"] === "number", path);
    }
  } finally {
    await f.close();
  }
});
