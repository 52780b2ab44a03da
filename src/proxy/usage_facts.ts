/**
 * Usage event assembly: one event per forwarded client request (not per attempt), priced by the
 * core with the SERVED model's rule, carrying both the served and the requested model.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { Node, PickedNode } from "../core/types.ts";
import type { RouteRecord, UsageEvent, UsageRecorder, UsageSource } from "../usage/types.ts";
import type { Logger } from "../log.ts";
import { errorMessage } from "../error_message.ts";
import { buildUsageEvent, formatCreatedAt } from "../usage/event.ts";
import { usageProblem } from "../core/usage_reading.ts";
import { withoutCredentials } from "../url_credentials.ts";
import type { TraceContext } from "./trace_context.ts";
import type { AnswerFacts } from "../telemetry/genai.ts";

/**
 * `created_at` stamps (UTC, second precision) formatted once per second instead of once per
 * event: every request writes one, and formatting a date is not free.
 */
export class SecondStamp {
  #second = -1;
  #text = "";

  /** The stamp of epoch-ms `ms`. */
  at(ms: number): string {
    const second = Math.floor(ms / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#text = formatCreatedAt(second * 1000);
    }
    return this.#text;
  }
}

/** What a request's outcome adds to its usage event: each part only when it is known. */
export interface UsageOutcome {
  /** A whole upstream JSON answer (non-streamed) to read usage from. */
  response?: unknown;
  /** The last usage object of a stream. */
  usage?: unknown;
  /** Tool calls of the answer (OpenAI `{function:{name}}` entries). */
  toolCalls?: unknown[];
  /** Error type of a failed request (`error_type`); empty when it succeeded. */
  errorType?: string;
  /** What went wrong (`error_message`), naming no secret; empty when it succeeded. */
  errorMessage?: string;
  /** Streams only. */
  contentBytes?: number;
  /** Streams only: routing start → first content byte handed to the client, ms. */
  ttftMs?: number;
  /** Where the tokens come from (ADR 0027); default `reported`. */
  usageSource?: UsageSource;
  /** Streams with OpenTelemetry on: what the chunks said of the answer (its attempt span). */
  facts?: AnswerFacts;
}

/** What the proxy knows about a finished request. */
export interface UsageFacts extends UsageOutcome {
  /** `created_at`, UTC `YYYY-MM-DDTHH:MM:SSZ` (default: now). */
  createdAt?: string;
  /** The request id (the client's `x-request-id` or a generated one). */
  requestId: string;
  /** The request's trace id and the request span's id (`trace_context.ts`). */
  trace?: Pick<TraceContext, "traceId" | "spanId">;
  /** The face the client spoke: `openai`, `anthropic` or `ollama`. */
  apiFormat: string;
  /** The client-facing endpoint path. */
  endpoint: string;
  /** The customer key id, or `anonymous`. */
  apiKeyId: string;
  /** The node that served the last attempt (and how it was picked, when not round-robin). */
  node: Pick<Node, "id" | "url" | "engine"> & Pick<Partial<PickedNode>, "route">;
  /** The served model (the tier's `model`, else the requested model): it is what gets priced. */
  servedModel: string;
  /** The requested model (the client's `model`: an alias or a node model). */
  requestedModel: string;
  /**
   * The status recorded: the answer's, or 499 (client gone) / 502 (broken) for a stream that did
   * not end.
   */
  status: number;
  /**
   * Whether the request succeeded: status below 400 and, for a stream, neither aborted nor broken.
   */
  ok: boolean;
  /** Request arrival → end of the answer, ms (capacity wait included). */
  durationMs: number;
  /** Upstream attempts sent (failovers included). */
  attempts: number;
}

/** Builds the usage event of a forwarded request (token counts read and priced by the core). */
export function usageEvent(skeid: RoutingCore, facts: UsageFacts): UsageEvent {
  const metrics = skeid.normalizeMetrics({
    model: facts.servedModel,
    response: facts.response,
    usage: facts.usage,
    tool_calls: facts.toolCalls,
    duration_ms: facts.durationMs,
    engine: facts.node.engine,
    route: facts.endpoint,
    provider: "skeid",
  });
  return buildUsageEvent({
    ...(facts.createdAt !== undefined ? { created_at: facts.createdAt } : {}),
    request_id: facts.requestId,
    ...(facts.trace !== undefined
      ? { trace_id: facts.trace.traceId, span_id: facts.trace.spanId }
      : {}),
    api_format: facts.apiFormat,
    endpoint: facts.endpoint,
    api_key_id: facts.apiKeyId,
    provider: "skeid",
    engine: facts.node.engine || "openaibase",
    model: facts.servedModel,
    requested_model: facts.requestedModel,
    node_id: facts.node.id,
    route_url: withoutCredentials(facts.node.url),
    status_code: facts.status,
    ok: facts.ok,
    duration_ms: Math.max(0, Math.round(facts.durationMs)),
    attempts: facts.attempts,
    input_tokens: metrics.input_tokens,
    output_tokens: metrics.output_tokens,
    total_tokens: metrics.total_tokens,
    cached_tokens: metrics.cached_tokens,
    cache_write_tokens: metrics.cache_write_tokens,
    tool_calls: metrics.tool_calls,
    cost_input_usd: metrics.cost_input_usd,
    cost_output_usd: metrics.cost_output_usd,
    cost_cache_read_usd: metrics.cost_cache_read_usd,
    cost_cache_write_usd: metrics.cost_cache_write_usd,
    cost_total_usd: metrics.cost_total_usd,
    error_type: facts.errorType ?? "",
    error_message: facts.errorMessage ?? "",
    ...(facts.contentBytes !== undefined ? { content_bytes: facts.contentBytes } : {}),
    ...(facts.ttftMs !== undefined ? { ttft_ms: Math.max(0, Math.round(facts.ttftMs)) } : {}),
    usage_source: facts.usageSource ?? "reported",
    ...(facts.node.route !== undefined ? { route: routeRecord(facts.node.route) } : {}),
  }, skeid.now);
}

