/**
 * The waiter queue: requests that found every eligible node full wait here until admission may
 * take them or their tier's wait runs out. Freed capacity goes by fair share between customer
 * keys (ADR 0024, `src/core/fair_share.ts`): the highest priority band first, in it the
 * backlogged key with the lowest virtual counter, within one key first come first served. Waiters
 * that name no customer key are one key: first come first served among them, as before.
 *
 * Waiting is event-driven. The core tells the queue when admission may now admit more (a slot was
 * freed, a reading changed, a node was added); the queue then offers the slot to its waiters in
 * fair-share order, synchronously, before any newcomer can run. Time-driven changes the core
 * cannot announce (a backoff ending) are covered by one timer at the core's next change moment; a
 * timer at `pollMs` is only a safety net. The queue owns at most one timer, whatever its length.
 *
 * @module
 */
import { type FairShareGroup, FairShareQueue, type FairShareTicket } from "../core/fair_share.ts";
import { DEFAULT_SHARE, type ShareSettings } from "../core/key_policy.ts";
import type { ShareStats, TierBacklog } from "./share_stats.ts";

/** One customer key's waiters in a tier (the Live page). */
export interface LiveWaiting {
  key_id: string;
  /** Its priority band. */
  band: number;
  queued: number;
  oldest_wait_ms: number;
}

/** A tier's waiters (the Live page). */
export interface LiveTier {
  /** The requested model they asked for. */
  alias: string;
  /** The tier, as metrics name it (`model|tags`). */
  tier: string;
  queue_length: number;
  oldest_wait_ms: number | null;
  waiting: LiveWaiting[];
}

/** Something waiting for a slot: it tries to take one when told the state changed. */
export interface Waiter {
  /** Tries to take a slot now; true when admitted (the waiter then leaves the queue). */
  tryAdmit(): boolean;
  /** The customer key the waiter is counted to (absent: one shared anonymous key). */
  readonly keyId?: string;
  /** The key's fair share settings (absent: weight 1, priority 0, no queue limit). */
  readonly share?: ShareSettings;
  /** Tokens charged to the key when it is admitted (input estimate + output limit). */
  estimateTokens?(): number;
  /** The tier it waits for, as metrics name it. */
  readonly tierName?: string;
  /** The requested model (an alias, or a node model's implicit tier) it waits for (Live page). */
  readonly aliasName?: string;
  /** Set by the queue when a wait admits it: hand it to `served` with the usage event. */
  shareTicket?: ShareTicket;
}

/**
 * Waiters per customer key counted for a group of workers (ADR 0025), so `share.max_queued`
 * bounds a key's waiters in the group, not in each worker.
 */
export interface QueueGate {
  /** Takes a place for a waiter of `keyId` when fewer than `max` wait; false: the queue is full. */
  take(keyId: string, max: number): boolean;
  /** Gives a place back (the wait ended). */
  release(keyId: string): void;
}

/**
 * The fair share of a group of workers (ADR 0025): this queue orders its waiters with the other
 * workers' as one queue (`src/workers/share_board.ts`).
 */
export interface QueueGroup extends FairShareGroup {
  /** Another worker has a waiter that could take a free slot now (a newcomer waits behind it). */
  othersWaiting(): boolean;
  /** Another worker has waiters (a direct admission is then charged, as under contention here). */
  othersQueued(): boolean;
}

/** Timer functions (tests inject a manual clock). */
export interface Timers {
  /** Calls `fn` once after `ms` ms; returns a handle for `clear`. */
  set(fn: () => void, ms: number): unknown;
  /** Cancels a timer `set` returned (no-op when it already ran). */
  clear(handle: unknown): void;
}

/** What the queue needs from the core and the clock. */
export interface WaiterQueueOptions {
  /** Epoch-ms clock. */
  now: () => number;
  /** Subscribes to "admission may now admit more"; returns the unsubscribe function. */
  subscribe: (listener: () => void) => () => void;
  /** Earliest moment a pending backoff or expiry may let admission take more, epoch ms. */
  nextChangeAt?: () => number | undefined;
  /** Safety-net retry period, ms (routing.wait_poll_ms), read each time it is used. */
  pollMs: () => number;
  /** Default: `setTimeout`/`clearTimeout`. */
  timers?: Timers;
  /** Wait times and served tokens for the metrics (none kept when absent). */
  stats?: ShareStats;
  /** A worker of a group: each key's waiters count against `share.max_queued` here too. */
  gate?: QueueGate;
  /** A worker of a group: this queue's waiters are ordered with the group's as one queue. */
  group?: QueueGroup;
  /**
   * Told of an error no waiter can be failed with (the group's lock could not be had while a
   * settled wait left the queue); the gateway logs it.
   */
  onError?: (err: unknown) => void;
}

