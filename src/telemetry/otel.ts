/**
 * Skeid's own spans and GenAI metrics through `@opentelemetry/api`, exported by Deno's built-in
 * OpenTelemetry (`OTEL_DENO=true`, ADR 0039): per client request the request span (SERVER, named
 * by route, a child of Deno's own server span), `skeid.admission` per walk step, and one CLIENT
 * span per upstream attempt in the GenAI conventions. The request and attempt spans end when the
 * request really ends (a stream's last byte relayed), not when the handler returns.
 *
 * Deno exports from its own threads (a bounded batch queue, `OTEL_BSP_*`): nothing here waits on
 * the collector.
 *
 * @module
 */
import {
  type Attributes,
  type Context,
  context,
  metrics,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  trace,
  type Tracer,
} from "@opentelemetry/api";
import type { PickedNode } from "../core/types.ts";
import type { UpstreamRequest } from "../faces/face.ts";
import { parseTraceparent, type TraceContext, validTracestate } from "../proxy/trace_context.ts";
import type { UsageOutcome } from "../proxy/usage_facts.ts";
import { tierName, type WalkResult } from "../proxy/walk.ts";
import type { UsageEvent } from "../usage/types.ts";
import { VERSION } from "../version.ts";
import {
  type GenAiMetrics,
  genAiMetrics,
  inputMessages,
  operationName,
  outputMessages,
  providerName,
  requestAttributes,
  responseAttributes,
  serverOf,
} from "./genai.ts";
import {
  otelEnabled,
  QUIET_TELEMETRY,
  type RequestTelemetry,
  type Telemetry,
} from "./telemetry.ts";

/** Options of the OpenTelemetry telemetry. */
export interface OtelOptions {
  /** The environment (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). */
  env: (name: string) => string | undefined;
  /** The worker of `serve --workers N` this gateway is (`skeid.worker` on its spans). */
  worker?: number;
}

/** Reads a client's trace headers for `propagation.extract`. */
const HEADERS_GETTER: TextMapGetter<Headers> = {
  get: (h, key) => h.get(key) ?? undefined,
  keys: (h) => [...h.keys()],
};

/** Epoch ms with sub-millisecond precision (span and event times). */
function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** The telemetry of a gateway with OpenTelemetry on. */
export class OtelTelemetry implements Telemetry {
  readonly on = true;
  readonly tracer: Tracer;
  readonly metrics: GenAiMetrics;
  /** Whether prompts and answers go into spans (opt-in: `..._CAPTURE_MESSAGE_CONTENT=true`). */
  readonly captureContent: boolean;
  /** `skeid.worker` of this gateway's spans; undefined for one process. */
  readonly worker: number | undefined;
  /** `server.address`/`server.port` per node base URL, parsed once. */
  readonly #servers = new Map<string, { address: string; port: number }>();

