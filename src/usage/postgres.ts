/**
 * The PostgreSQL usage store on `postgres` (porsager). A small pool per process; an idempotent
 * migration under an advisory lock (several workers may start at once); one multi-row insert
 * per batch `ON CONFLICT (event_id) DO NOTHING`; reports in SQL. No error or description ever
 * carries the password.
 *
 * @module
 */
// Types only: the driver (and the Node compatibility layer it pulls in, ~8 MB of a serve process)
// loads when a PostgreSQL store connects, not in every process (`connectPostgres`).
import { sinceTimestamp } from "./report_since.ts";
import type postgres from "postgres";
import type { PostgresStoreConfig } from "./config.ts";
import {
  addColumnStatements,
  createTable,
  KEYSET_INDEXES,
  USAGE_COLUMNS,
  USAGE_INDEXES,
} from "./ledger_schema.ts";
import {
  eventOfRow,
  type EventsDialect,
  type EventsPage,
  eventsPageOf,
  type EventsQuery,
  eventsSql,
} from "./events_page.ts";
import { errorMessage } from "./secret.ts";
import { type ReportDialect, type SqlArg, sqlPeriodTotals, sqlReport } from "./sql_report.ts";
import type { ReportFilters, UsageEvent, UsageReport, UsageStore } from "./types.ts";
import type { KeyPeriodTotals } from "./types.ts";
import { UsageWriteError } from "./write_error.ts";
import {
  DAILY,
  eventRows,
  HOURLY,
  ROLLUP_EVENT_COLUMNS,
  type RollupGrain,
  rollupSeriesSql,
  rollupTableStatements,
  type SeriesAnswer,
  seriesAnswer,
  type SeriesQuery,
  seriesSql,
  upsertRollupsFrom,
} from "./rollup.ts";

/**
 * Rows per INSERT statement (33 columns × 500 stays far below the 65,535 parameter limit). The
 * ledger's batches are at most 500 events by default, so a batch is one atomic statement.
 */
const ROWS_PER_INSERT = 500;
/** Advisory lock key serializing migrations of several processes ("skeid" + "usage"). */
export const MIGRATE_LOCK = 0x736b6569_64;
/** created_at rendered back as `YYYY-MM-DDTHH:MM:SSZ`. */
const CREATED_AT_TEXT = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

type Param = string | number | boolean | null;

/** A column value as PostgreSQL takes it: NUL characters stripped (text cannot hold them). */
function pgValue(event: UsageEvent, name: string): Param {
  const v = (event as unknown as Record<string, unknown>)[name];
  if (v === undefined || v === null) return null;
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return Number.isFinite(v) ? v : 0;
  // `route`: a small record of four fields.
  if (typeof v === "object") return JSON.stringify(v);
  return String(v).replaceAll("\u0000", "");
}

