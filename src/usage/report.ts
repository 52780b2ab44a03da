/**
 * The usage report's shared parts (reference usage-and-cost §6): filter normalization, the
 * columns of a `recent` row, group ordering, and the in-memory aggregation the jsonlog store
 * uses (the SQL stores compute the same in SQL: `sql_report.ts`).
 *
 * @module
 */
import { reportSince } from "./report_since.ts";
import { toAmount, toCount } from "./event.ts";
import type {
  EstimatedTotals,
  ReportFilters,
  ReportGroup,
  ReportTotals,
  TokenCounts,
  UsageReport,
} from "./types.ts";

/** Default number of `recent` rows. */
export const DEFAULT_REPORT_LIMIT = 20;
/** Most `recent` rows a report gives. */
export const MAX_REPORT_LIMIT = 500;

/** The error of a ledger without a store. */
export const NOT_CONFIGURED = "usage_store not configured";

/** The answer when there is no store and no report callback. */
export function notConfiguredReport(): UsageReport {
  return { ok: false, enabled: false, error: NOT_CONFIGURED };
}

/**
 * Drops empty filters, turns `since` into the stores' form (`reportSince`: throws `SinceError`
 * for text that names no time, `now` epoch ms for a span back from it) and clamps `limit`
 * (missing or below 1 → 20, above 500 → 500). Accepts strings, as a query string gives them.
 */
export function normalizeReportFilters(
  filters: ReportFilters | Record<string, unknown> | undefined,
  now: number = Date.now(),
): ReportFilters {
  const f = (filters ?? {}) as Record<string, unknown>;
  const out: ReportFilters = {};
  for (const key of ["since", "api_key_id", "model"] as const) {
    const v = f[key];
    if (typeof v === "string" && v.trim() !== "") out[key] = v.trim();
  }
  if (out.since !== undefined) out.since = reportSince(out.since, now);
  const raw = typeof f.limit === "string" ? Number(f.limit.trim()) : f.limit;
  const n = typeof raw === "number" && Number.isFinite(raw) ? Math.trunc(raw) : 0;
  out.limit = n < 1 ? DEFAULT_REPORT_LIMIT : Math.min(n, MAX_REPORT_LIMIT);
  return out;
}

/** The token counts a report sums, in the order of its totals. */
export const TOKEN_COUNT_FIELDS = [
  "input_tokens",
  "output_tokens",
  "total_tokens",
  "cached_tokens",
  "cache_write_tokens",
  "tool_calls",
] as const satisfies readonly (keyof TokenCounts)[];

/** The fields of one `recent` row, in order (plus `event_id` and `request_id`). */
export const RECENT_FIELDS = [
  "id",
  "event_id",
  "created_at",
  "request_id",
  "api_format",
  "endpoint",
  "api_key_id",
  "model",
  "requested_model",
  "node_id",
  "status_code",
  "ok",
  ...TOKEN_COUNT_FIELDS,
  "cost_total_usd",
  "usage_source",
  "trace_id",
  "span_id",
] as const;

const NUMERIC = new Set<string>(["status_code", ...TOKEN_COUNT_FIELDS]);

/** One `recent` row from a stored record (row or parsed JSON): fixed fields, typed values. */
export function recentRow(src: Record<string, unknown>): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (const f of RECENT_FIELDS) {
    const v = src[f];
    if (f === "id") row.id = typeof v === "string" ? v : toCount(v);
    else if (f === "ok") row.ok = v === true || v === 1 || v === "1" || v === "t";
    else if (f === "cost_total_usd") row[f] = toAmount(v);
    else if (NUMERIC.has(f)) row[f] = toCount(v);
    else row[f] = typeof v === "string" ? v : "";
  }
  if (row.requested_model === "") row.requested_model = row.model;
  if (row.usage_source !== "estimated") row.usage_source = "reported";
  return row;
}

/** All-zero totals. */
export function emptyTotals(): ReportTotals & { estimated: EstimatedTotals } {
  return {
    requests: 0,
    input_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    cached_tokens: 0,
    cache_write_tokens: 0,
    tool_calls: 0,
    total_cost_usd: 0,
    estimated: { requests: 0, total_tokens: 0, total_cost_usd: 0 },
  };
}

/** Orders groups by cost, then requests (both descending), then name, so reports are stable. */
export function compareGroups(a: ReportGroup, b: ReportGroup): number {
  return b.total_cost_usd - a.total_cost_usd || b.requests - a.requests ||
    String(a.api_key_id ?? a.model ?? "").localeCompare(String(b.api_key_id ?? b.model ?? ""));
}

function matches(e: Record<string, unknown>, f: ReportFilters): boolean {
  if (f.since !== undefined && !(String(e.created_at ?? "") >= f.since)) return false;
  if (f.api_key_id !== undefined && e.api_key_id !== f.api_key_id) return false;
  if (f.model !== undefined && e.model !== f.model) return false;
  return true;
}

/**
 * Totals, by_key, by_model and recent over `records` given oldest first (recent = the last
 * `limit` that match, newest first).
 */
export function aggregate(
  records: readonly Record<string, unknown>[],
  filters: ReportFilters,
): Pick<UsageReport, "totals" | "by_key" | "by_model" | "recent"> {
  const totals = emptyTotals();
  const byKey = new Map<string, ReportGroup>();
  const byModel = new Map<string, ReportGroup>();
  const hits: Record<string, unknown>[] = [];
  for (const e of records) {
    if (!matches(e, filters)) continue;
    hits.push(e);
    const tokens = toCount(e.total_tokens);
    const cost = toAmount(e.cost_total_usd);
    totals.requests += 1;
    for (const f of TOKEN_COUNT_FIELDS) totals[f] += toCount(e[f]);
    totals.total_cost_usd += cost;
    if (e.usage_source === "estimated") {
      totals.estimated.requests += 1;
      totals.estimated.total_tokens += tokens;
      totals.estimated.total_cost_usd += cost;
    }
    for (const [map, field] of [[byKey, "api_key_id"], [byModel, "model"]] as const) {
      const name = typeof e[field] === "string" ? e[field] as string : "";
      const g = map.get(name) ?? { [field]: name, requests: 0, total_tokens: 0, total_cost_usd: 0 };
      g.requests += 1;
      g.total_tokens += tokens;
      g.total_cost_usd += cost;
      map.set(name, g);
    }
  }
  const limit = filters.limit ?? DEFAULT_REPORT_LIMIT;
  return {
    totals,
    by_key: [...byKey.values()].sort(compareGroups),
    by_model: [...byModel.values()].sort(compareGroups),
    recent: hits.slice(-limit).reverse().map(recentRow),
  };
}
