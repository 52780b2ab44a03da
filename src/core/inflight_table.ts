/**
 * Per-node inflight counters in one block of memory that the workers of a process share (ADR
 * 0025). Admission takes a slot with one compare-and-swap on the node's total, so a group of
 * workers never holds more than the process's share of a node's `max_conns`, and no worker
 * refuses while a slot is free in another. Each worker's own holding is kept beside the total,
 * so the slots of a worker that died can be given back.
 *
 * A single process uses the same table on a plain (non-shared) buffer: one code path.
 *
 * Layout, in 32-bit words: word 0 is the release generation (bumped and notified on every
 * release, so waiters in every worker wake); then `capacity` rows of
 * `[claimed, hash-hi, hash-lo, total, worker 0, …, worker W-1]`, found by open addressing on a
 * 64-bit hash of the node id.
 *
 * @module
 */

/** Words before the first row. */
const HEADER = 1;
/** Words of a row before the per-worker holdings. */
const ROW_HEAD = 4;

/** Sizes of a table. */
export interface InflightTableSize {
  /** Distinct node ids the table can hold (a power of two is not required). */
  capacity: number;
  /** Workers sharing it. */
  workers: number;
}

/** The bytes a table of this size needs. */
export function inflightTableBytes(size: InflightTableSize): number {
  return (HEADER + size.capacity * (ROW_HEAD + size.workers)) * 4;
}

/** 64-bit FNV-1a of a string, as two unsigned 32-bit halves (never both 0). */
export function nodeIdHash(id: string): [number, number] {
  let hi = 0xcbf29ce4 | 0;
  let lo = 0x84222325 | 0;
  for (let i = 0; i < id.length; i++) {
    lo ^= id.charCodeAt(i);
    // multiply the 64-bit (hi, lo) by the FNV prime 0x100000001b3
    const a = Math.imul(lo, 0x1b3);
    const carry = Math.floor(((lo >>> 0) * 0x1b3) / 0x100000000);
    hi = (Math.imul(hi, 0x1b3) + (lo << 8) + carry) | 0;
    lo = a;
  }
  if (hi === 0 && lo === 0) lo = 1;
  return [hi | 0, lo | 0];
}

/** Shared per-node inflight counters. */
export class InflightTable {
  readonly words: Int32Array;
  readonly capacity: number;
  readonly workers: number;
  /** This worker's column. */
  readonly worker: number;
  /** Slot of a node id, cached per worker (ids are claimed once, never moved). */
  readonly #slots = new Map<string, number>();

  /**
   * A table over `buffer` (a SharedArrayBuffer shared by the workers, or a plain ArrayBuffer for
   * one process), seen by worker number `worker`.
   */
  constructor(buffer: ArrayBufferLike, size: InflightTableSize, worker = 0) {
    if (buffer.byteLength < inflightTableBytes(size)) {
      throw new RangeError("inflight table buffer too small");
    }
    if (!(worker >= 0 && worker < size.workers)) throw new RangeError(`no worker ${worker}`);
    this.words = new Int32Array(buffer);
    this.capacity = size.capacity;
    this.workers = size.workers;
    this.worker = worker;
  }

  /** A table for one process alone. */
  static local(capacity = 4096): InflightTable {
    const size = { capacity, workers: 1 };
    return new InflightTable(new ArrayBuffer(inflightTableBytes(size)), size, 0);
  }

  /** A table `workers` workers can share (worker 0's view; hand the buffer to the others). */
  static shared(capacity: number, workers: number): InflightTable {
    const size = { capacity, workers };
    return new InflightTable(new SharedArrayBuffer(inflightTableBytes(size)), size, 0);
  }

  /** The row offset of a node id, claimed on first use; -1 when the table is full. */
  slot(id: string): number {
    const cached = this.#slots.get(id);
    if (cached !== undefined) return cached;
    const [hi, lo] = nodeIdHash(id);
    const w = this.words;
    const rowWords = ROW_HEAD + this.workers;
    const start = ((hi ^ lo) >>> 0) % this.capacity;
    for (let probe = 0; probe < this.capacity; probe++) {
      const row = HEADER + ((start + probe) % this.capacity) * rowWords;
      let claimed = Atomics.load(w, row);
      if (claimed === 0) {
        // Claim the row; a claim in progress (1) is waited out below.
        if (Atomics.compareExchange(w, row, 0, 1) === 0) {
          Atomics.store(w, row + 1, hi);
          Atomics.store(w, row + 2, lo);
          Atomics.store(w, row, 2);
          this.#slots.set(id, row);
          return row;
        }
        claimed = Atomics.load(w, row);
      }
      // Another worker is writing the hash (a few instructions): spin until it is published.
      for (let i = 0; claimed === 1 && i < 1_000_000; i++) claimed = Atomics.load(w, row);
      if (Atomics.load(w, row + 1) === hi && Atomics.load(w, row + 2) === lo) {
        this.#slots.set(id, row);
        return row;
      }
    }
    return -1;
  }

  /** The number (0 … capacity-1) of the row at offset `row` (for arrays beside the table). */
  rowIndex(row: number): number {
    return (row - HEADER) / (ROW_HEAD + this.workers);
  }

  /** Takes one slot of the row when its total is below `limit` (0 = no limit). */
  tryTake(row: number, limit: number): boolean {
    const w = this.words;
    const total = row + 3;
    if (limit > 0) {
      for (;;) {
        const now = Atomics.load(w, total);
        if (now >= limit) return false;
        if (Atomics.compareExchange(w, total, now, now + 1) === now) break;
      }
    } else {
      Atomics.add(w, total, 1);
    }
    Atomics.add(w, row + ROW_HEAD + this.worker, 1);
    return true;
  }

  /** Gives one slot of the row back (never below 0) and wakes the waiters of every worker. */
  release(row: number): void {
    const w = this.words;
    const own = row + ROW_HEAD + this.worker;
    if (Atomics.load(w, own) <= 0) return;
    Atomics.sub(w, own, 1);
    Atomics.sub(w, row + 3, 1);
    this.#bump();
  }

  /** Requests in flight at the row's node, all workers together. */
  total(row: number): number {
    return Atomics.load(this.words, row + 3);
  }

  /** Requests in flight at the row's node held by one worker (default this one). */
  held(row: number, worker = this.worker): number {
    return Atomics.load(this.words, row + ROW_HEAD + worker);
  }

  /**
   * Gives back every slot a (dead) worker held, in every row; answers how many. Called by the
   * process that supervises the workers.
   */
  releaseWorker(worker: number): number {
    const w = this.words;
    const rowWords = ROW_HEAD + this.workers;
    let freed = 0;
    for (let r = 0; r < this.capacity; r++) {
      const row = HEADER + r * rowWords;
      if (Atomics.load(w, row) !== 2) continue;
      const held = Atomics.exchange(w, row + ROW_HEAD + worker, 0);
      if (held > 0) {
        Atomics.sub(w, row + 3, held);
        freed += held;
      }
    }
    if (freed > 0) this.#bump();
    return freed;
  }

  /** The release generation: it changes whenever a slot was given back anywhere. */
  generation(): number {
    return Atomics.load(this.words, 0);
  }

  /**
   * Resolves once the generation moved past `seen` (a slot freed in some worker), or at once
   * when it already has. Only meaningful on a shared buffer.
   */
  released(seen: number): Promise<void> {
    const r = Atomics.waitAsync(this.words, 0, seen);
    return r.async ? r.value.then(() => {}) : Promise.resolve();
  }

  #bump(): void {
    Atomics.add(this.words, 0, 1);
    if (this.workers > 1) Atomics.notify(this.words, 0);
  }
}
