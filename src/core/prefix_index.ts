/**
 * The prefix index: which node was recently sent which prompt prefix, remembered as the chained
 * hashes of the prompt's blocks (`route_hint.ts`), per node, with no engine events — an
 * approximation of each node's KV cache built from Skeid's own routing.
 *
 * Memory is fixed when the index is made: `capacity` entries of three 32-bit words (block ⊗ node
 * key, node, last routed second), 12 bytes each — a million remembered blocks are 12 MB,
 * whatever the traffic. Entries sit in buckets of {@link WAYS}; a new entry takes a free place or
 * the least recently routed one of its bucket (LRU within the bucket), and an entry older than
 * the time-to-live never matches. Forgetting a node (restart, ejection, its cache reset) clears
 * its entries in one pass.
 *
 * The words can live in a SharedArrayBuffer shared by the workers of one process: a block one
 * worker routed is then warm for all of them. Writes are plain stores, unlocked: two workers
 * writing one bucket at once can lose one entry, which costs a cache miss and nothing else.
 *
 * @module
 */
import { mix32 } from "./rendezvous.ts";

/** Entries per bucket. */
export const WAYS = 4;

/** Words per entry: key, node, second. */
const WORDS = 3;

/** Bytes an index of `capacity` entries takes. */
export function prefixIndexBytes(capacity: number): number {
  return bucketCount(capacity) * WAYS * WORDS * 4;
}

function bucketCount(capacity: number): number {
  return Math.max(1, Math.ceil(Math.max(1, Math.floor(capacity)) / WAYS));
}

/** Options of a prefix index. */
export interface PrefixIndexOptions {
  /** Blocks remembered at most (all nodes together). */
  capacity: number;
  /** How long an entry matches after its last routing, ms. */
  ttlMs: number;
  /** Epoch-ms clock. */
  now: () => number;
  /** Words to use (shared between workers); default a buffer of this index alone. */
  buffer?: SharedArrayBuffer | ArrayBuffer;
}

/** A bounded, time-limited map from (node, block hash) to "recently routed there". */
export class PrefixIndex {
  readonly #words: Uint32Array;
  readonly #buckets: number;
  readonly #ttlS: number;
  readonly #now: () => number;

  /** An empty index (or one over a shared buffer made by {@link PrefixIndex.buffer}). */
  constructor(opts: PrefixIndexOptions) {
    this.#buckets = bucketCount(opts.capacity);
    const bytes = this.#buckets * WAYS * WORDS * 4;
    const buffer = opts.buffer ?? new ArrayBuffer(bytes);
    if (buffer.byteLength < bytes) {
      throw new RangeError(`prefix index buffer: ${buffer.byteLength} bytes, needs ${bytes}`);
    }
    this.#words = new Uint32Array(buffer, 0, this.#buckets * WAYS * WORDS);
    this.#ttlS = Math.max(1, Math.ceil(opts.ttlMs / 1000));
    this.#now = opts.now;
  }

  /** A buffer for an index of `capacity` entries that several workers can share. */
  static buffer(capacity: number): SharedArrayBuffer {
    return new SharedArrayBuffer(prefixIndexBytes(capacity));
  }

  /** Entries the index can hold. */
  get capacity(): number {
    return this.#buckets * WAYS;
  }

  /** Bytes of its words. */
  get bytes(): number {
    return this.#words.byteLength;
  }

  /**
   * Remembers that `blocks` (a prompt's chained block hashes) were routed to `node` now. `known`:
   * how many leading blocks the caller just found remembered there (`matched`); while the chain
   * was refreshed less than an eighth of the time-to-live ago (its first block's time), only the
   * blocks after them are written — a long conversation costs its new blocks, not all of them.
   */
  record(node: number, blocks: ArrayLike<number>, known = 0): void {
    this.recordFrom(node, blocks, this.recordStart(node, blocks, known), Infinity);
  }

  /**
   * Where {@link PrefixIndex.record} would start writing `blocks` for `node`: after the `known`
   * leading ones while the chain is fresh, else at the first (a refresh).
   */
  recordStart(node: number, blocks: ArrayLike<number>, known: number): number {
    if (known <= 0 || known > blocks.length) return 0;
    const at = this.#find(node, blocks[0]);
    return at >= 0 && this.#second() - this.#words[at + 2] < this.#ttlS / 8 ? known : 0;
  }

