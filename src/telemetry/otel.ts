/**
 * Skeid's own spans and GenAI metrics, recorded and exported by Skeid (ADR 0050; the spans are
 * ADR 0039's): per client request the request span (SERVER, named by route, continuing a valid
 * inbound `traceparent`), `skeid.admission` per walk step, and one CLIENT span per upstream
 * attempt in the GenAI conventions. The request and attempt spans end when the request really
 * ends (a stream's last byte relayed), not when the handler returns.
 *
 * On the request path a span is a `SpanRecord` — ids, `performance.now()` stamps, attributes as
 * references to what the request already has; the fixed attributes of an attempt (its node and
 * model) are encoded once per node and model. The exporter (`otlp_export.ts`) encodes and sends
 * from a timer of its own; nothing here waits on the collector.
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import type { PickedNode, Tier } from "../core/types.ts";
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
import { tierName, type WalkResult } from "../proxy/walk.ts";
import type { UsageEvent } from "../usage/types.ts";
import { VERSION } from "../version.ts";
import {
  answerFacts,
  factsAttributes,
  GENAI,
  inputMessages,
  operationName,
  outputMessages,
  providerName,
  requestAttributes,
  serverOf,
} from "./genai.ts";
import { GenAiHistograms, type GenAiSeries } from "./genai_histograms.ts";
import { encodeAttrs, resourceBlock, scopeBlock } from "./otlp_encode.ts";
import {
  MetricExporter,
  noCounts,
  OtlpPoster,
  SpanExporter,
  type TelemetryCounts,
} from "./otlp_export.ts";
import { otelEnabled, type OtelSettings, otelSettings } from "./otel_settings.ts";
import {
  attrKey,
  type AttrList,
  AttrType,
  eventName,
  SpanKindCode,
  spanName,
  SpanRecord,
} from "./span_record.ts";
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

/** Skeid's own attribute keys. */
const K = {
  method: attrKey("http.request.method", AttrType.String),
  route: attrKey("http.route", AttrType.String),
  status: attrKey("http.response.status_code", AttrType.Int),
  apiFormat: attrKey("skeid.api_format", AttrType.String),
  worker: attrKey("skeid.worker", AttrType.Int),
  requestedModel: attrKey("skeid.requested_model", AttrType.String),
  outcome: attrKey("skeid.outcome", AttrType.String),
  keyStep: attrKey("skeid.key_step", AttrType.String),
  result: attrKey("skeid.admission.result", AttrType.String),
  waited: attrKey("skeid.admission.waited_ms", AttrType.Double),
  queued: attrKey("skeid.admission.queued", AttrType.Bool),
  queueLength: attrKey("skeid.admission.queue_length", AttrType.Int),
  reason: attrKey("skeid.admission.reason", AttrType.String),
  tier: attrKey("skeid.tier", AttrType.String),
  node: attrKey("skeid.node.id", AttrType.String),
  pick: attrKey("skeid.pick", AttrType.String),
  keyKind: attrKey("skeid.pick.key_kind", AttrType.String),
  hit: attrKey("skeid.pick.hit", AttrType.Bool),
  spilled: attrKey("skeid.pick.spilled", AttrType.Bool),
  attempt: attrKey("skeid.attempt", AttrType.Int),
  usageSource: attrKey("skeid.usage_source", AttrType.String),
  clientGone: attrKey("skeid.client_gone", AttrType.Bool),
  ttft: attrKey("skeid.time_to_first_chunk_ms", AttrType.Double),
  eventId: attrKey("skeid.usage.event_id", AttrType.String),
  eventStatus: attrKey("skeid.usage.status_code", AttrType.Int),
  eventOk: attrKey("skeid.usage.ok", AttrType.Bool),
  eventSource: attrKey("skeid.usage.source", AttrType.String),
  eventCost: attrKey("skeid.usage.cost_total_usd", AttrType.Double),
} as const;

const ADMISSION = spanName("skeid.admission");
const USAGE_EVENT = eventName("skeid.usage_event");
const USAGE_LOST = eventName("skeid.usage_lost");
const FIRST_CHUNK = eventName("skeid.first_chunk");

/** What every attempt to one node for one served model shares, made once. */
class AttemptLabels {
  readonly op: string;
  readonly url: string;
  readonly engine: string;
  /** `{operation} {served model}`, encoded. */
  readonly name: Uint8Array;
  /** The attempt span's fixed attributes, encoded. */
  readonly fixed: Uint8Array;
  /** The metric labels (operation, provider, model, server, node, worker). */
  readonly labels: AttrList;
  /** Points per response model and error type. */
  readonly #series = new Map<string, GenAiSeries>();

