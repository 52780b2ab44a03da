/**
 * The `issued_keys` table: one row per issued key, in the usage store's database (sqlite or
 * postgresql, created on first open). The secret is stored only as its salted, peppered hash;
 * the previous secret of a rotation with the moment its grace window ends. `version` grows by one
 * with every change, so a reader never installs an older row over a newer one.
 *
 * @module
 */
import type { NormalizedUsageStoreConfig } from "../usage/config.ts";
import {
  type Arg,
  postgresDriver,
  type Row,
  type SqlDriver,
  sqliteDriver,
} from "../usage/sql_driver.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";

/** One issued key as stored. Times are epoch ms. */
export interface IssuedKeyRow {
  /** The public id. */
  id: string;
  name: string;
  /** The named policy it is on; null: the default policy. */
  policy: string | null;
  /** Inline policy fields over it (`models`, `deny_tags`, `limits`, `budget`, `share`). */
  spec: JsonObject;
  /** Free metadata, as given. */
  metadata: JsonObject;
  created_ms: number;
  updated_ms: number;
  expires_ms: number | null;
  revoked_ms: number | null;
  /** The current secret's salt and hash. */
  salt: string;
  hash: string;
  /** The secret a rotation replaced, valid until `prev_until_ms`. */
  prev_salt: string | null;
  prev_hash: string | null;
  prev_until_ms: number | null;
  /** Grows by one with every change. */
  version: number;
}

/** A key's state at a moment. */
export type IssuedKeyState = "active" | "expired" | "revoked";

/** The state of `row` at `now`. */
export function stateOf(row: IssuedKeyRow, now: number): IssuedKeyState {
  if (row.revoked_ms !== null) return "revoked";
  if (row.expires_ms !== null && row.expires_ms <= now) return "expired";
  return "active";
}

/** Filters and page of a listing; `after` is the last id of the previous page. */
export interface IssuedKeyQuery {
  after?: string;
  limit: number;
  name?: string;
  policy?: string;
  state?: IssuedKeyState;
  /** The moment `state` is judged at. */
  now: number;
}

const COLUMNS = [
  "id",
  "name",
  "policy",
  "spec",
  "metadata",
  "created_ms",
  "updated_ms",
  "expires_ms",
  "revoked_ms",
  "salt",
  "hash",
  "prev_salt",
  "prev_hash",
  "prev_until_ms",
  "version",
] as const;

/** The table and its indexes. */
export function issuedKeysTableStatements(dialect: "sqlite" | "postgresql"): string[] {
  const ms = dialect === "sqlite" ? "INTEGER" : "BIGINT";
  return [
    `CREATE TABLE IF NOT EXISTS issued_keys (\n  id TEXT PRIMARY KEY,\n  name TEXT NOT NULL,\n` +
    `  policy TEXT,\n  spec TEXT NOT NULL,\n  metadata TEXT NOT NULL,\n` +
    `  created_ms ${ms} NOT NULL,\n  updated_ms ${ms} NOT NULL,\n  expires_ms ${ms},\n` +
    `  revoked_ms ${ms},\n  salt TEXT NOT NULL,\n  hash TEXT NOT NULL,\n  prev_salt TEXT,\n` +
    `  prev_hash TEXT,\n  prev_until_ms ${ms},\n  version ${ms} NOT NULL\n)`,
    "CREATE INDEX IF NOT EXISTS issued_keys_name_idx ON issued_keys (name)",
  ];
}

function num(v: unknown): number | null {
  return v === null || v === undefined ? null : Number(v);
}

function str(v: unknown): string | null {
  return v === null || v === undefined ? null : String(v);
}

function object(v: unknown): JsonObject {
  const parsed = parseJson(String(v ?? "{}"));
  return isJsonObject(parsed) ? parsed : {};
}

function rowOf(r: Row): IssuedKeyRow {
  return {
    id: String(r.id),
    name: String(r.name),
    policy: str(r.policy),
    spec: object(r.spec),
    metadata: object(r.metadata),
    created_ms: Number(r.created_ms),
    updated_ms: Number(r.updated_ms),
    expires_ms: num(r.expires_ms),
    revoked_ms: num(r.revoked_ms),
    salt: String(r.salt),
    hash: String(r.hash),
    prev_salt: str(r.prev_salt),
    prev_hash: str(r.prev_hash),
    prev_until_ms: num(r.prev_until_ms),
    version: Number(r.version),
  };
}

function argsOf(row: IssuedKeyRow): Arg[] {
  return COLUMNS.map((c) => {
    const v = row[c];
    return typeof v === "object" && v !== null ? JSON.stringify(v) : v;
  });
}

/** Rows per `IN (…)` of a refresh read. */
const READ_CHUNK = 500;

/** What the directory asks of the table (`IssuedKeyStore`; tests wrap it). */
export interface IssuedKeyTable {
  insert(row: IssuedKeyRow): Promise<boolean>;
  get(id: string): Promise<IssuedKeyRow | undefined>;
  getMany(ids: readonly string[]): Promise<IssuedKeyRow[]>;
  update(row: IssuedKeyRow): Promise<boolean>;
  list(q: IssuedKeyQuery): Promise<IssuedKeyRow[]>;
  close(): Promise<void>;
}

