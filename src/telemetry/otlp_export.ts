/**
 * Sending spans and metrics off the request path (ADR 0050): a bounded span queue exported in
 * batches (the spec's batch span processor: `OTEL_BSP_MAX_QUEUE_SIZE`, `_SCHEDULE_DELAY`,
 * `_MAX_EXPORT_BATCH_SIZE`), the GenAI histograms every `OTEL_METRIC_EXPORT_INTERVAL`, each
 * export one `fetch` POST bounded by the exporter's timeout. A span that finds the queue full is
 * dropped and counted, as is every span of a failed export; nothing here is retried. The
 * shutdown flush is bounded by the export timeout too.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { encodeHistograms, encodeSpans, type HistogramMetric, UnixClock } from "./otlp_encode.ts";
import type { OtlpTarget } from "./otel_settings.ts";
import { ProtoWriter } from "./proto_writer.ts";
import type { SpanRecord } from "./span_record.ts";

/** What the exporters counted, for `/skeid/metrics`. */
export interface TelemetryCounts {
  /** Spans a collector accepted. */
  spansExported: number;
  /** Spans dropped because the queue was full (`OTEL_BSP_MAX_QUEUE_SIZE`). */
  spansDroppedQueueFull: number;
  /** Spans dropped because their export failed (refused, timed out, not 2xx). */
  spansDroppedExportFailed: number;
  /** Metric exports that failed. */
  metricExportsFailed: number;
}

/** No counts yet. */
export function noCounts(): TelemetryCounts {
  return {
    spansExported: 0,
    spansDroppedQueueFull: 0,
    spansDroppedExportFailed: 0,
    metricExportsFailed: 0,
  };
}

/** Said when an export fails (at most once a minute per signal, not per export). */
export type ExportWarn = (signal: "traces" | "metrics", error: string) => void;

/** POSTs one export; true when the collector answered 2xx within the bound. */
async function post(target: OtlpTarget, body: Uint8Array<ArrayBuffer>, signal: AbortSignal) {
  const res = await fetch(target.url, { method: "POST", headers: target.headers, body, signal });
  // The body is read (and dropped) so the connection goes back to the pool.
  await res.body?.cancel();
  if (!res.ok) throw new Error(`collector answered ${res.status}`);
}

/** The signal of one export: the exporter's timeout, or the shutdown's deadline if sooner. */
function boundOf(timeoutMs: number, deadline?: AbortSignal): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return deadline === undefined ? timeout : AbortSignal.any([timeout, deadline]);
}

/** Options of a SpanExporter. */
export interface SpanExporterOptions {
  readonly target: OtlpTarget;
  readonly maxQueue: number;
  readonly maxBatch: number;
  readonly scheduleDelayMs: number;
  /** `Resource` and `InstrumentationScope`, encoded once. */
  readonly resource: Uint8Array;
  readonly scope: Uint8Array;
  readonly counts: TelemetryCounts;
  readonly warn: ExportWarn;
}

/** The bounded span queue and its batch export. */
export class SpanExporter {
  readonly #o: SpanExporterOptions;
  readonly #w = new ProtoWriter();
  readonly #clock = new UnixClock();
  #queue: SpanRecord[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #exporting: Promise<void> | undefined;
  #closed = false;

  constructor(opts: SpanExporterOptions) {
    this.#o = opts;
  }

  /** A span ended: queued, or dropped and counted when the queue is full. */
  push(span: SpanRecord): void {
    const o = this.#o;
    const queue = this.#queue;
    if (queue.length >= o.maxQueue || this.#closed) {
      o.counts.spansDroppedQueueFull++;
      return;
    }
    queue.push(span);
    if (this.#exporting !== undefined) return;
    if (queue.length >= o.maxBatch) this.#schedule(0);
    else if (this.#timer === undefined) this.#schedule(o.scheduleDelayMs);
  }

  /** Spans waiting. */
  get queued(): number {
    return this.#queue.length;
  }

  #schedule(ms: number): void {
    if (this.#timer !== undefined) {
      if (ms > 0) return;
      clearTimeout(this.#timer);
    }
    // Never on the request path: the batch is encoded and sent from a timer of its own.
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.#exporting = this.#drain().finally(() => this.#exporting = undefined);
    }, ms);
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  /** Exports batches while a full one waits; then waits for the schedule again. */
  async #drain(deadline?: AbortSignal): Promise<void> {
    const o = this.#o;
    for (;;) {
      const batch = this.#take();
      if (batch.length === 0) return;
      await this.#send(batch, deadline);
      if (deadline?.aborted) {
        o.counts.spansDroppedExportFailed += this.#queue.length;
        this.#queue = [];
        return;
      }
      if (deadline === undefined && this.#queue.length < o.maxBatch) {
        if (this.#queue.length > 0) {
          // The rest waits for the schedule (set once this export is no longer in flight).
          queueMicrotask(() => this.#schedule(o.scheduleDelayMs));
        }
        return;
      }
    }
  }

  #take(): SpanRecord[] {
    const max = this.#o.maxBatch;
    const queue = this.#queue;
    if (queue.length <= max) {
      this.#queue = [];
      return queue;
    }
    this.#queue = queue.slice(max);
    return queue.slice(0, max);
  }

