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
import {
  encodeHistograms,
  encodeSpanBatch,
  type HistogramMetric,
  UnixClock,
  writeSpan,
} from "./otlp_encode.ts";
import type { OtlpTarget } from "./otel_settings.ts";
import { ProtoWriter } from "./proto_writer.ts";
import { Http1Abort, Http1Client } from "../proxy/http1.ts";
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

/**
 * Sends export bodies: a plain `http:` collector (the usual local one) through Skeid's HTTP/1.1
 * client, which measured a third of `fetch`'s CPU per 200 KB export (ADR 0050); `https:` through
 * `fetch`.
 */
export class OtlpPoster {
  readonly #http1 = new Http1Client({ maxIdlePerHost: 2 });

  /** POSTs one export; throws unless the collector answered 2xx before `signal` aborted. */
  async post(
    target: OtlpTarget,
    body: Uint8Array<ArrayBuffer>,
    signal: AbortSignal,
  ): Promise<void> {
    const status = target.url.startsWith("http:")
      ? await this.#viaHttp1(target, body, signal)
      : await viaFetch(target, body, signal);
    if (status < 200 || status > 299) throw new Error(`collector answered ${status}`);
  }

  async #viaHttp1(target: OtlpTarget, body: Uint8Array, signal: AbortSignal): Promise<number> {
    const abort = new Http1Abort();
    const onAbort = () => abort.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const answer = await this.#http1.send(
        target.url,
        "POST",
        Object.entries(target.headers),
        body,
        abort,
      );
      const rest = answer.body;
      // Read to its end (an empty ExportServiceResponse, as a rule): the connection is reused.
      if (rest !== null && !(rest instanceof Uint8Array)) {
        while ((await rest.read()) !== null) { /* dropped */ }
      }
      return answer.status;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Closes the kept connections. */
  close(): void {
    this.#http1.close();
  }
}

async function viaFetch(target: OtlpTarget, body: Uint8Array<ArrayBuffer>, signal: AbortSignal) {
  const res = await fetch(target.url, { method: "POST", headers: target.headers, body, signal });
  // The body is read (and dropped) so the connection goes back to the pool.
  await res.body?.cancel();
  return res.status;
}

/** The signal of one export: the exporter's timeout, or the shutdown's end if sooner. */
function boundOf(timeoutMs: number, stop: AbortSignal): AbortSignal {
  return AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]);
}

/**
 * A shutdown's bound: aborts `stop` (every export in flight or to come) `timeoutMs` from now;
 * answers the timer to clear once the shutdown is over.
 */
function stopAfter(stop: AbortController, timeoutMs: number): ReturnType<typeof setTimeout> {
  const timer = setTimeout(() => stop.abort(), timeoutMs);
  Deno.unrefTimer(timer);
  return timer;
}

/**
 * Encoded span bytes queued at most (beside `OTEL_BSP_MAX_QUEUE_SIZE` spans): with message
 * content captured a span holds a prompt, and 2,048 of them could be gigabytes.
 */
export const MAX_QUEUED_BYTES = 32 * 1024 * 1024;
/**
 * A batch's span bytes at most (one larger span goes alone): under the OpenTelemetry
 * Collector's default limit of a request body (20 MiB), so a batch is never refused whole.
 */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

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
  readonly poster: OtlpPoster;
}

/**
 * The bounded span queue and its batch export. A span is encoded when it ends, into the bytes
 * waiting to go (its record dies young: holding records until their batch went made the GC work
 * more than the encoding did, ADR 0050); a batch is those bytes under the resource and scope.
 */
export class SpanExporter {
  readonly #o: SpanExporterOptions;
  /** The spans waiting, encoded back to back. */
  readonly #pending = new ProtoWriter();
  /** Where each waiting span ends in `#pending`. */
  #ends: number[] = [];
  /** The export body being sent (reused: one export at a time). */
  readonly #body = new ProtoWriter();
  readonly #clock = new UnixClock();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The timer is the one of a full batch (no delay). */
  #due = false;
  #exporting: Promise<void> | undefined;
  #closed = false;
  /** Aborted when the shutdown's bound is up: what is in flight then fails, and is counted. */
  readonly #stop = new AbortController();

  constructor(opts: SpanExporterOptions) {
    this.#o = opts;
  }

