/**
 * The SQLite usage store on `node:sqlite`. DatabaseSync is synchronous, so it stays off the
 * request path: only the ledger's background writer calls `write` (a batch in one transaction)
 * and reports are admin-only.
 *
 * @module
 */
import {
  eventOfRow,
  type EventsDialect,
  type EventsPage,
  eventsPageOf,
  type EventsQuery,
  eventsSql,
} from "./events_page.ts";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { dirname } from "node:path";
import type { SqliteStoreConfig } from "./config.ts";
import {
  addColumnStatements,
  createTable,
  KEYSET_INDEXES,
  USAGE_COLUMNS,
  USAGE_INDEXES,
} from "./ledger_schema.ts";
import { errorMessage } from "./secret.ts";
import { type ReportDialect, type SqlArg, sqlPeriodTotals, sqlReport } from "./sql_report.ts";
import type { ReportFilters, UsageEvent, UsageReport, UsageStore } from "./types.ts";
import type { KeyPeriodTotals } from "./types.ts";
import {
  DAILY,
  eventRows,
  foldDays,
  foldEvent,
  HOURLY,
  ROLLUP_EVENT_COLUMNS,
  ROLLUP_KEYS,
  ROLLUP_SUMS,
  type RollupGrain,
  type RollupRow,
  rollupSeriesSql,
  rollupTableStatements,
  type SeriesAnswer,
  seriesAnswer,
  type SeriesQuery,
  seriesSql,
  upsertRollupsFrom,
  upsertTail,
} from "./rollup.ts";

/** How long a writer waits for another process's lock (several workers, one file). */
const BUSY_TIMEOUT_MS = 2000;