  /**
   * Writes `blocks[from, from + budget)` for `node` (in order, so what is written is always a
   * prefix of the chain) and answers where it stopped: `blocks.length` when all are written.
   * Each write is a likely cache miss in a table of megabytes; a caller bounding the work of
   * one pick writes the rest later.
   */
  recordFrom(node: number, blocks: ArrayLike<number>, from: number, budget: number): number {
    const second = this.#second();
    const w = this.#words;
    const end = Math.min(blocks.length, from + budget);
    for (let i = from; i < end; i++) {
      const key = entryKey(blocks[i], node);
      const base = (key % this.#buckets) * WAYS * WORDS;
      let place = -1;
      let oldest = Infinity;
      for (let j = 0; j < WAYS; j++) {
        const at = base + j * WORDS;
        if (w[at] === key && w[at + 1] === node) {
          place = at;
          break;
        }
        const age = w[at] === 0 ? -1 : w[at + 2];
        if (age < oldest) {
          oldest = age;
          place = at;
        }
      }
      w[place] = key;
      w[place + 1] = node;
      w[place + 2] = second;
    }
    return end;
  }

  /** Whether block `block` is remembered for `node` and younger than the time-to-live. */
  has(node: number, block: number): boolean {
    return this.#has(node, block, this.#second() - this.#ttlS);
  }

  /** `has`, with the oldest second still live computed by the caller (once per prompt). */
  #has(node: number, block: number, oldest: number): boolean {
    const at = this.#find(node, block);
    return at >= 0 && this.#words[at + 2] >= oldest;
  }

  /** Where the entry of (node, block) is in the words, or -1. */
  #find(node: number, block: number): number {
    const key = entryKey(block, node);
    const base = (key % this.#buckets) * WAYS * WORDS;
    const w = this.#words;
    for (let j = 0; j < WAYS; j++) {
      const at = base + j * WORDS;
      if (w[at] === key && w[at + 1] === node) return at;
    }
    return -1;
  }

  /**
   * How many leading blocks of `blocks` are remembered for `node`: the longest prefix, found by
   * bisection — chained hashes are recorded a whole prompt at a time, so block i being there
   * means (up to evictions) blocks 0..i are too. The first block is asked first (most nodes of a
   * fleet hold none of a prompt: one lookup each), then the last (a prompt sent again: two);
   * only a node holding part of it costs O(log n) more. Each lookup is a likely cache miss in a
   * table of megabytes, so their number is the pick's cost.
   */
  matched(node: number, blocks: ArrayLike<number>): number {
    const n = blocks.length;
    if (n === 0) return 0;
    const oldest = this.#second() - this.#ttlS;
    if (!this.#has(node, blocks[0], oldest)) return 0;
    if (n === 1 || this.#has(node, blocks[n - 1], oldest)) return n;
    let lo = 1; // blocks [0, lo) are known to match
    let hi = n - 1; // blocks [hi, n) are known not to
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#has(node, blocks[mid], oldest)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Forgets every entry of `node` (it restarted, was ejected, or its cache was reset). */
  forgetNode(node: number): void {
    const w = this.#words;
    for (let at = 0; at < w.length; at += WORDS) {
      if (w[at] !== 0 && w[at + 1] === node) w[at] = 0;
    }
  }

  /** Entries held now (live and expired not yet replaced); one pass, for metrics. */
  size(): number {
    let n = 0;
    const w = this.#words;
    const oldest = this.#second() - this.#ttlS;
    for (let at = 0; at < w.length; at += WORDS) if (w[at] !== 0 && w[at + 2] >= oldest) n++;
    return n;
  }

  #second(): number {
    return Math.floor(this.#now() / 1000);
  }
}

/** The entry key of a (block, node) pair: never 0 (0 marks a free place). */
function entryKey(block: number, node: number): number {
  return (mix32((block ^ Math.imul(node, 0x9e3779b1)) >>> 0) | 1) >>> 0;
}