/** What a usage event tells fair share. */
export interface ServedTokens {
  /** The customer key id. */
  readonly api_key_id: string;
  /** Input tokens. */
  readonly input_tokens: number;
  /** Output tokens. */
  readonly output_tokens: number;
}

/**
 * How a wait ended; `queue_full`: the key already had `share.max_queued` waiters, so this one
 * did not wait at all (429 `key_queue_full`).
 */
export type WaitResult = "admitted" | "timeout" | "aborted" | "queue_full";

/** A slot given by fair share: hand it back to `served` when the usage event is recorded. */
export type ShareTicket = FairShareTicket<unknown>;

type Ticket = FairShareTicket<Entry | null>;

interface Entry {
  waiter: Waiter;
  deadline: number;
  since: number;
  resolve: (result: WaitResult) => void;
  /** Ends the wait with an error thrown while admitting it. */
  reject: (err: unknown) => void;
  /** What its `tryAdmit` threw in the round that just ran (the wait fails with it). */
  error: unknown;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  ticket: Ticket | undefined;
  settled: boolean;
  /** Holds a place in the group's `QueueGate`. */
  gated: boolean;
}

const defaultTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Waiters that name no customer key share this one. */
const NO_KEY = "";

/** A round's admission attempt; what the waiter throws is kept on its entry, to fail its wait. */
function tryAdmit(entry: Entry | null): boolean {
  if (entry === null || entry.error !== undefined) return false;
  try {
    return entry.waiter.tryAdmit();
  } catch (err) {
    entry.error = err ?? new Error("tryAdmit threw");
    return false;
  }
}

/** The key's tokens estimate; a waiter without one is charged one token (order, no weight). */
function estimateOf(waiter: Waiter): number {
  return waiter.estimateTokens?.() ?? 1;
}

/** A fair-share queue of waiting requests, woken by capacity changes. */
export class WaiterQueue {
  readonly #opts: WaiterQueueOptions;
  readonly #timers: Timers;
  readonly #unsubscribe: () => void;
  /** Waiting requests in fair-share order (`null` items: charges of direct admissions). */
  readonly #fair: FairShareQueue<Entry | null>;
  #draining = false;
  #again = false;
  #timer: unknown;
  #timerAt = Infinity;
  #lastPoll = 0;
  #closed = false;
  readonly #gate: QueueGate | undefined;
  readonly #group: QueueGroup | undefined;

  /** Subscribes to the core's capacity changes at once; `close()` unsubscribes. */
  constructor(opts: WaiterQueueOptions) {
    this.#opts = opts;
    this.#timers = opts.timers ?? defaultTimers;
    this.#gate = opts.gate;
    this.#group = opts.group;
    this.#fair = new FairShareQueue<Entry | null>(opts.group);
    this.#unsubscribe = opts.subscribe(() => this.wake());
  }

  /** How many requests are waiting. */
  get size(): number {
    return this.#fair.size;
  }