/** A connection pool on the database a `usage_store` names (the response store shares it). */
export async function connectPostgres(c: PostgresStoreConfig): Promise<postgres.Sql> {
  const { default: connect } = await import("postgres");
  const options = {
    max: c.pool_size,
    connect_timeout: c.connect_timeout_s,
    onnotice: () => {},
    connection: { application_name: "skeid" },
    ...(c.user ? { user: c.user } : {}),
    ...(c.password ? { password: c.password.reveal() } : {}),
  };
  return c.dsn
    ? connect(c.dsn, options)
    : connect({ ...options, host: c.host, port: c.port, database: c.dbname });
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
  /** Whether each insert also upserts `usage_rollups` (the table and its columns exist). */
  #rollups = false;
  /** Whether each insert also upserts `usage_rollups_daily` (that table exists too). */
  #daily = false;
  /** Set once the marker row was seen: the roll-ups are complete and reads may use them. */
  #rollupsReadable = false;
  /** Set once the daily marker row was seen: the daily roll-ups are complete too. */
  #dailyReadable = false;
  /** The background build of an existing ledger's roll-ups, when one was started. */
  #backfill: Promise<void> | undefined;

  /** `readOnly`: prepare connects and checks the table, without migrating. */
  constructor(cfg: PostgresStoreConfig, opts: { readOnly?: boolean } = {}) {
    this.#cfg = cfg;
    this.#readOnly = opts.readOnly ?? false;
    this.#secrets = cfg.password ? [cfg.password.reveal()] : [];
    this.description = `postgresql ${
      cfg.user ? cfg.user + "@" : ""
    }${cfg.host}:${cfg.port}/${cfg.dbname}`;
  }

  #connect(): Promise<postgres.Sql> {
    return connectPostgres(this.#cfg);
  }

  #fail(what: string, err: unknown): Error {
    return new Error(`${what} ${this.description}: ${errorMessage(err, this.#secrets)}`);
  }

  /** Connects; with auto_migrate creates the table, adds missing columns, then indexes. */
  async prepare(): Promise<void> {
    const sql = await this.#connect();
    this.#sql = sql;
    try {
      const schema = this.#cfg.schema_file && this.#cfg.auto_migrate && !this.#readOnly
        ? await Deno.readTextFile(this.#cfg.schema_file)
        : undefined;
      await sql`SELECT 1`;
      if (!this.#readOnly && this.#cfg.auto_migrate) {
        // One transaction on a reserved connection, not `sql.begin`: that one sends ROLLBACK on
        // a connection the server dropped and crashes the process (see `write`). On any failure
        // the pool is ended below, and the server rolls back what the connection began.
        const tx = await sql.reserve();
        await tx.unsafe("BEGIN");
        await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATE_LOCK})`);
        // Table first, then the columns an old table lacks, then indexes that may name them.
        await tx.unsafe(schema ?? createTable("postgresql")).simple();
        const have = await this.#readColumns(tx);
        for (const stmt of addColumnStatements("postgresql", have)) await tx.unsafe(stmt);
        for (const stmt of USAGE_INDEXES) await tx.unsafe(stmt);
        for (const stmt of KEYSET_INDEXES.postgresql) await tx.unsafe(stmt);
        for (const stmt of rollupTableStatements("postgresql")) await tx.unsafe(stmt);
        await tx.unsafe("COMMIT");
        tx.release();
      }
      this.#columns = await this.#readColumns(sql);
      if (this.#columns.size === 0) throw new Error("table usage_events does not exist");
      const idx = await sql.unsafe(
        `SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'usage_events'
           AND indexdef ILIKE 'CREATE UNIQUE INDEX%(event_id)'`,
      );
      this.#conflict = idx.length > 0;
      const [t] = await sql.unsafe(
        "SELECT to_regclass('usage_rollups') IS NOT NULL AS r, " +
          "to_regclass('usage_rollup_state') IS NOT NULL AS s, " +
          "to_regclass('usage_rollups_daily') IS NOT NULL AS d",
      );
      this.#rollups = !this.#readOnly && t?.r === true && t?.s === true &&
        ROLLUP_EVENT_COLUMNS.every((c) => this.#columns.has(c));
      this.#daily = this.#rollups && t?.d === true;
      const built = t?.s === true && await this.#markerSeen(sql) &&
        (!this.#daily || await this.#dailyMarkerSeen(sql));
      if (t?.s === true && !built && this.#rollups) {
        // Off the open: the build of a large ledger takes a while (batches wait for its lock).
        this.#backfill = this.#buildRollups(sql).catch(() => {
          // Left unbuilt: reads scan the events; the next open tries again.
        });
      }
    } catch (err) {
      this.#sql = undefined;
      await sql.end({ timeout: 0 }).catch(() => {});
      throw this.#fail("usage_store", err);
    }
  }

  async #markerSeen(sql: postgres.Sql | postgres.ReservedSql): Promise<boolean> {
    if (this.#rollupsReadable) return true;
    const rows = await sql.unsafe("SELECT 1 FROM usage_rollup_state WHERE name = $1", [
      HOURLY.marker,
    ]);
    this.#rollupsReadable = rows.length > 0;
    return this.#rollupsReadable;
  }

  async #dailyMarkerSeen(sql: postgres.Sql): Promise<boolean> {
    if (this.#dailyReadable) return true;
    const rows = await sql.unsafe("SELECT 1 FROM usage_rollup_state WHERE name = $1", [
      DAILY.marker,
    ]);
    this.#dailyReadable = rows.length > 0;
    return this.#dailyReadable;
  }

  /**
   * Builds the roll-ups from every stored event, with the marker, in one transaction holding
   * the roll-up table against writers: a batch committed before it is in its scan, one after it
   * adds its own sums to the built rows, so nothing counts twice. Under the migration lock, so
   * of several processes opening one ledger only the first builds. The daily rows are summed
   * from the hourly ones in the same transaction (a ledger whose hourly rows were built before
   * the daily table existed gets only the daily ones built).
   */
  async #buildRollups(sql: postgres.Sql): Promise<void> {
    const tx = await sql.reserve();
    try {
      await tx.unsafe("BEGIN");
      await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATE_LOCK})`);
      const done = async (g: RollupGrain) =>
        (await tx.unsafe("SELECT 1 FROM usage_rollup_state WHERE name = $1", [g.marker]))
          .length > 0;
      const mark = (g: RollupGrain) =>
        tx.unsafe("INSERT INTO usage_rollup_state (name, done_at) VALUES ($1, $2)", [
          g.marker,
          new Date().toISOString(),
        ]);
      const hourly = !(await done(HOURLY));
      const daily = this.#daily && !(await done(DAILY));
      if (hourly || daily) {
        // Both tables, in the order a batch's statement takes them, so neither waits on the other.
        await tx.unsafe(
          `LOCK TABLE ${HOURLY.table}${this.#daily ? `, ${DAILY.table}` : ""} IN EXCLUSIVE MODE`,
        );
      }
      if (hourly) {
        await tx.unsafe(`DELETE FROM ${HOURLY.table}`);
        await tx.unsafe(upsertRollupsFrom(eventRows("postgresql", "usage_events")));
        await mark(HOURLY);
      }
      if (daily) {
        await tx.unsafe(`DELETE FROM ${DAILY.table}`);
        await tx.unsafe(upsertRollupsFrom(HOURLY.table, DAILY));
        await mark(DAILY);
      }
      await tx.unsafe("COMMIT");
    } catch (err) {
      await tx.unsafe("ROLLBACK").catch(() => {});
      throw err;
    } finally {
      tx.release();
    }
  }

  /** Settles when the roll-up build started by this open is over (at once when none was). */
  async rollupsBuilt(): Promise<void> {
    await this.#backfill;
  }

  async #readColumns(sql: postgres.Sql | postgres.TransactionSql): Promise<Set<string>> {
    const rows = await sql.unsafe(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'usage_events'`,
    );
    return new Set(rows.map((r) => String(r.column_name)));
  }

  /**
   * Inserts the batch, up to ROWS_PER_INSERT rows per statement, each statement atomic on its
   * own; an event_id already stored is skipped. A failure after some statements names how many
   * events were written (UsageWriteError), so the ledger retries only the rest.
   *
   * No `sql.begin` here: when the server drops the connection inside a transaction (a restart,
   * a failover), postgres@3.4 sends its ROLLBACK on the dead connection and throws from a
   * setImmediate callback ("Cannot read properties of null (reading 'write')") — an uncaught
   * error that ends the whole gateway. A single autocommit statement has nothing to roll back.
   */
  async write(events: UsageEvent[]): Promise<void> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    if (events.length === 0) return;
    const cols = USAGE_COLUMNS.map((c) => c.name).filter((n) => this.#columns.has(n));
    const tail = this.#conflict ? " ON CONFLICT (event_id) DO NOTHING" : "";
    let written = 0;
    try {
      for (let i = 0; i < events.length; i += ROWS_PER_INSERT) {
        const chunk = events.slice(i, i + ROWS_PER_INSERT);
        const params: Param[] = [];
        const rows = chunk.map((e) =>
          `(${cols.map((c) => (params.push(pgValue(e, c)), `$${params.length}`)).join(", ")})`
        );
        const insert = `INSERT INTO usage_events (${cols.join(", ")}) VALUES ${
          rows.join(", ")
        }${tail}`;
        // With roll-ups: one statement inserts the events and upserts the sums of the rows it
        // really inserted (a replayed event_id returns none), one upsert per distinct key, into
        // the hourly table and (a data-modifying CTE runs whether read or not) the daily one.
        const returning = `WITH ins AS (${insert} RETURNING ${ROLLUP_EVENT_COLUMNS.join(", ")})`;
        const inserted = eventRows("postgresql", "ins");
        await sql.unsafe(
          this.#daily
            ? `${returning}, hourly AS (${upsertRollupsFrom(inserted)}) ${
              upsertRollupsFrom(inserted, DAILY)
            }`
            : this.#rollups
            ? `${returning} ${upsertRollupsFrom(inserted)}`
            : insert,
          params,
          { prepare: false },
        );
        written += chunk.length;
      }
    } catch (err) {
      const e = this.#fail("write", err);
      throw written > 0 ? new UsageWriteError(e.message, written) : e;
    }
  }

  /** PostgreSQL's spelling: `$n` placeholders, numbers as float8, a missing column sums to 0. */
  readonly #dialect: ReportDialect = {
    param: (n) => `$${n}`,
    count: "COUNT(*)::float8",
    sum: (name) => this.#columns.has(name) ? `COALESCE(SUM(${name}), 0)::float8` : "0::float8",
    has: (name) => this.#columns.has(name),
    recentColumn: (name) => {
      if (name === "id") return "id::float8 AS id";
      if (name === "created_at") return `${CREATED_AT_TEXT} AS created_at`;
      return this.#columns.has(name) ? name : `NULL AS ${name}`;
    },
    // An ISO prefix compares as a timestamp (the index serves it); other text as the string.
    since: (since, param) => {
      const ts = sinceTimestamp(since);
      return ts
        ? { condition: `created_at >= ${param}::timestamptz`, arg: ts }
        : { condition: `${CREATED_AT_TEXT} >= ${param}`, arg: since };
    },
    float: "::float8",
  };

  /** Totals, by_key, by_model and recent in SQL (`sqlReport`); same shape as the SQLite store's. */
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
      const query = (text: string, args: SqlArg[]) => sql.unsafe(text, args);
      return await sqlReport(
        query,
        this.#dialect,
        filters,
        { backend: "postgresql", db_path: "" },
        await this.#readable(sql),
      );
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

  /** Whether reads may use the daily roll-ups: their table there and their marker written. */
  async #readableDaily(sql: postgres.Sql): Promise<boolean> {
    if (this.#dailyReadable) return true;
    const [t] = await sql.unsafe("SELECT to_regclass('usage_rollups_daily') IS NOT NULL AS d");
    return t?.d === true && await this.#dailyMarkerSeen(sql);
  }

  /** Whether reads may use the roll-ups: both tables there and the marker row written. */
  async #readable(sql: postgres.Sql): Promise<boolean> {
    if (this.#rollupsReadable) return true;
    const [t] = await sql.unsafe("SELECT to_regclass('usage_rollup_state') IS NOT NULL AS s");
    return t?.s === true && await this.#markerSeen(sql);
  }

  /**
   * The Usage page's series: from the roll-ups once built (the daily ones for the whole days of
   * a `step=day` range), else from the events.
   */
  async series(q: SeriesQuery): Promise<SeriesAnswer> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    try {
      const param = (n: number) => `$${n}`;
      const statements = await this.#readable(sql)
        ? rollupSeriesSql(q, await this.#readableDaily(sql), param)
        : [{
          text: seriesSql(q, eventRows("postgresql", "usage_events"), param),
          args: [q.from, q.to],
        }];
      const rows = [];
      for (const { text, args } of statements) rows.push(...await sql.unsafe(text, args));
      return seriesAnswer(q, rows, "postgresql", false);
    } catch (err) {
      throw this.#fail("series", err);
    }
  }

  /** A page of the Requests page: `(created_at, id)` below the cursor, over their index. */
  async events(q: EventsQuery): Promise<EventsPage> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    try {
      const { text, args } = eventsSql(this.#eventsDialect(), q);
      return eventsPageOf(await sql.unsafe(text, args), q);
    } catch (err) {
      throw this.#fail("events", err);
    }
  }

  /** One event by its event id. */
  async event(eventId: string): Promise<Record<string, unknown> | undefined> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    if (!this.#columns.has("event_id")) return undefined;
    try {
      const rows = await sql.unsafe(
        `SELECT ${this.#eventsDialect().columns} FROM usage_events WHERE event_id = $1 LIMIT 1`,
        [eventId],
      );
      return rows[0] ? eventOfRow(rows[0]) : undefined;
    } catch (err) {
      throw this.#fail("event", err);
    }
  }

  /** PostgreSQL's spelling of the page: the columns the table has, created_at as UTC text. */
  #eventsDialect(): EventsDialect {
    const cols = ["id", ...USAGE_COLUMNS.map((c) => c.name).filter((n) => this.#columns.has(n))]
      .map((n) => n === "created_at" ? `${CREATED_AT_TEXT} AS created_at` : n);
    return {
      param: (n) => `$${n}`,
      // Microseconds: the cursor must compare equal to the stored value, not to its second.
      cursorTs: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
      atOrBefore: (p) => `usage_events.created_at <= ${p}::timestamptz`,
      at: (p) => `usage_events.created_at = ${p}::timestamptz`,
      columns: cols.join(", "),
      has: (name) => this.#columns.has(name),
    };
  }

  /**
   * Cost and tokens per customer key id since `since`, in SQL (`sqlPeriodTotals`): what every
   * frontend on this database re-reads at `budget_refresh_ms`.
   */
  async periodTotals(since: string): Promise<Map<string, KeyPeriodTotals>> {
    const sql = this.#sql;
    if (!sql) throw new Error(`${this.description}: store is not open`);
    try {
      const query = (text: string, args: SqlArg[]) => sql.unsafe(text, args);
      return await sqlPeriodTotals(query, this.#dialect, since);
    } catch (err) {
      throw this.#fail("period totals", err);
    }
  }

  /**
   * Ends the pool. Waits at most a second: the ledger has flushed by now, and a connection that
   * met a refused connect during an outage may never report its socket closed.
   */
  async close(): Promise<void> {
    await this.#backfill;
    const sql = this.#sql;
    this.#sql = undefined;
    if (sql) await sql.end({ timeout: 1 }).catch(() => {});
  }
}
