/**
 * One `model` upstream: a client body with the `model` key twice is parsed with the last one
 * (which Skeid routes, bills and sends), but its raw bytes carry both, and an upstream may read
 * the first. Such a body is never forwarded as sent: the exchange re-serializes the parsed body
 * instead, so the upstream sees exactly one `model`, the served one.
 *
 * @module
 */

/** `"model"`: the key's bytes after the opening quote. */
const KEY = [0x6d, 0x6f, 0x64, 0x65, 0x6c, 0x22]; // m o d e l "
const QUOTE = 0x22;

/**
 * The client's bytes when they may be forwarded as sent (`"model"` occurs at most once), else
 * undefined (the face serializes the parsed body). The scan is a byte search, no decoding; a
 * `"model"` key nested deeper (a tool's schema) only costs a re-serialization.
 */
export function forwardableBody(
  raw: Uint8Array<ArrayBuffer> | undefined,
): Uint8Array<ArrayBuffer> | undefined {
  if (raw === undefined) return undefined;
  let seen = 0;
  let at = raw.indexOf(KEY[0], 1);
  while (at > 0) {
    if (raw[at - 1] === QUOTE && matchesAt(raw, at) && ++seen > 1) return undefined;
    at = raw.indexOf(KEY[0], at + 1);
  }
  return raw;
}

function matchesAt(raw: Uint8Array, at: number): boolean {
  if (at + KEY.length > raw.length) return false;
  for (let i = 1; i < KEY.length; i++) if (raw[at + i] !== KEY[i]) return false;
  return true;
}