  /** Requests wait, here or (in a group) in another worker: a direct admission is charged. */
  get #contended(): boolean {
    return this.#fair.size > 0 || (this.#group !== undefined && this.#group.othersQueued());
  }

  /**
   * A newcomer must queue instead of taking a free slot: a waiter of another worker of the group
   * that could take it comes first (in one process a free slot with waiters is one they cannot use).
   */
  yields(): boolean {
    return this.#group !== undefined && this.#group.othersWaiting();
  }

  /**
   * Waits until `waiter.tryAdmit()` succeeds, `deadline` (epoch ms) passes, or `signal` aborts.
   * The caller has already tried once; the first retry happens on the next change. A throw from
   * `tryAdmit` (or from the group's lock) ends the wait: the promise rejects with it.
   */
  wait(waiter: Waiter, deadline: number, signal?: AbortSignal): Promise<WaitResult> {
    if (signal?.aborted) return Promise.resolve("aborted");
    const now = this.#opts.now();
    if (this.#closed || deadline <= now) return Promise.resolve("timeout");
    return new Promise<WaitResult>((resolve, reject) => {
      const entry: Entry = {
        waiter,
        deadline,
        since: now,
        resolve,
        reject,
        error: undefined,
        signal,
        onAbort: undefined,
        ticket: undefined,
        settled: false,
        gated: false,
      };
      const max = waiter.share?.max_queued;
      if (this.#gate && max !== undefined && max !== null && waiter.keyId !== undefined) {
        if (!this.#gate.take(waiter.keyId, max)) {
          resolve("queue_full");
          return;
        }
        entry.gated = true;
      }
      const wasEmpty = this.#fair.size === 0;
      let ticket: Ticket | null;
      try {
        ticket = this.#fair.enqueue(
          waiter.keyId ?? NO_KEY,
          waiter.share ?? DEFAULT_SHARE,
          entry,
          estimateOf(waiter),
        );
      } catch (err) {
        // The group's lock could not be had: the wait fails with it, its gate place given back.
        if (entry.gated) this.#gate!.release(waiter.keyId!);
        reject(err);
        return;
      }
      if (ticket === null) {
        if (entry.gated) this.#gate!.release(waiter.keyId!);
        resolve("queue_full");
        return;
      }
      entry.ticket = ticket;
      if (signal) {
        entry.onAbort = () => this.#settle(entry, "aborted");
        signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      if (wasEmpty) this.#lastPoll = now;
      // In a group the round decides at once between this waiter and the other workers' (it may
      // have queued behind one of them with a slot free); alone, the caller has just tried.
      if (this.#group) this.wake();
      else this.#schedule();
    });
  }

  /**
   * A waiter admitted without waiting while others wait: its service counts to its key like a
   * dispatched waiter's (ADR 0024). Nothing happens when nobody waits. Returns the ticket to hand
   * to `served`, or undefined.
   */
  charge(waiter: Waiter): Ticket | undefined {
    if (!this.#contended) return undefined;
    // Bookkeeping of a request that holds its slot already: a failure is reported, never thrown
    // into the admission that must hand the slot on.
    return this.#reported(() =>
      this.#fair.charge(
        waiter.keyId ?? NO_KEY,
        waiter.share ?? DEFAULT_SHARE,
        null,
        estimateOf(waiter),
      ) ??
        undefined
    );
  }

  /** `fn`'s value; an error it throws goes to `onError` (undefined then). */
  #reported<R>(fn: () => R): R | undefined {
    try {
      return fn();
    } catch (err) {
      this.#opts.onError?.(err);
      return undefined;
    }
  }

  /**
   * A request's usage event was recorded (undefined: lost): the charge of the waiter's admission
   * is corrected with the real tokens (input + output), which count as served to the key.
   */
  served(waiter: Waiter | undefined, event: ServedTokens | undefined): void {
    if (event === undefined) return;
    const ticket = waiter?.shareTicket;
    const tokens = event.input_tokens + event.output_tokens;
    if (ticket !== undefined) this.#reported(() => this.#fair.correct(ticket as Ticket, tokens));
    this.#opts.stats?.served(event.api_key_id, event.input_tokens, event.output_tokens);
  }

  /** Gives back the charge of an admission whose attempt served nothing (failover). */
  uncharge(ticket: ShareTicket | undefined): void {
    if (ticket !== undefined) this.#reported(() => this.#fair.correct(ticket as Ticket, 0));
  }

  /** Offers freed capacity to the waiters in fair-share order (the core's change listener). */
  wake(): void {
    if (this.#fair.size === 0) return;
    if (this.#draining) {
      // A change announced while a waiter was being admitted: run the round again after this one.
      this.#again = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#again = false;
        let admitted: Ticket[];
        try {
          admitted = this.#fair.drain(tryAdmit);
        } catch (err) {
          // The group's lock could not be had (ShareBoardLockTimeout): every wait here fails
          // with it, none hangs on a round that cannot run.
          for (const entry of this.#entries()) this.#fail(entry, err);
          break;
        }
        for (const t of admitted) this.#settle(t.item!, "admitted");
        for (const entry of this.#entries()) {
          if (entry.error !== undefined) this.#fail(entry, entry.error);
        }
      } while (this.#again && this.#fair.size > 0);
    } finally {
      this.#draining = false;
    }
    this.#schedule();
  }

  /** Waiting requests per tier: backlogged keys and their queue lengths (metrics). */
  backlog(): TierBacklog[] {
    const tiers = new Map<string, Map<string, number>>();
    for (const t of this.#fair.tickets()) {
      const tier = t.item?.waiter.tierName ?? "";
      let keys = tiers.get(tier);
      if (!keys) tiers.set(tier, keys = new Map());
      keys.set(t.keyId, (keys.get(t.keyId) ?? 0) + 1);
    }
    return [...tiers].map(([tier, keys]) => ({ tier, keys }));
  }

  /**
   * Who waits now, per requested model and tier (the Live page): each customer key's band, how
   * many of its requests wait and for how long the oldest has. O(waiters); nothing when none.
   */
  liveTiers(now: number): LiveTier[] {
    const tiers = new Map<string, LiveTier>();
    const keys = new Map<string, LiveWaiting>();
    for (const t of this.#fair.tickets()) {
      const entry = t.item;
      if (!entry) continue;
      const w = entry.waiter;
      const alias = w.aliasName ?? "";
      const tier = w.tierName ?? "";
      const at = `${alias}\u0000${tier}`;
      let row = tiers.get(at);
      if (!row) {
        tiers.set(at, row = { alias, tier, queue_length: 0, oldest_wait_ms: null, waiting: [] });
      }
      const waited = Math.max(0, now - entry.since);
      row.queue_length++;
      row.oldest_wait_ms = Math.max(row.oldest_wait_ms ?? 0, waited);
      const k = `${at}\u0000${t.keyId}`;
      let key = keys.get(k);
      if (!key) {
        key = { key_id: t.keyId, band: w.share?.priority ?? 0, queued: 0, oldest_wait_ms: 0 };
        keys.set(k, key);
        row.waiting.push(key);
      }
      key.queued++;
      key.oldest_wait_ms = Math.max(key.oldest_wait_ms, waited);
    }
    return [...tiers.values()];
  }

  /** Ends every wait (timeout) and stops listening; used at shutdown. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    for (const entry of this.#entries()) this.#settle(entry, "timeout");
    this.#clearTimer();
  }

  /** The waiting entries, collected (settling one changes the queue). */
  #entries(): Entry[] {
    const out: Entry[] = [];
    for (const t of this.#fair.tickets()) if (t.item) out.push(t.item);
    return out;
  }

  /** Ends a wait with an error (its waiter's `tryAdmit` threw, or the group's lock failed). */
  #fail(entry: Entry, err: unknown): void {
    if (entry.settled) return;
    const reject = entry.reject;
    // Settled as a timeout for the bookkeeping (gate, queue, listener, stats); the promise
    // rejects first, so the wait ends with the error.
    entry.resolve = () => {};
    reject(err);
    this.#settle(entry, "timeout");
  }

  #settle(entry: Entry, result: WaitResult): void {
    // An entry is settled once; one `drain` admitted has already left the fair queue.
    if (entry.settled) return;
    entry.settled = true;
    if (entry.gated) this.#gate!.release(entry.waiter.keyId!);
    const ticket = entry.ticket!;
    // The ticket leaves this queue even when the group's lock fails (FairShareQueue.remove).
    this.#reported(() => this.#fair.remove(ticket));
    if (entry.signal && entry.onAbort) entry.signal.removeEventListener("abort", entry.onAbort);
    const waiter = entry.waiter;
    if (result === "admitted") waiter.shareTicket = ticket;
    this.#opts.stats?.waited(
      waiter.tierName ?? "",
      ticket.keyId,
      this.#opts.now() - entry.since,
    );
    entry.resolve(result);
    if (this.#fair.size === 0) this.#clearTimer();
    else if (result === "aborted") this.#schedule();
  }

  #onTimer(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = this.#opts.now();
    for (const entry of this.#entries()) {
      if (entry.deadline > now || entry.settled) continue;
      // One last try at the deadline, so a slot freed in the same instant is not lost; taken
      // out of fair-share order, it is charged like a direct admission.
      this.#reported(() => this.#fair.remove(entry.ticket!));
      if (tryAdmit(entry)) {
        entry.ticket = this.charge(entry.waiter) ?? entry.ticket;
        this.#settle(entry, "admitted");
      } else if (entry.error !== undefined) this.#fail(entry, entry.error);
      else this.#settle(entry, "timeout");
    }
    this.#lastPoll = now;
    this.wake();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#fair.size === 0 || this.#closed) {
      this.#clearTimer();
      return;
    }
    const now = this.#opts.now();
    let at = this.#lastPoll + Math.max(1, this.#opts.pollMs());
    if (at <= now) at = now + Math.max(1, this.#opts.pollMs());
    for (const t of this.#fair.tickets()) {
      const deadline = t.item?.deadline ?? Infinity;
      if (deadline < at) at = deadline;
    }
    // A change moment already past says nothing new (the poll covers it); only a future one counts.
    const change = this.#opts.nextChangeAt?.();
    if (change !== undefined && change > now && change < at) at = change;
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    this.#clearTimer();
    const delay = Math.max(0, at - now);
    this.#timerAt = at;
    this.#timer = this.#timers.set(() => this.#onTimer(), delay);
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      this.#timers.clear(this.#timer);
      this.#timer = undefined;
    }
    this.#timerAt = Infinity;
  }
}
