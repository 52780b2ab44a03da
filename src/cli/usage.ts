/**
 * `skeid usage` (placeholder until its issue lands).
 *
 * @module
 */

/** Runs the subcommand; answers the exit code. */
export function run(_args: string[]): Promise<number> {
  console.error("skeid usage: not built yet");
  return Promise.resolve(1);
}
