/**
 * Waiting in tests for a condition that nothing announces (a counter inside a server, a file
 * another task writes): re-checked on a short tick, bounded in time and in checks.
 *
 * @module
 */

/**
 * Waits until `cond()` holds, re-checking every `everyMs`; fails after `timeoutMs` naming
 * `what` (a function is asked at the time of failure, so it can report the last value seen).
 */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 3000,
  everyMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // Bounded by the deadline, and by a count in case the clock stands still.
  const checks = Math.ceil(timeoutMs / Math.max(1, everyMs)) * 4 + 1;
  for (let i = 0; i < checks; i++) {
    if (await cond()) return;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  if (await cond()) return;
  const name = typeof what === "string" ? what : what();
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${name}`);
}
