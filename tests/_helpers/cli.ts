/**
 * Running a `skeid` subcommand in process with its output captured: every subcommand that
 * takes an io (`check`, `usage`) writes through `out`/`err` and reads variables through `env`;
 * and `skeid serve --workers N` as a child process.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import type { CliIo } from "../../src/cli/io.ts";

/** What a captured run answered and printed. */
export interface CliRun {
  code: number;
  /** Each `out` call, in order. */
  out: string[];
  /** Each `err` call, in order. */
  err: string[];
}

/**
 * Runs `run(args, io)` with output captured and an environment of exactly `vars` (nothing
 * from the real one).
 */
export async function runCli(
  run: (args: string[], io: CliIo) => Promise<number>,
  args: string[],
  vars: Record<string, string> = {},
): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await run(args, {
    out: (text) => out.push(text),
    err: (text) => err.push(text),
    env: (name) => vars[name],
  });
  return { code, out, err };
}

/** Ends a child process the test started (SIGKILL unless it already exited) and waits for it. */
export async function endChild(proc: Deno.ChildProcess): Promise<void> {
  try {
    proc.kill("SIGKILL");
  } catch {
    // exited
  }
  await proc.status;
}

/** A `skeid serve --workers N` the test started, once its banner named the workers. */
export interface ServedGroup {
  proc: Deno.ChildProcess;
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** What it printed up to the workers line. */
  banner: string;
  /** Ends the process and its output stream. */
  stop(): Promise<void>;
}

const LAUNCHER = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

/**
 * Starts `skeid serve --config <config> --listen 127.0.0.1:0 --workers <workers>` and reads its
 * output (bounded: 30 s) until the `--workers N` line, so the group listens when this returns.
 */
export async function serveWorkers(config: string, workers = 2): Promise<ServedGroup> {
  const proc = new Deno.Command(LAUNCHER, {
    args: ["serve", "--config", config, "--listen", "127.0.0.1:0", "--workers", String(workers)],
    stdout: "piped",
    stderr: "null",
    env: { SKEID_LOG_LEVEL: "error" },
  }).spawn();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stop = async () => {
    await endChild(proc);
    await reader.cancel().catch(() => {});
  };
  const line = `--workers ${workers}`;
  let banner = "";
  const end = Date.now() + 30_000;
  while (!banner.includes(line) && Date.now() < end) {
    const { value, done } = await reader.read();
    if (done) break;
    banner += value;
  }
  const base = /http:\/\/127\.0\.0\.1:\d+/.exec(banner)?.[0];
  if (!banner.includes(line) || base === undefined) {
    await stop();
    throw new Error(`serve --workers ${workers} did not start: ${banner}`);
  }
  return { proc, base, banner, stop };
}
