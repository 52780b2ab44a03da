/**
 * The assertions the tests share, on top of `node:assert` (built into Deno; `@std/assert` lives
 * on JSR, which this project does not reach). Names and argument order follow `@std/assert`.
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

/** A class of errors, for `instanceof` checks (any constructor signature). */
export type ErrorClass<E extends Error> = abstract new (...args: never[]) => E;

/** Fails unless `cond` is truthy. */
export function assert(cond: unknown, msg?: string): asserts cond {
  nodeAssert.ok(cond, msg);
}

/** Fails unless `actual` deep-equals `expected` (strict: types, prototypes and all). */
export function assertEquals<T>(actual: unknown, expected: T, msg?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, msg);
}

/** Fails unless `text` matches `re`. */
export function assertMatch(text: string, re: RegExp, msg?: string): void {
  nodeAssert.match(text, re, msg);
}

/** Fails unless `text` contains `part`. */
export function assertStringIncludes(text: string, part: string, msg?: string): void {
  nodeAssert.ok(
    text.includes(part),
    msg ?? `expected ${JSON.stringify(text)} to contain ${JSON.stringify(part)}`,
  );
}

/** Fails if `text` contains `part`. */
export function assertNotIncludes(text: string, part: string, msg?: string): void {
  nodeAssert.ok(
    !text.includes(part),
    msg ?? `expected ${JSON.stringify(text)} not to contain ${JSON.stringify(part)}`,
  );
}

/** What was thrown, as an Error (a thrown non-Error is wrapped in one). */
function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

/** Fails unless `thrown` is an instance of `type` (when given); answers it. */
function checkThrown<E extends Error>(thrown: unknown, type: ErrorClass<E> | undefined): E {
  if (type !== undefined) {
    nodeAssert.ok(thrown instanceof type, `expected ${type.name}, got ${thrown}`);
    return thrown;
  }
  return asError(thrown) as E;
}

/** Calls `fn`, which must throw (an instance of `type`, when given); answers the error. */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  type?: ErrorClass<E>,
  msg?: string,
): E {
  try {
    fn();
  } catch (thrown) {
    return checkThrown(thrown, type);
  }
  throw new nodeAssert.AssertionError({
    message: msg ?? `expected ${type?.name ?? "an error"} to be thrown`,
  });
}

/** Awaits `fn`, which must reject (with an instance of `type`, when given); answers the error. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  type?: ErrorClass<E>,
  msg?: string,
): Promise<E> {
  try {
    await fn();
  } catch (thrown) {
    return checkThrown(thrown, type);
  }
  throw new nodeAssert.AssertionError({
    message: msg ?? `expected ${type?.name ?? "an error"} to be rejected`,
  });
}

/** Fails if `actual` deep-equals `expected` (strict, as `assertEquals` compares). */
export function assertNotEquals(actual: unknown, expected: unknown, msg?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, msg);
}
