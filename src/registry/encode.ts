/**
 * The snapshot's wire form: canonical JSON (object keys sorted, no whitespace) as UTF-8 bytes,
 * so the same snapshot always signs to the same signature.
 *
 * @module
 */
import { canonicalJson } from "../config/canonical.ts";

const encoder = new TextEncoder();

/** Canonical JSON bytes of a snapshot (sorted keys, UTF-8). */
export function encode(snapshot: unknown): Uint8Array<ArrayBuffer> {
  return encoder.encode(canonicalJson(snapshot));
}
