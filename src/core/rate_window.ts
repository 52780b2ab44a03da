/**
 * Rate limits per customer key (ADR 0023): requests and tokens per rolling minute (`limits.rpm`,
 * `limits.tpm`) and concurrent requests (`limits.max_inflight`).
 *
 * The minute is sixty one-second buckets in a ring per key, so a check costs O(1) amortized
 * whatever the request rate (a list of every request would grow with `rpm`); a request counts
 * from its second until that second is sixty seconds old, i.e. for 59 to 60 s. Tokens are
 * counted at admission with the request's estimate (input from the body, output from its limit)
 * and replaced by the real count when its usage event is settled, so a burst of large
 * `max_tokens` requests cannot all pass before the first one finishes.
 *
 * Counters are keyed by customer key id and the numbers are read from the key's policy on every
 * check, so a reload changes the limits of the next request and keeps the counts.
 *
 * @module
 */
import type { KeyLimits } from "./key_policy.ts";

const SLOTS = 60;
const SECOND_MS = 1000;

/** The `x-ratelimit-*` headers of a limited customer key (only those of limits it has). */
export type RateHeaders = Readonly<Record<string, string>>;

const NO_HEADERS: RateHeaders = Object.freeze({});

/** Why a request was refused. */
export type RateRefusal = "rpm" | "tpm" | "max_inflight";

/** An admitted request's hold on its key's windows; give it back to `settle`/`release`/`cancel`. */
export interface RateTicket {
  /** The customer key id. */
  readonly keyId: string;
  /** The second (epoch s) whose bucket counted the request. */
  readonly second: number;
  /** Tokens the bucket holds for it: the estimate, then the settled count. */
  tokens: number;
  /** Whether it still holds an inflight place (until `release` or `cancel`). */
  inflight: boolean;
  /** Whether it still counts in its bucket (until `cancel`). */
  counted: boolean;
}

/** The answer of `check`. */
export type RateDecision =
  | {
    /** Admitted: the request is counted. */
    readonly allowed: true;
    /** null when the key has no limits (nothing to settle or release). */
    readonly ticket: RateTicket | null;
    /** Headers for the answer (empty when the key has no rpm/tpm). */
    readonly headers: RateHeaders;
  }
  | {
    /** Refused (429 `key_rate_limited`). */
    readonly allowed: false;
    /** Which limit refused it (the first that does, in the order rpm, tpm, max_inflight). */
    readonly reason: RateRefusal;
    /** Seconds until a request like this one fits (the `Retry-After` value), at least 1. */
    readonly retryAfterS: number;
    /** False when no wait helps: the request's own tokens exceed `tpm`. */
    readonly canFit: boolean;
    /** Headers for the refusal. */
    readonly headers: RateHeaders;
  };

/** A customer key's current windows (admin view). */
export interface RateWindowState {
  /** Requests counted in the rolling minute. */
  requests: number;
  /** Tokens counted in the rolling minute. */
  tokens: number;
  /** Requests admitted and not yet released. */
  inflight: number;
}

class KeyWindow {
  readonly requests = new Int32Array(SLOTS);
  readonly tokens = new Float64Array(SLOTS);
  /** The second each slot holds; a slot whose second left the window is empty. */
  readonly seconds = new Float64Array(SLOTS).fill(-Infinity);
  totalRequests = 0;
  totalTokens = 0;
  inflight = 0;
  /** The latest second advanced to. */
  current = -Infinity;

  /** Empties the buckets that left the window; at most 60 per call, O(1) amortized. */
  advance(second: number): void {
    if (second <= this.current) return;
    const from = Math.max(this.current + 1, second - SLOTS + 1);
    for (let s = from; s <= second; s++) this.#clear(slotOf(s));
    this.current = second;
  }

