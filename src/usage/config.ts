/**
 * The `usage_store` config: backend inference and defaults (reference usage-and-cost §7), the
 * normalized form every store is built from, and change detection for reloads.
 *
 * Runs at config time only (it may stat a path); never on the request path.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { SecretValue } from "./secret.ts";

/** Name of the spill file kept next to the store (or in the data directory). */
export const SPILL_FILE_NAME = "skeid-usage-spill.jsonl";

/** Settings every backend shares. */
interface CommonStoreConfig {
  /** Write-behind: 0 = write at once (next tick); above 0, one batch per interval. */
  flush_interval_ms: number;
  /** Where events wait while the store cannot take them (JSON lines, fsynced). */
  spill_path: string;
  /**
   * Whether events with `usage_source: estimated` are priced (default true). False bills reported
   * usage only: those events are still recorded, with their estimated tokens and a cost of 0
   * (ADR 0027).
   */
  bill_estimated: boolean;
}

/** A jsonlog store: one `.json` file per event (dir) or JSON lines in one file (file). */
export interface JsonlogStoreConfig extends CommonStoreConfig {
  /** Always `jsonlog`. */
  backend: "jsonlog";
  /** The directory (dir mode, no trailing `/`) or the file (file mode). */
  path: string;
  /**
   * `dir` (one file per event) or `file` (JSON lines); default `dir` when `path` ends in `/` or is
   * a directory.
   */
  mode: "dir" | "file";
  /** fsync every write. */
  fsync: boolean;
}

/** A SQLite store. */
export interface SqliteStoreConfig extends CommonStoreConfig {
  /** Always `sqlite`. */
  backend: "sqlite";
  /** The SQLite database file. */
  path: string;
  /** SQL run instead of the shipped schema when auto-migrating. */
  schema_file?: string;
  /** Create the table and add missing columns and indexes on prepare (default true). */
  auto_migrate: boolean;
}

/** A PostgreSQL store. The password never prints (see `SecretValue`). */
export interface PostgresStoreConfig extends CommonStoreConfig {
  /** Always `postgresql`. */
  backend: "postgresql";
  /** A `postgres://` URL without its password (that moved to `password`). */
  dsn?: string;
  /** Server host (default `127.0.0.1`). */
  host: string;
  /** Server port (default 5432). */
  port: number;
  /** Database name (default `skeid`). */
  dbname: string;
  /** Role to connect as; absent = the driver's default. */
  user?: string;
  /** The database password, wrapped so it never prints. */
  password?: SecretValue;
  /** The variable the password was read from (kept for display and change detection). */
  password_env?: string;
  /** SQL run instead of the shipped schema when auto-migrating. */
  schema_file?: string;
  /** Create the table and add missing columns and indexes on prepare (default true). */
  auto_migrate: boolean;
  /** Connections in this process's pool. */
  pool_size: number;
  /** Seconds to wait for a connection. */
  connect_timeout_s: number;
}

/** A normalized `usage_store`. */
export type NormalizedUsageStoreConfig =
  | JsonlogStoreConfig
  | SqliteStoreConfig
  | PostgresStoreConfig;

/** Where the normalizer reads defaults from. */
export interface NormalizeOptions {
  /** The top-level `usage_db_path` (older spelling of a sqlite store). */
  usageDbPath?: string;
  /** The environment (SKEID_USAGE_DB, password_env, STATE_DIRECTORY). */
  env: (name: string) => string | undefined;
  /** Answers whether a path is an existing directory; default `Deno.statSync`. */
  isDirectory?: (path: string) => boolean;
}

const P = "usage_store";

function fail(field: string, message: string): never {
  throw new Error(`${P}${field ? "." + field : ""}: ${message}`);
}

function optString(raw: Record<string, unknown>, key: string): string | undefined {
  const v = raw[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v === "number") return String(v);
  if (typeof v !== "string") fail(key, `must be a string`);
  const t = v.trim();
  return t === "" ? undefined : t;
}

function optBool(raw: Record<string, unknown>, key: string, dflt: boolean): boolean {
  const v = raw[key];
  if (v === undefined || v === null || v === "") return dflt;
  if (typeof v === "boolean") return v;
  if (v === 1 || v === 0) return v === 1;
  if (typeof v === "string") {
    const t = v.trim().toLowerCase();
    if (["1", "true", "yes", "on"].includes(t)) return true;
    if (["0", "false", "no", "off"].includes(t)) return false;
  }
  return fail(key, `must be true or false`);
}

function optInt(
  raw: Record<string, unknown>,
  key: string,
  dflt: number,
  min: number,
  max: number,
): number {
  const v = raw[key];
  if (v === undefined || v === null || v === "") return dflt;
  const n = typeof v === "string" ? Number(v.trim()) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    fail(key, `must be a whole number from ${min} to ${max}`);
  }
  return n;
}

