/**
 * Canonical JSON (object keys sorted, no whitespace) and a digest of it. Change detection of a
 * config and its sections compares digests, so a key order or a comment edit changes nothing.
 *
 * @module
 */
import { createHash } from "node:crypto";

/** JSON text of `value` with every object's keys sorted; `undefined` members are left out. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(obj).sort()) {
      if (obj[key] !== undefined) out[key] = sortKeys(obj[key]);
    }
    return out;
  }
  return value;
}

/** SHA-256 hex of the canonical JSON of `value` (synchronous: config load is not the hot path). */
export function digestOf(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}
