/**
 * The PostgreSQL usage store on `postgres` (porsager). A small pool per process; an idempotent
 * migration under an advisory lock (several workers may start at once); one multi-row insert
 * per batch `ON CONFLICT (event_id) DO NOTHING`; reports in SQL. No error or description ever
 * carries the password.
 *
 * @module
 */
import postgres from "postgres";
import type { PostgresStoreConfig } from "./config.ts";
import { compareGroups, emptyTotals, RECENT_FIELDS, recentRow } from "./report.ts";
import { addColumnStatements, createTable, USAGE_COLUMNS, USAGE_INDEXES } from "./schema.ts";
import { errorMessage } from "./secret.ts";
import type {
  ReportFilters,
  ReportGroup,
  ReportTotals,
  UsageEvent,
  UsageReport,
  UsageStore,
} from "./types.ts";

/** Rows per INSERT statement (33 columns × 500 stays far below the 65,535 parameter limit). */
const ROWS_PER_INSERT = 500;
/** Advisory lock key serializing migrations of several processes ("skeid" + "usage"). */
const MIGRATE_LOCK = 0x736b6569_64;
/** created_at rendered back as `YYYY-MM-DDTHH:MM:SSZ`. */
const CREATED_AT_TEXT = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

type Param = string | number | boolean | null;

/**
 * A report's `since` as a full timestamp, when it is an ISO-8601 prefix (`2026-09`,
 * `2026-09-01`, `2026-09-01T10:00`…): missing parts take their lowest value, the zone is UTC
 * unless given. Comparing the column with it is the same as the string comparison the other
 * stores make, yet uses the index. Undefined for anything else.
 */
export function sinceTimestamp(since: string): string | undefined {
  const m =
    /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(\.\d+)?)?)?)?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/
      .exec(since.trim());
  if (!m) return undefined;
  const [, y, mo = "01", d = "01", h = "00", mi = "00", s = "00", frac = "", tz = "Z"] = m;
  const text = `${y}-${mo}-${d}T${h}:${mi}:${s}${frac}${tz}`;
  const check = new Date(text);
  if (Number.isNaN(check.getTime())) return undefined;
  // Reject day/month overflow that Date would roll over (2026-02-30).
  if (tz === "Z" && check.toISOString().slice(0, 10) !== `${y}-${mo}-${d}`) return undefined;
  return text;
}

/** A column value as PostgreSQL takes it: NUL characters stripped (text cannot hold them). */
function pgValue(event: UsageEvent, name: string): Param {
  const v = (event as unknown as Record<string, unknown>)[name];
  if (v === undefined || v === null) return null;
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return Number.isFinite(v) ? v : 0;
  return String(v).replaceAll("\u0000", "");
}

/** A PostgreSQL store. */
export class PostgresStore implements UsageStore {
  /** Always `postgresql`. */
  readonly backend = "postgresql" as const;
  /** `postgresql [user@]host:port/dbname`. */
  readonly description: string;
  readonly #cfg: PostgresStoreConfig;
  readonly #readOnly: boolean;
  readonly #secrets: string[];
  #sql: postgres.Sql | undefined;
  #columns = new Set<string>();
  #conflict = false;

  /** `readOnly`: prepare connects and checks the table, without migrating. */
  constructor(cfg: PostgresStoreConfig, opts: { readOnly?: boolean } = {}) {
    this.#cfg = cfg;
    this.#readOnly = opts.readOnly ?? false;
    this.#secrets = cfg.password ? [cfg.password.reveal()] : [];
    this.description = `postgresql ${
      cfg.user ? cfg.user + "@" : ""
    }${cfg.host}:${cfg.port}/${cfg.dbname}`;
  }

