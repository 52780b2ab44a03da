/**
 * The cap on request-body bytes buffered across all requests at once. Each JSON body is held
 * whole (the client's bytes plus the parsed form) from its intake until its answer is committed,
 * so many large bodies at once would grow the process without bound; past the cap a body is
 * refused (503 with `Retry-After`) before it is read.
 *
 * @module
 */

/** Default of `SKEID_MAX_BUFFERED_BYTES`: 256 MiB of request bodies held at once. */
export const DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024;

/** `SKEID_MAX_BUFFERED_BYTES`: a whole number of bytes > 0, else the default. */
export function maxBufferedBytes(raw: string | undefined): number {
  const n = raw === undefined || raw.trim() === "" ? NaN : Number(raw.trim());
  return Number.isSafeInteger(n) && n > 0 ? n : DEFAULT_MAX_BUFFERED_BYTES;
}

/** Bytes reserved by the bodies being buffered, at most `limit` in all. */
export class BufferBudget {
  #used = 0;

  /** `limit`: bytes all buffered bodies may hold at once. */
  constructor(readonly limit: number) {}

  /** Bytes reserved now. */
  get used(): number {
    return this.#used;
  }

  /** Reserves `n` bytes; false (nothing reserved) when that would pass the limit. */
  reserve(n: number): boolean {
    if (this.#used + n > this.limit) return false;
    this.#used += n;
    return true;
  }

  /** Gives back `n` bytes reserved before. */
  release(n: number): void {
    this.#used = Math.max(0, this.#used - n);
  }
}