  constructor(opts: OtelOptions) {
    this.tracer = trace.getTracer("skeid", VERSION);
    this.metrics = genAiMetrics(metrics.getMeter("skeid", VERSION));
    const capture = (opts.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") ?? "")
      .trim().toLowerCase();
    this.captureContent = capture === "true";
    this.worker = opts.worker;
  }

  request(req: Request, endpoint: string, apiFormat: string): RequestTelemetry {
    return new OtelRequest(this, req, endpoint, apiFormat);
  }

  /** The server of a node's base URL. */
  server(url: string): { address: string; port: number } {
    let s = this.#servers.get(url);
    if (s === undefined) {
      s = serverOf(url);
      // Bounded: node URLs come from the config; a table grown past it is simply started over.
      if (this.#servers.size >= 4096) this.#servers.clear();
      this.#servers.set(url, s);
    }
    return s;
  }
}

/** An upstream attempt's open span and what its metrics are recorded with. */
interface OpenAttempt {
  readonly span: Span;
  readonly startedMs: number;
  /** The metric attributes (operation, provider, model, server, node). */
  readonly labels: Attributes;
}

/** One request's spans. */
class OtelRequest implements RequestTelemetry {
  readonly trace: TraceContext;
  readonly #t: OtelTelemetry;
  readonly #span: Span;
  /** The request span as the parent of the admission and attempt spans. */
  readonly #ctx: Context;
  readonly #startedMs: number;
  /** When the open admission step began (the key step, or the failed attempt's end). */
  #admitFrom: number | undefined;
  #keyLimited = false;
  /** Whether a walk step answered yet (before one, only the key step can have refused). */
  #walked = false;
  /** The waiters queued when the open walk step began to wait; undefined: it did not wait. */
  #queuedBehind: number | undefined;
  #attempt: OpenAttempt | undefined;
  #ended = false;

  /** RequestTelemetry: the attempt's call with its span active (Deno's fetch span under it). */
  readonly within = <T>(call: () => T): T => {
    const open = this.#attempt;
    return open === undefined ? call() : context.with(trace.setSpan(this.#ctx, open.span), call);
  };

  constructor(t: OtelTelemetry, req: Request, endpoint: string, apiFormat: string) {
    this.#t = t;
    this.#startedMs = nowMs();
    let parent = context.active();
    const server = trace.getSpan(parent);
    if (server !== undefined) {
      // Deno's own server span (which continued the client's traceparent): named by method only.
      server.setAttribute("http.route", endpoint);
    } else {
      parent = propagation.extract(ROOT_CONTEXT, req.headers, HEADERS_GETTER);
    }
    const attributes: Attributes = {
      "http.request.method": req.method,
      "http.route": endpoint,
      "skeid.api_format": apiFormat,
    };
    if (t.worker !== undefined) attributes["skeid.worker"] = t.worker;
    const span = t.tracer.startSpan(`${req.method} ${endpoint}`, {
      kind: SpanKind.SERVER,
      attributes,
      startTime: this.#startedMs,
    }, parent);
    this.#span = span;
    this.#ctx = trace.setSpan(parent, span);
    const sc = span.spanContext();
    this.trace = {
      traceId: sc.traceId,
      spanId: sc.spanId,
      sampled: (sc.traceFlags & 1) === 1,
      tracestate: clientTracestate(req.headers),
    };
  }

  model(requested: string): void {
    this.#span.setAttribute("skeid.requested_model", requested);
  }

  admitting(): void {
    this.#admitFrom = nowMs();
  }

  keyPassed(limited: boolean): void {
    this.#keyLimited = limited;
  }

  queued(waiting: number): void {
    this.#queuedBehind = waiting;
  }

  walked(step: WalkResult): void {
    this.#walked = true;
    const end = nowMs();
    const start = this.#admitFrom ?? end;
    this.#admitFrom = undefined;
    const a: Attributes = {
      "skeid.key_step": this.#keyLimited ? "passed_limited" : "passed",
      "skeid.admission.result": step.kind,
      "skeid.admission.waited_ms": Math.round((end - start) * 1000) / 1000,
    };
    if (this.#queuedBehind !== undefined) {
      // Why it took time: it waited in the queue for a tier's capacity (the length: it included).
      a["skeid.admission.queued"] = true;
      a["skeid.admission.queue_length"] = this.#queuedBehind;
      this.#queuedBehind = undefined;
    }
    if (step.kind === "admitted") {
      const node = step.node;
      a["skeid.tier"] = tierName(step.tier);
      a["skeid.node.id"] = node.id;
      const route = node.route;
      a["skeid.pick"] = route?.pick ?? "round_robin";
      if (route !== undefined) {
        a["skeid.pick.key_kind"] = route.key_kind;
        a["skeid.pick.hit"] = route.hit;
        a["skeid.pick.spilled"] = route.spilled;
      }
    } else if (step.kind === "refused") {
      a["skeid.admission.reason"] = step.reason;
      a["http.response.status_code"] = step.status;
    }
    const span = this.#t.tracer.startSpan("skeid.admission", {
      kind: SpanKind.INTERNAL,
      attributes: a,
      startTime: start,
    }, this.#ctx);
    if (step.kind === "refused") {
      span.setStatus({ code: SpanStatusCode.ERROR, message: step.reason });
    }
    span.end(end);
  }

  attempt(
    node: PickedNode,
    servedModel: string,
    n: number,
    upstream: UpstreamRequest,
  ): string | undefined {
    const t = this.#t;
    const op = operationName(upstream.path);
    const server = t.server(node.url);
    const provider = providerName(node.engine);
    const labels: Attributes = {
      "gen_ai.operation.name": op,
      "gen_ai.provider.name": provider,
      "gen_ai.request.model": servedModel,
      "server.address": server.address,
      "server.port": server.port,
      "skeid.node.id": node.id,
    };
    // Each worker's points are its own series (their meters are not merged across isolates).
    if (t.worker !== undefined) labels["skeid.worker"] = t.worker;
    // Each attribute costs Deno's span about 2 µs (docs/bench/otel.md): the request's own facts
    // (requested model, stream) are on the request span, not repeated here.
    const a: Attributes = {
      ...labels,
      // The name tools read before `gen_ai.provider.name` replaced it.
      "gen_ai.system": provider,
      "skeid.attempt": n,
    };
    requestAttributes(upstream.body, a);
    if (t.captureContent) {
      const input = inputMessages(upstream.body);
      if (input !== undefined) a["gen_ai.input.messages"] = input;
    }
    const startedMs = nowMs();
    const span = t.tracer.startSpan(`${op} ${servedModel}`, {
      kind: SpanKind.CLIENT,
      attributes: a,
      startTime: startedMs,
    }, this.#ctx);
    this.#attempt = { span, startedMs, labels };
    return span.spanContext().spanId;
  }

  attemptFailed(reason: string, status: number): void {
    const open = this.#attempt;
    if (open === undefined) return;
    this.#attempt = undefined;
    const errorType = status > 0 ? String(status) : "transport_failure";
    open.span.setAttribute("error.type", errorType);
    if (status > 0) open.span.setAttribute("http.response.status_code", status);
    open.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
    const end = nowMs();
    open.span.end(end);
    this.#t.metrics.duration.record((end - open.startedMs) / 1000, {
      ...open.labels,
      "error.type": errorType,
    });
    // The next walk step (a failover's admission) starts where this attempt ended.
    this.#admitFrom = end;
  }

  recorded(event: UsageEvent | undefined, outcome: UsageOutcome): void {
    const span = this.#span;
    if (event === undefined) {
      span.addEvent("skeid.usage_lost");
    } else {
      span.addEvent("skeid.usage_event", {
        "skeid.usage.event_id": event.event_id,
        "skeid.usage.status_code": event.status_code,
        "skeid.usage.ok": event.ok,
        "skeid.usage.source": event.usage_source,
        "skeid.usage.cost_total_usd": event.cost_total_usd,
      });
    }
    const open = this.#attempt;
    if (open === undefined) return;
    this.#attempt = undefined;
    const s = open.span;
    const end = nowMs();
    const a: Attributes = {};
    const labels: Attributes = { ...open.labels };
    if (event !== undefined) {
      a["gen_ai.usage.input_tokens"] = event.input_tokens;
      a["gen_ai.usage.output_tokens"] = event.output_tokens;
      // Cache counts only when there were any; under the current names and the names of the
      // conventions before 1.37, which tools still read.
      if (event.cached_tokens > 0) {
        a["gen_ai.usage.cache_read.input_tokens"] = event.cached_tokens;
        a["gen_ai.usage.cache_read_input_tokens"] = event.cached_tokens;
      }
      if (event.cache_write_tokens > 0) {
        a["gen_ai.usage.cache_creation.input_tokens"] = event.cache_write_tokens;
        a["gen_ai.usage.cache_creation_input_tokens"] = event.cache_write_tokens;
      }
      if (event.usage_source === "estimated") a["skeid.usage_source"] = "estimated";
      if (event.status_code === 499) a["skeid.client_gone"] = true;
      if (!event.ok) {
        const errorType = event.error_type !== "" ? event.error_type : String(event.status_code);
        a["error.type"] = errorType;
        labels["error.type"] = errorType;
        s.setStatus({ code: SpanStatusCode.ERROR, message: event.error_message });
      }
    }
    responseAttributes(outcome.response, a);
    if (typeof a["gen_ai.response.model"] === "string") {
      labels["gen_ai.response.model"] = a["gen_ai.response.model"];
    }
    if (this.#t.captureContent) {
      const output = outputMessages(outcome.response);
      if (output !== undefined) a["gen_ai.output.messages"] = output;
    }
    const ttft = outcome.ttftMs;
    if (ttft !== undefined) {
      a["skeid.time_to_first_chunk_ms"] = ttft;
      // The moment the first content chunk was handed to the client (ttft counts from arrival).
      s.addEvent(
        "skeid.first_chunk",
        { "skeid.time_to_first_chunk_ms": ttft },
        this.#startedMs + ttft,
      );
      this.#t.metrics.ttft.record(ttft / 1000, labels);
    }
    s.setAttributes(a);
    s.end(end);
    const m = this.#t.metrics;
    m.duration.record((end - open.startedMs) / 1000, labels);
    if (event !== undefined) {
      m.tokens.record(event.input_tokens, { ...labels, "gen_ai.token.type": "input" });
      m.tokens.record(event.output_tokens, { ...labels, "gen_ai.token.type": "output" });
    }
  }

  outcome(status: number, outcome: string): void {
    const span = this.#span;
    span.setAttribute("http.response.status_code", status);
    span.setAttribute("skeid.outcome", outcome);
    if (this.#admitFrom !== undefined && !this.#walked) {
      // Refused by the key step (rate windows, budget), before any walk step answered.
      const end = nowMs();
      const adm = this.#t.tracer.startSpan("skeid.admission", {
        kind: SpanKind.INTERNAL,
        attributes: {
          // Only the key step runs between `admitting` and the first walk step.
          "skeid.key_step": "refused",
          "skeid.admission.result": "refused",
          "skeid.admission.reason": outcome,
          "http.response.status_code": status,
        },
        startTime: this.#admitFrom,
      }, this.#ctx);
      adm.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      adm.end(end);
      this.#admitFrom = undefined;
    }
    if (status >= 500) {
      span.setAttribute("error.type", String(status));
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    }
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    const end = nowMs();
    const open = this.#attempt;
    if (open !== undefined) {
      // Ended without a usage event (an error in the gateway): the attempt ends with the request.
      this.#attempt = undefined;
      open.span.setAttribute("error.type", "_OTHER");
      open.span.setStatus({ code: SpanStatusCode.ERROR, message: "ended without a conclusion" });
      open.span.end(end);
    }
    this.#span.end(end);
  }
}

/** The client's `tracestate`, passed on beside a valid `traceparent` only (ADR 0033). */
function clientTracestate(headers: Headers): string | undefined {
  const parent = headers.get("traceparent");
  if (parent === null || parseTraceparent(parent) === undefined) return undefined;
  const state = headers.get("tracestate");
  return state !== null && validTracestate(state) ? state : undefined;
}

/**
 * The telemetry a gateway is composed with: OpenTelemetry's when `OTEL_DENO` turns Deno's on,
 * else the quiet one (nothing built per request).
 */
export function telemetryFor(opts: OtelOptions): Telemetry {
  return otelEnabled(opts.env) ? new OtelTelemetry(opts) : QUIET_TELEMETRY;
}
