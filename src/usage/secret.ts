/**
 * A password held so that it cannot be printed by accident: JSON, string conversion and
 * `Deno.inspect` all show `***`; only `reveal()` gives the value. Plus the redaction applied to
 * every error message a store hands out.
 *
 * @module
 */
import { errorMessage as plainErrorMessage } from "../error_message.ts";

const MASK = "***";

/** A secret string (a store password) that prints as `***`. */
export class SecretValue {
  readonly #value: string;

  /** Wraps `value`. */
  constructor(value: string) {
    this.#value = value;
  }

  /** The secret itself; pass it only to the library that needs it. */
  reveal(): string {
    return this.#value;
  }

  /** `***` — so JSON.stringify of a config never carries the secret. */
  toJSON(): string {
    return MASK;
  }

  /** `***`. */
  toString(): string {
    return MASK;
  }

  /** `***` in `console.log` / `Deno.inspect`. */
  [Symbol.for("Deno.customInspect")](): string {
    return MASK;
  }
}

/**
 * Removes secrets from a message: every literal occurrence of one of `secrets`, every
 * `password=…` pair and every password in a URL's user-info (`postgres://u:p@h` → `u:***@h`).
 */
export function redactSecrets(message: string, secrets: readonly string[] = []): string {
  let out = message;
  for (const s of secrets) {
    if (s.length > 0) out = out.split(s).join(MASK);
  }
  return out
    .replace(/(password\s*=\s*)('[^']*'|"[^"]*"|[^\s;&'"]+)/gi, `$1${MASK}`)
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/\s]*@/gi, `$1${MASK}@`);
}

/** The message of a thrown value, redacted (a driver's error may quote a DSN). */
export function errorMessage(err: unknown, secrets: readonly string[] = []): string {
  return redactSecrets(plainErrorMessage(err), secrets);
}
