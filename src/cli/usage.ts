/**
 * `skeid usage` — the usage report from the command line.
 *
 * ```
 * skeid usage [--config FILE] [--since TIME] [--api-key-id ID] [--model M] [--limit N] [--json]
 *             [--backend B] [--db PATH] [--dsn DSN] [--schema sqlite|postgresql]
 * ```
 *
 * The store comes from `--backend/--db/--dsn` when given, else from the config file's
 * `usage_store` (or its older `usage_db_path`), else from `SKEID_USAGE_DB`. It is opened
 * read-only: a report never creates a database or migrates a table.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { type NormalizedUsageStoreConfig, normalizeUsageStoreConfig } from "../usage/config.ts";
import { createUsageStore } from "../usage/open.ts";
import { normalizeReportFilters } from "../usage/report.ts";
import { SinceError } from "../usage/report_since.ts";
import { POSTGRES_SCHEMA, SQLITE_SCHEMA } from "../usage/ledger_schema.ts";
import { errorMessage } from "../usage/secret.ts";
import type { ReportFilters, ReportGroup, UsageReport, UsageStore } from "../usage/types.ts";
import { type CliIo, consoleIo } from "./io.ts";
import { isJsonObject } from "../core/json.ts";
import { formatBudget, keyBudget } from "./usage_budget.ts";

const HELP = `usage: skeid usage [options]

Prints the usage report: totals, by customer key id, by model, and the most recent events.

options:
  --config FILE       config whose usage_store (or usage_db_path) names the store
                      (default: skeid.yaml when it exists, else SKEID_USAGE_DB)
  --backend B         sqlite | jsonlog | postgresql (inferred from --db/--dsn when absent)
  --db PATH           a SQLite database, or a jsonlog file/directory (with --backend jsonlog)
  --dsn DSN           a PostgreSQL dsn (postgres://user@host:port/db; the password may come
                      from PGPASSWORD)
  --since TIME        only events created at or after this time: an ISO date or time, UTC
                      unless it names a zone (2026-09-01, 2026-09-01T12:00), or a span back
                      from now (30m, 24h, 7d, 2w)
  --api-key-id ID     only this customer key id; with a config, also the key's budget this
                      period (cap, spent, remaining, reset; ID may be a names: name)
  --model M           only this served model
  --limit N           recent events to list (default 20, at most 500)
  --json              print the report as JSON
  --schema BACKEND    print the shipped schema of sqlite or postgresql and exit
  -h, --help          this help
`;

/** A usage error: printed with the help hint, exit 1. */
class CliError extends Error {}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The raw usage_store config: flags, else the config file, else the environment default. */
async function rawStoreConfig(
  values: Record<string, string | boolean | undefined>,
): Promise<{ raw: unknown; usageDbPath?: string; source: string }> {
  const flag = (k: string) => typeof values[k] === "string" ? values[k] as string : undefined;
  if (flag("backend") || flag("db") || flag("dsn")) {
    const raw: Record<string, string> = {};
    if (flag("backend")) raw.backend = flag("backend")!;
    if (flag("db")) raw.path = flag("db")!;
    if (flag("dsn")) raw.dsn = flag("dsn")!;
    return { raw, source: "command line" };
  }
  const doc = await configDoc(values);
  if (!doc) return { raw: undefined, source: "SKEID_USAGE_DB" };
  const { top, path } = doc;
  const dbPath = typeof top.usage_db_path === "string" ? top.usage_db_path : undefined;
  return { raw: top.usage_store, usageDbPath: dbPath, source: path };
}

