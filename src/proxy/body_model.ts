/**
 * One `model` upstream: a client body with the `model` key twice is parsed with the last one
 * (which Skeid routes, bills and sends), but its raw bytes carry both, and an upstream may read
 * the first. Such a body is never forwarded as sent: the exchange re-serializes the parsed body
 * instead, so the upstream sees exactly one `model`, the served one.
 *
 * @module
 */

import type { JsonScan } from "../json_scan.ts";

/**
 * The client's bytes when they may be forwarded as sent (one `"model"` key at most, as the scan
 * before parsing counted them), else undefined (the face serializes the parsed body). A `"model"`
 * key nested deeper (a tool's schema) only costs a re-serialization.
 */
export function forwardableBody(
  raw: Uint8Array<ArrayBuffer> | undefined,
  scan: JsonScan,
): Uint8Array<ArrayBuffer> | undefined {
  return raw !== undefined && scan.modelKeys <= 1 ? raw : undefined;
}