function defaultIsDirectory(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/** The backend named by `backend`, accepting the `postgres*` and `json*` spellings. */
function explicitBackend(value: unknown): NormalizedUsageStoreConfig["backend"] {
  if (typeof value !== "string") return fail("backend", "must be a string");
  const b = value.trim().toLowerCase();
  if (b.startsWith("postgres") || b === "pg") return "postgresql";
  if (b.startsWith("json")) return "jsonlog";
  if (b === "sqlite" || b === "sqlite3") return "sqlite";
  return fail("backend", `unknown backend '${value}' (jsonlog, sqlite or postgresql)`);
}

/** Fields of a legacy `dbi:Pg:dbname=x;host=y;port=z` dsn. */
function parseDbiPg(dsn: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of dsn.replace(/^dbi:Pg:/i, "").split(";")) {
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    out[part.slice(0, eq).trim().toLowerCase()] = part.slice(eq + 1).trim();
  }
  return out;
}

function isPgUrl(dsn: string): boolean {
  return /^postgres(ql)?:\/\//i.test(dsn);
}

function isDbiPg(dsn: string): boolean {
  return /^dbi:Pg:/i.test(dsn);
}

/** The path of a legacy `dbi:SQLite:dbname=PATH` dsn, if it is one. */
function dbiSqlitePath(dsn: string): string | undefined {
  const m = /^dbi:SQLite:(?:dbname=)?(.+)$/i.exec(dsn);
  return m ? m[1].trim() : undefined;
}

function spillPath(
  raw: Record<string, unknown>,
  near: string | undefined,
  env: (name: string) => string | undefined,
): string {
  const explicit = optString(raw, "spill_path");
  if (explicit) return explicit;
  const dir = near ?? env("SKEID_DATA_DIR") ?? env("STATE_DIRECTORY") ?? ".";
  return join(dir, SPILL_FILE_NAME);
}

/**
 * Normalizes a raw `usage_store` section. Backend: explicit `backend`, else sqlite for
 * `sqlite_path`/`path`/`db_path`, else postgresql for a `postgres://`, `postgresql://` or
 * `dbi:Pg:` dsn, else jsonlog for `log_path`, else sqlite at `usageDbPath`/`SKEID_USAGE_DB`.
 * Throws an Error naming the field (`usage_store.backend: unknown backend 'x' …`).
 */
