/**
 * One statement at a time on the usage store's database, for the tables that live beside
 * `usage_events` (the response store's `responses`, the issued keys' `issued_keys`): SQLite
 * through `node:sqlite` or PostgreSQL through the usage store's connection settings, with `?` or
 * `$n` placeholders (`param`) and the migration lock the usage store takes.
 *
 * @module
 */
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import type { PostgresStoreConfig } from "./config.ts";
import { connectPostgres, MIGRATE_LOCK } from "./postgres.ts";

/** A statement argument. */
export type Arg = string | number | null;
/** A result row. */
export type Row = Record<string, unknown>;

/** How a database runs one statement (`?`-style or `$n`-style placeholders, see `param`). */
export interface SqlDriver {
  run(text: string, args: Arg[]): Promise<Row[]>;
  param(i: number): string;
  /** Runs the statements that create the table, one process at a time. */
  migrate(statements: string[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * SQLite through `node:sqlite`: synchronous, but each statement is a primary-key or indexed
 * lookup on a WAL database (ADR 0028 names the cost).
 */
export function sqliteDriver(path: string): SqlDriver {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA busy_timeout = 2000");
  const driver: SqlDriver = {
    run: (text, args) => {
      try {
        return Promise.resolve(db.prepare(text).all(...(args as SQLInputValue[])) as Row[]);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    param: () => "?",
    // SQLite takes the database's write lock for each statement (busy_timeout waits for it).
    migrate: async (statements) => {
      for (const stmt of statements) await driver.run(stmt, []);
    },
    close: () => {
      db.close();
      return Promise.resolve();
    },
  };
  return driver;
}

/** PostgreSQL through the usage store's connection settings (a pool of its own). */
export function postgresDriver(usage: PostgresStoreConfig): SqlDriver {
  // The driver loads on first use (`connectPostgres`); every use waits for the one pool.
  const pool = connectPostgres(usage);
  // A failed load surfaces at the first use that awaits it, never as an unhandled rejection.
  pool.catch(() => {});
  return {
    run: async (text, args) => [...await (await pool).unsafe(text, args)] as Row[],
    param: (i) => `$${i}`,
    // Several workers start at once: CREATE … IF NOT EXISTS races in PostgreSQL, so the tables
    // are made under the usage store's migration lock, on a reserved connection (as it does).
    migrate: async (statements) => {
      const tx = await (await pool).reserve();
      try {
        await tx.unsafe("BEGIN");
        await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATE_LOCK})`);
        for (const stmt of statements) await tx.unsafe(stmt);
        await tx.unsafe("COMMIT");
      } finally {
        tx.release();
      }
    },
    close: async () => (await pool).end({ timeout: 5 }),
  };
}