/** The config file's top-level map (`--config`, else skeid.yaml when it exists). */
async function configDoc(
  values: Record<string, string | boolean | undefined>,
): Promise<{ top: Record<string, unknown>; path: string } | undefined> {
  const given = typeof values.config === "string" ? values.config : undefined;
  const path = given ?? (await exists("skeid.yaml") ? "skeid.yaml" : undefined);
  if (!path) return undefined;
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new CliError(`cannot read config ${path}: ${errorMessage(err)}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new CliError(`config ${path}: ${errorMessage(err)}`);
  }
  if (doc !== null && doc !== undefined && (typeof doc !== "object" || Array.isArray(doc))) {
    throw new CliError(`config ${path}: the top level must be a map`);
  }
  return { top: (doc ?? {}) as Record<string, unknown>, path };
}

function limitOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--limit must be a whole number ≥ 1`);
  return n;
}

/** Runs the subcommand; answers the exit code (0, or 1 with the error on stderr). */
export async function run(args: string[], io: CliIo = consoleIo): Promise<number> {
  let store: UsageStore | undefined;
  try {
    let values: Record<string, string | boolean | undefined>;
    try {
      ({ values } = parseArgs({
        args,
        strict: true,
        allowPositionals: false,
        options: {
          config: { type: "string" },
          since: { type: "string" },
          "api-key-id": { type: "string" },
          model: { type: "string" },
          limit: { type: "string" },
          json: { type: "boolean" },
          backend: { type: "string" },
          db: { type: "string" },
          dsn: { type: "string" },
          schema: { type: "string" },
          help: { type: "boolean", short: "h" },
        },
      }));
    } catch (err) {
      throw new CliError(errorMessage(err));
    }
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    if (typeof values.schema === "string") {
      const s = values.schema.toLowerCase();
      if (s === "sqlite") io.out(SQLITE_SCHEMA);
      else if (s.startsWith("postgres")) io.out(POSTGRES_SCHEMA);
      else throw new CliError(`--schema must be sqlite or postgresql`);
      return 0;
    }
    // --api-key-id may be a `names:` name of the config: the report filters by the id it names.
    const ref = values["api-key-id"];
    const top = typeof ref === "string" ? (await configDoc(values))?.top : undefined;
    const names = top?.names;
    const named = typeof ref === "string" && isJsonObject(names) ? names[ref] : undefined;
    let filters: ReportFilters;
    try {
      filters = normalizeReportFilters({
        since: values.since,
        api_key_id: typeof named === "string" ? named : ref,
        model: values.model,
        limit: limitOf(values.limit as string | undefined),
      });
    } catch (err) {
      if (err instanceof SinceError) throw new CliError(`--since: ${err.message}`);
      throw err;
    }
    const { raw, usageDbPath, source } = await rawStoreConfig(values);
    let cfg: NormalizedUsageStoreConfig;
    try {
      cfg = normalizeUsageStoreConfig(raw, { usageDbPath, env: io.env });
    } catch (err) {
      const from = source === "SKEID_USAGE_DB" && io.env("SKEID_USAGE_DB") === undefined
        ? "no --config, skeid.yaml or SKEID_USAGE_DB"
        : `from ${source}`;
      throw new CliError(`${errorMessage(err)} (${from})`);
    }
    store = createUsageStore(cfg, { readOnly: true });
    await store.prepare();
    const report = await store.report(filters);
    if (!report.ok) {
      io.err(`skeid usage: ${report.error ?? "the store gave no report"}`);
      return 1;
    }
    // --api-key-id: the key's budget this period, from the config and the store (ADR 0023).
    const budget = top ? await keyBudget(top, ref as string, store) : undefined;
    if (values.json) {
      io.out(JSON.stringify(budget ? { ...report, budget: budget.status } : report, null, 2));
    } else {
      const text = formatReport(report, store.description);
      io.out(budget ? `${text}\n\n${formatBudget(budget.apiKeyId, budget.status)}` : text);
    }
    return 0;
  } catch (err) {
    const hint = err instanceof CliError ? "\n(see skeid usage --help)" : "";
    io.err(`skeid usage: ${errorMessage(err)}${hint}`);
    return 1;
  } finally {
    await store?.close().catch(() => {});
  }
}

// ---- text output ------------------------------------------------------------------------------

