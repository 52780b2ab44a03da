/**
 * The assertions the config tests use, on top of `node:assert` (built into Deno; `@std/assert`
 * lives on JSR, which this project does not reach).
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

/** Fails unless `actual` deep-equals `expected`. */
export function assertEquals<T>(actual: unknown, expected: T, msg?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, msg);
}

/** Fails unless `cond` is truthy. */
export function assert(cond: unknown, msg?: string): asserts cond {
  nodeAssert.ok(cond, msg);
}

/** Fails unless `text` matches `re`. */
export function assertMatch(text: string, re: RegExp, msg?: string): void {
  nodeAssert.match(text, re, msg);
}

/** Fails unless `fn()` throws an instance of `type`; answers what it threw. */
export function assertThrows<E extends Error>(
  fn: () => unknown,
  // deno-lint-ignore no-explicit-any
  type: new (...args: any[]) => E,
): E {
  try {
    fn();
  } catch (e) {
    nodeAssert.ok(e instanceof type, `expected ${type.name}, got ${e}`);
    return e as E;
  }
  throw new nodeAssert.AssertionError({ message: `expected ${type.name} to be thrown` });
}

/** Fails unless `fn()` rejects with an instance of `type`; answers the error. */
export async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  type: new (...args: any[]) => E,
): Promise<E> {
  try {
    await fn();
  } catch (e) {
    nodeAssert.ok(e instanceof type, `expected ${type.name}, got ${e}`);
    return e as E;
  }
  throw new nodeAssert.AssertionError({ message: `expected ${type.name} to be rejected` });
}
