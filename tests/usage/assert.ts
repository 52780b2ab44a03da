/**
 * Assertions for the usage tests, on the built-in `node:assert` (JSR's std is not reachable).
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

/** Fails unless `value` is truthy. */
export function assert(value: unknown, message?: string): asserts value {
  nodeAssert.ok(value, message);
}

/** Deep strict equality. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Fails unless `text` matches `re`. */
export function assertMatch(text: string, re: RegExp, message?: string): void {
  nodeAssert.match(text, re, message);
}

/** Fails unless `text` contains `part`. */
export function assertStringIncludes(text: string, part: string, message?: string): void {
  nodeAssert.ok(
    text.includes(part),
    message ?? `expected ${JSON.stringify(text)} to contain ${JSON.stringify(part)}`,
  );
}

/** Fails if `text` contains `part`. */
export function assertNotIncludes(text: string, part: string, message?: string): void {
  nodeAssert.ok(
    !text.includes(part),
    message ?? `expected ${JSON.stringify(text)} not to contain ${JSON.stringify(part)}`,
  );
}

/** Awaits `fn`, which must reject; answers the error. */
export async function assertRejects(fn: () => Promise<unknown>, message?: string): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  throw new Error(message ?? "expected a rejection");
}

/** Calls `fn`, which must throw; answers the error. */
export function assertThrows(fn: () => unknown, message?: string): Error {
  try {
    fn();
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  throw new Error(message ?? "expected a throw");
}
