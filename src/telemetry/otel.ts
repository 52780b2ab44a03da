/**
 * Skeid's own spans and GenAI metrics, recorded and exported by Skeid (ADR 0050; the spans are
 * ADR 0039's): per client request the request span (SERVER, named by route, continuing a valid
 * inbound `traceparent`), `skeid.admission` per walk step, and one CLIENT span per upstream
 * attempt in the GenAI conventions. The request and attempt spans end when the request really
 * ends (a stream's last byte relayed), not when the handler returns.
 *
 * On the request path a span is a `SpanRecord` — ids, `performance.now()` stamps, attributes as
 * references to what the request already has; what many requests' spans share is encoded once
 * (`span_labels.ts`). The exporter (`otlp_export.ts`) encodes and sends from a timer of its own;
 * nothing here waits on the collector.
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import type { PickedNode } from "../core/types.ts";
import type { UpstreamRequest } from "../faces/face.ts";
import type { Logger } from "../log.ts";
import {
  newSpanId,
  newTraceId,
  parseTraceparent,
  type TraceContext,
  validTracestate,
} from "../proxy/trace_context.ts";
import type { UsageOutcome } from "../proxy/usage_facts.ts";
import type { WalkResult } from "../proxy/walk.ts";
import type { UsageEvent } from "../usage/types.ts";
import { VERSION } from "../version.ts";
import {
  answerFacts,
  factsAttributes,
  GENAI,
  inputMessages,
  operationName,
  outputMessages,
  requestAttributes,
} from "./genai.ts";
import { GenAiHistograms } from "./genai_histograms.ts";
import { resourceBlock, scopeBlock } from "./otlp_encode.ts";
import {
  MetricExporter,
  noCounts,
  OtlpPoster,
  SpanExporter,
  type TelemetryCounts,
} from "./otlp_export.ts";
import { otelEnabled, type OtelSettings, otelSettings } from "./otel_settings.ts";
import { SKEID } from "./skeid_attrs.ts";
import { type AttemptLabels, SpanLabels } from "./span_labels.ts";
import { eventName, SpanKindCode, spanName, SpanRecord } from "./span_record.ts";
import { QUIET_TELEMETRY, type RequestTelemetry, type Telemetry } from "./telemetry.ts";

/** Options of the OpenTelemetry telemetry. */
export interface OtelOptions {
  /** The environment (the spec's `OTEL_*` variables). */
  env: (name: string) => string | undefined;
  /** The worker of `serve --workers N` this gateway is (`skeid.worker` on its spans). */
  worker?: number;
  /**
   * Where the settings' warnings (by the process alone or worker 0 only) and failed exports are
   * said (once a minute at most).
   */
  logger?: Logger;
}

const ADMISSION = spanName("skeid.admission");
const USAGE_EVENT = eventName("skeid.usage_event");
const USAGE_LOST = eventName("skeid.usage_lost");
const FIRST_CHUNK = eventName("skeid.first_chunk");

/** Whether a trace id falls in the sampled share `ratio` (its low 56 bits, as the spec reads them). */
function ratioSampled(traceId: string, ratio: number): boolean {
  if (ratio >= 1) return true;
  if (ratio <= 0) return false;
  return Number.parseInt(traceId.slice(18), 16) / 2 ** 56 < ratio;
}

/** The telemetry of a gateway with OpenTelemetry on. */
export class OtelTelemetry implements Telemetry {
  readonly on = true;
  readonly settings: OtelSettings;
  /** Undefined: spans are not exported (`OTEL_TRACES_EXPORTER=none`). */
  readonly spans: SpanExporter | undefined;
  readonly histograms = new GenAiHistograms();
  readonly #metrics: MetricExporter | undefined;
  readonly #counts: TelemetryCounts = noCounts();
  readonly #poster = new OtlpPoster();
  /** What the spans of many requests share, made once. */
  readonly labels: SpanLabels;
  readonly #logger: Logger | undefined;
  readonly #warnedAt = { traces: -Infinity, metrics: -Infinity };

