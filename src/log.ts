/**
 * Structured logging: one JSON line per event of note, on stderr. Never pass a secret (a customer
 * key, an upstream key, the admin key) into a field: log key ids and variable names only.
 *
 * @module
 */

/** Log levels, least to most severe. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** A structured logger. `event` is a short stable name (`usage_lost`, `config_reloaded`). */
export interface Logger {
  /** Diagnostic detail (e.g. `usage_store_retry_failed`); dropped unless the level is `debug`. */
  debug(event: string, fields?: Record<string, unknown>): void;
  /** Normal events of note (e.g. `usage_store_configured`, `admin_node_added`). */
  info(event: string, fields?: Record<string, unknown>): void;
  /** Something is wrong but Skeid carries on (e.g. `usage_queue_full`, `config_file_missing`). */
  warn(event: string, fields?: Record<string, unknown>): void;
  /** A failure an operator must act on (e.g. `usage_lost`, `config_reload_failed`). */
  error(event: string, fields?: Record<string, unknown>): void;
}

/** Where log lines go; tests pass a collector. */
export type LogSink = (line: string) => void;

const encoder = new TextEncoder();
const stderrSink: LogSink = (line) => {
  Deno.stderr.write(encoder.encode(line + "\n")).catch(() => {});
};

/** Parses `SKEID_LOG_LEVEL`-style text; unknown values fall back to `info`. */
export function parseLogLevel(value: string | undefined): LogLevel {
  const v = (value ?? "").trim().toLowerCase();
  return v === "debug" || v === "info" || v === "warn" || v === "error" ? v : "info";
}

/** Creates a logger writing JSON lines at or above `level` to `sink` (default stderr). */
export function createLogger(level: LogLevel = "info", sink: LogSink = stderrSink): Logger {
  const min = RANK[level];
  const emit = (lvl: LogLevel, event: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return;
    sink(JSON.stringify({ ts: new Date().toISOString(), level: lvl, event, ...fields }));
  };
  return {
    debug: (e, f) => emit("debug", e, f),
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
  };
}

/** A logger that keeps its lines in memory, for tests. */
export function memoryLogger(
  level: LogLevel = "debug",
): Logger & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(level, (line) => lines.push(JSON.parse(line)));
  return Object.assign(logger, { lines });
}

/** A logger that drops everything. */
export const silentLogger: Logger = createLogger("error", () => {});
