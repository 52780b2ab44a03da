/**
 * The usage report of a SQL store (SQLite, PostgreSQL): the same queries — totals, by customer
 * key id, by model, recent — over the same filters, each database speaking its own dialect.
 *
 * @module
 */
import {
  compareGroups,
  DEFAULT_REPORT_LIMIT,
  emptyTotals,
  RECENT_FIELDS,
  recentRow,
  TOKEN_COUNT_FIELDS,
} from "./report.ts";
import { hourAlignedSince } from "./rollup.ts";
import type { KeyPeriodTotals, ReportFilters, ReportGroup, UsageReport } from "./types.ts";

/** A query argument of a report. */
export type SqlArg = string | number;

/** How one database spells the report's parts. */
export interface ReportDialect {
  /** The placeholder of argument number `n` (1-based): `?` or `$n`. */
  param(n: number): string;
  /** `COUNT(*)`, as this database hands it back as a number. */
  readonly count: string;
  /** The sum of column `name`, 0 when the table lacks the column. */
  sum(name: string): string;
  /** Whether the table has column `name`. */
  has(name: string): boolean;
  /** The select expression of the `recent` field `name`. */
  recentColumn(name: string): string;
  /** The condition of a `since` filter with its argument at `param`, and that argument. */
  since(since: string, param: string): { condition: string; arg: SqlArg };
  /** What makes a sum of the roll-ups a number this database hands back as one (`::float8`). */
  readonly float: string;
}

/** Runs one query with its arguments; answers the rows. */
export type SqlQuery = (
  text: string,
  args: SqlArg[],
) => Promise<readonly Record<string, unknown>[]> | readonly Record<string, unknown>[];

/** Which store a report comes from, as the report names it. */
export interface ReportSource {
  /** Which backend the report names. */
  backend: "sqlite" | "postgresql";
  /** The SQLite file; '' for PostgreSQL. */
  db_path: string;
}

/** The WHERE clause and arguments of `filters`, its `since` condition given. */
function whereOf(
  dialect: ReportDialect,
  filters: ReportFilters,
  since: (param: string) => { condition: string; arg: SqlArg },
): { w: string; args: SqlArg[] } {
  const where: string[] = [];
  const args: SqlArg[] = [];
  if (filters.since !== undefined) {
    const { condition, arg } = since(dialect.param(args.length + 1));
    args.push(arg);
    where.push(condition);
  }
  for (const field of ["api_key_id", "model"] as const) {
    const value = filters[field];
    if (value === undefined) continue;
    args.push(value);
    where.push(`${field} = ${dialect.param(args.length)}`);
  }
  return { w: where.length ? ` WHERE ${where.join(" AND ")}` : "", args };
}

/**
 * The report of the `usage_events` table: totals, by_key, by_model and recent (newest first,
 * `filters.limit` rows), `filters` already normalized. A failing query rejects. With `rollups`
 * (the roll-ups are built) and a `since` on a whole hour, the sums come from `usage_rollups`
 * and only `recent` reads the events.
 */
export async function sqlReport(
  query: SqlQuery,
  dialect: ReportDialect,
  filters: ReportFilters,
  source: ReportSource,
  rollups = false,
): Promise<UsageReport> {
  const hour = filters.since === undefined ? "" : hourAlignedSince(filters.since);
  if (rollups && hour !== undefined) {
    const sums = await rollupSums(query, dialect, filters, hour);
    return {
      ok: true,
      enabled: true,
      ...source,
      since: filters.since ?? "",
      ...sums,
      recent: await recentRows(query, dialect, filters),
    };
  }
  const { w, args } = whereOf(dialect, filters, (p) => dialect.since(filters.since!, p));
  const { count, sum } = dialect;

  const [t] = await query(
    `SELECT ${count} AS requests, ${
      TOKEN_COUNT_FIELDS.map((c) => `${sum(c)} AS ${c}`).join(", ")
    }, ${sum("cost_total_usd")} AS total_cost_usd FROM usage_events${w}`,
    args,
  );
  const totals = emptyTotals();
  for (const k of [...TOKEN_COUNT_FIELDS, "requests", "total_cost_usd"] as const) {
    totals[k] = Number(t?.[k] ?? 0);
  }
  if (dialect.has("usage_source")) {
    const [e] = await query(
      `SELECT ${count} AS requests, ${sum("total_tokens")} AS total_tokens, ${
        sum("cost_total_usd")
      } AS total_cost_usd FROM usage_events${w ? `${w} AND` : " WHERE"} usage_source = 'estimated'`,
      args,
    );
    totals.estimated = {
      requests: Number(e?.requests ?? 0),
      total_tokens: Number(e?.total_tokens ?? 0),
      total_cost_usd: Number(e?.total_cost_usd ?? 0),
    };
  }

  const recent = await recentRows(query, dialect, filters);

  const group = async (field: "api_key_id" | "model"): Promise<ReportGroup[]> =>
    (await query(
      `SELECT COALESCE(${field}, '') AS name, ${count} AS requests, ${
        sum("total_tokens")
      } AS total_tokens, ${sum("cost_total_usd")} AS total_cost_usd ` +
        `FROM usage_events${w} GROUP BY COALESCE(${field}, '')`,
      args,
    )).map((r) => groupOf(r, field)).sort(compareGroups);

  return {
    ok: true,
    enabled: true,
    ...source,
    since: filters.since ?? "",
    totals,
    by_key: await group("api_key_id"),
    by_model: await group("model"),
    recent,
  };
}

