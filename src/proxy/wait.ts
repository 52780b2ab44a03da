/**
 * The waiter queue: requests that found every eligible node full wait here, first come first
 * served, until admission may take them or their tier's wait runs out.
 *
 * Waiting is event-driven. The core tells the queue when admission may now admit more (a slot was
 * freed, a reading changed, a node was added); the queue then offers the slot to its waiters in
 * arrival order, synchronously, before any newcomer can run. Time-driven changes the core cannot
 * announce (a backoff ending) are covered by one timer at the core's next change moment; a timer at
 * `pollMs` is only a safety net. The queue owns at most one timer, whatever its length.
 *
 * @module
 */
import { type Linked, LinkedList } from "./linked_list.ts";

/** Something waiting for a slot: it tries to take one when told the state changed. */
export interface Waiter {
  /** Tries to take a slot now; true when admitted (the waiter then leaves the queue). */
  tryAdmit(): boolean;
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
}

/** How a wait ended. */
export type WaitResult = "admitted" | "timeout" | "aborted";

interface Entry extends Linked<Entry> {
  waiter: Waiter;
  deadline: number;
  resolve: (result: WaitResult) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

const defaultTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** A FIFO queue of waiting requests, woken by capacity changes. */
export class WaiterQueue {
  readonly #opts: WaiterQueueOptions;
  readonly #timers: Timers;
  readonly #unsubscribe: () => void;
  /** Waiting requests in arrival order. */
  readonly #entries = new LinkedList<Entry>();
  #draining = false;
  #again = false;
  #timer: unknown;
  #timerAt = Infinity;
  #lastPoll = 0;
  #closed = false;

  /** Subscribes to the core's capacity changes at once; `close()` unsubscribes. */
  constructor(opts: WaiterQueueOptions) {
    this.#opts = opts;
    this.#timers = opts.timers ?? defaultTimers;
    this.#unsubscribe = opts.subscribe(() => this.wake());
  }

  /** How many requests are waiting. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Waits until `waiter.tryAdmit()` succeeds, `deadline` (epoch ms) passes, or `signal` aborts.
   * The caller has already tried once; the first retry happens on the next change.
   */
  wait(waiter: Waiter, deadline: number, signal?: AbortSignal): Promise<WaitResult> {
    if (signal?.aborted) return Promise.resolve("aborted");
    if (this.#closed || deadline <= this.#opts.now()) return Promise.resolve("timeout");
    return new Promise<WaitResult>((resolve) => {
      const entry: Entry = {
        waiter,
        deadline,
        resolve,
        signal,
        onAbort: undefined,
      };
      if (signal) {
        entry.onAbort = () => this.#settle(entry, "aborted");
        signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      if (this.#entries.size === 0) this.#lastPoll = this.#opts.now();
      this.#entries.add(entry);
      this.#schedule();
    });
  }

  /** Offers freed capacity to the waiters in arrival order (the core's change listener). */
  wake(): void {
    if (this.#entries.size === 0) return;
    if (this.#draining) {
      // A change announced while a waiter was being admitted: run the round again after this one.
      this.#again = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#again = false;
        let entry = this.#entries.first;
        while (entry) {
          const next = entry.linkNext;
          let admitted = false;
          try {
            admitted = entry.waiter.tryAdmit();
          } catch {
            admitted = false;
          }
          if (admitted) this.#settle(entry, "admitted");
          entry = next;
        }
      } while (this.#again && this.#entries.size > 0);
    } finally {
      this.#draining = false;
    }
    this.#schedule();
  }

  /** Ends every wait (timeout) and stops listening; used at shutdown. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    for (let entry = this.#entries.first; entry; entry = this.#entries.first) {
      this.#settle(entry, "timeout");
    }
    this.#clearTimer();
  }

  #settle(entry: Entry, result: WaitResult): void {
    // An entry is settled once: the first settle unlinks it, a later one finds it gone.
    if (!this.#entries.delete(entry)) return;
    if (entry.signal && entry.onAbort) entry.signal.removeEventListener("abort", entry.onAbort);
    entry.resolve(result);
    if (this.#entries.size === 0) this.#clearTimer();
    else if (result === "aborted") this.#schedule();
  }

  #onTimer(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = this.#opts.now();
    let entry = this.#entries.first;
    while (entry) {
      const next = entry.linkNext;
      if (entry.deadline <= now) {
        // One last try at the deadline, so a slot freed in the same instant is not lost.
        let admitted = false;
        try {
          admitted = entry.waiter.tryAdmit();
        } catch {
          admitted = false;
        }
        this.#settle(entry, admitted ? "admitted" : "timeout");
      }
      entry = next;
    }
    this.#lastPoll = now;
    this.wake();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#entries.size === 0 || this.#closed) {
      this.#clearTimer();
      return;
    }
    const now = this.#opts.now();
    let at = this.#lastPoll + Math.max(1, this.#opts.pollMs());
    if (at <= now) at = now + Math.max(1, this.#opts.pollMs());
    for (let e = this.#entries.first; e; e = e.linkNext) if (e.deadline < at) at = e.deadline;
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
