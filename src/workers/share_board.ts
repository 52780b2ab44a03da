/**
 * Fair share of a group of workers (ADR 0025, ADR 0024): what the workers' waiter queues share so
 * the group orders its waiters as one queue would. It holds, in one `SharedArrayBuffer`:
 *
 * - every customer key's virtual counter (a key's requests may wait in any worker, and every
 *   worker's dispatch and correction moves the one counter) and the band it counts in (a band's
 *   renormalisation shifts the counters of its keys in every worker),
 * - each band's time (the counter of its last dispatched key) and the group's arrival numbers,
 * - each worker's best waiter per band, published after every change of its queue.
 *
 * A worker's round offers what is free to its own best waiter only when no other worker publishes
 * a better one that could still take it; a waiter whose worker set it aside in a round since the
 * last release (`InflightTable` generation) is not waited for, so nothing stalls behind a waiter
 * that cannot use the freed node. A change of what a worker publishes is announced (the board's
 * poke word), so a worker that left capacity to another hears when that one declined it.
 *
 * Every access is inside one spin lock (`locked`), run only when requests wait. Its sections are
 * loads and stores of the board and of the queue's own memory: the queue decides under the lock
 * and acts outside it (an admission attempt — node picks, a compare-and-swap on the inflight
 * table — never runs inside). A wait for the lock is bounded: it spins, then gives up the core in
 * slices of at most a millisecond, and past `LOCK_WAIT_MS` throws `ShareBoardLockTimeout` naming
 * the holder (a request then fails with 500; nothing hangs). The lock word holds the owner's
 * number (worker index + 1; the supervisor's is the number after the last worker's), so a worker
 * that died holding it can be cleared (`workerDied`).
 *
 * @module
 */
import type { FairShareGroup, QueueHead } from "../core/fair_share.ts";
import type { InflightTable } from "../core/inflight_table.ts";

/** Bands a worker publishes (the highest first); a queue with more keeps the rest to itself. */
const BANDS = 8;
/** Band times the group keeps. */
const BAND_TIMES = 32;

// Int32 words.
const LOCK = 0;
const POKE = 1;
const BAND_COUNT = 2;
const INT_HEAD = 4;
/** Per published entry: present, key index, blocked (1/0), the next key's index (-1: none). */
const ENTRY_INTS = 4;
/** Per worker: the release generation of its last round, then its entries. */
const WORKER_INTS = 1 + BANDS * ENTRY_INTS;

/** The longest a worker waits for the board's lock, ms, before `ShareBoardLockTimeout`. */
export const LOCK_WAIT_MS = 250;

/** The board's lock stayed held past `LOCK_WAIT_MS` (a holder stuck, or a bug). */
export class ShareBoardLockTimeout extends Error {
  /** `holder`: the lock word's owner number (worker index + 1; workers + 1: the supervisor). */
  constructor(readonly holder: number, waitedMs: number) {
    super(
      `share board lock held by ${holder === 0 ? "nobody" : `owner ${holder}`} for over ` +
        `${Math.round(waitedMs)} ms (fair share of the worker group)`,
    );
    this.name = "ShareBoardLockTimeout";
  }
}

/** Sizes of a board. */
export interface ShareBoardSize {
  /** Workers sharing it. */
  workers: number;
  /** Keys it can count (the key table's capacity: a key's index is its row there). */
  keys: number;
}

function intWords(size: ShareBoardSize): number {
  // Rounded up to an even count so the float part starts 8-byte aligned.
  const n = INT_HEAD + size.workers * WORKER_INTS;
  return n + (n & 1);
}

/**
 * Float64 slots: the arrival counter, band times (priority, time), entries (priority, seq), key
 * counters, key bands (NaN until the key's counter is first set).
 */
function floatSlots(size: ShareBoardSize): number {
  return 1 + BAND_TIMES * 2 + size.workers * BANDS * 2 + size.keys * 2;
}

/** The bytes a board of this size needs. */
export function shareBoardBytes(size: ShareBoardSize): number {
  return intWords(size) * 4 + floatSlots(size) * 8;
}

/** One worker's view of the group's fair-share state. */
export class ShareBoard implements FairShareGroup {
  readonly #ints: Int32Array;
  readonly #floats: Float64Array;
  readonly #size: ShareBoardSize;
  readonly #worker: number;
  readonly #keys: InflightTable;
  readonly #generation: () => number;
  /** Float index of the band times, the entries and the key counters. */
  readonly #bandAt = 1;
  readonly #entryAt = 1 + BAND_TIMES * 2;
  readonly #keyAt: number;
  readonly #keyBandAt: number;
  /** This view's number in the lock word: worker index + 1, the supervisor's workers + 1. */
  readonly #owner: number;
  #depth = 0;

