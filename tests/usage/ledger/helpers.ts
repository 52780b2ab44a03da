/**
 * Helpers of the ledger end-to-end tests: a real gateway (`startServer`) writing to a real usage
 * store (no callback sink), a load driver that sends its own request ids over real HTTP, readers
 * that list the request ids a store holds (straight from the files or tables, not through the
 * ledger), bounded polling, and the local PostgreSQL cluster (fresh databases, stop and start).
 *
 * @module
 */
import postgres from "postgres";
import { assertEquals } from "../../_assert.ts";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { stringify } from "yaml";
import { type RunningServer, startServer } from "../../../src/server.ts";
import type { Gateway } from "../../../src/gateway.ts";
import { memoryLogger } from "../../../src/log.ts";
import { run as usageCli } from "../../../src/cli/usage.ts";
import { pgAdminDsn, pgUnavailable } from "../../_helpers/pg.ts";
import { until } from "../../_helpers/poll.ts";
import { runCli } from "../../_helpers/cli.ts";

export { freshPgDatabase } from "../../_helpers/pg.ts";

/** The in-memory logger a test gateway writes to. */
export type MemoryLogger = ReturnType<typeof memoryLogger>;

/** A gateway under test that records into the store its config names. */
export interface LedgerGateway {
  /** `http://127.0.0.1:PORT`. */
  base: string;
  gw: Gateway;
  server: RunningServer;
  logger: MemoryLogger;
  /** The temp directory holding the config, the spill file and file-based stores. */
  dir: string;
  configPath: string;
  /** The ledger's spill file (events wait there while the store is down). */
  spillPath: string;
  /**
   * Replaces the config file the way editors and deploy tools do (a new file renamed over the
   * old one), so the watcher never reads a half-written file.
   */
  writeConfig(config: Record<string, unknown>): Promise<void>;
  /** Stops the server: drains, flushes the ledger into the store, closes it. Idempotent. */
  stop(): Promise<void>;
  /** Stops (if needed) and removes the temp directory. */
  cleanup(): Promise<void>;
}

/** A fresh temp directory for one test. */
export function tempDir(): Promise<string> {
  return Deno.makeTempDir({ prefix: "skeid-ledger-" });
}

/**
 * Starts a gateway on 127.0.0.1:0 with `config(dir)` written as YAML into a fresh temp directory
 * (the function gets the directory so file-based stores can live in it).
 */
