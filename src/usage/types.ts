/**
 * The usage event — the billing unit: one per forwarded request, whatever the outcome — and the
 * store contract every backend (jsonlog, sqlite, postgresql, callbacks) implements.
 *
 * @module
 */

import type { EventsPage, EventsQuery } from "./events_page.ts";
import type { CostAmounts, TokenCounts } from "../core/types.ts";
import type { SeriesAnswer, SeriesQuery } from "./rollup.ts";

// The core prices events and owns these shapes (it imports nothing from src/usage/).
export type { CostAmounts, TokenCounts };

/** One usage event. Costs arrive already priced with the served model's rule. */
export interface UsageEvent extends TokenCounts, CostAmounts {
  /** Unique event id (idempotency key: a replayed insert of the same id is a no-op). */
  event_id: string;
  /** UTC `YYYY-MM-DDTHH:MM:SSZ`. */
  created_at: string;
  /** The request id, same as the `x-request-id` response header and the log lines. */
  request_id: string;
  /**
   * The W3C trace id (32 lowercase hex): the client's `traceparent` continued, else a new one.
   * Absent on events from before it was recorded and on events not built by the proxy.
   */
  trace_id?: string;
  /** The request span's id (16 lowercase hex), the parent of every attempt's `traceparent`. */
  span_id?: string;
  /** `openai`, `anthropic` or `ollama`. */
  api_format: string;
  /** Client-facing route, e.g. `/v1/chat/completions`, `/v1/messages`, `/api/chat`. */
  endpoint: string;
  /** Customer key id (`k_<40 hex>`), `anonymous` without a key. */
  api_key_id: string;
  /** Who recorded the event (`skeid` for the proxy). */
  provider: string;
  /** Engine id of the node that served the last attempt. */
  engine: string;
  /** Served model: what the node was asked for. */
  model: string;
  /** What the client asked for (an alias, or the same as model). */
  requested_model: string;
  /** Id of the node that served the last attempt. */
  node_id: string;
  /** Base URL of that node (`…/v1`); never carries an upstream key. */
  route_url: string;
  /** HTTP status the client got. */
  status_code: number;
  /** Whether the request succeeded; a usage event is written either way. */
  ok: boolean;
  /** Milliseconds since routing started (capacity wait included). */
  duration_ms: number;
  /** Short machine-readable failure kind (e.g. `upstream_error`, `aborted`); `''` when ok. */
  error_type: string;
  /** Human-readable failure detail; `''` when ok. Never carries a secret. */
  error_message: string;
  /** Streams only: UTF-8 bytes of content relayed or translated. Never used for billing. */
  content_bytes?: number;
  /** Streams only: ms from routing start to the first content byte sent to the client. */
  ttft_ms?: number;
  /** How many upstream attempts this request took (failover). */
  attempts: number;
  /** How the node was picked; absent for `round_robin` (and for events from before it). */
  route?: RouteRecord;
  /**
   * Where the token counts come from (ADR 0027): `reported` by the upstream (exact; also an
   * event with no tokens at all), or `estimated` by Skeid for a request the client left before
   * the upstream reported its usage (from the request and the text relayed).
   */
  usage_source: UsageSource;
}

/** A usage event's pick: which pick, which session key kind, and how it went. */
export interface RouteRecord {
  /** `least_loaded` or `affinity`. */
  pick: string;
  /** The session key kind that decided (`prompt_cache_key`, …, `prompt`, `none`). */
  key_kind: string;
  /** Whether the node was the affinity node (the one most likely holding the prefix). */
  hit: boolean;
  /** Whether the load bound moved the request off the affinity node. */
  spilled: boolean;
}

/** Where a usage event's token counts come from (ADR 0027). */
export type UsageSource = "reported" | "estimated";

/** Filters of a usage report; empty ones are dropped. */
export interface ReportFilters {
  /** Only events with `created_at` at or after this (an ISO-8601 UTC prefix such as `2026-09`). */
  since?: string;
  /** Only this customer key id's events. */
  api_key_id?: string;
  /** Only events of this served model. */
  model?: string;
  /** Default 20, capped at 500. */
  limit?: number;
}

/** Aggregates of a usage report: the token counts summed, with requests and cost. */
export interface ReportTotals extends TokenCounts {
  /** Usage events that matched the filters. */
  requests: number;
  /** Summed `cost_total_usd`, USD. */
  total_cost_usd: number;
  /**
   * The part of the above with `usage_source: estimated` (ADR 0027), shown apart (every store
   * gives it; a report callback may not).
   */
  estimated?: EstimatedTotals;
}