  constructor(op: string, node: PickedNode, served: string, worker: number | undefined) {
    this.op = op;
    this.url = node.url;
    this.engine = node.engine;
    const server = serverOf(node.url);
    const provider = providerName(node.engine);
    this.name = spanName(`${op} ${served}`);
    const labels: AttrList = [
      GENAI.operation,
      op,
      GENAI.provider,
      provider,
      GENAI.requestModel,
      served,
      GENAI.serverAddress,
      server.address,
      GENAI.serverPort,
      server.port,
      K.node,
      node.id,
    ];
    // Each worker's points are its own series (their histograms are not merged across isolates).
    if (worker !== undefined) labels.push(K.worker, worker);
    this.labels = labels;
    this.fixed = encodeAttrs([...labels, GENAI.system, provider]);
  }

  /** The points of `responseModel` and `errorType` (each undefined when none). */
  series(
    all: GenAiHistograms,
    responseModel: string | undefined,
    errorType: string | undefined,
  ): GenAiSeries {
    const key = errorType === undefined
      ? responseModel ?? ""
      : `${responseModel ?? ""}\u0000${errorType}`;
    let s = this.#series.get(key);
    if (s === undefined) {
      // The response model is the node's word: one that names a new model in every answer must
      // not grow this table (nor make a label set per answer). Past the bound its points go to
      // the overflow set, as past the histograms' own bound.
      if (this.#series.size >= MAX_SERIES_CACHED) return all.overflow();
      const labels = [...this.labels];
      if (responseModel !== undefined) labels.push(GENAI.responseModel, responseModel);
      if (errorType !== undefined) labels.push(GENAI.errorType, errorType);
      s = all.add(labels);
      this.#series.set(key, s);
    }
    return s;
  }
}

/** The request span's name and fixed attributes of one route, made once. */
interface RouteLabels {
  readonly method: string;
  readonly apiFormat: string;
  readonly name: Uint8Array;
  readonly fixed: Uint8Array;
}

/**
 * An admitted walk step's attributes but its wait, encoded once per key step, node, tier and
 * pick decision (an admission span otherwise wrote the same six to nine strings every request).
 */
interface AdmittedLabels {
  readonly limited: boolean;
  readonly tier: Tier;
  readonly pick: string;
  readonly keyKind: string | undefined;
  readonly hit: boolean | undefined;
  readonly spilled: boolean | undefined;
  readonly fixed: Uint8Array;
}

/** Whether two tiers name the same served model and tags. */
function sameTier(a: Tier, b: Tier): boolean {
  if (a === b) return true;
  if (a.model !== b.model || a.tags.length !== b.tags.length) return false;
  for (let i = 0; i < a.tags.length; i++) if (a.tags[i] !== b.tags[i]) return false;
  return true;
}

/** Entries kept in each of the caches below at most; a full one starts over. */
const MAX_CACHED = 4096;
/** Series one node and model keeps at hand, by response model and error type. */
const MAX_SERIES_CACHED = 256;

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
  /** `skeid.worker` of this gateway's spans; undefined for one process. */
  readonly worker: number | undefined;
  /** By node id, then served model: the labels of each operation (one or two). */
  readonly #attempts = new Map<string, Map<string, AttemptLabels[]>>();
  /** By route: the labels of each method and face. */
  readonly #routes = new Map<string, RouteLabels[]>();
  /** By node id: the fixed attributes of its admissions. */
  readonly #admissions = new Map<string, AdmittedLabels[]>();
  #cached = 0;
  readonly #logger: Logger | undefined;
  readonly #warnedAt = { traces: -Infinity, metrics: -Infinity };