  #clear(slot: number): void {
    this.totalRequests -= this.requests[slot];
    this.totalTokens -= this.tokens[slot];
    this.requests[slot] = 0;
    this.tokens[slot] = 0;
    this.seconds[slot] = -Infinity;
  }

  /** Whether a ticket's bucket still counts. */
  holds(second: number): boolean {
    return second > this.current - SLOTS && this.seconds[slotOf(second)] === second;
  }

  add(second: number, requests: number, tokens: number): void {
    const slot = slotOf(second);
    this.seconds[slot] = second;
    this.requests[slot] += requests;
    this.tokens[slot] = Math.max(0, this.tokens[slot] + tokens);
    this.totalRequests += requests;
    this.totalTokens = Math.max(0, this.totalTokens + tokens);
  }

  /**
   * The earliest moment (epoch ms) at which the oldest buckets have left the window so that
   * `needRequests` and `needTokens` more fit; Infinity when they never do.
   */
  fitsAt(needRequests: number, needTokens: number): number {
    let requests = this.totalRequests;
    let tokens = this.totalTokens;
    if (requests <= needRequests && tokens <= needTokens) return -Infinity;
    const first = this.current - SLOTS + 1;
    // The slot is stepped, not recomputed: `%` on a double second costs a libm call each time.
    for (let s = first, slot = slotOf(first); s <= this.current; s++, slot = nextSlot(slot)) {
      if (this.seconds[slot] !== s) continue;
      requests -= this.requests[slot];
      tokens -= this.tokens[slot];
      if (requests <= needRequests && tokens <= needTokens) return (s + SLOTS) * SECOND_MS;
    }
    return Infinity;
  }

  /**
   * When the oldest bucket counting requests, and the oldest counting tokens, leave the window
   * (epoch ms; -1 when none counts): one scan for both, into `out` (no allocation per answer).
   */
  oldestLeaveAt(out: Float64Array): void {
    out[0] = -1;
    out[1] = -1;
    const first = this.current - SLOTS + 1;
    for (let s = first, slot = slotOf(first); s <= this.current; s++, slot = nextSlot(slot)) {
      if (this.seconds[slot] !== s) continue;
      const at = (s + SLOTS) * SECOND_MS;
      if (out[0] < 0 && this.requests[slot] > 0) out[0] = at;
      if (out[1] < 0 && this.tokens[slot] > 0) out[1] = at;
      if (out[0] >= 0 && out[1] >= 0) return;
    }
  }
}

function slotOf(second: number): number {
  return ((second % SLOTS) + SLOTS) % SLOTS;
}

function nextSlot(slot: number): number {
  return slot === SLOTS - 1 ? 0 : slot + 1;
}

/** Go-style duration, as OpenAI writes `x-ratelimit-reset-*`: `20ms`, `29.5s`, `1m0s`. */
export function formatResetDuration(ms: number): string {
  const v = Math.max(0, Math.ceil(ms));
  if (v < SECOND_MS) return `${v}ms`;
  // An integer of ms over 1000 prints with at most 3 decimals (no toFixed: it is on every answer).
  if (v < 60 * SECOND_MS) return `${v / SECOND_MS}s`;
  const minutes = Math.floor(v / (60 * SECOND_MS));
  return `${minutes}m${(v - minutes * 60 * SECOND_MS) / SECOND_MS}s`;
}

/** Rolling-minute request and token windows and inflight counts, per customer key id. */
export class RateWindows {
  readonly #limitsOf: (keyId: string) => KeyLimits | null;
  readonly #keys = new Map<string, KeyWindow>();

  /** `limitsOf` gives a key's current limits (e.g. `id => skeid.keyPolicy(id).limits`). */
  constructor(limitsOf: (keyId: string) => KeyLimits | null) {
    this.#limitsOf = limitsOf;
  }

  /**
   * Admits and counts a request of `keyId` at `now` (epoch ms) with `estimateTokens` (input
   * estimate + output limit), or refuses it with the seconds until one like it fits. A key
   * without limits is admitted without any state.
   */
  check(keyId: string, now: number, estimateTokens: number): RateDecision {
    const limits = this.#limitsOf(keyId);
    if (!limits || (limits.rpm === null && limits.tpm === null && limits.max_inflight === null)) {
      return { allowed: true, ticket: null, headers: NO_HEADERS };
    }
    const second = Math.floor(now / SECOND_MS);
    const w = this.#window(keyId);
    w.advance(second);
    const tokens = Math.max(0, estimateTokens);
    const rpm = limits.rpm ?? Infinity;
    const tpm = limits.tpm ?? Infinity;

    let reason: RateRefusal | undefined;
    if (w.totalRequests + 1 > rpm) reason = "rpm";
    else if (w.totalTokens + tokens > tpm) reason = "tpm";
    else if (limits.max_inflight !== null && w.inflight >= limits.max_inflight) {
      reason = "max_inflight";
    }
    if (reason !== undefined) {
      const canFit = tokens <= tpm;
      let retryMs: number;
      if (reason === "max_inflight") retryMs = SECOND_MS; // ends when a request ends: unknowable
      else if (!canFit) retryMs = SLOTS * SECOND_MS;
      else retryMs = w.fitsAt(rpm - 1, tpm - tokens) - now;
      const retryAfterS = Math.max(1, Math.ceil(retryMs / SECOND_MS));
      return { allowed: false, reason, retryAfterS, canFit, headers: headersOf(w, limits, now) };
    }
    w.add(second, 1, tokens);
    w.inflight++;
    const ticket: RateTicket = { keyId, second, tokens, inflight: true, counted: true };
    return { allowed: true, ticket, headers: headersOf(w, limits, now) };
  }

