/**
 * Building a usage event (record_usage's event, reference usage-and-cost §4): defaults, the
 * token and cost derivation chains from metrics and a usage hash, and sane numbers only, so a
 * store never rejects an event for a NaN or a fractional token count.
 *
 * @module
 */
import type { UsageEvent } from "./types.ts";
import { isJsonObject } from "../core/json.ts";

/** What an event is built from: any event field, plus metrics / a usage hash / tool names. */
export interface UsageEventFields extends Partial<UsageEvent> {
  /** normalize_metrics' answer (token counts, costs, tool_calls, optionally `usage`). */
  metrics?: Record<string, unknown>;
  /** A usage hash (OpenAI `prompt_tokens`…, or canonical `input_tokens`…). */
  usage?: unknown;
  /** Names of the tool calls; their count wins over `metrics.tool_calls`. */
  tool_names?: string[];
}

/** Epoch ms → `YYYY-MM-DDTHH:MM:SSZ` (UTC, second precision). */
export function formatCreatedAt(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19) + "Z";
}

/** `value` when it is a JSON object, else undefined. */
function record(value: unknown): Record<string, unknown> | undefined {
  return isJsonObject(value) ? value : undefined;
}

/** A count: finite, whole, not negative; anything else is 0. */
export function toCount(value: unknown): number {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.trunc(n) : 0;
}

/** An amount in USD: finite, else 0 (never rounded). */
export function toAmount(value: unknown): number {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) ? n : 0;
}

/** The first source with a non-zero count (a zero counts as "not reported"). */
function firstCount(...values: unknown[]): number {
  for (const v of values) {
    const n = toCount(v);
    if (n > 0) return n;
  }
  return 0;
}

/** The first source that is a finite number (costs: zero is a real price). */
function firstAmount(...values: unknown[]): number {
  for (const v of values) {
    if (typeof v === "number" && Number.isFinite(v)) return v;
  }
  return 0;
}

function text(value: unknown, fallback = ""): string {
  return typeof value === "string" ? value : fallback;
}

/**
 * Builds one usage event. Explicit fields win; token counts then follow the derivation chains
 * of usage-and-cost §4; `created_at` defaults to `now()` in UTC; `requested_model` to `model`;
 * `ok` to a 2xx status without an error type; `event_id` to a fresh UUID. `content_bytes`,
 * `ttft_ms`, `trace_id` and `span_id` appear only when given and not empty.
 */
export function buildUsageEvent(
  fields: UsageEventFields,
  now: () => number = Date.now,
): UsageEvent {
  const m = record(fields.metrics) ?? {};
  const mu = record(m.usage) ?? {};
  const u = record(fields.usage) ?? {};
  const details = record(u.prompt_tokens_details) ?? record(mu.prompt_tokens_details) ?? {};

  const input = firstCount(
    fields.input_tokens,
    mu.input_tokens,
    mu.input,
    u.input_tokens,
    u.prompt_tokens,
    m.input_tokens,
  );
  const output = firstCount(
    fields.output_tokens,
    mu.output_tokens,
    mu.output,
    u.output_tokens,
    u.completion_tokens,
    m.output_tokens,
  );
  const total = firstCount(
    fields.total_tokens,
    mu.total_tokens,
    mu.total,
    u.total_tokens,
    m.total_tokens,
  ) || input + output;
  const cached = firstCount(
    fields.cached_tokens,
    mu.cached,
    mu.cached_tokens,
    u.cached,
    u.cached_tokens,
    details.cached_tokens,
    m.cached_tokens,
  );
  const cacheWrite = firstCount(
    fields.cache_write_tokens,
    mu.cache_write,
    mu.cache_write_tokens,
    u.cache_write,
    u.cache_write_tokens,
    m.cache_write_tokens,
  );
  const toolCalls = fields.tool_calls !== undefined
    ? toCount(fields.tool_calls)
    : Array.isArray(fields.tool_names)
    ? fields.tool_names.length
    : toCount(m.tool_calls);

  const model = text(fields.model, text(m.model));
  const status = toCount(fields.status_code);
  const errorType = text(fields.error_type);
  const event: UsageEvent = {
    event_id: text(fields.event_id) || crypto.randomUUID(),
    created_at: text(fields.created_at) || formatCreatedAt(now()),
    request_id: text(fields.request_id),
    api_format: text(fields.api_format),
    endpoint: text(fields.endpoint),
    api_key_id: text(fields.api_key_id),
    provider: text(fields.provider, text(m.provider)),
    engine: text(fields.engine, text(m.engine)),
    model,
    requested_model: text(fields.requested_model) || model,
    node_id: text(fields.node_id),
    route_url: text(fields.route_url),
    status_code: status,
    ok: typeof fields.ok === "boolean"
      ? fields.ok
      : status >= 200 && status < 300 && errorType === "",
    duration_ms: toCount(fields.duration_ms ?? m.duration_ms),
    input_tokens: input,
    output_tokens: output,
    total_tokens: total,
    cached_tokens: cached,
    cache_write_tokens: cacheWrite,
    tool_calls: toolCalls,
    cost_input_usd: firstAmount(fields.cost_input_usd, m.cost_input_usd, m.input_cost_usd),
    cost_output_usd: firstAmount(fields.cost_output_usd, m.cost_output_usd, m.output_cost_usd),
    cost_cache_read_usd: firstAmount(
      fields.cost_cache_read_usd,
      m.cost_cache_read_usd,
      m.cache_read_cost_usd,
    ),
    cost_cache_write_usd: firstAmount(
      fields.cost_cache_write_usd,
      m.cost_cache_write_usd,
      m.cache_write_cost_usd,
    ),
    cost_total_usd: firstAmount(fields.cost_total_usd, m.cost_total_usd, m.total_cost_usd),
    error_type: errorType,
    error_message: text(fields.error_message),
    attempts: toCount(fields.attempts),
    usage_source: fields.usage_source === "estimated" ? "estimated" : "reported",
  };
  if (typeof fields.trace_id === "string" && fields.trace_id !== "") {
    event.trace_id = fields.trace_id;
  }
  if (typeof fields.span_id === "string" && fields.span_id !== "") event.span_id = fields.span_id;
  if (fields.content_bytes !== undefined) event.content_bytes = toCount(fields.content_bytes);
  if (fields.ttft_ms !== undefined) event.ttft_ms = toCount(fields.ttft_ms);
  const route = record(fields.route);
  if (route !== undefined) {
    event.route = {
      pick: text(route.pick),
      key_kind: text(route.key_kind),
      hit: route.hit === true,
      spilled: route.spilled === true,
    };
  }
  return event;
}
