/**
 * The `usage_events` table (reference usage-and-cost §5) for SQLite and PostgreSQL, from one
 * column list: the shipped schema, the columns an old table gets added, the indexes.
 *
 * @module
 */

/** One column of `usage_events`. */
export interface UsageColumn {
  /** Column name. */
  name: string;
  /** SQLite column type and constraints. */
  sqlite: string;
  /** PostgreSQL column type and constraints. */
  postgresql: string;
}

/** The columns after `id`, in table order; the last ones were added over time (nullable). */
export const USAGE_COLUMNS: readonly UsageColumn[] = [
  {
    name: "created_at",
    sqlite: "TEXT NOT NULL",
    postgresql: "TIMESTAMPTZ NOT NULL DEFAULT NOW()",
  },
  ...[
    "request_id",
    "api_format",
    "endpoint",
    "api_key_id",
    "provider",
    "engine",
    "model",
    "requested_model",
    "node_id",
    "route_url",
  ].map((name) => ({ name, sqlite: "TEXT", postgresql: "TEXT" })),
  { name: "status_code", sqlite: "INTEGER", postgresql: "INTEGER" },
  {
    name: "ok",
    sqlite: "INTEGER NOT NULL DEFAULT 0",
    postgresql: "BOOLEAN NOT NULL DEFAULT FALSE",
  },
  { name: "duration_ms", sqlite: "INTEGER", postgresql: "INTEGER" },
  ...["input_tokens", "output_tokens", "total_tokens", "tool_calls"].map((name) => ({
    name,
    sqlite: "INTEGER NOT NULL DEFAULT 0",
    postgresql: "BIGINT NOT NULL DEFAULT 0",
  })),
  ...["cost_input_usd", "cost_output_usd", "cost_total_usd"].map((name) => ({
    name,
    sqlite: "REAL NOT NULL DEFAULT 0",
    postgresql: "DOUBLE PRECISION NOT NULL DEFAULT 0",
  })),
  { name: "error_type", sqlite: "TEXT", postgresql: "TEXT" },
  { name: "error_message", sqlite: "TEXT", postgresql: "TEXT" },
  // Added columns: NULL means "not measured" (a row from before the column existed).
  { name: "cached_tokens", sqlite: "INTEGER", postgresql: "BIGINT" },
  { name: "content_bytes", sqlite: "INTEGER", postgresql: "BIGINT" },
  { name: "cost_cache_read_usd", sqlite: "REAL", postgresql: "DOUBLE PRECISION" },
  { name: "cost_cache_write_usd", sqlite: "REAL", postgresql: "DOUBLE PRECISION" },
  { name: "cache_write_tokens", sqlite: "INTEGER", postgresql: "BIGINT" },
  { name: "event_id", sqlite: "TEXT", postgresql: "TEXT" },
  { name: "ttft_ms", sqlite: "INTEGER", postgresql: "BIGINT" },
  { name: "attempts", sqlite: "INTEGER", postgresql: "INTEGER" },
  // ADR 0027: NULL (a row from before the column) reads as `reported`.
  { name: "usage_source", sqlite: "TEXT", postgresql: "TEXT" },
  // The pick as JSON ({pick, key_kind, hit, spilled}); NULL for round_robin and older rows.
  { name: "route", sqlite: "TEXT", postgresql: "TEXT" },
  // W3C trace context of the request (its trace and request span); NULL for older rows.
  { name: "trace_id", sqlite: "TEXT", postgresql: "TEXT" },
  { name: "span_id", sqlite: "TEXT", postgresql: "TEXT" },
];

/** Indexes; the event_id one is unique (the idempotency key of a replayed batch). */
export const USAGE_INDEXES: readonly string[] = [
  "CREATE INDEX IF NOT EXISTS usage_events_created_at_idx ON usage_events (created_at)",
  "CREATE INDEX IF NOT EXISTS usage_events_api_key_id_idx ON usage_events (api_key_id)",
  "CREATE INDEX IF NOT EXISTS usage_events_model_idx ON usage_events (model)",
  "CREATE INDEX IF NOT EXISTS usage_events_requested_model_idx ON usage_events (requested_model)",
  "CREATE UNIQUE INDEX IF NOT EXISTS usage_events_event_id_idx ON usage_events (event_id)",
];

/**
 * The Requests page's keyset order, newest first (`events_page.ts`), unfiltered and filtered by
 * customer key (the filter used most). SQLite's indexes end in the rowid, which `id` is, so its
 * `created_at` index already serves the unfiltered order; PostgreSQL's do not.
 */
