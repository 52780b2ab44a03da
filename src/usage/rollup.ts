/**
 * Hourly and daily roll-ups of the usage events: one row per (hour or day, customer key id,
 * requested model, served model, node) with the sums the usage report and the Usage page's charts
 * read, kept in the same database as `usage_events` and written in the same statement or
 * transaction as the batch they count. The SQL here is shared by SQLite and PostgreSQL: the table, the per-event
 * row view both the backfill and the fallback read, the series query; the in-memory fold serves
 * SQLite's write path and the jsonlog store's since-start roll-up.
 *
 * @module
 */
import { QueryParamError } from "./query_param_error.ts";
import { TOKEN_COUNT_FIELDS } from "./report.ts";
import type { UsageEvent } from "./types.ts";

/** The key columns of a roll-up row, after `hour` (`YYYY-MM-DDTHH`, UTC). */
export const ROLLUP_KEYS = ["api_key_id", "requested_model", "model", "node_id"] as const;

/** The event columns a roll-up sums as they are: the token counts and the cost. */
const COUNTED = [...TOKEN_COUNT_FIELDS, "cost_total_usd"] as const;

/** The summed columns of a roll-up row. */
export const ROLLUP_SUMS = [
  "requests",
  "errors",
  ...COUNTED,
  "estimated_requests",
  "estimated_tokens",
  "estimated_cost_usd",
] as const;

/** One summed column's name. */
export type RollupSum = typeof ROLLUP_SUMS[number];

/** The sums of one roll-up row. */
export type RollupSums = Record<RollupSum, number>;

/** One roll-up row: its key and its sums. */
export interface RollupRow extends RollupSums {
  /** `YYYY-MM-DDTHH` of the events' created_at (UTC). */
  hour: string;
  api_key_id: string;
  requested_model: string;
  model: string;
  node_id: string;
}

/** The columns the roll-ups read from `usage_events` (a table lacking one gets none). */
export const ROLLUP_EVENT_COLUMNS: readonly string[] = [
  "created_at",
  ...ROLLUP_KEYS,
  "ok",
  ...COUNTED,
  "usage_source",
];

/** The name of the marker row saying an existing ledger's roll-ups were built. */
export const BACKFILL_MARKER = "backfill";

/**
 * One roll-up table: its name, its time column and that column's text length (a prefix of the
 * ISO created_at), and the marker row saying an existing ledger's rows of it were built.
 */
export interface RollupGrain {
  table: string;
  column: "hour" | "day";
  length: 13 | 10;
  marker: string;
}

/** `usage_rollups`: one row per UTC hour and key. */
export const HOURLY: RollupGrain = {
  table: "usage_rollups",
  column: "hour",
  length: 13,
  marker: BACKFILL_MARKER,
};

/** `usage_rollups_daily`: one row per UTC day and key, what a chart of days reads. */
export const DAILY: RollupGrain = {
  table: "usage_rollups_daily",
  column: "day",
  length: 10,
  marker: "backfill_daily",
};

type Dialect = "sqlite" | "postgresql";

/** The roll-up tables and their marker table (`CREATE … IF NOT EXISTS`, safe to run again). */
export function rollupTableStatements(dialect: Dialect): string[] {
  const int = dialect === "sqlite" ? "INTEGER" : "BIGINT";
  const real = dialect === "sqlite" ? "REAL" : "DOUBLE PRECISION";
  const sums = ROLLUP_SUMS.map((c) =>
    `  ${c} ${c.endsWith("_usd") ? real : int} NOT NULL DEFAULT 0`
  );
  // The primary key leads with the time column: a range of hours or days is a range of it. On
  // SQLite the daily table is stored in that key's order (WITHOUT ROWID), so a range of days is
  // read in place rather than through the key's index and then the table; the hourly table
  // keeps the shape existing ledgers have.
  const table = (g: RollupGrain) =>
    `CREATE TABLE IF NOT EXISTS ${g.table} (\n  ${g.column} TEXT NOT NULL,\n${
      ROLLUP_KEYS.map((k) => `  ${k} TEXT NOT NULL DEFAULT ''`).join(",\n")
    },\n${sums.join(",\n")},\n  PRIMARY KEY (${g.column}, ${ROLLUP_KEYS.join(", ")})\n)${
      dialect === "sqlite" && g === DAILY ? " WITHOUT ROWID" : ""
    }`;
  return [
    table(HOURLY),
    table(DAILY),
    "CREATE TABLE IF NOT EXISTS usage_rollup_state (name TEXT PRIMARY KEY, done_at TEXT NOT NULL)",
  ];
}

