/**
 * Capacity readings: storage, expiry, tighter-reading-wins across sources (ADR 0019), and what
 * admission may conclude from them. One reading shape for every probe, so admission never learns
 * where a number came from (ADR 0019). Pure and synchronous; time comes from the injected clock.
 *
 * A reading is *current* while it is younger than `maxAgeMs` (0 = no age limit) and before its
 * `expires_at`; a pending backoff (`now < retry_after`) keeps it current past both, because a
 * provider that said "not for another 30 seconds" told us something that is still true.
 *
 * @module
 */
import type { CapacityReading, CapacityReadingInput, NodeQueue } from "./types.ts";

/** Options of a capacity table. */
export interface CapacityTableOptions {
  /** Epoch-ms clock. */
  now: () => number;
  /** How long a reading is trusted, ms; 0 disables the age limit. */
  maxAgeMs: number;
}

/** A finite number, else undefined (readings come from probes and the admin API alike). */
function finite(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** Per-node capacity readings. */
export class CapacityTable {
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  readonly #readings = new Map<string, CapacityReading>();

  /**
   * `now` is the core's epoch-ms clock; `maxAgeMs` below 0 or not finite counts as 0 (no age
   * limit).
   */
  constructor(opts: CapacityTableOptions) {
    this.#now = opts.now;
    this.#maxAgeMs = Math.max(0, finite(opts.maxAgeMs) ?? 0);
  }

  /** How long a reading is trusted, ms (0 = no age limit). */
  get maxAgeMs(): number {
    return this.#maxAgeMs;
  }

  /**
   * Records a reading (tighter wins across sources, ADR 0019); returns the reading in force
   * afterwards, or undefined when the one stored is already not current (e.g. an old `at`).
   */
  set(id: string, input: CapacityReadingInput): CapacityReading | undefined {
    const now = this.#now();
    const incoming = this.#build(input, now);
    const current = this.#current(id, now);
    if (current && this.#holdsOff(current, incoming, now)) return { ...current };
    this.#readings.set(id, incoming);
    return this.get(id);
  }

  /** The current reading (a copy), or undefined (none, aged out, expired). */
  get(id: string): CapacityReading | undefined {
    const r = this.#current(id, this.#now());
    return r ? { ...r } : undefined;
  }

  /** Drops all readings, one node's, or one node's only when `source` wrote it. */
  forget(id?: string, source?: string): void {
    if (id === undefined) {
      this.#readings.clear();
      return;
    }
    const r = this.#readings.get(id);
    if (!r) return;
    // A probe forgetting what it said must not wipe a backoff another source recorded.
    if (source !== undefined && r.source !== source) return;
    this.#readings.delete(id);
  }

  /**
   * Whether the reading (if any) lets admission send one more request now. No reading: yes
   * (inflight decides); pending backoff: no; no usable limit: yes; else `used < limit`.
   */
  allows(id: string): boolean {
    const now = this.#now();
    const r = this.#current(id, now);
    return r === undefined || readingAllows(r, now);
  }

  /**
   * Earliest moment (epoch ms) a reading that refuses now may stop refusing — its backoff
   * ending, or its expiry — so a waiting request can set one timer instead of polling.
   * Undefined when no reading refuses.
   */
  nextChangeAt(): number | undefined {
    const now = this.#now();
    let next: number | undefined;
    for (const id of [...this.#readings.keys()]) {
      const r = this.#current(id, now);
      if (!r || readingAllows(r, now)) continue;
      const at = isBackingOff(r, now) ? r.retry_after : this.#expiryOf(r);
      if (at !== undefined && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  #build(input: CapacityReadingInput, now: number): CapacityReading {
    const reading: CapacityReading = {
      source: typeof input.source === "string" && input.source !== "" ? input.source : "custom",
      used: finite(input.used) ?? null,
      limit: finite(input.limit) ?? null,
      at: finite(input.at) ?? now,
    };
    if (typeof input.quota === "string" && input.quota !== "") reading.quota = input.quota;
    const expires = finite(input.expires_at);
    if (expires !== undefined) reading.expires_at = expires;
    const interval = finite(input.interval_ms);
    if (interval !== undefined && interval > 0) reading.interval_ms = interval;
    const queue = queueOf(input.queue);
    if (queue !== undefined) reading.queue = queue;
    const relative = finite(input.retry_after_ms);
    const absolute = finite(input.retry_after);
    if (relative !== undefined && relative > 0) reading.retry_after = now + relative;
    else if (absolute !== undefined) reading.retry_after = absolute;
    return reading;
  }

  /** Tighter wins: the current reading keeps an incoming one from another source out. */
  #holdsOff(current: CapacityReading, incoming: CapacityReading, now: number): boolean {
    if (current.source === incoming.source) return false;
    if (!(tightness(current, now) > tightness(incoming, now))) return false;
    if (isBackingOff(current, now)) return true;
    // Held only until one of the two sources has had a full poll; two passive readings
    // (no interval) never hold each other off.
    const window = Math.max(current.interval_ms ?? 0, incoming.interval_ms ?? 0);
    return now - current.at < window;
  }

  /** The stored reading while current; drops it (lazily) once aged out or expired. */
  #current(id: string, now: number): CapacityReading | undefined {
    const r = this.#readings.get(id);
    if (!r) return undefined;
    if (isBackingOff(r, now)) return r;
    const expiry = this.#expiryOf(r);
    if (expiry !== undefined && now >= expiry) {
      this.#readings.delete(id);
      return undefined;
    }
    return r;
  }

  /** The moment a reading stops being current (backoff aside), or undefined for never. */
  #expiryOf(r: CapacityReading): number | undefined {
    const aged = this.#maxAgeMs > 0 ? r.at + this.#maxAgeMs : undefined;
    if (r.expires_at === undefined) return aged;
    return aged === undefined ? r.expires_at : Math.min(aged, r.expires_at);
  }
}

/** A reading's queue gauges, checked: finite and not negative, else left out. */
function queueOf(value: unknown): NodeQueue | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const q = value as Record<string, unknown>;
  const count = (
    v: unknown,
  ) => (finite(v) !== undefined && (v as number) >= 0 ? v as number : undefined);
  const running = count(q.running);
  const waiting = count(q.waiting);
  if (running === undefined && waiting === undefined) return undefined;
  const out: NodeQueue = { running: running ?? 0, waiting: waiting ?? 0 };
  const kv = count(q.kv_usage);
  if (kv !== undefined) out.kv_usage = kv;
  const queries = count(q.prefix_queries);
  if (queries !== undefined) out.prefix_queries = queries;
  const hits = count(q.prefix_hits);
  if (hits !== undefined) out.prefix_hits = hits;
  return out;
}

/** Whether a reading's backoff is still pending at `now`. */
export function isBackingOff(r: CapacityReading, now: number): boolean {
  return r.retry_after !== undefined && now < r.retry_after;
}

/** Admission's verdict on one current reading (it only ever narrows `max_conns`). */
export function readingAllows(r: CapacityReading, now: number): boolean {
  if (isBackingOff(r, now)) return false;
  if (r.limit === null || r.limit <= 0) return true;
  return (r.used ?? 0) < r.limit;
}

/** How tight a reading is: a pending backoff is tightest, then used/limit, then no limit (0). */
export function tightness(r: CapacityReading, now: number): number {
  if (isBackingOff(r, now)) return Infinity;
  if (r.limit !== null && r.limit > 0) return (r.used ?? 0) / r.limit;
  return 0;
}
