/**
 * The span queue and its exports (ADR 0050): a full queue drops and counts, a failed export
 * counts its spans, a batch goes when it is full or when its delay is up, and the shutdown
 * flush is bounded by the export timeout even against a collector that never answers.
 */
import { assert, assertEquals } from "../_assert.ts";
import { OtlpReceiver, silentCollector } from "../_helpers/otlp_receiver.ts";
import { until } from "../_helpers/poll.ts";
import { resourceBlock, scopeBlock } from "../../src/telemetry/otlp_encode.ts";
import {
  MAX_BATCH_BYTES,
  MAX_QUEUED_BYTES,
  noCounts,
  OtlpPoster,
  SpanExporter,
  type SpanExporterOptions,
  type TelemetryCounts,
} from "../../src/telemetry/otlp_export.ts";
import { attrKey, AttrType, spanName, SpanRecord } from "../../src/telemetry/span_record.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

function span(i: number): SpanRecord {
  const s = new SpanRecord(
    TRACE,
    i.toString(16).padStart(16, "0"),
    undefined,
    spanName(`s${i}`),
    1,
    performance.now(),
  );
  s.endMs = s.startMs + 1;
  return s;
}

function exporter(
  url: string,
  o: Partial<SpanExporterOptions> = {},
): { ex: SpanExporter; counts: TelemetryCounts } {
  const counts = noCounts();
  const ex = new SpanExporter({
    target: { url, headers: { "content-type": "application/x-protobuf" }, timeoutMs: 300 },
    maxQueue: 2048,
    maxBatch: 512,
    scheduleDelayMs: 60_000,
    resource: resourceBlock([["service.name", "t"]], 1),
    scope: scopeBlock("skeid", "0"),
    counts,
    warn: () => {},
    poster: new OtlpPoster(),
    ...o,
  });
  return { ex, counts };
}

Deno.test("span queue: what does not fit is dropped and counted; a failed export counted", async () => {
  const c = silentCollector();
  try {
    const { ex, counts } = exporter(`${c.endpoint}/v1/traces`, { maxQueue: 3, maxBatch: 3 });
    for (let i = 0; i < 10; i++) ex.push(span(i));
    assertEquals(counts.spansDroppedQueueFull, 7);
    assertEquals(ex.queued, 3);
    // The full batch goes at once, hangs, and times out (300 ms): its spans are counted too.
    await until(() => counts.spansDroppedExportFailed === 3, "the failed export", 5000, 20);
    assert(c.held.length > 0, "the exporter did connect");
    assertEquals(counts.spansExported, 0);
    await ex.shutdown();
  } finally {
    await c.close();
  }
});

Deno.test("span queue: a batch goes when full, the rest at its delay, and shutdown sends what waits", async () => {
  const r = new OtlpReceiver();
  try {
    const { ex, counts } = exporter(`${r.endpoint}/v1/traces`, { maxBatch: 4 });
    for (let i = 0; i < 6; i++) ex.push(span(i));
    await r.waitFor("the full batch", (rr) => rr.spans.length >= 4 ? true : undefined);
    assertEquals(r.spans.length, 4, "one batch of four; the other two wait for the delay");
    assertEquals(r.posts["/v1/traces"], 1);
    await ex.shutdown();
    assertEquals(r.spans.map((s) => s.name), ["s0", "s1", "s2", "s3", "s4", "s5"]);
    assertEquals(counts.spansExported, 6);
    ex.push(span(9));
    assertEquals(counts.spansDroppedQueueFull, 1, "nothing is queued after the shutdown");
  } finally {
    await r.close();
  }
});

Deno.test("span queue: the shutdown flush is bounded by the export timeout", async () => {
  const c = silentCollector();
  try {
    const { ex, counts } = exporter(`${c.endpoint}/v1/traces`, { maxBatch: 2 });
    // One export in flight (hanging), nine more batches behind it: each given its own 300 ms,
    // the flush would take 3 s; the bound is on the whole flush.
    for (let i = 0; i < 20; i++) ex.push(span(i));
    await until(() => c.held.length > 0, "the first export's connection", 5000, 10);
    const t0 = performance.now();
    await ex.shutdown();
    const ms = performance.now() - t0;
    assert(ms < 1500, `shutdown took ${ms.toFixed(0)} ms with a 300 ms export timeout`);
    assertEquals(counts.spansDroppedExportFailed, 20, "every span not sent is counted");
  } finally {
    await c.close();
  }
});

Deno.test("span queue: large spans are bounded in bytes — queued, and in each batch", async () => {
  const r = new OtlpReceiver();
  try {
    const url = `${r.endpoint}/v1/traces`;
    const { ex, counts } = exporter(url, {
      target: { url, headers: { "content-type": "application/x-protobuf" }, timeoutMs: 20_000 },
    });
    const prompt = attrKey("gen_ai.input.messages", AttrType.String);
    const big = "p".repeat(1024 * 1024);
    // 60 spans of 1 MiB each: more bytes than the queue holds, while the first batch is out.
    for (let i = 0; i < 60; i++) {
      const s = span(i);
      s.set(prompt, big);
      ex.push(s);
    }
    const queuedMb = MAX_QUEUED_BYTES / (1024 * 1024);
    assert(counts.spansDroppedQueueFull > 0, "spans past the queue's bytes are dropped");
    assert(counts.spansDroppedQueueFull <= 60 - queuedMb, `${counts.spansDroppedQueueFull}`);
    await ex.shutdown();
    assertEquals(counts.spansDroppedExportFailed, 0);
    assertEquals(counts.spansExported + counts.spansDroppedQueueFull, 60, "each span counted once");
    assertEquals(r.spans.length, counts.spansExported);
    // No batch carried more than its bytes' worth of these spans.
    const perBatch = Math.floor(MAX_BATCH_BYTES / (1024 * 1024));
    assert(
      r.posts["/v1/traces"] >= Math.ceil(counts.spansExported / perBatch),
      `${r.posts["/v1/traces"]} posts`,
    );
  } finally {
    await r.close();
  }
});