/** The hour of a created_at column, `YYYY-MM-DDTHH` (SQLite keeps the ISO text). */
function hourExpr(dialect: Dialect): string {
  return dialect === "sqlite"
    ? "substr(created_at, 1, 13)"
    : `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24')`;
}

/**
 * Each event of `source` (a table or a CTE with the `usage_events` columns) as a one-event
 * roll-up row: what the backfill sums, what the PostgreSQL write sums of its inserted rows, and
 * what reads scan before the backfill is done.
 */
export function eventRows(dialect: Dialect, source: string): string {
  const n = (c: string) => `COALESCE(${c}, 0)`;
  const est = "usage_source = 'estimated'";
  return `(SELECT ${hourExpr(dialect)} AS hour, ${
    ROLLUP_KEYS.map((k) => `COALESCE(${k}, '') AS ${k}`).join(", ")
  }, 1 AS requests, CASE WHEN ok THEN 0 ELSE 1 END AS errors, ${
    COUNTED.map((c) => `${n(c)} AS ${c}`).join(", ")
  }, ` +
    `CASE WHEN ${est} THEN 1 ELSE 0 END AS estimated_requests, ` +
    `CASE WHEN ${est} THEN ${n("total_tokens")} ELSE 0 END AS estimated_tokens, ` +
    `CASE WHEN ${est} THEN ${n("cost_total_usd")} ELSE 0 END AS estimated_cost_usd ` +
    `FROM ${source}) AS e`;
}

/**
 * `INSERT INTO` the table of `grain` the sums of `rows` (an `eventRows`, or `usage_rollups`
 * itself: anything with an `hour` column, the keys and the sums), adding to existing rows.
 */
export function upsertRollupsFrom(rows: string, grain: RollupGrain = HOURLY): string {
  const time = grain === HOURLY ? "hour" : `substr(hour, 1, ${grain.length})`;
  const keys = ROLLUP_KEYS.join(", ");
  return `INSERT INTO ${grain.table} (${grain.column}, ${keys}, ${
    ROLLUP_SUMS.join(", ")
  }) SELECT ${time}, ${keys}, ${
    ROLLUP_SUMS.map((c) => `SUM(${c})`).join(", ")
  } FROM ${rows} GROUP BY ${time}, ${keys}${upsertTail(grain)}`;
}

/** The ON CONFLICT clause that adds a new row's sums to the stored row of its key. */
export function upsertTail(grain: RollupGrain = HOURLY): string {
  return ` ON CONFLICT (${grain.column}, ${ROLLUP_KEYS.join(", ")}) DO UPDATE SET ${
    ROLLUP_SUMS.map((c) => `${c} = ${grain.table}.${c} + excluded.${c}`).join(", ")
  }`;
}

/**
 * The key of `row` in a fold: each part with its length before it (unambiguous whatever the
 * parts hold, and a fifth of a `JSON.stringify` of them, on every usage event).
 */
function foldKey(row: Pick<RollupRow, "hour" | typeof ROLLUP_KEYS[number]>): string {
  let key = `${row.hour.length}:${row.hour}`;
  for (const name of ROLLUP_KEYS) {
    const part = String(row[name]);
    key += `${part.length}:${part}`;
  }
  return key;
}