export function normalizeUsageStoreConfig(
  raw: unknown,
  opts: NormalizeOptions,
): NormalizedUsageStoreConfig {
  const env = opts.env;
  const isDirectory = opts.isDirectory ?? defaultIsDirectory;
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== "object" || Array.isArray(raw)) fail("", "must be a map");
  const r = raw as Record<string, unknown>;

  const dsn = optString(r, "dsn");
  let backend: NormalizedUsageStoreConfig["backend"];
  if (r.backend !== undefined && r.backend !== null && r.backend !== "") {
    backend = explicitBackend(r.backend);
  } else if (optString(r, "sqlite_path") || optString(r, "path") || optString(r, "db_path")) {
    backend = "sqlite";
  } else if (dsn && (isPgUrl(dsn) || isDbiPg(dsn))) {
    backend = "postgresql";
  } else if (dsn && dbiSqlitePath(dsn)) {
    backend = "sqlite";
  } else if (dsn) {
    return fail("dsn", "not a PostgreSQL dsn (postgres://, postgresql:// or dbi:Pg:)");
  } else if (optString(r, "log_path")) {
    backend = "jsonlog";
  } else {
    backend = "sqlite";
  }
  const flush = optInt(r, "flush_interval_ms", 0, 0, 3_600_000);

  if (backend === "jsonlog") {
    const given = optString(r, "log_path") ?? optString(r, "path");
    if (!given) return fail("path", "jsonlog needs log_path or path");
    const modeRaw = optString(r, "mode")?.toLowerCase();
    if (modeRaw !== undefined && modeRaw !== "dir" && modeRaw !== "file") {
      fail("mode", `must be dir or file, not '${modeRaw}'`);
    }
    const mode = modeRaw ?? (given.endsWith("/") || isDirectory(given) ? "dir" : "file");
    const path = given.length > 1 ? given.replace(/\/+$/, "") : given;
    return {
      backend,
      path,
      mode,
      fsync: optBool(r, "fsync", false),
      flush_interval_ms: flush,
      bill_estimated: optBool(r, "bill_estimated", true),
      spill_path: spillPath(r, dirname(path), env),
    };
  }

  if (backend === "sqlite") {
    const path = optString(r, "sqlite_path") ?? optString(r, "path") ?? optString(r, "db_path") ??
      (dsn ? dbiSqlitePath(dsn) : undefined) ?? opts.usageDbPath ?? env("SKEID_USAGE_DB");
    if (!path) {
      return fail(
        "sqlite_path",
        "no usage store: give sqlite_path (or path, db_path), log_path or dsn, " +
          "or set usage_db_path / SKEID_USAGE_DB",
      );
    }
    return {
      backend,
      path,
      schema_file: optString(r, "schema_file"),
      auto_migrate: optBool(r, "auto_migrate", true),
      flush_interval_ms: flush,
      bill_estimated: optBool(r, "bill_estimated", true),
      spill_path: spillPath(r, dirname(path), env),
    };
  }

  // postgresql
  let host = optString(r, "host") ?? "127.0.0.1";
  let port = optInt(r, "port", 5432, 1, 65535);
  let dbname = optString(r, "dbname") ?? optString(r, "database") ?? "skeid";
  let user = optString(r, "user") ?? optString(r, "username");
  let password: string | undefined = typeof r.password === "string" && r.password !== ""
    ? r.password
    : undefined;
  if (r.password !== undefined && r.password !== null && typeof r.password !== "string") {
    fail("password", "must be a string");
  }
  const passwordEnv = optString(r, "password_env");
  if (passwordEnv && password === undefined) {
    const fromEnv = env(passwordEnv);
    if (fromEnv === undefined || fromEnv === "") {
      fail("password_env", `variable ${passwordEnv} is not set`);
    }
    password = fromEnv;
  }
  let cleanDsn: string | undefined;
  if (dsn && isPgUrl(dsn)) {
    let url: URL;
    try {
      url = new URL(dsn);
    } catch {
      return fail("dsn", "not a valid postgres:// URL");
    }
    if (url.hostname) host = decodeURIComponent(url.hostname);
    if (url.port) port = Number(url.port);
    if (url.pathname.length > 1) dbname = decodeURIComponent(url.pathname.slice(1));
    if (!user && url.username) user = decodeURIComponent(url.username);
    if (password === undefined && url.password) password = decodeURIComponent(url.password);
    url.password = "";
    cleanDsn = url.toString();
  } else if (dsn && isDbiPg(dsn)) {
    const f = parseDbiPg(dsn);
    if (f.host) host = f.host;
    if (f.port) {
      const n = Number(f.port);
      if (!Number.isInteger(n) || n < 1 || n > 65535) fail("dsn", "port must be 1–65535");
      port = n;
    }
    dbname = f.dbname ?? f.database ?? f.db ?? dbname;
    user ??= f.user;
    password ??= f.password;
  } else if (dsn) {
    fail("dsn", "not a PostgreSQL dsn (postgres://, postgresql:// or dbi:Pg:)");
  }
  return {
    backend,
    dsn: cleanDsn,
    host,
    port,
    dbname,
    user,
    password: password === undefined ? undefined : new SecretValue(password),
    password_env: passwordEnv,
    schema_file: optString(r, "schema_file"),
    auto_migrate: optBool(r, "auto_migrate", true),
    pool_size: optInt(r, "pool_size", 4, 1, 100),
    connect_timeout_s: optInt(r, "connect_timeout_s", 10, 1, 600),
    flush_interval_ms: flush,
    bill_estimated: optBool(r, "bill_estimated", true),
    spill_path: spillPath(r, undefined, env),
  };
}

/** The store a config describes, for logs: backend and path or host, no password. */
export function describeStoreConfig(cfg: NormalizedUsageStoreConfig): string {
  switch (cfg.backend) {
    case "jsonlog":
      return `jsonlog ${cfg.mode} ${cfg.path}`;
    case "sqlite":
      return `sqlite ${cfg.path}`;
    case "postgresql":
      return `postgresql ${cfg.user ? cfg.user + "@" : ""}${cfg.host}:${cfg.port}/${cfg.dbname}`;
  }
}

/** The fields that name the store itself (ledger settings such as the flush interval excluded). */
function identity(cfg: NormalizedUsageStoreConfig): unknown[] {
  switch (cfg.backend) {
    case "jsonlog":
      return [cfg.backend, cfg.path, cfg.mode, cfg.fsync];
    case "sqlite":
      return [cfg.backend, cfg.path, cfg.schema_file, cfg.auto_migrate];
    case "postgresql":
      return [
        cfg.backend,
        cfg.dsn,
        cfg.host,
        cfg.port,
        cfg.dbname,
        cfg.user,
        cfg.password?.reveal(),
        cfg.schema_file,
        cfg.auto_migrate,
        cfg.pool_size,
        cfg.connect_timeout_s,
      ];
  }
}

/**
 * Whether two configs name the same store (backend, dsn, host, path, mode, user, password,
 * schema_file, auto_migrate…). A different one is prepared and swapped in; the same one is kept.
 */
export function sameStoreConfig(
  a: NormalizedUsageStoreConfig | undefined,
  b: NormalizedUsageStoreConfig | undefined,
): boolean {
  if (a === undefined || b === undefined) return a === b;
  const x = identity(a);
  const y = identity(b);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