  #connect(): postgres.Sql {
    const c = this.#cfg;
    const options = {
      max: c.pool_size,
      connect_timeout: c.connect_timeout_s,
      onnotice: () => {},
      connection: { application_name: "skeid" },
      ...(c.user ? { user: c.user } : {}),
      ...(c.password ? { password: c.password.reveal() } : {}),
    };
    return c.dsn
      ? postgres(c.dsn, options)
      : postgres({ ...options, host: c.host, port: c.port, database: c.dbname });
  }

  #fail(what: string, err: unknown): Error {
    return new Error(`${what} ${this.description}: ${errorMessage(err, this.#secrets)}`);
  }

  /** Connects; with auto_migrate creates the table, adds missing columns, then indexes. */
  async prepare(): Promise<void> {
    const sql = this.#connect();
    this.#sql = sql;
    try {
      const schema = this.#cfg.schema_file && this.#cfg.auto_migrate && !this.#readOnly
        ? await Deno.readTextFile(this.#cfg.schema_file)
        : undefined;
      await sql`SELECT 1`;
      if (!this.#readOnly && this.#cfg.auto_migrate) {
        await sql.begin(async (tx) => {
          await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATE_LOCK})`);
          // Table first, then the columns an old table lacks, then indexes that may name them.
          await tx.unsafe(schema ?? createTable("postgresql")).simple();
          const have = await this.#readColumns(tx);
          for (const stmt of addColumnStatements("postgresql", have)) await tx.unsafe(stmt);
          for (const stmt of USAGE_INDEXES) await tx.unsafe(stmt);
        });
      }
      this.#columns = await this.#readColumns(sql);
      if (this.#columns.size === 0) throw new Error("table usage_events does not exist");
      const idx = await sql.unsafe(
        `SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'usage_events'
           AND indexdef ILIKE 'CREATE UNIQUE INDEX%(event_id)'`,
      );
      this.#conflict = idx.length > 0;
    } catch (err) {
      this.#sql = undefined;
      await sql.end({ timeout: 0 }).catch(() => {});
      throw this.#fail("usage_store", err);
    }
  }

  async #readColumns(sql: postgres.Sql | postgres.TransactionSql): Promise<Set<string>> {
    const rows = await sql.unsafe(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'usage_events'`,
    );
    return new Set(rows.map((r) => String(r.column_name)));
  }

  /** Inserts the batch in one transaction; an event_id already stored is skipped. */
  async write(events: UsageEvent[]): Promise<void> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    if (events.length === 0) return;
    const cols = USAGE_COLUMNS.map((c) => c.name).filter((n) => this.#columns.has(n));
    const tail = this.#conflict ? " ON CONFLICT (event_id) DO NOTHING" : "";
    try {
      await sql.begin(async (tx) => {
        for (let i = 0; i < events.length; i += ROWS_PER_INSERT) {
          const chunk = events.slice(i, i + ROWS_PER_INSERT);
          const params: Param[] = [];
          const rows = chunk.map((e) =>
            `(${cols.map((c) => (params.push(pgValue(e, c)), `$${params.length}`)).join(", ")})`
          );
          await tx.unsafe(
            `INSERT INTO usage_events (${cols.join(", ")}) VALUES ${rows.join(", ")}${tail}`,
            params,
            { prepare: false },
          );
        }
      });
    } catch (err) {
      throw this.#fail("write", err);
    }
  }

  #sum(name: string): string {
    return this.#columns.has(name) ? `COALESCE(SUM(${name}), 0)::float8` : "0::float8";
  }

  #recentColumn(name: string): string {
    if (name === "id") return "id::float8 AS id";
    if (name === "created_at") return `${CREATED_AT_TEXT} AS created_at`;
    return this.#columns.has(name) ? name : `NULL AS ${name}`;
  }

  /** Totals, by_key, by_model and recent in SQL; same shape as the SQLite store's. */
  async report(filters: ReportFilters): Promise<UsageReport> {
    const sql = this.#sql;
    if (!sql) {
      return {
        ok: false,
        enabled: true,
        backend: "postgresql",
        error: `${this.description}: store is not open`,
      };
    }
    try {
      return await this.#report(sql, filters);
    } catch (err) {
      return {
        ok: false,
        enabled: true,
        backend: "postgresql",
        db_path: "",
        error: this.#fail("report", err).message,
      };
    }
  }

  async #report(sql: postgres.Sql, filters: ReportFilters): Promise<UsageReport> {
    const where: string[] = [];
    const args: Param[] = [];
    if (filters.since !== undefined) {
      const ts = sinceTimestamp(filters.since);
      args.push(ts ?? filters.since);
      where.push(
        ts ? `created_at >= $${args.length}::timestamptz` : `${CREATED_AT_TEXT} >= $${args.length}`,
      );
    }
    if (filters.api_key_id !== undefined) {
      args.push(filters.api_key_id);
      where.push(`api_key_id = $${args.length}`);
    }
    if (filters.model !== undefined) {
      args.push(filters.model);
      where.push(`model = $${args.length}`);
    }
    const w = where.length ? ` WHERE ${where.join(" AND ")}` : "";

    const [t] = await sql.unsafe(
      `SELECT COUNT(*)::float8 AS requests, ${
        [
          "input_tokens",
          "output_tokens",
          "total_tokens",
          "cached_tokens",
          "cache_write_tokens",
          "tool_calls",
        ].map((c) => `${this.#sum(c)} AS ${c}`).join(", ")
      }, ${this.#sum("cost_total_usd")} AS total_cost_usd FROM usage_events${w}`,
      args,
    );
    const totals: ReportTotals = emptyTotals();
    for (const k of Object.keys(totals) as (keyof ReportTotals)[]) {
      totals[k] = Number(t?.[k] ?? 0);
    }

    const group = async (field: "api_key_id" | "model"): Promise<ReportGroup[]> =>
      (await sql.unsafe(
        `SELECT COALESCE(${field}, '') AS name, COUNT(*)::float8 AS requests, ${
          this.#sum("total_tokens")
        } AS total_tokens, ${this.#sum("cost_total_usd")} AS total_cost_usd ` +
          `FROM usage_events${w} GROUP BY COALESCE(${field}, '')`,
        args,
      )).map((r) => ({
        [field]: String(r.name ?? ""),
        requests: Number(r.requests),
        total_tokens: Number(r.total_tokens),
        total_cost_usd: Number(r.total_cost_usd),
      })).sort(compareGroups);

    const recentArgs = [...args, filters.limit ?? 20];
    const recent = (await sql.unsafe(
      `SELECT ${
        RECENT_FIELDS.map((f) => this.#recentColumn(f)).join(", ")
      } FROM usage_events${w} ` +
        `ORDER BY id DESC LIMIT $${recentArgs.length}`,
      recentArgs,
    )).map((r) => recentRow(r));

    return {
      ok: true,
      enabled: true,
      backend: "postgresql",
      db_path: "",
      since: filters.since ?? "",
      totals,
      by_key: await group("api_key_id"),
      by_model: await group("model"),
      recent,
    };
  }

  /**
   * Ends the pool. Waits at most a second: the ledger has flushed by now, and a connection that
   * met a refused connect during an outage may never report its socket closed.
   */
  async close(): Promise<void> {
    const sql = this.#sql;
    this.#sql = undefined;
    if (sql) await sql.end({ timeout: 1 }).catch(() => {});
  }
}