  constructor(opts: OtelOptions) {
    const s = otelSettings(opts.env, VERSION, opts.worker);
    this.settings = s;
    this.worker = opts.worker;
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

  /** The labels of attempts with `op` to `node` for `served`. */
  attemptLabels(op: string, node: PickedNode, served: string): AttemptLabels {
    // Looked up by the config's own strings (their hashes kept), no key string made per attempt.
    let byModel = this.#attempts.get(node.id);
    if (byModel === undefined) {
      byModel = new Map();
      this.#attempts.set(node.id, byModel);
    }
    let ops = byModel.get(served);
    if (ops === undefined) {
      ops = [];
      byModel.set(served, ops);
    }
    for (let i = 0; i < ops.length; i++) {
      const l = ops[i];
      // A node whose URL or engine a config reload changed gets its labels anew.
      if (l.op === op && l.url === node.url && l.engine === node.engine) return l;
    }
    if (this.#cached >= MAX_CACHED) {
      this.#startOver();
      return this.attemptLabels(op, node, served);
    }
    const l = new AttemptLabels(op, node, served, this.worker);
    ops.push(l);
    this.#cached++;
    return l;
  }

  /** The request span's name and fixed attributes for a route. */
  routeLabels(method: string, endpoint: string, apiFormat: string): RouteLabels {
    let list = this.#routes.get(endpoint);
    if (list === undefined) {
      if (this.#routes.size >= MAX_CACHED) this.#routes.clear();
      list = [];
      this.#routes.set(endpoint, list);
    }
    for (let i = 0; i < list.length; i++) {
      const r = list[i];
      if (r.method === method && r.apiFormat === apiFormat) return r;
    }
    const attrs: AttrList = [K.method, method, K.route, endpoint, K.apiFormat, apiFormat];
    if (this.worker !== undefined) attrs.push(K.worker, this.worker);
    const r = {
      method,
      apiFormat,
      name: spanName(`${method} ${endpoint}`),
      fixed: encodeAttrs(attrs),
    };
    // Bounded: methods and faces are few; a route's list past them starts over.
    if (list.length >= 16) list.length = 0;
    list.push(r);
    return r;
  }

  /** The fixed attributes of an admission span whose walk step admitted `node` from `tier`. */
  admittedLabels(limited: boolean, node: PickedNode, tier: Tier): Uint8Array {
    let list = this.#admissions.get(node.id);
    if (list === undefined) {
      if (this.#admissions.size >= MAX_CACHED) this.#admissions.clear();
      list = [];
      this.#admissions.set(node.id, list);
    }
    const route = node.route;
    const pick = route?.pick ?? "round_robin";
    for (let i = 0; i < list.length; i++) {
      const l = list[i];
      if (
        l.limited === limited && l.pick === pick && l.keyKind === route?.key_kind &&
        l.hit === route?.hit && l.spilled === route?.spilled && sameTier(l.tier, tier)
      ) return l.fixed;
    }
    const attrs: AttrList = [
      K.keyStep,
      limited ? "passed_limited" : "passed",
      K.result,
      "admitted",
      K.tier,
      tierName(tier),
      K.node,
      node.id,
      K.pick,
      pick,
    ];
    if (route !== undefined) {
      attrs.push(K.keyKind, route.key_kind, K.hit, route.hit, K.spilled, route.spilled);
    }
    const fixed = encodeAttrs(attrs);
    // Bounded: tiers, picks and their outcomes per node are few; past them the list starts over.
    if (list.length >= 32) list.length = 0;
    list.push({
      limited,
      tier: { ...tier, tags: [...tier.tags] },
      pick,
      keyKind: route?.key_kind,
      hit: route?.hit,
      spilled: route?.spilled,
      fixed,
    });
    return fixed;
  }

  /** Bounded: node ids and models come from the config; a table grown past it starts over. */
  #startOver(): void {
    this.#attempts.clear();
    this.#cached = 0;
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
      const route = t.routeLabels(req.method, endpoint, apiFormat);
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
    this.#span?.set(K.requestedModel, requested);
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
    this.#admittedAt = step.kind === "admitted" ? end : undefined;
    const start = this.#admitFrom ?? end;
    this.#admitFrom = undefined;
    const behind = this.#queuedBehind;
    this.#queuedBehind = undefined;
    if (this.#span === undefined) return;
    const admitted = step.kind === "admitted";
    const s = this.#child(
      ADMISSION,
      SpanKindCode.Internal,
      start,
      admitted ? this.#t.admittedLabels(this.#keyLimited, step.node, step.tier) : undefined,
    );
    if (!admitted) {
      s.set(K.keyStep, this.#keyLimited ? "passed_limited" : "passed");
      s.set(K.result, step.kind);
    }
    s.set(K.waited, Math.round((end - start) * 1000) / 1000);
    if (behind !== undefined) {
      // Why it took time: it waited in the queue for a tier's capacity (the length: it included).
      s.set(K.queued, true);
      s.set(K.queueLength, behind);
    }
    if (step.kind === "refused") {
      s.set(K.reason, step.reason);
      s.set(K.status, step.status);
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
    const labels = t.attemptLabels(operationName(upstream.path), node, servedModel);
    const startedMs = this.#admittedAt ?? performance.now();
    this.#admittedAt = undefined;
    let span: SpanRecord | undefined;
    let spanId: string;
    if (this.#span !== undefined) {
      span = this.#child(labels.name, SpanKindCode.Client, startedMs, labels.fixed);
      spanId = span.spanId;
      span.set(K.attempt, n);
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
      if (status > 0) s.set(K.status, status);
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
          K.eventId,
          event.event_id,
          K.eventStatus,
          event.status_code,
          K.eventOk,
          event.ok,
          K.eventSource,
          event.usage_source,
          K.eventCost,
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
        if (event.usage_source === "estimated") s.set(K.usageSource, "estimated");
        if (event.status_code === 499) s.set(K.clientGone, true);
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
        s.set(K.ttft, ttft);
        // The moment the first content chunk was handed to the client (ttft counts from arrival).
        s.event(FIRST_CHUNK, this.#startedMs + ttft, [K.ttft, ttft]);
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
    span.set(K.status, status);
    span.set(K.outcome, outcome);
    if (this.#admitFrom !== undefined && !this.#walked) {
      // Refused by the key step (rate windows, budget), before any walk step answered.
      const adm = this.#child(ADMISSION, SpanKindCode.Internal, this.#admitFrom);
      // Only the key step runs between `admitting` and the first walk step.
      adm.set(K.keyStep, "refused");
      adm.set(K.result, "refused");
      adm.set(K.reason, outcome);
      adm.set(K.status, status);
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