  async #send(batch: SpanRecord[], deadline?: AbortSignal): Promise<void> {
    const o = this.#o;
    const body = encodeSpans(this.#w, this.#clock, o.resource, o.scope, batch, 0, batch.length);
    try {
      await post(o.target, body, boundOf(o.target.timeoutMs, deadline));
      o.counts.spansExported += batch.length;
    } catch (err) {
      o.counts.spansDroppedExportFailed += batch.length;
      o.warn("traces", errorMessage(err));
    }
  }

  /**
   * Exports what is queued, bounded by the export timeout from now (an export in flight is
   * waited for within the same bound); nothing is queued after.
   */
  async shutdown(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const deadline = AbortSignal.timeout(this.#o.target.timeoutMs);
    const inflight = this.#exporting;
    if (inflight !== undefined) await untilAborted(inflight, deadline);
    if (!deadline.aborted) await this.#drain(deadline);
    const left = this.#queue.length;
    if (left > 0) {
      this.#o.counts.spansDroppedExportFailed += left;
      this.#queue = [];
    }
  }
}

/** Waits for `p`, or until `signal` aborts, whichever is first. */
async function untilAborted(p: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  const aborted = Promise.withResolvers<void>();
  const onAbort = () => aborted.resolve();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await Promise.race([p, aborted.promise]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** Options of a MetricExporter. */
export interface MetricExporterOptions {
  readonly target: OtlpTarget;
  readonly intervalMs: number;
  readonly resource: Uint8Array;
  readonly scope: Uint8Array;
  /** The histograms as they stand now (cumulative); empty when nothing was recorded. */
  readonly read: () => HistogramMetric[];
  readonly counts: TelemetryCounts;
  readonly warn: ExportWarn;
}

/** Sends the cumulative histograms every interval, and once more at shutdown. */
export class MetricExporter {
  readonly #o: MetricExporterOptions;
  readonly #w = new ProtoWriter();
  readonly #clock = new UnixClock();
  /** The start of every cumulative point: when this exporter began. */
  readonly #startMs = performance.now();
  readonly #interval: ReturnType<typeof setInterval>;
  #exporting: Promise<void> | undefined;

  constructor(opts: MetricExporterOptions) {
    this.#o = opts;
    this.#interval = setInterval(() => {
      // One export at a time: a slow collector skips an interval rather than piling up.
      if (this.#exporting === undefined) {
        this.#exporting = this.#export().finally(() => this.#exporting = undefined);
      }
    }, opts.intervalMs);
    Deno.unrefTimer(this.#interval);
  }

  async #export(deadline?: AbortSignal): Promise<void> {
    const o = this.#o;
    const metrics = o.read();
    if (metrics.length === 0) return;
    const body = encodeHistograms(
      this.#w,
      this.#clock,
      o.resource,
      o.scope,
      metrics,
      this.#startMs,
      performance.now(),
    );
    try {
      await post(o.target, body, boundOf(o.target.timeoutMs, deadline));
    } catch (err) {
      o.counts.metricExportsFailed++;
      o.warn("metrics", errorMessage(err));
    }
  }

  /** The last export, bounded by the export timeout from now. */
  async shutdown(): Promise<void> {
    clearInterval(this.#interval);
    const deadline = AbortSignal.timeout(this.#o.target.timeoutMs);
    const inflight = this.#exporting;
    if (inflight !== undefined) await untilAborted(inflight, deadline);
    if (!deadline.aborted) await this.#export(deadline);
  }
}
