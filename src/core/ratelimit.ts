/**
 * The passive probe: rate-limit headers and Retry-After off every upstream response.
 * SKELETON — owner: core-capacity.
 * @module
 */
import type { CapacityReadingInput } from "./types.ts";

/** The 15 response headers worth reading (lowercase), so the request path pulls only these. */
export const CAPACITY_HEADER_NAMES: readonly string[] = [];

/**
 * The reading a response's headers imply (source `ratelimit`), or undefined when they say
 * nothing useful. The closest-to-exhausted quota decides, compared as a fraction.
 */
export function readingFromHeaders(
  _headers: Headers | Record<string, string>,
  _status?: number,
): CapacityReadingInput | undefined {
  throw new Error("TODO");
}
