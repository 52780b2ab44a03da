/**
 * The SQLite usage store on `node:sqlite`. DatabaseSync is synchronous, so it stays off the
 * request path: only the ledger's background writer calls `write` (a batch in one transaction)
 * and reports are admin-only.
 *
 * @module
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { dirname } from "node:path";
import type { SqliteStoreConfig } from "./config.ts";
import { addColumnStatements, createTable, USAGE_COLUMNS, USAGE_INDEXES } from "./ledger_schema.ts";
import { errorMessage } from "./secret.ts";
import { type ReportDialect, type SqlArg, sqlPeriodTotals, sqlReport } from "./sql_report.ts";
import type { ReportFilters, UsageEvent, UsageReport, UsageStore } from "./types.ts";
import type { KeyPeriodTotals } from "./types.ts";

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
        }
      }
      this.#columns = this.#readColumns();
      if (this.#columns.size === 0) throw new Error("table usage_events does not exist");
      if (!this.#readOnly) this.#prepareInsert(db);
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
        for (const e of events) insert.run(...this.#insertColumns.map((c) => columnValue(e, c)));
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
      });
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
  };

  #closeDb(): void {
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