  /**
   * Over `buffer` (see `shareBoardBytes`), as worker `worker` (-1: the supervisor, which publishes
   * nothing and clears what a dead worker left). Keys get their index from `keys` (the group's key
   * table, rows `share <key id>`); `generation` is the node table's release generation.
   */
  constructor(
    buffer: SharedArrayBuffer,
    size: ShareBoardSize,
    worker: number,
    keys: InflightTable,
    generation: () => number,
  ) {
    if (buffer.byteLength < shareBoardBytes(size)) throw new RangeError("share board too small");
    if (!(worker >= -1 && worker < size.workers)) throw new RangeError(`no worker ${worker}`);
    this.#size = size;
    this.#worker = worker;
    this.#keys = keys;
    this.#generation = generation;
    this.#ints = new Int32Array(buffer, 0, intWords(size));
    this.#floats = new Float64Array(buffer, intWords(size) * 4, floatSlots(size));
    this.#keyAt = this.#entryAt + size.workers * BANDS * 2;
    this.#keyBandAt = this.#keyAt + size.keys;
    this.#owner = worker < 0 ? size.workers + 1 : worker + 1;
  }

  /** A board's buffer for `size`: no key counted in any band yet. */
  static buffer(size: ShareBoardSize): SharedArrayBuffer {
    const buffer = new SharedArrayBuffer(shareBoardBytes(size));
    const keyBandAt = floatSlots(size) - size.keys;
    new Float64Array(buffer, intWords(size) * 4, floatSlots(size)).fill(NaN, keyBandAt);
    return buffer;
  }

