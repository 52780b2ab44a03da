/**
 * Skeid's hand-written OTLP protobuf (ADR 0050), decoded by the test receiver with the message
 * types generated from the official `.proto` files: spans with every attribute type, events,
 * status, parent and `tracestate`; strings past one length byte and not ASCII; the cumulative
 * histograms with their buckets.
 */
import { assert, assertEquals } from "../_assert.ts";
import { OtlpReceiver } from "../_helpers/otlp_receiver.ts";
import { GenAiHistograms, MAX_SERIES } from "../../src/telemetry/genai_histograms.ts";
import { DURATION_BUCKETS_S, TOKEN_BUCKETS } from "../../src/telemetry/genai.ts";
import {
  encodeAttrs,
  encodeHistograms,
  encodeSpans,
  resourceBlock,
  scopeBlock,
  UnixClock,
} from "../../src/telemetry/otlp_encode.ts";
import { ProtoWriter } from "../../src/telemetry/proto_writer.ts";
import {
  attrKey,
  AttrType,
  eventName,
  SpanKindCode,
  spanName,
  SpanRecord,
  StatusCode,
} from "../../src/telemetry/span_record.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

/** POSTs one export body to the receiver as a collector would get it. */
async function deliver(r: OtlpReceiver, path: string, body: Uint8Array<ArrayBuffer>) {
  const res = await fetch(`${r.endpoint}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-protobuf" },
    body,
  });
  await res.body?.cancel();
  assertEquals(res.status, 200);
}

Deno.test("otlp: spans decode as written — ids, times, every attribute type, events, status", async () => {
  const r = new OtlpReceiver();
  try {
    const resource = resourceBlock([["service.name", "skeid-test"], ["skeid.worker", 1]], 1);
    const scope = scopeBlock("skeid", "9.9.9");
    const long = "x".repeat(300);
    const accented = "modèle—日本語";
    const t0 = performance.now();
    const fixed = encodeAttrs([attrKey("server.port", AttrType.Int), 8000]);
    const s = new SpanRecord(
      TRACE,
      "00f067aa0ba902b7",
      "a3ce929d0e0e4736",
      spanName("chat qwen3"),
      SpanKindCode.Client,
      t0,
      fixed,
    );
    s.traceState = "rojo=00f067aa0ba902b7";
    s.set(attrKey("a.string", AttrType.String), accented);
    s.set(attrKey("a.long", AttrType.String), long);
    s.set(attrKey("a.int", AttrType.Int), 42);
    s.set(attrKey("a.negative", AttrType.Int), -3);
    // A client's number that is no int64 (`max_tokens: 1e30`): a double, never a broken varint.
    s.set(attrKey("a.huge", AttrType.Int), 1e30);
    s.set(attrKey("a.below", AttrType.Int), -1e20);
    s.set(attrKey("a.double", AttrType.Double), 0.5);
    s.set(attrKey("a.bool", AttrType.Bool), true);
    s.set(attrKey("a.strings", AttrType.Strings), ["stop", "length"]);
    s.event(eventName("skeid.first_chunk"), t0 + 1.5, [attrKey("e.n", AttrType.Double), 1.5]);
    s.fail("upstream answered 503");
    s.endMs = t0 + 2.25;
    const root = new SpanRecord(TRACE, "b7ad6b7169203331", undefined, spanName("r"), 2, t0);
    root.endMs = t0 + 3;
    const clock = new UnixClock();
    const w = new ProtoWriter(64); // small: the buffer has to grow
    await deliver(r, "/v1/traces", encodeSpans(w, clock, resource, scope, [s, root], 0, 2));

    assertEquals(r.spans.length, 2);
    const got = r.spans[0];
    assertEquals([got.traceId, got.spanId, got.parentSpanId], [
      TRACE,
      "00f067aa0ba902b7",
      "a3ce929d0e0e4736",
    ]);
    assertEquals([got.name, got.kind, got.scope], ["chat qwen3", SpanKindCode.Client, "skeid"]);
    assertEquals(got.resource, { "service.name": "skeid-test", "skeid.worker": 1 });
    assertEquals(got.attributes, {
      "server.port": 8000,
      "a.string": accented,
      "a.long": long,
      "a.int": 42,
      "a.negative": -3,
      "a.huge": 1e30,
      "a.below": -1e20,
      "a.double": 0.5,
      "a.bool": true,
      "a.strings": ["stop", "length"],
    });
    assertEquals(got.statusCode, StatusCode.Error);
    const startMs = Number(got.startNs / 1000n) / 1000;
    const wallMs = performance.timeOrigin + t0;
    assert(Math.abs(startMs - wallMs) < 0.01, `start ${startMs} vs ${wallMs}`);
    assertEquals(Number(got.endNs - got.startNs), 2_250_000, "2.25 ms in ns");
    assertEquals(got.events.length, 1);
    assertEquals(got.events[0].name, "skeid.first_chunk");
    assertEquals(Number(got.events[0].timeNs - got.startNs), 1_500_000);
    assertEquals(got.events[0].attributes, { "e.n": 1.5 });
    assertEquals(r.spans[1].parentSpanId, "", "a root span has no parent");
    assertEquals(r.spans[1].statusCode, StatusCode.Unset);

    // The writer is reused: a second export of a range decodes on its own.
    await deliver(r, "/v1/traces", encodeSpans(w, clock, resource, scope, [s, root], 1, 2));
    assertEquals(r.spans.length, 3);
    assertEquals(r.spans[2].spanId, "b7ad6b7169203331");
  } finally {
    await r.close();
  }
});

Deno.test("otlp: cumulative histograms decode with the spec's buckets, counts and labels", async () => {
  const r = new OtlpReceiver();
  try {
    const h = new GenAiHistograms();
    const node = attrKey("skeid.node.id", AttrType.String);
    const a = h.add([node, "gpu-1"]);
    const b = h.add([node, "gpu-2"]);
    a.duration.record(0.005); // below the first bound
    a.duration.record(0.01); // on a bound: that bucket
    a.duration.record(100); // above every bound
    a.inputTokens.record(12);
    a.outputTokens.record(4);
    b.duration.record(0.3);
    const resource = resourceBlock([["service.name", "skeid-test"]], 1);
    const body = encodeHistograms(
      new ProtoWriter(),
      new UnixClock(),
      resource,
      scopeBlock("skeid", "9.9.9"),
      h.read(),
      performance.now() - 1000,
      performance.now(),
    );
    await deliver(r, "/v1/metrics", body);
    const duration = r.points.filter((p) => p.metric === "gen_ai.client.operation.duration");
    assertEquals(duration.map((p) => p.attributes["skeid.node.id"]), ["gpu-1", "gpu-2"]);
    assertEquals(duration[0].bounds, DURATION_BUCKETS_S);
    assertEquals(duration[0].unit, "s");
    assertEquals(duration[0].count, 3);
    assertEquals(duration[0].sum, 100.015);
    const tokens = r.points.filter((p) => p.metric === "gen_ai.client.token.usage");
    assertEquals(
      tokens.map((p) => [p.attributes["skeid.node.id"], p.attributes["gen_ai.token.type"], p.sum]),
      [["gpu-1", "input", 12], ["gpu-1", "output", 4]],
      "only label sets with a record",
    );
    assertEquals(tokens[0].bounds, TOKEN_BUCKETS);
    assertEquals(
      r.points.filter((p) => p.metric === "gen_ai.server.time_to_first_token"),
      [],
      "no stream, no time to first token",
    );
  } finally {
    await r.close();
  }
});

Deno.test("otlp: histogram buckets hold (bound before, bound]", () => {
  const h = new GenAiHistograms();
  const s = h.add([]);
  for (const x of [0.005, 0.01, 0.0100001, 81.92, 82]) s.duration.record(x);
  const c = [...s.duration.counts];
  assertEquals(c.length, DURATION_BUCKETS_S.length + 1);
  assertEquals([c[0], c[1], c.at(-2), c.at(-1)], [2, 1, 1, 1]);
  assertEquals([s.duration.min, s.duration.max], [0.005, 82]);
});

Deno.test("otlp: label sets past the bound share one overflow set, never one each", () => {
  const h = new GenAiHistograms();
  const key = attrKey("gen_ai.response.model", AttrType.String);
  for (let i = 0; i < MAX_SERIES; i++) h.add([key, `m${i}`]).duration.record(1);
  const past = [h.add([key, "one more"]), h.add([key, "and another"]), h.overflow()];
  assert(past[0] === past[1] && past[1] === past[2], "one overflow set");
  for (const s of past) s.duration.record(1);
  const points = [
    ...h.read().find((m) => m.name === "gen_ai.client.operation.duration")!.points,
  ];
  assertEquals(points.length, MAX_SERIES + 1);
  assertEquals(points.at(-1)!.count, 3);
});

Deno.test("otlp: spans and lists of every length decode — one byte, two and three of length", async () => {
  const r = new OtlpReceiver();
  try {
    const clock = new UnixClock();
    const t0 = performance.now();
    const list = attrKey("a.list", AttrType.Strings);
    const dbl = attrKey("a.double", AttrType.Double);
    const str = attrKey("a.string", AttrType.String);
    // A span under 128 bytes, one of 128 to 16 KB, one past 16 KB (three length bytes); string
    // lists short, not ASCII, and too long for one length byte; doubles of every kind.
    const sizes = [0, 300, 20_000];
    const lists = [["stop"], ["fin", "ü"], Array.from({ length: 40 }, (_, i) => `reason-${i}`)];
    const doubles = [0, -0.25, 1e300, Number.POSITIVE_INFINITY];
    const spans = sizes.map((n, i) => {
      const s = new SpanRecord(TRACE, `00f067aa0ba902b${i}`, undefined, spanName(`s${i}`), 1, t0);
      if (n > 0) s.set(str, "y".repeat(n));
      s.set(list, lists[i]);
      s.set(dbl, doubles[i]);
      // An event of each size too.
      s.event(eventName("e"), t0 + 1, [str, "z".repeat(n / 2)]);
      s.endMs = t0 + 2;
      return s;
    });
    const resource = resourceBlock([["service.name", "skeid-test"]], 1);
    const w = new ProtoWriter(64);
    await deliver(
      r,
      "/v1/traces",
      encodeSpans(w, clock, resource, scopeBlock("s", "1"), spans, 0, 3),
    );
    assertEquals(r.spans.map((s) => s.name), ["s0", "s1", "s2"]);
    r.spans.forEach((got, i) => {
      const want: Record<string, unknown> = { "a.list": lists[i], "a.double": doubles[i] };
      if (sizes[i] > 0) want["a.string"] = "y".repeat(sizes[i]);
      assertEquals(got.attributes, want, `span ${i}`);
      assertEquals(got.events[0].attributes, { "a.string": "z".repeat(sizes[i] / 2) });
      assertEquals(Number(got.endNs - got.startNs), 2_000_000);
    });
  } finally {
    await r.close();
  }
});