  /**
   * A span ended: encoded into the queue, or dropped and counted when the queue is full — in
   * spans (`OTEL_BSP_MAX_QUEUE_SIZE`) or in bytes (`MAX_QUEUED_BYTES`: spans carrying captured
   * prompts can be large).
   */
  push(span: SpanRecord): void {
    const o = this.#o;
    const ends = this.#ends;
    if (ends.length >= o.maxQueue || this.#pending.pos >= MAX_QUEUED_BYTES || this.#closed) {
      o.counts.spansDroppedQueueFull++;
      return;
    }
    writeSpan(this.#pending, this.#clock, span);
    ends.push(this.#pending.pos);
    if (this.#exporting !== undefined) return;
    if (this.#fullBatch()) this.#schedule(0);
    else if (this.#timer === undefined) this.#schedule(o.scheduleDelayMs);
  }

  /** Whether a whole batch waits: `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans, or its bytes. */
  #fullBatch(): boolean {
    return this.#ends.length >= this.#o.maxBatch || this.#pending.pos >= MAX_BATCH_BYTES;
  }

  /** The spans of the next batch: at most the batch size, and past the first, its bytes. */
  #nextBatch(): number {
    const ends = this.#ends;
    let n = Math.min(ends.length, this.#o.maxBatch);
    while (n > 1 && ends[n - 1] > MAX_BATCH_BYTES) n--;
    return n;
  }

  /** Spans waiting. */
  get queued(): number {
    return this.#ends.length;
  }

  #schedule(ms: number): void {
    // After shutdown began its flush sends what is left; no timer of its own outlives it.
    if (this.#closed) return;
    if (this.#timer !== undefined) {
      // A batch already due at once stays so (spans keep coming until its timer runs).
      if (ms > 0 || this.#due) return;
      clearTimeout(this.#timer);
    }
    // Never on the request path: the batch is sent from a timer of its own.
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.#due = false;
      this.#exporting = this.#drain().finally(() => this.#exporting = undefined);
    }, ms);
    Deno.unrefTimer(timer);
    this.#timer = timer;
    this.#due = ms === 0;
  }

  /**
   * Exports batches while a full one waits, then waits for the schedule again; `all` (the
   * shutdown): until nothing waits.
   */
  async #drain(all = false): Promise<void> {
    const o = this.#o;
    for (;;) {
      const n = this.#nextBatch();
      if (n === 0) return;
      await this.#send(n);
      if (this.#stop.signal.aborted) {
        this.#dropAll();
        return;
      }
      if (!all && !this.#fullBatch()) {
        if (this.#ends.length > 0) {
          // The rest waits for the schedule (set once this export is no longer in flight).
          queueMicrotask(() => this.#schedule(o.scheduleDelayMs));
        }
        return;
      }
    }
  }

  /** Sends the first `n` waiting spans; they leave the queue whatever the answer. */
  async #send(n: number): Promise<void> {
    const o = this.#o;
    const end = this.#ends[n - 1];
    const body = encodeSpanBatch(this.#body, o.resource, o.scope, this.#pending.slice(0, end));
    this.#pending.dropFront(end);
    const ends = this.#ends.slice(n);
    for (let i = 0; i < ends.length; i++) ends[i] -= end;
    this.#ends = ends;
    try {
      await o.poster.post(o.target, body, boundOf(o.target.timeoutMs, this.#stop.signal));
      o.counts.spansExported += n;
    } catch (err) {
      o.counts.spansDroppedExportFailed += n;
      o.warn("traces", errorMessage(err));
    }
  }

  #dropAll(): void {
    this.#o.counts.spansDroppedExportFailed += this.#ends.length;
    this.#ends = [];
    this.#pending.reset();
  }

  /**
   * Exports what is queued, bounded by the export timeout from now (an export in flight is
   * waited for within the same bound); nothing is queued after.
   */
  async shutdown(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#due = false;
    const bound = stopAfter(this.#stop, this.#o.target.timeoutMs);
    try {
      // An export in flight ends by its own timeout or by the bound, whichever is first.
      await this.#exporting;
      if (!this.#stop.signal.aborted) await this.#drain(true);
    } finally {
      clearTimeout(bound);
    }
    if (this.#ends.length > 0) this.#dropAll();
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
  readonly poster: OtlpPoster;
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
  /** Aborted when the shutdown's bound is up. */
  readonly #stop = new AbortController();

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

  async #export(): Promise<void> {
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
      await o.poster.post(o.target, body, boundOf(o.target.timeoutMs, this.#stop.signal));
    } catch (err) {
      o.counts.metricExportsFailed++;
      o.warn("metrics", errorMessage(err));
    }
  }

  /** The last export, bounded by the export timeout from now. */
  async shutdown(): Promise<void> {
    clearInterval(this.#interval);
    const bound = stopAfter(this.#stop, this.#o.target.timeoutMs);
    try {
      await this.#exporting;
      if (!this.#stop.signal.aborted) await this.#export();
    } finally {
      clearTimeout(bound);
    }
  }
}