export async function startLedgerGateway(
  config: (dir: string) => Record<string, unknown>,
  opts: { reloadIntervalMs?: number; dir?: string } = {},
): Promise<LedgerGateway> {
  const dir = opts.dir ?? await tempDir();
  const configPath = join(dir, "skeid.yaml");
  const spillPath = join(dir, "spill.jsonl");
  await Deno.writeTextFile(configPath, stringify(config(dir)));
  const logger = memoryLogger("info");
  let server: RunningServer;
  try {
    server = await startServer({
      hostname: "127.0.0.1",
      port: 0,
      configPath,
      env: () => undefined,
      logger,
      spillPath,
      reloadIntervalMs: opts.reloadIntervalMs ?? 100,
    });
  } catch (err) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  }
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= server.stop(5000));
  return {
    base: `http://127.0.0.1:${server.addr.port}`,
    gw: server.gateway,
    server,
    logger,
    dir,
    configPath,
    spillPath,
    writeConfig: async (c) => {
      const tmp = join(dir, `.skeid.yaml.${crypto.randomUUID().slice(0, 8)}.tmp`);
      await Deno.writeTextFile(tmp, stringify(c));
      await Deno.rename(tmp, configPath);
    },
    stop,
    cleanup: async () => {
      await stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** What a load run did. */
export interface LoadResult {
  /** The request ids sent, in index order. */
  ids: string[];
  /** Requests that did not come back 200 with their own request id (should be empty). */
  failures: string[];
  /** How many were streams. */
  streams: number;
}

/** Options of `runLoad`. */
export interface LoadOptions {
  base: string;
  /** Requests to send. */
  count: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** Prefix of the request ids (`<prefix>-<index>`), unique per run. */
  prefix: string;
  model?: string;
  /** Awaited before request `i` is sent (pacing around an outage). */
  before?: (i: number) => Promise<void> | void;
  /** Called after request `i` came back, body read to the end. */
  after?: (i: number) => void;
}

/**
 * Sends `count` chat requests on the OpenAI face, `concurrency` at a time; every other one is a
 * stream (read to `[DONE]`). Each carries its own `x-request-id`, which must come back.
 */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const ids = Array.from({ length: opts.count }, (_, i) => `${opts.prefix}-${i}`);
  const failures: string[] = [];
  let next = 0;
  let streams = 0;
  const one = async (i: number) => {
    const stream = i % 2 === 1;
    if (stream) streams++;
    const id = ids[i];
    try {
      const res = await fetch(`${opts.base}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-request-id": id },
        body: JSON.stringify({
          model: opts.model ?? "m",
          messages: [{ role: "user", content: `request ${i}` }],
          ...(stream ? { stream: true } : {}),
        }),
      });
      const text = await res.text();
      const echoed = res.headers.get("x-request-id");
      if (res.status !== 200) failures.push(`${id}: status ${res.status}: ${text.slice(0, 200)}`);
      else if (echoed !== id) failures.push(`${id}: x-request-id came back as ${echoed}`);
      else if (stream && !text.includes("data: [DONE]")) failures.push(`${id}: stream unfinished`);
    } catch (err) {
      failures.push(`${id}: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const worker = async () => {
    // Bounded: each turn takes one index and there are `count` of them.
    while (next < opts.count) {
      const i = next++;
      await opts.before?.(i);
      await one(i);
      opts.after?.(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, opts.count) }, worker));
  return { ids, failures, streams };
}

/**
 * Re-checks `cond` every `everyMs` until it holds; fails after `timeoutMs` naming `what` (a
 * function is asked at the time of failure, so it can report the last value seen). The shared
 * `until` with this suite's argument order and its slower default tick.
 */
export function pollUntil(
  cond: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string | (() => string),
  everyMs = 20,
): Promise<void> {
  return until(cond, what, timeoutMs, everyMs);
}

/** Fails naming every error that escaped to the top level (with its stack). */
export function assertNoUncaught(uncaught: readonly unknown[]): void {
  assertEquals(
    uncaught.map((e) => e instanceof Error ? e.stack ?? e.message : String(e)),
    [],
    "no error escaped to the top level (it would end the gateway)",
  );
}

/**
 * Runs `fn` catching the errors that escape to the top level meanwhile — thrown from a timer or
 * an event handler (inside the PostgreSQL client, say), they would end the whole process, in
 * production the gateway — so the test fails naming them instead of the runner dying before
 * its `finally` blocks ran. `fn` gets the list, to check it early; it is checked at the end.
 */
export async function catchingUncaught(
  fn: (uncaught: readonly unknown[]) => Promise<void>,
): Promise<void> {
  const uncaught: unknown[] = [];
  const onError = (e: ErrorEvent) => {
    e.preventDefault();
    uncaught.push(e.error);
  };
  const onRejection = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    uncaught.push(e.reason);
  };
  globalThis.addEventListener("error", onError);
  globalThis.addEventListener("unhandledrejection", onRejection);
  try {
    await fn(uncaught);
  } finally {
    globalThis.removeEventListener("error", onError);
    globalThis.removeEventListener("unhandledrejection", onRejection);
  }
  assertNoUncaught(uncaught);
}

// ---- reading a store directly ---------------------------------------------------------------

/** A store as a test reads it. */
export type StoreRef =
  | { backend: "jsonlog-dir"; path: string }
  | { backend: "jsonlog-file"; path: string }
  | { backend: "sqlite"; path: string }
  | { backend: "postgresql"; dsn: string };

/**
 * The request ids of every event the store holds, one entry per stored record (duplicates kept:
 * a jsonlog file with a line twice, a table with a row twice, shows here twice). A store not
 * created yet holds nothing.
 */
export async function storedRequestIds(store: StoreRef): Promise<string[]> {
  switch (store.backend) {
    case "jsonlog-dir": {
      const out: string[] = [];
      try {
        for await (const entry of Deno.readDir(store.path)) {
          if (!entry.isFile || !entry.name.endsWith(".json") || entry.name.startsWith(".")) {
            continue;
          }
          const rec = JSON.parse(await Deno.readTextFile(join(store.path, entry.name)));
          out.push(String(rec.request_id));
        }
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return [];
        throw err;
      }
      return out;
    }
    case "jsonlog-file": {
      let text: string;
      try {
        text = await Deno.readTextFile(store.path);
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return [];
        throw err;
      }
      // Complete lines only: the last piece is empty after a final newline, or a line the store
      // is still appending (read mid-write by a poll); the store itself skips such a line too.
      return text.split("\n").slice(0, -1).filter((l) => l.trim() !== "").map((l) =>
        String(JSON.parse(l).request_id)
      );
    }
    case "sqlite": {
      try {
        await Deno.stat(store.path);
      } catch {
        return [];
      }
      const db = new DatabaseSync(store.path, { readOnly: true });
      try {
        return db.prepare("SELECT request_id FROM usage_events").all().map((r) =>
          String(r.request_id)
        );
      } catch (err) {
        if (String(err).includes("no such table")) return [];
        throw err;
      } finally {
        db.close();
      }
    }
    case "postgresql": {
      const sql = postgres(store.dsn, { max: 1, connect_timeout: 5, onnotice: () => {} });
      try {
        const rows = await sql.unsafe("SELECT request_id FROM usage_events");
        return rows.map((r) => String(r.request_id));
      } catch (err) {
        if (String(err).includes("does not exist")) return [];
        throw err;
      } finally {
        await sql.end({ timeout: 5 });
      }
    }
  }
}

/** Counts of each id in `ids`. */
function tally(ids: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const id of ids) m.set(id, (m.get(id) ?? 0) + 1);
  return m;
}

/**
 * Compares what a store holds with what was sent: ids sent but not stored, ids stored more than
 * once, ids stored that were never sent. All three empty means exactly one event per request.
 */
export function compareIds(
  sent: readonly string[],
  stored: readonly string[],
): { missing: string[]; duplicated: string[]; unexpected: string[] } {
  const counts = tally(stored);
  const sentSet = new Set(sent);
  return {
    missing: sent.filter((id) => !counts.has(id)),
    duplicated: [...counts].filter(([, n]) => n > 1).map(([id, n]) => `${id}×${n}`),
    unexpected: [...counts.keys()].filter((id) => !sentSet.has(id)),
  };
}

/** How many lines a file has (0 when missing): the spill and replay files. */
export async function lineCount(path: string): Promise<number> {
  try {
    return (await Deno.readTextFile(path)).split("\n").filter((l) => l.trim() !== "").length;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 0;
    throw err;
  }
}

// ---- skeid usage ----------------------------------------------------------------------------

/** Runs `skeid usage` in process; answers exit code, stdout and stderr. */
export async function usageCommand(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const r = await runCli(usageCli, args, env);
  return { code: r.code, out: r.out.join("\n"), err: r.err.join("\n") };
}

// ---- PostgreSQL -----------------------------------------------------------------------------

/**
 * Test options for PostgreSQL tests: ignored, with the reason printed, when the server does not
 * answer — unless `SKEID_REQUIRE_PG=1`, where they run (and fail).
 */
export async function pgGate(what: string): Promise<{ ignore: boolean }> {
  const reason = await pgUnavailable();
  if (reason === undefined) return { ignore: false };
  if (Deno.env.get("SKEID_REQUIRE_PG") === "1") {
    console.error(`PostgreSQL unreachable (${reason}) and SKEID_REQUIRE_PG=1: ${what} will fail`);
    return { ignore: false };
  }
  console.error(`IGNORED ${what}: PostgreSQL unreachable (${reason}); SKEID_REQUIRE_PG=1 fails`);
  return { ignore: true };
}

/** The local PostgreSQL cluster, which a test may stop and start (`pg_ctlcluster`). */
export interface LocalCluster {
  version: string;
  /** Stops the cluster (fast shutdown: connections are cut). */
  stop(): Promise<void>;
  /** Starts it and waits (bounded) until it answers. */
  start(): Promise<void>;
  /** Whether it answers a query now. */
  answers(): Promise<boolean>;
}

async function command(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    const dec = new TextDecoder();
    throw new Error(
      `${cmd} ${args.join(" ")} exited ${out.code}: ${dec.decode(out.stderr)}${
        dec.decode(out.stdout)
      }`.trim(),
    );
  }
}