  constructor(opts: OtelOptions) {
    const s = otelSettings(opts.env, VERSION, opts.worker);
    this.settings = s;
    this.labels = new SpanLabels(opts.worker);
    this.#logger = opts.logger;
    // The workers of a group read the same environment: the first says its settings' problems.
    if (!opts.worker) {
      for (const w of s.warnings) opts.logger?.warn("telemetry_setting", { problem: w });
    }
    const resource = resourceBlock(s.resource, 1);
    const scope = scopeBlock("skeid", VERSION);
    const warn = (signal: "traces" | "metrics", error: string) => this.#warn(signal, error);
    const poster = this.#poster;
    this.spans = s.traces === undefined ? undefined : new SpanExporter({
      target: s.traces,
      maxQueue: s.maxQueue,
      maxBatch: s.maxBatch,
      scheduleDelayMs: s.scheduleDelayMs,
      resource,
      scope,
      counts: this.#counts,
      warn,
      poster,
    });
    this.#metrics = s.metrics === undefined ? undefined : new MetricExporter({
      target: s.metrics,
      intervalMs: s.metricIntervalMs,
      resource,
      scope,
      read: () => this.histograms.read(),
      counts: this.#counts,
      warn,
      poster,
    });
  }

  request(req: InboundRequest, endpoint: string, apiFormat: string): RequestTelemetry {
    return new OtelRequest(this, req, endpoint, apiFormat);
  }

  counts(): Readonly<TelemetryCounts> {
    return this.#counts;
  }

  async shutdown(): Promise<void> {
    await Promise.all([this.spans?.shutdown(), this.#metrics?.shutdown()]);
    this.#poster.close();
  }

  /** Whether a new trace, or one continued from a client's `sampled` flag, is recorded. */
  sampled(traceId: string, parentSampled: boolean | undefined): boolean {
    const s = this.settings.sampler;
    if (parentSampled !== undefined && s.parentBased) return parentSampled;
    return ratioSampled(traceId, s.ratio);
  }

  #warn(signal: "traces" | "metrics", error: string): void {
    const now = performance.now();
    if (now - this.#warnedAt[signal] < 60_000) return;
    this.#warnedAt[signal] = now;
    this.#logger?.warn("telemetry_export_failed", { signal, error });
  }
}

/** An upstream attempt in flight: its span (when recorded) and its labels. */
interface OpenAttempt {
  readonly span: SpanRecord | undefined;
  readonly startedMs: number;
  readonly labels: AttemptLabels;
}

/** One request's spans and metric records. */
class OtelRequest implements RequestTelemetry {
  readonly trace: TraceContext;
  readonly #t: OtelTelemetry;
  /** The request span; undefined when the trace is not sampled (metrics are still recorded). */
  readonly #span: SpanRecord | undefined;
  readonly #startedMs: number;
  /** When the open admission step began (the key step, or the failed attempt's end). */
  #admitFrom: number | undefined;
  #keyLimited = false;
  /** Whether a walk step answered yet (before one, only the key step can have refused). */
  #walked = false;
  /** The waiters queued when the open walk step began to wait; undefined: it did not wait. */
  #queuedBehind: number | undefined;
  #attempt: OpenAttempt | undefined;
  /**
   * When the last walk step admitted a node: its attempt starts there (the node's key, when it
   * has to be fetched, is part of the attempt), and the clock is read once for both.
   */
  #admittedAt: number | undefined;
  #ended = false;

  constructor(t: OtelTelemetry, req: InboundRequest, endpoint: string, apiFormat: string) {
    this.#t = t;
    const startedMs = performance.now();
    this.#startedMs = startedMs;
    const headers = req.headers;
    const raw = headers.get("traceparent");
    const parent = raw === null ? undefined : parseTraceparent(raw);
    let traceId: string;
    let tracestate: string | undefined;
    if (parent === undefined) traceId = newTraceId();
    else {
      traceId = parent.traceId;
      const state = headers.get("tracestate");
      if (state !== null && validTracestate(state)) tracestate = state;
    }
    const sampled = t.sampled(traceId, parent?.sampled);
    const spanId = newSpanId();
    this.trace = { traceId, spanId, sampled, tracestate };
    if (sampled && t.spans !== undefined) {
      const route = t.labels.route(req.method, endpoint, apiFormat);
      const span = new SpanRecord(
        traceId,
        spanId,
        parent?.parentId,
        route.name,
        SpanKindCode.Server,
        startedMs,
        route.fixed,
      );
      span.traceState = tracestate;
      this.#span = span;
    }
  }

  model(requested: string): void {
    this.#span?.set(SKEID.requestedModel, requested);
  }

  admitting(): void {
    this.#admitFrom = performance.now();
  }

  keyPassed(limited: boolean): void {
    this.#keyLimited = limited;
  }

  queued(waiting: number): void {
    this.#queuedBehind = waiting;
  }

  walked(step: WalkResult): void {
    this.#walked = true;
    const end = performance.now();
    const admitted = step.kind === "admitted";
    this.#admittedAt = admitted ? end : undefined;
    const start = this.#admitFrom ?? end;
    this.#admitFrom = undefined;
    const behind = this.#queuedBehind;
    this.#queuedBehind = undefined;
    if (this.#span === undefined) return;
    const s = this.#child(
      ADMISSION,
      SpanKindCode.Internal,
      start,
      admitted ? this.#t.labels.admitted(this.#keyLimited, step.node, step.tier) : undefined,
    );
    if (!admitted) {
      s.set(SKEID.keyStep, this.#keyLimited ? "passed_limited" : "passed");
      s.set(SKEID.result, step.kind);
    }
    s.set(SKEID.waited, Math.round((end - start) * 1000) / 1000);
    if (behind !== undefined) {
      // Why it took time: it waited in the queue for a tier's capacity (the length: it included).
      s.set(SKEID.queued, true);
      s.set(SKEID.queueLength, behind);
    }
    if (step.kind === "refused") {
      s.set(SKEID.reason, step.reason);
      s.set(SKEID.status, step.status);
      s.fail(step.reason);
    }
    this.#finish(s, end);
  }

  attempt(
    node: PickedNode,
    servedModel: string,
    n: number,
    upstream: UpstreamRequest,
  ): string | undefined {
    const t = this.#t;
    const labels = t.labels.attempt(operationName(upstream.path), node, servedModel);
    const startedMs = this.#admittedAt ?? performance.now();
    this.#admittedAt = undefined;
    let span: SpanRecord | undefined;
    let spanId: string;
    if (this.#span !== undefined) {
      span = this.#child(labels.name, SpanKindCode.Client, startedMs, labels.fixed);
      spanId = span.spanId;
      span.set(SKEID.attempt, n);
      requestAttributes(upstream.body, span);
      if (t.settings.captureContent) {
        const input = inputMessages(upstream.body);
        if (input !== undefined) span.set(GENAI.inputMessages, input);
      }
    } else spanId = newSpanId();
    this.#attempt = { span, startedMs, labels };
    return spanId;
  }

  attemptFailed(reason: string, status: number): void {
    const open = this.#attempt;
    if (open === undefined) return;
    this.#attempt = undefined;
    const errorType = status > 0 ? String(status) : "transport_failure";
    const end = performance.now();
    const s = open.span;
    if (s !== undefined) {
      s.set(GENAI.errorType, errorType);
      if (status > 0) s.set(SKEID.status, status);
      s.fail(reason);
      this.#finish(s, end);
    }
    open.labels.series(this.#t.histograms, undefined, errorType).duration.record(
      (end - open.startedMs) / 1000,
    );
    // The next walk step (a failover's admission) starts where this attempt ended.
    this.#admitFrom = end;
  }

  recorded(event: UsageEvent | undefined, outcome: UsageOutcome): void {
    // One clock read for the event and the attempt's end (the same moment).
    const end = performance.now();
    const span = this.#span;
    if (span !== undefined) {
      if (event === undefined) span.event(USAGE_LOST, end);
      else {
        span.event(USAGE_EVENT, end, [
          SKEID.eventId,
          event.event_id,
          SKEID.eventStatus,
          event.status_code,
          SKEID.eventOk,
          event.ok,
          SKEID.eventSource,
          event.usage_source,
          SKEID.eventCost,
          event.cost_total_usd,
        ]);
      }
    }
    const open = this.#attempt;
    if (open === undefined) return;
    this.#attempt = undefined;
    const s = open.span;
    let errorType: string | undefined;
    if (event !== undefined && !event.ok) {
      errorType = event.error_type !== "" ? event.error_type : String(event.status_code);
    }
    const facts = outcome.facts ?? answerFacts(outcome.response);
    const ttft = outcome.ttftMs;
    if (s !== undefined) {
      if (event !== undefined) {
        s.set(GENAI.inputTokens, event.input_tokens);
        s.set(GENAI.outputTokens, event.output_tokens);
        // Cache counts only when there were any; under the current names and the names of the
        // conventions before 1.37, which tools still read.
        if (event.cached_tokens > 0) {
          s.set(GENAI.cacheRead, event.cached_tokens);
          s.set(GENAI.cacheReadOld, event.cached_tokens);
        }
        if (event.cache_write_tokens > 0) {
          s.set(GENAI.cacheCreation, event.cache_write_tokens);
          s.set(GENAI.cacheCreationOld, event.cache_write_tokens);
        }
        if (event.usage_source === "estimated") s.set(SKEID.usageSource, "estimated");
        if (event.status_code === 499) s.set(SKEID.clientGone, true);
        if (errorType !== undefined) {
          s.set(GENAI.errorType, errorType);
          s.fail(event.error_message);
        }
      }
      factsAttributes(facts, s);
      if (this.#t.settings.captureContent) {
        const output = outputMessages(outcome.response);
        if (output !== undefined) s.set(GENAI.outputMessages, output);
      }
      if (ttft !== undefined) {
        s.set(SKEID.ttft, ttft);
        // The moment the first content chunk was handed to the client (ttft counts from arrival).
        s.event(FIRST_CHUNK, this.#startedMs + ttft, [SKEID.ttft, ttft]);
      }
      this.#finish(s, end);
    }
    const series = open.labels.series(this.#t.histograms, facts?.model, errorType);
    series.duration.record((end - open.startedMs) / 1000);
    if (ttft !== undefined) series.ttft.record(ttft / 1000);
    if (event !== undefined) {
      series.inputTokens.record(event.input_tokens);
      series.outputTokens.record(event.output_tokens);
    }
  }

  outcome(status: number, outcome: string): void {
    const span = this.#span;
    if (span === undefined) return;
    span.set(SKEID.status, status);
    span.set(SKEID.outcome, outcome);
    if (this.#admitFrom !== undefined && !this.#walked) {
      // Refused by the key step (rate windows, budget), before any walk step answered.
      const adm = this.#child(ADMISSION, SpanKindCode.Internal, this.#admitFrom);
      // Only the key step runs between `admitting` and the first walk step.
      adm.set(SKEID.keyStep, "refused");
      adm.set(SKEID.result, "refused");
      adm.set(SKEID.reason, outcome);
      adm.set(SKEID.status, status);
      adm.fail(outcome);
      this.#finish(adm, performance.now());
      this.#admitFrom = undefined;
    }
    if (status >= 500) {
      span.set(GENAI.errorType, String(status));
      span.fail(outcome);
    }
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    const end = performance.now();
    const open = this.#attempt;
    if (open !== undefined) {
      // Ended without a usage event (an error in the gateway): the attempt ends with the request.
      this.#attempt = undefined;
      const s = open.span;
      if (s !== undefined) {
        s.set(GENAI.errorType, "_OTHER");
        s.fail("ended without a conclusion");
        this.#finish(s, end);
      }
    }
    const span = this.#span;
    if (span !== undefined) this.#finish(span, end);
  }

  /** A child span of the request span (which exists: the trace is recorded). */
  #child(name: Uint8Array, kind: SpanKindCode, startMs: number, fixed?: Uint8Array): SpanRecord {
    const parent = this.#span!;
    return new SpanRecord(parent.traceId, newSpanId(), parent.spanId, name, kind, startMs, fixed);
  }

  /** Ends a span and hands it to the exporter's queue. */
  #finish(s: SpanRecord, endMs: number): void {
    s.endMs = endMs;
    this.#t.spans?.push(s);
  }
}

/**
 * The telemetry a gateway is composed with: Skeid's own OpenTelemetry export when an OTLP
 * endpoint is named (and `OTEL_SDK_DISABLED` is not `true`), else the quiet one (nothing built
 * per request).
 */
export function telemetryFor(opts: OtelOptions): Telemetry {
  if (otelEnabled(opts.env)) return new OtelTelemetry(opts);
  // The switch of earlier versions: said once (by the first of a group's workers), or an
  // operator upgrading would get silence.
  if (!opts.worker && (opts.env("OTEL_DENO") ?? "").trim().toLowerCase() === "true") {
    opts.logger?.warn("telemetry_off", {
      message: "OTEL_DENO=true no longer turns OpenTelemetry on: set " +
        "OTEL_EXPORTER_OTLP_ENDPOINT (docs/telemetry.md)",
    });
  }
  return QUIET_TELEMETRY;
}
