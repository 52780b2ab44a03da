/**
 * How an issued key's secret is stored: HMAC-SHA-256 keyed with the pepper (an environment
 * variable, never in the database) over a per-key random salt and the secret. A stolen database
 * alone does not let anyone test guesses; the salt makes equal secrets hash apart. Compared in
 * constant time.
 *
 * @module
 */
import { timingSafeEqual } from "../admin/auth.ts";
import { randomHex } from "./key_format.ts";

const encoder = new TextEncoder();

/** The pepper as an HMAC key, imported once. */
export class Pepper {
  readonly #key: Promise<CryptoKey>;

  /** `secret`: the pepper variable's value (non-empty). */
  constructor(secret: string) {
    this.#key = crypto.subtle.importKey(
      "raw",
      encoder.encode(secret),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
  }

  /** The hex HMAC of salt + secret. */
  async hash(salt: string, secret: string): Promise<string> {
    const mac = await crypto.subtle.sign("HMAC", await this.#key, encoder.encode(salt + secret));
    let hex = "";
    for (const b of new Uint8Array(mac)) hex += b.toString(16).padStart(2, "0");
    return hex;
  }

  /** Whether `secret` hashes to `hash` under `salt`; the compare takes the same time anywhere. */
  async matches(salt: string, secret: string, hash: string): Promise<boolean> {
    const got = await this.hash(salt, secret);
    return timingSafeEqual(encoder.encode(got), encoder.encode(hash.padEnd(got.length, "0")));
  }
}

/** A new salt (128 random bits, hex). */
export function newSalt(): string {
  return randomHex(16);
}