/**
 * The local cluster `main` of the newest version under /etc/postgresql, when the test server is
 * that one (no SKEID_TEST_PG_DSN naming another host); else why not.
 */
export async function localCluster(): Promise<LocalCluster | string> {
  const admin = new URL(pgAdminDsn());
  if (!["127.0.0.1", "localhost"].includes(admin.hostname) || (admin.port || "5432") !== "5432") {
    return `the test server ${admin.hostname}:${admin.port} is not the local cluster`;
  }
  const versions: string[] = [];
  try {
    for await (const e of Deno.readDir("/etc/postgresql")) if (e.isDirectory) versions.push(e.name);
  } catch {
    return "no /etc/postgresql";
  }
  versions.sort((a, b) => Number(a) - Number(b));
  const version = versions.at(-1);
  if (!version) return "no cluster under /etc/postgresql";
  const ctl = (action: string) =>
    command("pg_ctlcluster", ["--skip-systemctl-redirect", version, "main", action]);
  const answers = async () => (await pgUnavailable()) === undefined;
  return {
    version,
    stop: () => ctl("stop"),
    start: async () => {
      await ctl("start");
      await pollUntil(answers, 30_000, "PostgreSQL to answer after start", 100);
    },
    answers,
  };
}

// ---- a `scripts/skeid serve` subprocess ------------------------------------------------------

