/**
 * The usage event — the billing unit: one per forwarded request, whatever the outcome — and the
 * store contract every backend (jsonlog, sqlite, postgresql, callbacks) implements.
 *
 * @module
 */

/** The token counts a usage event bills; 0 where the upstream reported nothing. */
export interface TokenCounts {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  /** Prompt tokens read from a cache. */
  cached_tokens: number;
  /** Prompt tokens written to a cache. */
  cache_write_tokens: number;
  tool_calls: number;
}

/** What a usage event costs (USD, the served model's rule); the parts sum to the total. */
export interface CostAmounts {
  cost_input_usd: number;
  cost_output_usd: number;
  cost_cache_read_usd: number;
  cost_cache_write_usd: number;
  cost_total_usd: number;
}

/** One usage event. Costs arrive already priced with the served model's rule. */
export interface UsageEvent extends TokenCounts, CostAmounts {
  /** Unique event id (idempotency key: a replayed insert of the same id is a no-op). */
  event_id: string;
  /** UTC `YYYY-MM-DDTHH:MM:SSZ`. */
  created_at: string;
  /** The request id, same as the `x-request-id` response header and the log lines. */
  request_id: string;
  /** `openai`, `anthropic` or `ollama`. */
  api_format: string;
  /** Client-facing route, e.g. `/v1/chat/completions`, `/v1/messages`, `/api/chat`. */
  endpoint: string;
  /** Customer key id (`k_<40 hex>`), `anonymous` without a key. */
  api_key_id: string;
  provider: string;
  engine: string;
  /** Served model: what the node was asked for. */
  model: string;
  /** What the client asked for (an alias, or the same as model). */
  requested_model: string;
  node_id: string;
  route_url: string;
  status_code: number;
  ok: boolean;
  /** Milliseconds since routing started (capacity wait included). */
  duration_ms: number;
  error_type: string;
  error_message: string;
  /** Streams only: UTF-8 bytes of content relayed or translated. Never used for billing. */
  content_bytes?: number;
  /** Streams only: ms from routing start to the first content byte sent to the client. */
  ttft_ms?: number;
  /** How many upstream attempts this request took (failover). */
  attempts: number;
}

/** Filters of a usage report; empty ones are dropped. */
export interface ReportFilters {
  since?: string;
  api_key_id?: string;
  model?: string;
  /** Default 20, capped at 500. */
  limit?: number;
}

/** Aggregates of a usage report: the token counts summed, with requests and cost. */
export interface ReportTotals extends TokenCounts {
  requests: number;
  total_cost_usd: number;
}

/** One row of by_key / by_model. */
export interface ReportGroup {
  requests: number;
  total_tokens: number;
  total_cost_usd: number;
  api_key_id?: string;
  model?: string;
}

/** The usage report, same shape on every backend. */
export interface UsageReport {
  ok: boolean;
  enabled: boolean;
  backend?: string;
  db_path?: string;
  since?: string;
  error?: string;
  totals?: ReportTotals;
  by_key?: ReportGroup[];
  by_model?: ReportGroup[];
  recent?: Record<string, unknown>[];
}

/** A store's answer to a write. Never thrown: failures come back as `{ok:false, error}`. */
export interface StoreResult {
  ok: boolean;
  error?: string;
  /** Write-behind: the event was queued, not yet written. */
  queued?: boolean;
}

/** The request path's view of the ledger: record never blocks and never throws. */
export interface UsageRecorder {
  /** Hands one event to the ledger; the write happens off the request path. */
  record(event: UsageEvent): void;
}

/** The backends a usage store can be. `callback` is the custom sink set on the ledger. */
export type UsageBackend = "jsonlog" | "sqlite" | "postgresql" | "callback";

/**
 * One usage store. Only the ledger's background writer calls `write`; reports are admin-only.
 * Every write is idempotent on `event_id`, so a replayed batch never duplicates a row.
 */
export interface UsageStore {
  readonly backend: UsageBackend;
  /** For logs: backend and path or host, never a password. */
  readonly description: string;
  /** Creates the directory, file or schema; throws when the store is unusable. */
  prepare(): Promise<void>;
  /** Writes one batch in one transaction; throws on failure (see `UsageWriteError`). */
  write(events: UsageEvent[]): Promise<void>;
  /** The report for `filters` (already normalized: empty filters dropped, limit 1–500). */
  report(filters: ReportFilters): Promise<UsageReport>;
  /** Releases files, handles and connections. */
  close(): Promise<void>;
}
