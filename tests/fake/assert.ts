/**
 * The few assertions the fake model tests use, on top of `node:assert` (built into Deno; the
 * `@std/assert` package lives on JSR, which this project does not reach).
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

/** Fails unless `fn()` rejects. */
export async function assertRejects(fn: () => Promise<unknown>, msg?: string): Promise<void> {
  await nodeAssert.rejects(fn, msg);
}