type Cell = string | number;

/** Aligned columns: text left, numbers right, two spaces apart. */
export function table(header: string[], rows: Cell[][]): string {
  const cells = [header, ...rows.map((r) => r.map(cellText))];
  const numeric = header.map((_, i) =>
    rows.length > 0 && rows.every((r) => typeof r[i] === "number")
  );
  const width = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells.map((r) =>
    r.map((c, i) => numeric[i] ? c.padStart(width[i]) : c.padEnd(width[i])).join("  ").trimEnd()
  ).join("\n");
}

/**
 * A cell as printed. A fraction (a cost in USD) is written in plain decimals to 12 places, its
 * trailing zeros cut: sums of prices carry binary rounding noise (0.000059999999999999995 for
 * 0.00006), and `String` writes a small cost in exponent form (1e-7).
 */
function cellText(c: Cell): string {
  if (typeof c === "string" || Number.isInteger(c) || !Number.isFinite(c)) return String(c);
  return c.toFixed(12).replace(/\.?0+$/, "");
}

function groups(rows: ReportGroup[] | undefined, field: "api_key_id" | "model"): Cell[][] {
  return (rows ?? []).map((g) => [
    g[field] || "(none)",
    g.requests,
    g.total_tokens,
    g.total_cost_usd,
  ]);
}

/** The report as text: a heading, totals, by customer key id, by model, recent. */
export function formatReport(report: UsageReport, description: string): string {
  const t = report.totals;
  const out: string[] = [];
  out.push(`usage ${report.since ? `since ${report.since}` : "(all time)"} — ${description}`, "");
  out.push("totals");
  out.push(
    table(["", ""], [
      ["requests", t?.requests ?? 0],
      ["input tokens", t?.input_tokens ?? 0],
      ["output tokens", t?.output_tokens ?? 0],
      ["total tokens", t?.total_tokens ?? 0],
      ["cached tokens", t?.cached_tokens ?? 0],
      ["cache write tokens", t?.cache_write_tokens ?? 0],
      ["tool calls", t?.tool_calls ?? 0],
      ["cost USD", t?.total_cost_usd ?? 0],
      // ADR 0027: the part whose tokens Skeid estimated (the client left before the usage report).
      ["estimated requests", t?.estimated?.requests ?? 0],
      ["estimated tokens", t?.estimated?.total_tokens ?? 0],
      ["estimated cost USD", t?.estimated?.total_cost_usd ?? 0],
    ]).split("\n").slice(1).map((l) => "  " + l).join("\n"),
  );
  for (
    const [title, field, head] of [
      ["by customer key id", "api_key_id", "API KEY ID"],
      ["by model", "model", "MODEL"],
    ] as const
  ) {
    const rows = groups(field === "api_key_id" ? report.by_key : report.by_model, field);
    out.push("", title);
    out.push(
      rows.length ? indent(table([head, "REQUESTS", "TOKENS", "COST USD"], rows)) : "  (none)",
    );
  }
  const recent = report.recent ?? [];
  out.push("", `recent (newest first, ${recent.length})`);
  out.push(
    recent.length
      ? indent(table(
        [
          "CREATED AT",
          "API KEY ID",
          "MODEL",
          "REQUESTED",
          "STATUS",
          "IN",
          "OUT",
          "COST USD",
          "USAGE",
        ],
        recent.map((r) => [
          String(r.created_at ?? ""),
          String(r.api_key_id || "(none)"),
          String(r.model ?? ""),
          String(r.requested_model ?? ""),
          Number(r.status_code ?? 0),
          Number(r.input_tokens ?? 0),
          Number(r.output_tokens ?? 0),
          Number(r.cost_total_usd ?? 0),
          String(r.usage_source ?? "reported"),
        ]),
      ))
      : "  (none)",
  );
  return out.join("\n");
}

function indent(text: string): string {
  return text.split("\n").map((l) => "  " + l).join("\n");
}