/** The estimated part of a report's totals (ADR 0027). */
export interface EstimatedTotals {
  /** Matching events whose tokens Skeid estimated. */
  requests: number;
  /** Their summed `total_tokens`. */
  total_tokens: number;
  /** Their summed `cost_total_usd`, USD (0 when the store bills reported usage only). */
  total_cost_usd: number;
}

/** One row of by_key / by_model. */
export interface ReportGroup {
  /** Usage events in the group. */
  requests: number;
  /** Summed `total_tokens` of the group. */
  total_tokens: number;
  /** Summed `cost_total_usd` of the group, USD. */
  total_cost_usd: number;
  /** The customer key id of a by_key group. */
  api_key_id?: string;
  /** The served model of a by_model group. */
  model?: string;
}

/** The usage report, same shape on every backend. */
export interface UsageReport {
  /** False when the report could not be made (see `error`). */
  ok: boolean;
  /** False when no usage store or report callback is configured. */
  enabled: boolean;
  /** Which backend answered (`jsonlog`, `sqlite`, `postgresql`, `callback`). */
  backend?: string;
  /** SQLite only: the database file. */
  db_path?: string;
  /** The `since` filter applied; `''` when none. */
  since?: string;
  /** Why the report failed; never carries a secret. */
  error?: string;
  /** Sums over every matching event. */
  totals?: ReportTotals;
  /** Per customer key id, by cost then requests, descending. */
  by_key?: ReportGroup[];
  /** Per served model, by cost then requests, descending. */
  by_model?: ReportGroup[];
  /** The last `limit` matching events, newest first, with the fixed columns of `RECENT_FIELDS`. */
  recent?: Record<string, unknown>[];
}

/** One customer key's usage since a moment: what a budget counts as spent. */
export interface KeyPeriodTotals {
  /** Summed `cost_total_usd`, USD. */
  usd: number;
  /** Summed input + output tokens. */
  tokens: number;
}

/** A store's answer to a write. Never thrown: failures come back as `{ok:false, error}`. */
export interface StoreResult {
  /** Whether the write succeeded (or was queued). */
  ok: boolean;
  /** Why it failed; never carries a secret. */
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
 * Every write is idempotent on `event_id`, so a replayed batch never duplicates a row; what a
 * store keeps in memory (jsonlog's roll-ups and recent events) counts a replay once because the
 * ledger says which batches it gave up on (`abandoned`).
 */
export interface UsageStore {
  /** Which kind of store this is. */
  readonly backend: UsageBackend;
  /** For logs: backend and path or host, never a password. */
  readonly description: string;
  /** Creates the directory, file or schema; throws when the store is unusable. */
  prepare(): Promise<void>;
  /** Writes one batch in one transaction; throws on failure (see `UsageWriteError`). */
  write(events: UsageEvent[]): Promise<void>;
  /**
   * The ledger stopped waiting for the write of `events` (it timed out): they went to the spill
   * file and will be written again. A write of this batch that still completes must not count
   * them in what the store keeps in memory, or the replay would count them twice. Told before
   * the ledger sees the timeout; absent where the store keeps nothing in memory.
   */
  abandoned?(events: readonly UsageEvent[]): void;
  /** The report for `filters` (already normalized: empty filters dropped, limit 1–500). */
  report(filters: ReportFilters): Promise<UsageReport>;
  /**
   * Cost and tokens per customer key id of the events with `created_at` at or after `since`
   * (`YYYY-MM-DDTHH:MM:SSZ`): the spent part of budgets at start and on refresh (ADR 0023).
   * Throws when the store cannot answer. Absent on stores that cannot sum (a callback sink).
   */
  periodTotals?(since: string): Promise<Map<string, KeyPeriodTotals>>;
  /**
   * The Usage page's series (`GET /skeid/usage/series`): per bucket and group, from the hourly
   * roll-ups. Absent on a callback sink. Throws when the store cannot answer.
   */
  series?(q: SeriesQuery): Promise<SeriesAnswer>;
  /** A page of the Requests page (`GET /skeid/usage/events`), newest first, by keyset. */
  events?(q: EventsQuery): Promise<EventsPage>;
  /** One event by its event id (`GET /skeid/usage/events/:id`); undefined when none. */
  event?(eventId: string): Promise<Record<string, unknown> | undefined>;
  /** Releases files, handles and connections. */
  close(): Promise<void>;
}