/** A `skeid serve` child process. */
export interface ServeProcess {
  /** `http://127.0.0.1:PORT`, read from its "listening on" line. */
  base: string;
  child: Deno.ChildProcess;
  /** Everything it wrote to stderr, once it exited. */
  stderr: Promise<string>;
  /** Kills it (SIGKILL) if still running and releases its pipes. */
  dispose(): Promise<void>;
}

/**
 * Starts `scripts/skeid serve --config <config> --listen 127.0.0.1:0` in `cwd` (env added to
 * this process's) and waits (bounded) for its listening line.
 */
export async function spawnServe(
  config: string,
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<ServeProcess> {
  const launcher = new URL("../../../scripts/skeid", import.meta.url).pathname;
  const child = new Deno.Command(launcher, {
    args: ["serve", "--config", config, "--listen", "127.0.0.1:0"],
    cwd,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  // Drain stdout in the background once the line is found, so the child never blocks on it.
  let drained: Promise<void> | undefined;
  const dispose = async () => {
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
    await child.status;
    await reader.cancel().catch(() => {});
    await drained;
    await stderr.catch(() => "");
  };
  let buf = "";
  const end = Date.now() + timeoutMs;
  try {
    for (;;) {
      const m = /listening on (http:\/\/[^\s]+)/.exec(buf);
      if (m) {
        drained = (async () => {
          try {
            for (;;) if ((await reader.read()).done) return;
          } catch { /* cancelled */ }
        })();
        return { base: m[1], child, stderr, dispose };
      }
      const left = end - Date.now();
      if (left <= 0) throw new Error(`skeid serve did not listen within ${timeoutMs} ms: ${buf}`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<{ done: true; value: undefined }>((r) => {
        timer = setTimeout(() => r({ done: true, value: undefined }), left);
      });
      const { value, done } = await Promise.race([reader.read(), timeout]);
      clearTimeout(timer);
      if (done) {
        if (Date.now() >= end) continue;
        throw new Error(`skeid serve exited before listening: ${buf}`);
      }
      buf += value;
    }
  } catch (err) {
    await dispose();
    const text = await stderr.catch(() => "");
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nstderr: ${text}`);
  }
}
