/**
 * Running a `skeid` subcommand in process with its output captured: every subcommand that
 * takes an io (`check`, `usage`) writes through `out`/`err` and reads variables through `env`.
 *
 * @module
 */
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
