/**
 * `skeid check --config FILE [--workers N]`: validates a config the way `serve` would load it,
 * without starting anything (the usage store is validated, never opened). Prints
 * `ok: FILE (N nodes, M aliases, ...)` with every warning (skipped entries, worker shares) and
 * exits 0; or prints every error with its path and line and exits 1; a missing file exits 2.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { RoutingCore } from "../core/routing_core.ts";
import { InflightTable } from "../core/inflight_table.ts";
import { silentLogger } from "../log.ts";
import { ConfigLoadError, formatIssue } from "../config/errors.ts";
import { ConfigFileMissingError, loadConfigFile, type LoadedConfig } from "../config/load.ts";
import { errorMessage } from "../error_message.ts";
import { type CliIo, consoleIo } from "./io.ts";

const HELP = `usage: skeid check --config FILE [--workers N]

Validates a config file: every error is printed with its path and line. Exit 0 when it loads
(warnings are printed too), 1 when it does not, 2 when the file is missing or the arguments are
wrong. Environment variables the config names (registry secret, admin key, a store's password)
are read as serve would read them; the usage store is checked but not opened. --workers N is
serve's: the workers share each node's max_conns, so only frontend_count splits it (warned).
`;

/** Runs the subcommand; answers the exit code. */
export async function run(args: string[], io: CliIo = consoleIo): Promise<number> {
  let values: { config?: string; workers?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        config: { type: "string", short: "c" },
        workers: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: false,
    }));
  } catch (e) {
    io.err(`skeid check: ${errorMessage(e)}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    io.out(HELP);
    return 0;
  }
  const path = values.config;
  if (!path) {
    io.err(`skeid check: --config FILE is required\n\n${HELP}`);
    return 2;
  }
  const workers = values.workers === undefined ? 1 : Number(values.workers);
  if (!Number.isInteger(workers) || workers < 1) {
    io.err("skeid check: --workers must be a whole number >= 1");
    return 2;
  }

  let loaded: LoadedConfig;
  try {
    loaded = await loadConfigFile(path, { env: io.env });
  } catch (e) {
    if (e instanceof ConfigFileMissingError) {
      io.err(`skeid check: config file not found: ${path}`);
      return 2;
    }
    if (e instanceof ConfigLoadError) {
      const n = e.issues.length;
      io.err(`skeid check: ${path}: ${n} ${n === 1 ? "error" : "errors"}`);
      for (const issue of e.issues) io.err(`error: ${formatIssue(issue)}`);
      return 1;
    }
    io.err(`skeid check: ${path}: ${errorMessage(e)}`);
    return 1;
  }

  io.out(`ok: ${path} (${summary(loaded)})`);
  for (const w of loaded.warnings) io.out(`warning: ${formatIssue(w)}`);
  for (const w of shareWarnings(loaded, workers, io.env)) io.out(`warning: ${w}`);
  return 0;
}

function plural(n: number, one: string, many = one + "s"): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** `3 nodes, 1 alias, 2 prices, 2 policies, 3 keys, usage store sqlite, registry off, ...` */
function summary(loaded: LoadedConfig): string {
  const c = loaded.config;
  const parts = [
    plural(loaded.nodes?.length ?? 0, "node"),
    plural(loaded.aliases?.size ?? 0, "alias", "aliases"),
    plural(loaded.pricing?.size ?? 0, "price"),
    plural(loaded.policySet?.policies.size ?? 0, "policy", "policies"),
    plural(Object.keys(c.keys ?? {}).length, "key"),
    plural(Object.keys(c.names ?? {}).length, "name"),
    loaded.usageStore ? `usage store ${loaded.usageStore.normalized.backend}` : "no usage store",
    `admin ${
      loaded.adminKey.key !== ""
        ? `on (${loaded.adminKey.source})`
        : loaded.adminKey.unset !== undefined
        ? `off (${loaded.adminKey.source} names ${loaded.adminKey.unset}, which is unset or empty)`
        : "off"
    }`,
    `registry ${loaded.registry ? "on" : "off"}`,
    loaded.manifest ? `manifest on (${plural(loaded.manifests.size, "key")})` : "manifest off",
  ];
  return parts.join(", ");
}

/** The worker/frontend share warnings serve would print for these nodes. */
function shareWarnings(
  loaded: LoadedConfig,
  workers: number,
  env: (name: string) => string | undefined,
): string[] {
  if (!loaded.nodeSpecs || loaded.nodeSpecs.length === 0) return [];
  try {
    // The workers of one serve share their inflight counters (ADR 0025): only frontends divide
    // max_conns, so N workers warn exactly as one does.
    const skeid = new RoutingCore({
      env,
      workerCount: workers,
      inflight: workers > 1 ? InflightTable.shared(1, workers) : undefined,
      logger: silentLogger,
    });
    skeid.setRouting(loaded.routing);
    skeid.replaceNodes(loaded.nodeSpecs);
    return skeid.workerShareWarnings();
  } catch (e) {
    return [`worker shares not checked: ${errorMessage(e)}`];
  }
}