  locked<R>(fn: () => R): R {
    if (this.#depth === 0) this.#acquire();
    this.#depth++;
    try {
      return fn();
    } finally {
      if (--this.#depth === 0) this.#release();
    }
  }

  nextSeq(): number {
    return this.#floats[0]++;
  }

  counter(keyId: string): number | undefined {
    const i = this.#keyIndex(keyId);
    return i < 0 ? undefined : this.#floats[this.#keyAt + i];
  }

  setCounter(keyId: string, priority: number, value: number): void {
    const i = this.#keyIndex(keyId);
    if (i < 0) return;
    this.#floats[this.#keyAt + i] = value;
    this.#floats[this.#keyBandAt + i] = priority;
  }

  shift(priority: number, offset: number): void {
    const floats = this.#floats;
    // Once per 2^40 of a band's virtual time: one pass over the key table is fine.
    for (let i = 0; i < this.#size.keys; i++) {
      if (floats[this.#keyBandAt + i] === priority) floats[this.#keyAt + i] -= offset;
    }
    const b = this.#band(priority, false);
    if (b >= 0) floats[this.#bandAt + b * 2 + 1] -= offset;
  }

  vtime(priority: number): number {
    const i = this.#band(priority, false);
    return i < 0 ? 0 : this.#floats[this.#bandAt + i * 2 + 1];
  }

  setVtime(priority: number, value: number): void {
    const i = this.#band(priority, true);
    if (i >= 0) this.#floats[this.#bandAt + i * 2 + 1] = value;
  }

  othersFloor(priority: number, except?: string): number | undefined {
    let floor: number | undefined;
    const skip = except === undefined ? -1 : this.#keyIndex(except);
    this.#someOther((e) => {
      const at = this.#entryInt(e);
      if (this.#floats[this.#entryAt + e * 2] !== priority) return false;
      // The entry's key is the one left out: that queue's next key is the smallest other there
      // (without it, a key whose own waiters head another queue saw no floor at all there, and a
      // correction dropped it below every key waiting in that queue).
      const key = this.#ints[at + 1] !== skip ? this.#ints[at + 1] : this.#ints[at + 3];
      if (key < 0) return false;
      const c = this.#floats[this.#keyAt + key];
      if (floor === undefined || c < floor) floor = c;
      return false;
    });
    return floor;
  }

  othersFirst(priority: number, counter: number, seq: number): boolean {
    const gen = this.#generation();
    return this.#someOther((e, roundGen) => {
      const at = this.#entryInt(e);
      // Set aside in a round since which no slot was freed: it cannot take what is free now.
      if (this.#ints[at + 2] === 1 && roundGen === gen) return false;
      const p = this.#floats[this.#entryAt + e * 2];
      if (p !== priority) return p > priority;
      const c = this.#floats[this.#keyAt + this.#ints[at + 1]];
      return c < counter || (c === counter && this.#floats[this.#entryAt + e * 2 + 1] < seq);
    });
  }

  /**
   * Another worker has a waiter that could still take a free slot (one that was not set aside
   * since the last release): a newcomer asks before it takes a free slot. With no waiter published
   * anywhere (the usual case) it answers from one look at each entry, without the lock.
   */
  othersWaiting(): boolean {
    return this.othersQueued() &&
      this.locked(() => this.othersFirst(-Infinity, Infinity, Infinity));
  }

  /** Another worker has waiters (whether or not they could take a free slot); without the lock. */
  othersQueued(): boolean {
    return this.#someOther(() => true, true);
  }

  publish(heads: readonly QueueHead[], drained: boolean): void {
    if (this.#worker < 0) return;
    const ints = this.#ints;
    const base = INT_HEAD + this.#worker * WORKER_INTS;
    let changed = false;
    if (drained) {
      // Waiters set aside in this round count as blocked from now: a worker that left capacity
      // to one of them must hear it.
      const gen = this.#generation();
      if (ints[base] !== gen && heads.some((h) => h.blocked)) changed = true;
      ints[base] = gen;
    }
    for (let b = 0; b < BANDS; b++) {
      const e = this.#worker * BANDS + b;
      const at = this.#entryInt(e);
      const head = heads[b];
      if (head === undefined) {
        if (ints[at] !== 0) changed = true;
        ints[at] = 0;
        continue;
      }
      const key = this.#keyIndex(head.keyId);
      const blocked = head.blocked ? 1 : 0;
      const fe = this.#entryAt + e * 2;
      if (
        ints[at] !== (key < 0 ? 0 : 1) || ints[at + 1] !== key || ints[at + 2] !== blocked ||
        this.#floats[fe] !== head.priority || this.#floats[fe + 1] !== head.seq
      ) changed = true;
      // A key the table cannot hold is not published: the group cannot read its counter.
      ints[at] = key < 0 ? 0 : 1;
      ints[at + 1] = key;
      ints[at + 2] = blocked;
      // Not announced when it alone changed: it moves no waiter ahead, only a floor.
      ints[at + 3] = head.nextKeyId === undefined ? -1 : this.#keyIndex(head.nextKeyId);
      this.#floats[fe] = head.priority;
      this.#floats[fe + 1] = head.seq;
    }
    if (changed) this.#poke();
  }

  /** Who holds the lock: 0 nobody, else the owner's number (worker index + 1; supervisor last). */
  holder(): number {
    return Atomics.load(this.#ints, LOCK);
  }

  /** The poke word: it changes whenever a worker's published waiters changed. */
  pokes(): number {
    return Atomics.load(this.#ints, POKE);
  }

  /** Resolves once the poke word moved past `seen`. */
  poked(seen: number): Promise<void> {
    const r = Atomics.waitAsync(this.#ints, POKE, seen);
    return r.async ? r.value.then(() => {}) : Promise.resolve();
  }

  /**
   * Worker `worker` died: its published waiters are gone (they were its requests), and a lock it
   * held is let go. Called by the supervisor.
   */
  workerDied(worker: number): void {
    Atomics.compareExchange(this.#ints, LOCK, worker + 1, 0);
    for (let b = 0; b < BANDS; b++) {
      Atomics.store(this.#ints, this.#entryInt(worker * BANDS + b), 0);
    }
    this.#poke();
  }

  #poke(): void {
    Atomics.add(this.#ints, POKE, 1);
    Atomics.notify(this.#ints, POKE);
  }

  /**
   * Takes the lock: a short spin (the holder runs a few loads and stores on another core), then
   * waits of at most 1 ms each (the holder's thread may be descheduled: the core goes to it),
   * never longer than `LOCK_WAIT_MS` in all.
   */
  #acquire(): void {
    const ints = this.#ints;
    const mine = this.#owner;
    let since = 0;
    for (let spins = 0;; spins++) {
      const held = Atomics.compareExchange(ints, LOCK, 0, mine);
      if (held === 0) return;
      if (spins < 200) continue;
      const now = performance.now();
      if (since === 0) since = now;
      else if (now - since > LOCK_WAIT_MS) throw new ShareBoardLockTimeout(held, now - since);
      Atomics.wait(ints, LOCK, held, 1);
    }
  }

  #release(): void {
    Atomics.store(this.#ints, LOCK, 0);
    Atomics.notify(this.#ints, LOCK, 1);
  }

  /**
   * Whether `pred` holds for a published entry of another worker (given that worker's round
   * generation); stops at the first that does. `atomic`: read the words atomically (outside the
   * lock).
   */
  #someOther(pred: (entry: number, roundGen: number) => boolean, atomic = false): boolean {
    const ints = this.#ints;
    for (let w = 0; w < this.#size.workers; w++) {
      if (w === this.#worker) continue;
      const roundGen = ints[INT_HEAD + w * WORKER_INTS];
      for (let b = 0; b < BANDS; b++) {
        const e = w * BANDS + b;
        const at = this.#entryInt(e);
        if ((atomic ? Atomics.load(ints, at) : ints[at]) === 1 && pred(e, roundGen)) return true;
      }
    }
    return false;
  }

  #entryInt(entry: number): number {
    const w = Math.floor(entry / BANDS);
    return INT_HEAD + w * WORKER_INTS + 1 + (entry % BANDS) * ENTRY_INTS;
  }

  #keyIndex(keyId: string): number {
    const row = this.#keys.slot(SHARE + keyId);
    return row < 0 ? -1 : this.#keys.rowIndex(row);
  }

  /** The band-time slot of `priority`; `add`: claim one when missing (-1 when all are taken). */
  #band(priority: number, add: boolean): number {
    const n = this.#ints[BAND_COUNT];
    for (let i = 0; i < n; i++) if (this.#floats[this.#bandAt + i * 2] === priority) return i;
    if (!add || n >= BAND_TIMES) return -1;
    this.#floats[this.#bandAt + n * 2] = priority;
    this.#floats[this.#bandAt + n * 2 + 1] = 0;
    this.#ints[BAND_COUNT] = n + 1;
    return n;
  }
}

const SHARE = "share ";
