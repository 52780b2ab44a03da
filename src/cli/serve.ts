/**
 * `skeid serve [--config FILE] [--listen HOST:PORT] [--admin-api-key KEY] [--workers N]`: runs
 * the gateway until SIGTERM/SIGINT, then stops accepting, drains in-flight requests (bounded by
 * SKEID_SHUTDOWN_GRACE_MS, default 10000), flushes the usage store and exits 0.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { formatIssue } from "../config/errors.ts";
import { errorMessage } from "../error_message.ts";
import { Supervisor } from "../workers/supervisor.ts";
import { addressInUse, addressTaken } from "./address.ts";
import { type RunningServer, startServer } from "../server.ts";

const HELP =
  `usage: skeid serve [--config FILE] [--listen HOST:PORT] [--admin-api-key KEY] [--workers N]

Runs the gateway until SIGTERM or SIGINT, then stops accepting, lets the requests in flight finish
(within SKEID_SHUTDOWN_GRACE_MS, default 10000), writes the usage events still held and exits 0.
SIGHUP reloads the config at once (the file is also watched).

options:
  -c, --config FILE        the config (default: skeid.yaml when it exists, else none: an empty
                           inventory, nodes added through the admin API)
  -l, --listen HOST:PORT   where clients connect (default 127.0.0.1:8090; [::1]:PORT for IPv6)
  --admin-api-key KEY      the admin key, over the config's (prefer SKEID_ADMIN_API_KEY or the
                           config's admin.api_key_env: a flag shows in the process list)
  -w, --workers N          N workers (isolates of this one process) on one
                           address, admitting as one (default 1)
  -h, --help               this help

Check a config first with: skeid check --config FILE
`;

/** Default listen address. */
export const DEFAULT_LISTEN = "127.0.0.1:8090";
/** Config file used when `--config` is not given and it exists. */
export const DEFAULT_CONFIG = "skeid.yaml";

/** `HOST:PORT` (IPv6 in brackets) → parts; throws on a bad value. */
export function parseListen(value: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(value.trim());
  if (!m) throw new Error(`--listen must be HOST:PORT, got '${value}'`);
  const hostname = m[1] ?? (m[2] || "0.0.0.0");
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--listen port must be 0..65535, got '${m[3]}'`);
  }
  return { hostname, port };
}

/** Runs the subcommand; answers the exit code. */
export async function run(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        config: { type: "string", short: "c" },
        listen: { type: "string", short: "l" },
        "admin-api-key": { type: "string" },
        workers: { type: "string", short: "w" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: false,
    });
  } catch (err) {
    console.error(`skeid serve: ${errorMessage(err)}`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) {
    console.log(HELP);
    return 0;
  }
  let listen;
  try {
    listen = parseListen(v.listen ?? DEFAULT_LISTEN);
  } catch (err) {
    console.error(`skeid serve: ${(err as Error).message}`);
    return 2;
  }
  const workers = v.workers === undefined ? 1 : Number(v.workers);
  if (!Number.isInteger(workers) || workers < 1) {
    console.error(`skeid serve: --workers must be a whole number >= 1, got '${v.workers}'`);
    return 2;
  }
  let configPath = v.config;
  if (configPath === undefined) {
    try {
      if ((await Deno.stat(DEFAULT_CONFIG)).isFile) configPath = DEFAULT_CONFIG;
    } catch {
      // no default config: start empty
    }
  }

  // Before the config, the usage store and the workers are opened: a taken address is the
  // operator's first problem, said as such.
  const taken = addressInUse(listen.hostname, listen.port);
  if (taken !== null) {
    console.error(`skeid serve: ${taken}`);
    return 1;
  }
  let running: Pick<RunningServer, "gateway" | "addr" | "stop" | "finished"> & {
    workers?: () => Promise<{ inflight: number }[]>;
  };
  try {
    const opts = {
      hostname: listen.hostname,
      port: listen.port,
      configPath,
      explicitAdminKey: v["admin-api-key"],
    };
    // N workers on one address, admitting as one (ADR 0025); 1 is the plain server.
    running = workers > 1
      ? await Supervisor.start({ ...opts, workers })
      : await startServer({ ...opts, workerCount: 1 });
  } catch (err) {
    if (err instanceof Deno.errors.AddrInUse) {
      // Taken between the check and the bind.
      console.error(`skeid serve: ${addressTaken(listen.hostname, listen.port)}`);
      return 1;
    }
    const msg = errorMessage(err);
    // ConfigLoadError names the file and every error with its path and line already.
    const where = configPath && !msg.startsWith("config") ? `config ${configPath}: ` : "";
    console.error(`skeid serve: ${where}${msg}`);
    return 1;
  }
  const gw = running.gateway;
  const host = running.addr.hostname.includes(":")
    ? `[${running.addr.hostname}]`
    : running.addr.hostname;
  console.log(`skeid: listening on http://${host}:${running.addr.port}`);
  console.log(`skeid: config ${configPath ?? "(none: empty inventory)"}`);
  if (workers > 1) {
    console.log(`skeid: --workers ${workers}: ${workers} workers share each node's max_conns`);
  }
  for (const w of gw.skeid.workerShareWarnings()) console.log(`skeid: warning: ${w}`);
  if (!gw.ledger.warnIfUnconfigured()) {
    console.log("skeid: warning: no usage_store configured: usage events are not recorded");
  }
  for (const w of gw.config.warnings()) console.log(`skeid: warning: ${formatIssue(w)}`);
  const adminOff = gw.config.adminKeyProblem();
  if (adminOff !== null) console.log(`skeid: warning: ${adminOff}`);

  const grace = Number(Deno.env.get("SKEID_SHUTDOWN_GRACE_MS") ?? "10000");
  const graceMs = Number.isFinite(grace) && grace >= 0 ? grace : 10_000;
  const stopped = Promise.withResolvers<string>();
  const onSignal = (name: string) => () => stopped.resolve(name);
  const term = onSignal("SIGTERM");
  const int = onSignal("SIGINT");
  Deno.addSignalListener("SIGTERM", term);
  Deno.addSignalListener("SIGINT", int);
  // SIGHUP: reload the config now (the watcher does it on its own within about a second).
  const hup = () => {
    gw.config.reload().catch((err) =>
      gw.logger.warn("config_reload_failed", {
        error: errorMessage(err),
      })
    );
  };
  Deno.addSignalListener("SIGHUP", hup);
  const signal = await Promise.race([
    stopped.promise,
    running.finished.then(() => "server stopped"),
    gw.fatal.then((reason) => `fatal: ${reason}`),
  ]);
  Deno.removeSignalListener("SIGTERM", term);
  Deno.removeSignalListener("SIGINT", int);
  Deno.removeSignalListener("SIGHUP", hup);
  // With workers the requests are theirs: the supervisor's gateway serves none.
  const inflight = running.workers
    ? (await running.workers().catch(() => [])).reduce((n, w) => n + w.inflight, 0)
    : gw.inflight;
  gw.logger.info("shutdown", { signal, inflight, grace_ms: graceMs });
  await running.stop(graceMs);
  gw.logger.info("stopped", {});
  // A fatal stop (an expired key-broker token) exits non-zero so the supervisor restarts us.
  return signal.startsWith("fatal:") ? 1 : 0;
}
