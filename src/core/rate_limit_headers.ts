/**
 * The passive probe: rate-limit headers and Retry-After off every upstream response (ADR 0019).
 * Costs no extra request: commercial providers put their quota state on every answer Skeid
 * already receives. Providers meter requests and tokens separately; the quota closest to
 * exhausted decides, compared as a fraction since the two are not the same unit.
 *
 * @module
 */
import { BUILTIN_ROUTING } from "./env.ts";
import type { CapacityReadingInput } from "./types.ts";

/** Header names of one provider quota, most specific first. */
interface QuotaHeaders {
  readonly quota: "requests" | "tokens";
  readonly remaining: readonly string[];
  readonly limit: readonly string[];
}

const QUOTAS: readonly QuotaHeaders[] = [
  {
    quota: "requests",
    remaining: [
      "x-ratelimit-remaining-requests",
      "anthropic-ratelimit-requests-remaining",
      "x-ratelimit-remaining",
      "ratelimit-remaining",
    ],
    limit: [
      "x-ratelimit-limit-requests",
      "anthropic-ratelimit-requests-limit",
      "x-ratelimit-limit",
      "ratelimit-limit",
    ],
  },
  {
    quota: "tokens",
    remaining: [
      "x-ratelimit-remaining-tokens",
      "anthropic-ratelimit-tokens-remaining",
      "anthropic-ratelimit-input-tokens-remaining",
    ],
    limit: [
      "x-ratelimit-limit-tokens",
      "anthropic-ratelimit-tokens-limit",
      "anthropic-ratelimit-input-tokens-limit",
    ],
  },
];

/** The 15 response headers worth reading (lowercase), so the request path pulls only these. */
export const CAPACITY_HEADER_NAMES: readonly string[] = Object.freeze([
  ...QUOTAS.flatMap((q) => [...q.remaining, ...q.limit]),
  "retry-after",
]);

/** Backoff after a 429 that carries no usable Retry-After, ms. */
const DEFAULT_429_BACKOFF_MS = 1000;

/** What bounds a Retry-After backoff: the clock an HTTP-date is read against, and the cap. */
export interface RetryAfterBounds {
  /** Now, epoch ms. */
  readonly now: number;
  /** The longest backoff, ms (`routing.max_retry_after_ms`). */
  readonly maxMs: number;
}

/** Case-insensitive header lookup over either form the callers hold. */
function headerGetter(headers: Headers | Record<string, string>): (name: string) => string | null {
  if (headers instanceof Headers) return (name) => headers.get(name);
  const lower = new Map<string, string>();
  for (const [k, v] of Object.entries(headers)) {
    const key = k.toLowerCase();
    // The first spelling seen wins, as with a duplicate header.
    if (!lower.has(key) && typeof v === "string") lower.set(key, v);
  }
  return (name) => lower.get(name) ?? null;
}

/** Leading integer digits after optional whitespace (`" 40 tokens"` → 40); else undefined. */
function leadingInt(value: string | null): number | undefined {
  if (value === null) return undefined;
  const m = /^\s*(\d+)/.exec(value);
  return m ? Number(m[1]) : undefined;
}

/** The value of the first of `names` that is present. */
function firstPresent(
  get: (name: string) => string | null,
  names: readonly string[],
): string | null {
  for (const name of names) {
    const v = get(name);
    if (v !== null) return v;
  }
  return null;
}

/** An HTTP-date in IMF-fixdate or RFC 850 form (RFC 9110 §5.6.7): always GMT. */
const GMT_DATE = /^[A-Za-z]{3,9}, [0-9A-Za-z -]+ \d{2}:\d{2}:\d{2} GMT$/;
/** An HTTP-date in asctime form, which names no zone (it is GMT too). */
const ASCTIME_DATE = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * Retry-After → ms from `now`: non-negative decimal seconds, or an HTTP-date (RFC 9110 §10.2.3;
 * one in the past is 0). Undefined when it is neither, or a date comes without a clock.
 */
function retryAfterMs(value: string | null, now: number | undefined): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  const seconds = /^(\d+(?:\.\d+)?)$/.exec(v);
  if (seconds) return Number(seconds[1]) * 1000;
  if (now === undefined) return undefined;
  const at = GMT_DATE.test(v) ? Date.parse(v) : ASCTIME_DATE.test(v) ? Date.parse(`${v} GMT`) : NaN;
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/** The statuses whose Retry-After backs a node off: "too many requests" and "unavailable". */
const BACKOFF_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/**
 * The reading a response's headers imply (source `ratelimit`, no `interval_ms`: it is a passive
 * observation), or undefined when they say nothing useful. The closest-to-exhausted quota
 * decides (ties → requests). The Retry-After of a 429 or a 503 (or a bare 429) becomes a
 * backoff, at most `bounds.maxMs`; on any other answer it means nothing (RFC 9110 §10.2.3 gives
 * it to those and to redirects). `healthy` is never touched — rate-limited is busy, not broken.
 * Without `bounds`, an HTTP-date is not read and the cap is the built-in one.
 */
export function readingFromHeaders(
  headers: Headers | Record<string, string>,
  status?: number,
  bounds?: RetryAfterBounds,
): CapacityReadingInput | undefined {
  const get = headerGetter(headers);
  let best: { quota: string; used: number; limit: number } | undefined;
  for (const q of QUOTAS) {
    const remaining = leadingInt(firstPresent(get, q.remaining));
    if (remaining === undefined) continue;
    const limit = leadingInt(firstPresent(get, q.limit)) ?? remaining + 1;
    if (limit <= 0) continue;
    const used = Math.min(limit, Math.max(0, limit - remaining));
    // Strictly larger fraction wins, so a tie keeps the earlier quota (requests).
    if (!best || used / limit > best.used / best.limit) best = { quota: q.quota, used, limit };
  }

  let backoffMs: number | undefined;
  if (status !== undefined && BACKOFF_STATUSES.has(status)) {
    const ms = retryAfterMs(get("retry-after"), bounds?.now);
    if (ms !== undefined && ms > 0) backoffMs = ms;
    else if (status === 429) backoffMs = DEFAULT_429_BACKOFF_MS;
    const maxMs = bounds?.maxMs ?? BUILTIN_ROUTING.max_retry_after_ms;
    if (backoffMs !== undefined) backoffMs = maxMs > 0 ? Math.min(backoffMs, maxMs) : undefined;
  }

  if (!best && backoffMs === undefined) return undefined;
  const reading: CapacityReadingInput = {
    source: "ratelimit",
    used: best?.used ?? null,
    limit: best?.limit ?? null,
  };
  if (best) reading.quota = best.quota;
  if (backoffMs !== undefined) reading.retry_after_ms = backoffMs;
  return reading;
}