  /** Replaces the ticket's token estimate by the real count (when its usage event is recorded). */
  settle(ticket: RateTicket | null, actualTokens: number, now: number): void {
    if (!ticket || !ticket.counted) return;
    const w = this.#keys.get(ticket.keyId);
    const actual = Math.max(0, actualTokens);
    if (w) {
      w.advance(Math.floor(now / SECOND_MS));
      if (w.holds(ticket.second)) w.add(ticket.second, 0, actual - ticket.tokens);
    }
    ticket.tokens = actual;
  }

  /** Gives back the ticket's inflight place (the end of the upstream call). Idempotent. */
  release(ticket: RateTicket | null): void {
    if (!ticket || !ticket.inflight) return;
    ticket.inflight = false;
    const w = this.#keys.get(ticket.keyId);
    if (w) w.inflight = Math.max(0, w.inflight - 1);
  }

  /**
   * Undoes an admission refused later before anything was forwarded (budget, node admission):
   * the request and its tokens no longer count, and its inflight place is given back.
   */
  cancel(ticket: RateTicket | null, now: number): void {
    if (!ticket) return;
    this.release(ticket);
    if (!ticket.counted) return;
    ticket.counted = false;
    const w = this.#keys.get(ticket.keyId);
    if (!w) return;
    w.advance(Math.floor(now / SECOND_MS));
    if (w.holds(ticket.second)) w.add(ticket.second, -1, -ticket.tokens);
  }

  /** The `x-ratelimit-*` headers a successful answer of `keyId` carries now. */
  headers(keyId: string, now: number): RateHeaders {
    const limits = this.#limitsOf(keyId);
    if (!limits || (limits.rpm === null && limits.tpm === null)) return NO_HEADERS;
    const w = this.#window(keyId);
    w.advance(Math.floor(now / SECOND_MS));
    return headersOf(w, limits, now);
  }

  /** A key's current windows (admin view); zeros for a key never seen. */
  state(keyId: string, now: number): RateWindowState {
    const w = this.#keys.get(keyId);
    if (!w) return { requests: 0, tokens: 0, inflight: 0 };
    w.advance(Math.floor(now / SECOND_MS));
    return { requests: w.totalRequests, tokens: w.totalTokens, inflight: w.inflight };
  }

  /** Forgets keys with empty windows and nothing inflight (call now and then; O(keys)). */
  sweep(now: number): number {
    const second = Math.floor(now / SECOND_MS);
    let removed = 0;
    for (const [keyId, w] of this.#keys) {
      w.advance(second);
      if (w.totalRequests === 0 && w.inflight === 0) {
        this.#keys.delete(keyId);
        removed++;
      }
    }
    return removed;
  }

  /** Number of customer keys with state. */
  get size(): number {
    return this.#keys.size;
  }

  #window(keyId: string): KeyWindow {
    let w = this.#keys.get(keyId);
    if (!w) {
      w = new KeyWindow();
      this.#keys.set(keyId, w);
    }
    return w;
  }
}

/** The limits' own header values, rendered once per (interned) limits object. */
interface LimitTexts {
  readonly rpm: string;
  readonly tpm: string;
}

const LIMIT_TEXTS = new WeakMap<KeyLimits, LimitTexts>();

function limitTexts(limits: KeyLimits): LimitTexts {
  let t = LIMIT_TEXTS.get(limits);
  if (t === undefined) {
    t = { rpm: String(limits.rpm), tpm: String(limits.tpm) };
    LIMIT_TEXTS.set(limits, t);
  }
  return t;
}

/** Scratch for `oldestLeaveAt` (the request path is synchronous here: one at a time). */
const OLDEST = new Float64Array(2);

/**
 * The headers of an answer: the limit values rendered once per limits object, the remaining
 * counts as integers, both reset times from one scan of the window.
 */
function headersOf(w: KeyWindow, limits: KeyLimits, now: number): RateHeaders {
  const h: Record<string, string> = {};
  const texts = limitTexts(limits);
  w.oldestLeaveAt(OLDEST);
  if (limits.rpm !== null) {
    h["x-ratelimit-limit-requests"] = texts.rpm;
    h["x-ratelimit-remaining-requests"] = String(Math.max(0, limits.rpm - w.totalRequests));
    h["x-ratelimit-reset-requests"] = resetText(OLDEST[0], now);
  }
  if (limits.tpm !== null) {
    h["x-ratelimit-limit-tokens"] = texts.tpm;
    h["x-ratelimit-remaining-tokens"] = String(
      Math.max(0, Math.floor(limits.tpm - w.totalTokens)),
    );
    h["x-ratelimit-reset-tokens"] = resetText(OLDEST[1], now);
  }
  return h;
}

/** Time until the oldest counted requests (or tokens) leave the window; `0s` when none count. */
function resetText(at: number, now: number): string {
  return formatResetDuration(at < 0 ? 0 : at - now);
}