/** One by_key or by_model group from its row (name, requests, total_tokens, total_cost_usd). */
function groupOf(r: Record<string, unknown>, field: "api_key_id" | "model"): ReportGroup {
  return {
    [field]: String(r.name ?? ""),
    requests: Number(r.requests),
    total_tokens: Number(r.total_tokens),
    total_cost_usd: Number(r.total_cost_usd),
  };
}

/** The `recent` rows of a report: the last `filters.limit` matching events, newest first. */
async function recentRows(
  query: SqlQuery,
  dialect: ReportDialect,
  filters: ReportFilters,
): Promise<Record<string, unknown>[]> {
  const { w, args } = whereOf(dialect, filters, (p) => dialect.since(filters.since!, p));
  const recentArgs = [...args, filters.limit ?? DEFAULT_REPORT_LIMIT];
  return (await query(
    `SELECT ${RECENT_FIELDS.map((f) => dialect.recentColumn(f)).join(", ")} ` +
      `FROM usage_events${w} ORDER BY id DESC LIMIT ${dialect.param(recentArgs.length)}`,
    recentArgs,
  )).map((r) => recentRow(r));
}

/**
 * Totals, by_key and by_model from `usage_rollups`: the rows of the hours at or after `hour`
 * (`YYYY-MM-DDTHH` or a shorter prefix; '' for all time) that match the key and model filters.
 */
async function rollupSums(
  query: SqlQuery,
  dialect: ReportDialect,
  filters: ReportFilters,
  hour: string,
): Promise<Pick<UsageReport, "totals" | "by_key" | "by_model">> {
  const { w, args } = whereOf(dialect, filters, (p) => ({ condition: `hour >= ${p}`, arg: hour }));
  const s = (c: string) => `COALESCE(SUM(${c}), 0)${dialect.float}`;
  const [t] = await query(
    `SELECT ${s("requests")} AS requests, ${
      [...TOKEN_COUNT_FIELDS, "estimated_requests", "estimated_tokens", "estimated_cost_usd"]
        .map((c) => `${s(c)} AS ${c}`).join(", ")
    }, ${s("cost_total_usd")} AS total_cost_usd FROM usage_rollups${w}`,
    args,
  );
  const totals = emptyTotals();
  for (const k of [...TOKEN_COUNT_FIELDS, "requests", "total_cost_usd"] as const) {
    totals[k] = Number(t?.[k] ?? 0);
  }
  totals.estimated = {
    requests: Number(t?.estimated_requests ?? 0),
    total_tokens: Number(t?.estimated_tokens ?? 0),
    total_cost_usd: Number(t?.estimated_cost_usd ?? 0),
  };
  const group = async (field: "api_key_id" | "model"): Promise<ReportGroup[]> =>
    (await query(
      `SELECT ${field} AS name, ${s("requests")} AS requests, ${
        s("total_tokens")
      } AS total_tokens, ${s("cost_total_usd")} AS total_cost_usd ` +
        `FROM usage_rollups${w} GROUP BY ${field}`,
      args,
    )).map((r) => groupOf(r, field)).sort(compareGroups);
  return { totals, by_key: await group("api_key_id"), by_model: await group("model") };
}

/**
 * Cost and input + output tokens per customer key id since `since` (budgets, ADR 0023): one
 * grouped query that the `created_at` index serves.
 */
export async function sqlPeriodTotals(
  query: SqlQuery,
  dialect: ReportDialect,
  since: string,
): Promise<Map<string, KeyPeriodTotals>> {
  const { condition, arg } = dialect.since(since, dialect.param(1));
  const rows = await query(
    `SELECT COALESCE(api_key_id, '') AS name, ${dialect.sum("cost_total_usd")} AS usd, ` +
      `${dialect.sum("input_tokens")} AS input_tokens, ${
        dialect.sum("output_tokens")
      } AS output_tokens FROM usage_events WHERE ${condition} GROUP BY COALESCE(api_key_id, '')`,
    [arg],
  );
  const totals = new Map<string, KeyPeriodTotals>();
  for (const r of rows) {
    totals.set(String(r.name ?? ""), {
      usd: Number(r.usd ?? 0),
      tokens: Number(r.input_tokens ?? 0) + Number(r.output_tokens ?? 0),
    });
  }
  return totals;
}