/** The usage event's `route` of a pick's decision. */
function routeRecord(d: NonNullable<PickedNode["route"]>): RouteRecord {
  return { pick: d.pick, key_kind: d.key_kind, hit: d.hit, spilled: d.spilled };
}

/** The request side of a usage event (an Exchange is one). */
export interface UsageRequest {
  /** The request id. */
  readonly requestId: string;
  /** The request's trace and its request span. */
  readonly trace: TraceContext;
  /** The face the client spoke. */
  readonly apiFormat: string;
  /** The client-facing endpoint path. */
  readonly endpoint: string;
  /** The customer key id, or `anonymous`. */
  readonly apiKeyId: string;
  /** The client's model. */
  readonly requestedModel: string;
  /** Upstream attempts sent. */
  readonly attempts: number;
  /** Epoch ms the request arrived. */
  readonly startedAt: number;
}

/** Where usage events go and what stamps them (a ProxyContext is one). */
export interface UsageSink {
  /** The core: pricing and the clock. */
  readonly skeid: RoutingCore;
  /** The ledger. */
  readonly recorder: UsageRecorder;
  /** Where a lost event is said. */
  readonly logger: Logger;
  /** The `created_at` stamp of an event recorded at epoch-ms `ms`. */
  createdAt(ms: number): string;
}

/**
 * Builds the usage event of a request forwarded to `node` and hands it to the ledger; an event
 * that cannot be built is logged (`usage_lost`) instead of thrown into the request path. Answers
 * the event recorded (undefined when lost).
 */
export function recordUsage(
  sink: UsageSink,
  req: UsageRequest,
  node: Node & Pick<Partial<PickedNode>, "route">,
  servedModel: string,
  status: number,
  ok: boolean,
  extra: UsageOutcome & { durationMs?: number },
): UsageEvent | undefined {
  const skeid = sink.skeid;
  try {
    const event = usageEvent(skeid, {
      createdAt: sink.createdAt(skeid.now()),
      requestId: req.requestId,
      trace: req.trace,
      apiFormat: req.apiFormat,
      endpoint: req.endpoint,
      apiKeyId: req.apiKeyId,
      node,
      servedModel,
      requestedModel: req.requestedModel,
      status,
      ok,
      durationMs: extra.durationMs ?? skeid.now() - req.startedAt,
      attempts: req.attempts,
      response: extra.response,
      usage: extra.usage,
      toolCalls: extra.toolCalls,
      errorType: extra.errorType,
      errorMessage: extra.errorMessage,
      contentBytes: extra.contentBytes,
      ttftMs: extra.ttftMs,
      usageSource: extra.usageSource,
    });
    sink.recorder.record(event);
    // A measured first token teaches the picks what this node's prefill costs.
    if (event.ok && event.ttft_ms !== undefined && event.usage_source === "reported") {
      skeid.observeRoute(node.id, {
        ttft_ms: event.ttft_ms,
        prompt_tokens: event.input_tokens,
        cached_tokens: event.cached_tokens,
        predicted_ttft_ms: node.route?.predicted_ttft_ms,
        predicted_wait_ms: node.route?.predicted_wait_ms,
      });
    }
    if (extra.usageSource !== "estimated") {
      warnBadUsage(sink, node.id, extra.usage ?? extra.response);
    }
    return event;
  } catch (err) {
    sink.logger.error("usage_lost", { request_id: req.requestId, error: errorMessage(err) });
    return undefined;
  }
}

/** Nodes already warned about, per sink (gateway): once per node, not once per request. */
const warnedNodes = new WeakMap<UsageSink, Set<string>>();

/**
 * Warns once per node when its usage counts were not token counts (read as not reported) or its
 * cache counts exceeded the input (clamped): the event is recorded either way.
 */
function warnBadUsage(sink: UsageSink, nodeId: string, reported: unknown): void {
  if (reported === undefined) return;
  const problem = usageProblem(reported);
  if (problem === undefined) return;
  let nodes = warnedNodes.get(sink);
  if (nodes === undefined) warnedNodes.set(sink, nodes = new Set());
  if (nodes.has(nodeId)) return;
  nodes.add(nodeId);
  sink.logger.warn("upstream_usage_invalid", { node_id: nodeId, problem });
}