function count(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** Adds one event to `fold` (key → row): the in-memory spelling of `eventRows`. */
export function foldEvent(fold: Map<string, RollupRow>, e: UsageEvent): void {
  const keys = {
    hour: String(e.created_at ?? "").slice(0, 13),
    api_key_id: e.api_key_id ?? "",
    requested_model: e.requested_model ?? "",
    model: e.model ?? "",
    node_id: e.node_id ?? "",
  };
  const k = foldKey(keys);
  let row = fold.get(k);
  if (!row) {
    row = { ...keys, ...Object.fromEntries(ROLLUP_SUMS.map((c) => [c, 0])) } as RollupRow;
    fold.set(k, row);
  }
  const estimated = e.usage_source === "estimated";
  row.requests += 1;
  row.errors += e.ok ? 0 : 1;
  for (const c of COUNTED) row[c] += count(e[c]);
  row.estimated_requests += estimated ? 1 : 0;
  row.estimated_tokens += estimated ? count(e.total_tokens) : 0;
  row.estimated_cost_usd += estimated ? count(e.cost_total_usd) : 0;
}

/**
 * The daily rows of hourly `rows` (a batch's fold): same keys and sums, one row per day; their
 * `hour` field holds the day, `YYYY-MM-DD`, so they bind to the daily upsert like hourly ones.
 */
export function foldDays(rows: Iterable<RollupRow>): RollupRow[] {
  const days = new Map<string, RollupRow>();
  for (const r of rows) {
    const keyed = { ...r, hour: r.hour.slice(0, DAILY.length) };
    const k = foldKey(keyed);
    const d = days.get(k);
    if (!d) {
      days.set(k, keyed);
      continue;
    }
    for (const c of ROLLUP_SUMS) d[c] += r[c];
  }
  return [...days.values()];
}

// ---- the series of the Usage page -------------------------------------------------------------

/** How a series splits its buckets. */
export type SeriesBy = "key" | "alias" | "model" | "node";
/** A series bucket's width. */
export type SeriesStep = "hour" | "day";

/** The roll-up column of each `by`. */
export const SERIES_COLUMN: Record<SeriesBy, typeof ROLLUP_KEYS[number]> = {
  key: "api_key_id",
  alias: "requested_model",
  model: "model",
  node: "node_id",
};

/** Most buckets a series answers (about 41 days of hours, or 1,000 days). */
export const MAX_SERIES_BUCKETS = 1000;

/** A validated series query: whole hours, `from` < `to`, at most MAX_SERIES_BUCKETS buckets. */
export interface SeriesQuery {
  /** First hour, `YYYY-MM-DDTHH` (the given `from` rounded down to its hour). */
  from: string;
  /** The hour after the last, `YYYY-MM-DDTHH` (the given `to` rounded up). */
  to: string;
  by: SeriesBy;
  step: SeriesStep;
}

/** One group of one bucket. */
export interface SeriesGroup {
  /** The key id, alias, served model or node id ('' when the events had none). */
  name: string;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cost_usd: number;
}

/** The answer of `GET /skeid/usage/series`. */
export interface SeriesAnswer {
  ok: true;
  /** Which store answered. */
  backend: string;
  /** True when the answer covers only the time since this process started (jsonlog). */
  since_start: boolean;
  /** First bucket start and end of the last, `YYYY-MM-DDTHH:00:00Z`. */
  from: string;
  to: string;
  by: SeriesBy;
  step: SeriesStep;
  /** Every bucket of the range, oldest first; a bucket without events has no groups. */
  buckets: { start: string; groups: SeriesGroup[] }[];
}

const HOUR_MS = 3_600_000;

function hourText(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13);
}

function instant(param: string, value: string | undefined): number {
  if (value === undefined || value.trim() === "") {
    throw new QueryParamError(param, "required (an ISO-8601 time, e.g. 2026-09-01T00:00:00Z)");
  }
  const v = value.trim();
  const ms = /^\d{4}-\d{2}-\d{2}/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) throw new QueryParamError(param, `'${v}' is not an ISO-8601 time`);
  return ms;
}