/** The value of column `name` for `event`, as SQLite stores it (booleans as 0/1). */
export function columnValue(event: UsageEvent, name: string): SQLInputValue {
  const v = (event as unknown as Record<string, unknown>)[name];
  if (v === undefined || v === null) return null;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number") return Number.isFinite(v) ? v : 0;
  // `route`: a small record of four fields.
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** A SQLite store. */
export class SqliteStore implements UsageStore {
  /** Always `sqlite`. */
  readonly backend = "sqlite" as const;
  /** `sqlite <path>`. */
  readonly description: string;
  readonly #cfg: SqliteStoreConfig;
  readonly #readOnly: boolean;
  #db: DatabaseSync | undefined;
  #columns = new Set<string>();
  #insert: StatementSync | undefined;
  #insertColumns: string[] = [];
  /** The roll-up upsert, when the database has `usage_rollups` (auto_migrate makes it). */
  #upsert: StatementSync | undefined;
  /** The daily roll-up upsert, when the database has `usage_rollups_daily` too. */
  #upsertDaily: StatementSync | undefined;
  /** The background build of an existing ledger's roll-ups, when one was started. */
  #backfill: Promise<void> | undefined;
  #backfillTimer: ReturnType<typeof setTimeout> | undefined;
  #backfillEnd: (() => void) | undefined;

  /** `readOnly`: prepare opens an existing database without creating or migrating anything. */
  constructor(cfg: SqliteStoreConfig, opts: { readOnly?: boolean } = {}) {
    this.#cfg = cfg;
    this.#readOnly = opts.readOnly ?? false;
    this.description = `sqlite ${cfg.path}`;
  }

  /** The database file. */
  get path(): string {
    return this.#cfg.path;
  }

  /** Opens (creating) the file, WAL mode, and with auto_migrate the table, columns, indexes. */
  async prepare(): Promise<void> {
    const { path, schema_file } = this.#cfg;
    try {
      const schema = schema_file && this.#cfg.auto_migrate && !this.#readOnly
        ? await Deno.readTextFile(schema_file)
        : undefined;
      if (this.#readOnly) await Deno.stat(path);
      else await Deno.mkdir(dirname(path), { recursive: true });
      const db = new DatabaseSync(path, { readOnly: this.#readOnly });
      this.#db = db;
      db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
      if (!this.#readOnly) {
        db.exec("PRAGMA journal_mode = WAL");
        if (this.#cfg.auto_migrate) {
          // Table first, then the columns an old table lacks, then indexes that may name them.
          db.exec(schema ?? createTable("sqlite"));
          for (const stmt of addColumnStatements("sqlite", this.#readColumns())) db.exec(stmt);
          for (const stmt of USAGE_INDEXES) db.exec(stmt);
          for (const stmt of KEYSET_INDEXES.sqlite) db.exec(stmt);
          for (const stmt of rollupTableStatements("sqlite")) db.exec(stmt);
        }
      }
      this.#columns = this.#readColumns();
      if (this.#columns.size === 0) throw new Error("table usage_events does not exist");
      if (!this.#readOnly) {
        this.#prepareInsert(db);
        this.#prepareRollups(db);
      }
    } catch (err) {
      this.#closeDb();
      throw new Error(`usage_store sqlite ${path}: ${errorMessage(err)}`);
    }
  }

  #readColumns(): Set<string> {
    const rows = this.#db!.prepare("PRAGMA table_info(usage_events)").all();
    return new Set(rows.map((r) => String(r.name)));
  }

  #prepareInsert(db: DatabaseSync): void {
    // A table the operator manages may lack newer columns: write the ones it has.
    this.#insertColumns = USAGE_COLUMNS.map((c) => c.name).filter((n) => this.#columns.has(n));
    const sql = `INSERT INTO usage_events (${this.#insertColumns.join(", ")}) VALUES (${
      this.#insertColumns.map(() => "?").join(", ")
    })`;
    try {
      this.#insert = db.prepare(`${sql} ON CONFLICT (event_id) DO NOTHING`);
    } catch {
      // No unique event_id index (auto_migrate off on an old table): plain inserts.
      this.#insert = db.prepare(sql);
    }
  }

  /** Whether the table `name` exists. */
  #hasTable(db: DatabaseSync, name: string): boolean {
    return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").all(name)
      .length > 0;
  }

  /**
   * With `usage_rollups` present (and every column it sums), each batch upserts its roll-ups;
   * a ledger whose roll-ups were never built gets them built once, after this open.
   */
  #prepareRollups(db: DatabaseSync): void {
    if (!this.#hasTable(db, "usage_rollups")) return;
    if (!ROLLUP_EVENT_COLUMNS.every((c) => this.#columns.has(c))) return;
    const upsert = (g: RollupGrain) => {
      const cols = [g.column, ...ROLLUP_KEYS, ...ROLLUP_SUMS];
      return db.prepare(
        `INSERT INTO ${g.table} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})${
          upsertTail(g)
        }`,
      );
    };
    this.#upsert = upsert(HOURLY);
    const daily = this.#hasTable(db, DAILY.table);
    this.#upsertDaily = daily ? upsert(DAILY) : undefined;
    if (this.#rollupsBuilt(db, HOURLY) && (!daily || this.#rollupsBuilt(db, DAILY))) return;
    // Off the open: a large ledger's build holds the write lock a while (batches wait for it).
    this.#backfill = new Promise((resolve) => {
      this.#backfillEnd = resolve;
      this.#backfillTimer = setTimeout(() => {
        this.#backfillTimer = undefined;
        try {
          this.#buildRollups();
        } catch { /* left unbuilt: reads scan the events; the next open tries again */ }
        resolve();
      }, 0);
    });
  }

  #rollupsBuilt(db: DatabaseSync, grain: RollupGrain): boolean {
    return this.#hasTable(db, "usage_rollup_state") &&
      db.prepare("SELECT 1 FROM usage_rollup_state WHERE name = ?").all(grain.marker).length >
        0;
  }

  /**
   * Builds the roll-ups from every stored event, in one transaction with the markers: what the
   * batches upserted before it is replaced by the same sums, so nothing counts twice. The daily
   * rows are summed from the hourly ones (built just before, or kept since their own build),
   * which agree with the events: a ledger from before the daily table gets only those built.
   */
  #buildRollups(): void {
    const db = this.#db;
    if (!db) return;
    db.exec("BEGIN IMMEDIATE");
    try {
      const mark = (g: RollupGrain) =>
        db.prepare("INSERT INTO usage_rollup_state (name, done_at) VALUES (?, ?)")
          .run(g.marker, new Date().toISOString());
      if (!this.#rollupsBuilt(db, HOURLY)) {
        db.exec(`DELETE FROM ${HOURLY.table}`);
        db.exec(upsertRollupsFrom(eventRows("sqlite", "usage_events")));
        mark(HOURLY);
      }
      if (this.#upsertDaily && !this.#rollupsBuilt(db, DAILY)) {
        db.exec(`DELETE FROM ${DAILY.table}`);
        db.exec(upsertRollupsFrom(HOURLY.table, DAILY));
        mark(DAILY);
      }
      db.exec("COMMIT");
    } catch (err) {
      try {
        db.exec("ROLLBACK");
      } catch { /* ended already */ }
      throw err;
    }
  }

  /** Settles when the roll-up build started by this open is over (at once when none was). */
  async rollupsBuilt(): Promise<void> {
    await this.#backfill;
  }

  /** Inserts the batch in one transaction; an event_id already stored is skipped. */
  write(events: UsageEvent[]): Promise<void> {
    const db = this.#db;
    const insert = this.#insert;
    if (!db || !insert) {
      return Promise.reject(new Error(`sqlite ${this.#cfg.path}: store is not open`));
    }
    if (events.length === 0) return Promise.resolve();
    try {
      db.exec("BEGIN IMMEDIATE");
      try {
        // Only events actually inserted count: a replayed event_id changes nothing.
        const fold = new Map<string, RollupRow>();
        for (const e of events) {
          const { changes } = insert.run(...this.#insertColumns.map((c) => columnValue(e, c)));
          if (this.#upsert && Number(changes) > 0) foldEvent(fold, e);
        }
        // One upsert per distinct roll-up key of the batch, hourly and daily, in the batch's
        // transaction.
        const bind = (row: RollupRow) =>
          ["hour", ...ROLLUP_KEYS, ...ROLLUP_SUMS].map((c) => row[c as keyof RollupRow]);
        for (const row of fold.values()) this.#upsert!.run(...bind(row));
        if (this.#upsertDaily) {
          for (const row of foldDays(fold.values())) this.#upsertDaily.run(...bind(row));
        }
        db.exec("COMMIT");
      } catch (err) {
        try {
          db.exec("ROLLBACK");
        } catch { /* the failed statement may have ended the transaction already */ }
        throw err;
      }
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(new Error(`sqlite write ${this.#cfg.path}: ${errorMessage(err)}`));
    }
  }

  /** Totals, by_key, by_model and recent in SQL (`sqlReport`). */
  async report(filters: ReportFilters): Promise<UsageReport> {
    const db = this.#db;
    if (!db) {
      return {
        ok: false,
        enabled: true,
        backend: "sqlite",
        error: `sqlite ${this.#cfg.path}: store is not open`,
      };
    }
    try {
      const query = (text: string, args: SqlArg[]) => db.prepare(text).all(...args);
      return await sqlReport(query, this.#dialect, filters, {
        backend: "sqlite",
        db_path: this.#cfg.path,
      }, this.#rollupsReadable(db, HOURLY));
    } catch (err) {
      return {
        ok: false,
        enabled: true,
        backend: "sqlite",
        db_path: this.#cfg.path,
        error: `sqlite report ${this.#cfg.path}: ${errorMessage(err)}`,
      };
    }
  }

  /** Whether reads may use the roll-ups: built, and kept by whoever writes this file. */
  #rollupsReadable(db: DatabaseSync, grain: RollupGrain): boolean {
    return this.#hasTable(db, grain.table) && this.#rollupsBuilt(db, grain);
  }

  /**
   * The Usage page's series: from the roll-ups once built (the daily ones for the whole days of
   * a `step=day` range), else from the events.
   */
  series(q: SeriesQuery): Promise<SeriesAnswer> {
    const db = this.#db;
    if (!db) return Promise.reject(new Error(`sqlite ${this.#cfg.path}: store is not open`));
    try {
      const statements = this.#rollupsReadable(db, HOURLY)
        ? rollupSeriesSql(q, this.#rollupsReadable(db, DAILY), () => "?")
        : [{
          text: seriesSql(q, eventRows("sqlite", "usage_events"), () => "?"),
          args: [q.from, q.to],
        }];
      const rows = statements.flatMap(({ text, args }) => db.prepare(text).all(...args));
      return Promise.resolve(seriesAnswer(q, rows, "sqlite", false));
    } catch (err) {
      return Promise.reject(new Error(`sqlite series ${this.#cfg.path}: ${errorMessage(err)}`));
    }
  }

  /** A page of the Requests page: `(created_at, id)` below the cursor, over the created_at index. */
  events(q: EventsQuery): Promise<EventsPage> {
    const db = this.#db;
    if (!db) return Promise.reject(new Error(`sqlite ${this.#cfg.path}: store is not open`));
    try {
      const { text, args } = eventsSql(this.#eventsDialect, q);
      return Promise.resolve(
        eventsPageOf(db.prepare(text).all(...args) as Record<string, unknown>[], q),
      );
    } catch (err) {
      return Promise.reject(new Error(`sqlite events ${this.#cfg.path}: ${errorMessage(err)}`));
    }
  }

  /** One event by its event id. */
  event(eventId: string): Promise<Record<string, unknown> | undefined> {
    const db = this.#db;
    if (!db) return Promise.reject(new Error(`sqlite ${this.#cfg.path}: store is not open`));
    if (!this.#columns.has("event_id")) return Promise.resolve(undefined);
    const row = db.prepare("SELECT * FROM usage_events WHERE event_id = ? LIMIT 1").get(eventId);
    return Promise.resolve(row ? eventOfRow(row as Record<string, unknown>) : undefined);
  }

  readonly #eventsDialect: EventsDialect = {
    param: () => "?",
    cursorTs: "created_at",
    atOrBefore: (p) => `created_at <= ${p}`,
    at: (p) => `created_at = ${p}`,
    columns: "*",
    has: (name) => this.#columns.has(name),
  };

  /** Cost and tokens per customer key id since `since`, in SQL (`sqlPeriodTotals`). */
  async periodTotals(since: string): Promise<Map<string, KeyPeriodTotals>> {
    const db = this.#db;
    if (!db) throw new Error(`sqlite ${this.#cfg.path}: store is not open`);
    const query = (text: string, args: SqlArg[]) => db.prepare(text).all(...args);
    try {
      return await sqlPeriodTotals(query, this.#dialect, since);
    } catch (err) {
      throw new Error(`sqlite period totals ${this.#cfg.path}: ${errorMessage(err)}`);
    }
  }

  /** SQLite's spelling of the report: `?` placeholders; a column the table lacks sums to 0. */
  readonly #dialect: ReportDialect = {
    param: () => "?",
    count: "COUNT(*)",
    sum: (name) => this.#columns.has(name) ? `COALESCE(SUM(${name}), 0)` : "0",
    has: (name) => this.#columns.has(name),
    recentColumn: (name) => this.#columns.has(name) ? name : `NULL AS ${name}`,
    since: (since, param) => ({ condition: `created_at >= ${param}`, arg: since }),
    float: "",
  };

  #closeDb(): void {
    // A build not begun yet is left to the next open (the marker stays absent).
    clearTimeout(this.#backfillTimer);
    this.#backfillTimer = undefined;
    this.#backfillEnd?.();
    this.#upsert = undefined;
    try {
      this.#db?.close();
    } catch { /* already closed */ }
    this.#db = undefined;
    this.#insert = undefined;
  }

  /** Closes the database. */
  close(): Promise<void> {
    this.#closeDb();
    return Promise.resolve();
  }
}
