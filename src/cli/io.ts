/**
 * Where a subcommand writes and what it reads from the environment: the console and the real
 * environment when run, captured lines and a given environment in tests.
 *
 * @module
 */

/** A subcommand's output and environment. */
export interface CliIo {
  /** Writes one text (a line or a block) to standard output. */
  out(text: string): void;
  /** Writes one text to standard error. */
  err(text: string): void;
  /** Reads an environment variable. */
  env(name: string): string | undefined;
}

/** The console and this process's environment. */
export const consoleIo: CliIo = {
  out: (text) => console.log(text),
  err: (text) => console.error(text),
  env: (name) => Deno.env.get(name),
};