/** Parses the query string of a series; throws QueryParamError naming the wrong parameter. */
export function parseSeriesQuery(q: (name: string) => string | undefined): SeriesQuery {
  const by = q("by") ?? "model";
  if (!(by in SERIES_COLUMN)) {
    throw new QueryParamError("by", `'${by}' is not one of key, alias, model, node`);
  }
  const step = q("step") ?? "hour";
  if (step !== "hour" && step !== "day") {
    throw new QueryParamError("step", `'${step}' is not hour or day`);
  }
  const fromMs = Math.floor(instant("from", q("from")) / HOUR_MS) * HOUR_MS;
  const toMs = Math.ceil(instant("to", q("to")) / HOUR_MS) * HOUR_MS;
  if (toMs <= fromMs) throw new QueryParamError("to", "must be after from");
  const width = step === "hour" ? HOUR_MS : 24 * HOUR_MS;
  const buckets = Math.ceil((toMs - fromMs) / width);
  if (buckets > MAX_SERIES_BUCKETS) {
    throw new QueryParamError(
      "to",
      `the range is ${buckets} ${step}s; at most ${MAX_SERIES_BUCKETS} at step=${step}`,
    );
  }
  return { from: hourText(fromMs), to: hourText(toMs), by: by as SeriesBy, step };
}

/** The SQL of a series over `source` (usage_rollups or an `eventRows`), `?`/`$n` by `param`. */
export function seriesSql(q: SeriesQuery, source: string, param: (n: number) => string): string {
  const col = SERIES_COLUMN[q.by];
  const bucket = `substr(hour, 1, ${q.step === "hour" ? 13 : 10})`;
  const sums = ["requests", "errors", "input_tokens", "output_tokens", "cached_tokens"]
    .map((c) => `SUM(${c}) AS ${c}`).join(", ");
  return `SELECT ${bucket} AS bucket, ${col} AS name, ${sums}, SUM(cost_total_usd) AS cost_usd ` +
    `FROM ${source} WHERE hour >= ${param(1)} AND hour < ${param(2)} ` +
    `GROUP BY ${bucket}, ${col} ORDER BY 1, 2`;
}

/** A statement and its arguments. */
export interface SqlText {
  text: string;
  args: string[];
}

const DAY_MS = 24 * HOUR_MS;

/**
 * The series of `q` from the roll-up tables, as statements whose rows, concatenated in order,
 * are the answer's rows. With `daily` (its rows built) and `step=day`, the whole days inside the
 * range come from `usage_rollups_daily`, and only the hours of a partial first or last day from
 * `usage_rollups`: the answer is the one the hourly rows give (same buckets, same groups, same
 * order), from about a twenty-fourth of the rows.
 *
 * Separate statements, not one `UNION ALL`: PostgreSQL plans a union of three small scans as a
 * parallel append, whose workers cost more to start on a busy host than the scans themselves
 * (230 ms against 15 ms measured). Each statement's buckets come after the one before's, so the
 * concatenation keeps the order each database's own `ORDER BY` (and collation) gives.
 */
export function rollupSeriesSql(
  q: SeriesQuery,
  daily: boolean,
  param: (n: number) => string,
): SqlText[] {
  const fromMs = Date.parse(`${q.from}:00:00Z`);
  const toMs = Date.parse(`${q.to}:00:00Z`);
  const dayFrom = Math.ceil(fromMs / DAY_MS) * DAY_MS;
  const dayTo = Math.floor(toMs / DAY_MS) * DAY_MS;
  if (!daily || q.step !== "day" || dayFrom >= dayTo) {
    return [{ text: seriesSql(q, HOURLY.table, param), args: [q.from, q.to] }];
  }
  const col = SERIES_COLUMN[q.by];
  const sums = `${
    ["requests", "errors", "input_tokens", "output_tokens", "cached_tokens"]
      .map((c) => `SUM(${c}) AS ${c}`).join(", ")
  }, SUM(cost_total_usd) AS cost_usd`;
  // The partial days' hours, before the first whole day and after the last.
  const hours = (from: string, to: string): SqlText => ({
    text: `SELECT substr(hour, 1, 10) AS bucket, ${col} AS name, ${sums} FROM ${HOURLY.table} ` +
      `WHERE hour >= ${param(1)} AND hour < ${param(2)} GROUP BY substr(hour, 1, 10), ${col} ` +
      `ORDER BY 1, 2`,
    args: [from, to],
  });
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  return [
    ...(fromMs < dayFrom ? [hours(q.from, hourText(dayFrom))] : []),
    {
      text: `SELECT day AS bucket, ${col} AS name, ${sums} FROM ${DAILY.table} ` +
        `WHERE day >= ${param(1)} AND day < ${param(2)} GROUP BY day, ${col} ORDER BY 1, 2`,
      args: [day(dayFrom), day(dayTo)],
    },
    ...(dayTo < toMs ? [hours(hourText(dayTo), q.to)] : []),
  ];
}

