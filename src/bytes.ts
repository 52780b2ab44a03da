/**
 * Byte buffers: joining the pieces of a body read chunk by chunk into one, and writing one whole
 * to a socket or file that may take part of it per write.
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

/** Something a write may take part of: a socket (`Deno.Conn`) or a file (`Deno.FsFile`). */
export interface ByteSink {
  write(p: Uint8Array): Promise<number>;
}

/** Writes all of `bytes` to `sink`, as many writes as it takes. */
export async function writeAll(sink: ByteSink, bytes: Uint8Array): Promise<void> {
  if (bytes.length === 0) return;
  // The first write takes the buffer itself: most take it whole, and no view is made.
  let off = await sink.write(bytes);
  while (off < bytes.length) off += await sink.write(bytes.subarray(off));
}