/** The issued keys of one database. */
export class IssuedKeyStore implements IssuedKeyTable {
  readonly #db: SqlDriver;

  private constructor(db: SqlDriver) {
    this.#db = db;
  }

  /**
   * Opens the table in the usage store's database (creating it), or throws naming why: the
   * jsonlog store has no database to keep keys in.
   */
  static async open(usage: NormalizedUsageStoreConfig): Promise<IssuedKeyStore> {
    let driver: SqlDriver;
    if (usage.backend === "sqlite") driver = sqliteDriver(usage.path);
    else if (usage.backend === "postgresql") driver = postgresDriver(usage);
    else throw new Error(JSONLOG_REFUSAL);
    try {
      await driver.migrate(issuedKeysTableStatements(usage.backend));
    } catch (err) {
      await driver.close().catch(() => {});
      throw err;
    }
    return new IssuedKeyStore(driver);
  }

  /** Adds a new key; false when its public id is taken already. */
  async insert(row: IssuedKeyRow): Promise<boolean> {
    const p = this.#db.param;
    const rows = await this.#db.run(
      `INSERT INTO issued_keys (${COLUMNS.join(", ")}) VALUES (${
        COLUMNS.map((_, i) => p(i + 1)).join(", ")
      }) ON CONFLICT (id) DO NOTHING RETURNING id`,
      argsOf(row),
    );
    return rows.length > 0;
  }

  /** The row of a public id. */
  async get(id: string): Promise<IssuedKeyRow | undefined> {
    const rows = await this.#db.run(
      `SELECT ${COLUMNS.join(", ")} FROM issued_keys WHERE id = ${this.#db.param(1)}`,
      [id],
    );
    return rows[0] === undefined ? undefined : rowOf(rows[0]);
  }

  /** The rows of these public ids (those that exist). */
  async getMany(ids: readonly string[]): Promise<IssuedKeyRow[]> {
    const out: IssuedKeyRow[] = [];
    for (let i = 0; i < ids.length; i += READ_CHUNK) {
      const chunk = ids.slice(i, i + READ_CHUNK);
      const rows = await this.#db.run(
        `SELECT ${COLUMNS.join(", ")} FROM issued_keys WHERE id IN (${
          chunk.map((_, j) => this.#db.param(j + 1)).join(", ")
        })`,
        chunk,
      );
      for (const r of rows) out.push(rowOf(r));
    }
    return out;
  }

  /**
   * Writes `row` (its `version` one more than the stored one) when the stored version is still
   * `row.version - 1`; false when another writer changed it in between.
   */
  async update(row: IssuedKeyRow): Promise<boolean> {
    const p = this.#db.param;
    const set = COLUMNS.slice(1).map((c, i) => `${c} = ${p(i + 1)}`).join(", ");
    const args = argsOf(row).slice(1);
    const rows = await this.#db.run(
      `UPDATE issued_keys SET ${set} WHERE id = ${p(args.length + 1)} AND version = ${
        p(args.length + 2)
      } RETURNING id`,
      [...args, row.id, row.version - 1],
    );
    return rows.length > 0;
  }

  /** A page of keys in public-id order after `q.after`, filtered. */
  async list(q: IssuedKeyQuery): Promise<IssuedKeyRow[]> {
    const p = this.#db.param;
    const where: string[] = [];
    const args: Arg[] = [];
    const add = (condition: (n: string) => string, arg: Arg) => {
      args.push(arg);
      where.push(condition(p(args.length)));
    };
    if (q.after !== undefined) add((n) => `id > ${n}`, q.after);
    if (q.name !== undefined) add((n) => `name = ${n}`, q.name);
    if (q.policy !== undefined) add((n) => `policy = ${n}`, q.policy);
    if (q.state === "revoked") where.push("revoked_ms IS NOT NULL");
    else if (q.state === "expired") {
      add((n) => `revoked_ms IS NULL AND expires_ms IS NOT NULL AND expires_ms <= ${n}`, q.now);
    } else if (q.state === "active") {
      add((n) => `revoked_ms IS NULL AND (expires_ms IS NULL OR expires_ms > ${n})`, q.now);
    }
    args.push(q.limit);
    const rows = await this.#db.run(
      `SELECT ${COLUMNS.join(", ")} FROM issued_keys${
        where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""
      } ORDER BY id LIMIT ${p(args.length)}`,
      args,
    );
    return rows.map(rowOf);
  }

  /** Closes the connection. */
  close(): Promise<void> {
    return this.#db.close();
  }
}

/** Why issued keys cannot be kept with a jsonlog usage store. */
export const JSONLOG_REFUSAL =
  "issued keys live in the usage store's database: set usage_store.backend to sqlite or " +
  "postgresql (the jsonlog store has none)";