/** The answer of `q` from grouped rows (bucket, name, sums), every bucket of the range listed. */
export function seriesAnswer(
  q: SeriesQuery,
  rows: readonly Record<string, unknown>[],
  backend: string,
  sinceStart: boolean,
): SeriesAnswer {
  const starts: string[] = [];
  const stepMs = q.step === "hour" ? HOUR_MS : 24 * HOUR_MS;
  const fromMs = Date.parse(`${q.from}:00:00Z`);
  const first = q.step === "hour" ? fromMs : Math.floor(fromMs / stepMs) * stepMs;
  const toMs = Date.parse(`${q.to}:00:00Z`);
  for (let t = first; t < toMs; t += stepMs) starts.push(new Date(t).toISOString());
  const byBucket = new Map<string, SeriesGroup[]>();
  for (const r of rows) {
    const b = String(r.bucket);
    const start = `${b}${b.length === 10 ? "T00" : ""}:00:00.000Z`;
    const groups = byBucket.get(start) ?? [];
    groups.push({
      name: String(r.name ?? ""),
      requests: Number(r.requests ?? 0),
      errors: Number(r.errors ?? 0),
      input_tokens: Number(r.input_tokens ?? 0),
      output_tokens: Number(r.output_tokens ?? 0),
      cached_tokens: Number(r.cached_tokens ?? 0),
      cost_usd: Number(r.cost_usd ?? 0),
    });
    byBucket.set(start, groups);
  }
  const iso = (s: string) => s.replace(".000Z", "Z");
  return {
    ok: true,
    backend,
    since_start: sinceStart,
    from: `${q.from}:00:00Z`,
    to: `${q.to}:00:00Z`,
    by: q.by,
    step: q.step,
    buckets: starts.map((s) => ({ start: iso(s), groups: byBucket.get(s) ?? [] })),
  };
}

/** The rows of a series from an in-memory fold (the jsonlog store's since-start roll-up). */
export function seriesRows(
  q: SeriesQuery,
  rows: Iterable<RollupRow>,
): Record<string, unknown>[] {
  const col = SERIES_COLUMN[q.by];
  const out = new Map<string, Record<string, number | string>>();
  for (const r of rows) {
    if (r.hour < q.from || r.hour >= q.to) continue;
    const bucket = r.hour.slice(0, q.step === "hour" ? 13 : 10);
    const k = JSON.stringify([bucket, r[col]]);
    const g = out.get(k) ??
      {
        bucket,
        name: r[col],
        requests: 0,
        errors: 0,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        cost_usd: 0,
      };
    for (const c of ["requests", "errors", "input_tokens", "output_tokens", "cached_tokens"]) {
      g[c] = Number(g[c]) + r[c as RollupSum];
    }
    g.cost_usd = Number(g.cost_usd) + r.cost_total_usd;
    out.set(k, g);
  }
  return [...out.values()];
}

/**
 * Whether a report's `since` falls on a whole hour in a form whose comparison with created_at
 * text equals the comparison of the hours (`2026-09`, `2026-09-01`, `2026-09-01T10`,
 * `…T10:00`, `…T10:00:00`, `…T10:00:00Z`): then the report may read the roll-ups.
 */
export function hourAlignedSince(since: string): string | undefined {
  if (!/^\d{4}(-\d{2}(-\d{2}(T\d{2}(:00(:00Z?)?)?)?)?)?$/.test(since)) return undefined;
  return since.slice(0, 13);
}
