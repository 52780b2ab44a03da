/**
 * Joining the pieces of a body read chunk by chunk into one buffer.
 *
 * @module
 */

/** The pieces `parts` (of `total` bytes together, counted while reading) as one buffer. */
export function concatBytes(parts: readonly Uint8Array[], total: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
