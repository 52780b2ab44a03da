/**
 * The clocks a simulated engine runs on: the wall clock (the fake model serving HTTP) or a
 * virtual clock (the routing benchmark), where time only moves from one due event to the next,
 * so a run's timings are the same on a busy machine as on an idle one, and are computed in a
 * fraction of the simulated time.
 *
 * @module
 */

/** What the engine needs of a clock: the time and a timer. */
export interface SimClock {
  /** Milliseconds (epoch ms on the wall clock, from 0 on a virtual one). */
  now(): number;
  /** Calls `fn` at `at` (ms, same scale as `now`); answers a cancel function. */
  at(at: number, fn: () => void): () => void;
}

/** The wall clock: `Date.now` and `setTimeout`. */
export const wallClock: SimClock = {
  now: () => Date.now(),
  at(at, fn) {
    const timer = setTimeout(fn, Math.max(0, at - Date.now()));
    return () => clearTimeout(timer);
  },
};

interface TimedEvent {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A virtual clock: events in a binary heap ordered by time, then by when they were scheduled (so
 * equal times run in a fixed order and a run is reproducible).
 */
export class VirtualClock implements SimClock {
  #now = 0;
  #seq = 0;
  readonly #heap: TimedEvent[] = [];

  /** The virtual time, ms. */
  now(): number {
    return this.#now;
  }

  /** Schedules `fn` at `at` (never before now). */
  at(at: number, fn: () => void): () => void {
    const event: TimedEvent = {
      at: Math.max(at, this.#now),
      seq: this.#seq++,
      fn,
      cancelled: false,
    };
    this.#push(event);
    return () => {
      event.cancelled = true;
    };
  }

  /** Events still due (cancelled ones included until they come up). */
  get pending(): number {
    return this.#heap.length;
  }

  /** Runs events in order until none is left or the next is after `until`; answers how many ran. */
  run(until = Infinity): number {
    let ran = 0;
    while (this.#heap.length > 0 && this.#heap[0].at <= until) {
      const event = this.#pop();
      if (event.cancelled) continue;
      this.#now = event.at;
      event.fn();
      ran++;
    }
    if (until !== Infinity && until > this.#now) this.#now = until;
    return ran;
  }

  #less(a: TimedEvent, b: TimedEvent): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  #push(event: TimedEvent): void {
    const heap = this.#heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  #pop(): TimedEvent {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && this.#less(heap[l], heap[m])) m = l;
        if (r < heap.length && this.#less(heap[r], heap[m])) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m], heap[i]];
        i = m;
      }
    }
    return top;
  }
}