export const KEYSET_INDEXES: Readonly<Record<"sqlite" | "postgresql", readonly string[]>> = {
  sqlite: [
    "CREATE INDEX IF NOT EXISTS usage_events_key_created_at_idx ON usage_events (api_key_id, created_at)",
  ],
  postgresql: [
    "CREATE INDEX IF NOT EXISTS usage_events_created_at_id_idx ON usage_events (created_at, id)",
    "CREATE INDEX IF NOT EXISTS usage_events_key_created_at_idx ON usage_events (api_key_id, created_at, id)",
  ],
};

/** The name of the unique index on event_id. */
export const EVENT_ID_INDEX = "usage_events_event_id_idx";

/** The CREATE TABLE statement alone (auto_migrate runs it, then adds columns, then indexes). */
export function createTable(dialect: "sqlite" | "postgresql"): string {
  const id = dialect === "sqlite" ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY";
  const cols = USAGE_COLUMNS.map((c) => `  ${c.name} ${c[dialect]}`);
  return `CREATE TABLE IF NOT EXISTS usage_events (\n  id ${id},\n${cols.join(",\n")}\n)`;
}

/** The shipped SQLite schema (what auto_migrate runs when no schema_file is given). */
export const SQLITE_SCHEMA: string =
  [createTable("sqlite"), ...USAGE_INDEXES, ...KEYSET_INDEXES.sqlite].join(";\n") + ";\n";

/** The shipped PostgreSQL schema. */
export const POSTGRES_SCHEMA: string =
  [createTable("postgresql"), ...USAGE_INDEXES, ...KEYSET_INDEXES.postgresql].join(";\n") + ";\n";

/** The statements that bring an existing table up to date, for the columns it lacks. */
export function addColumnStatements(
  dialect: "sqlite" | "postgresql",
  existing: ReadonlySet<string>,
): string[] {
  return USAGE_COLUMNS.filter((c) => !existing.has(c.name)).map((c) =>
    `ALTER TABLE usage_events ADD COLUMN ${
      dialect === "postgresql" ? "IF NOT EXISTS " : ""
    }${c.name} ${c[dialect]}`
  );
}

/**
 * The `responses` table: the Responses face's kept responses (ADR 0028), one row per response,
 * in the usage store's database. `n` orders them (the oldest of a key is dropped first); the
 * times are epoch ms; `input` and `response` are JSON text.
 */
export function responsesTableStatements(dialect: "sqlite" | "postgresql"): string[] {
  const n = dialect === "sqlite" ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY";
  const ms = dialect === "sqlite" ? "INTEGER" : "BIGINT";
  return [
    `CREATE TABLE IF NOT EXISTS responses (\n  n ${n},\n  id TEXT NOT NULL UNIQUE,\n` +
    `  api_key_id TEXT NOT NULL,\n  created_ms ${ms} NOT NULL,\n  expires_ms ${ms} NOT NULL,\n` +
    `  previous_id TEXT NOT NULL DEFAULT '',\n  bytes ${ms} NOT NULL DEFAULT 0,\n` +
    `  input TEXT NOT NULL,\n  response TEXT NOT NULL\n)`,
    "CREATE INDEX IF NOT EXISTS responses_api_key_id_idx ON responses (api_key_id, n)",
    "CREATE INDEX IF NOT EXISTS responses_expires_ms_idx ON responses (expires_ms)",
  ];
}

/**
 * What brings a `responses` table made before responses were linked up to date: the link
 * (`previous_id`, empty for such a row, whose `input` holds the whole conversation) and the
 * size (`bytes`, filled from the row's text). `existing`: the table's columns (SQLite, which has
 * no ADD COLUMN IF NOT EXISTS); PostgreSQL's statements are safe to run again.
 */
export function responsesUpgradeStatements(
  dialect: "sqlite" | "postgresql",
  existing?: ReadonlySet<string>,
): string[] {
  const ms = dialect === "sqlite" ? "INTEGER" : "BIGINT";
  const columns: [string, string][] = [
    ["previous_id", "TEXT NOT NULL DEFAULT ''"],
    ["bytes", `${ms} NOT NULL DEFAULT 0`],
  ];
  const add = columns.filter(([name]) => dialect === "postgresql" || !existing?.has(name));
  if (add.length === 0) return [];
  const ifNot = dialect === "postgresql" ? "IF NOT EXISTS " : "";
  const size = dialect === "postgresql" ? "octet_length" : "length";
  return [
    ...add.map(([name, type]) => `ALTER TABLE responses ADD COLUMN ${ifNot}${name} ${type}`),
    `UPDATE responses SET bytes = ${size}(input) + ${size}(response) WHERE bytes = 0`,
  ];
}
