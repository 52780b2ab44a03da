/**
 * The simulated engine's KV block cache, as vLLM's automatic prefix caching keeps it: the prompt
 * is cut into blocks of `blockSize` tokens, each full block named by a hash chained over every
 * block before it (so equal hashes mean equal prefixes), and blocks no running sequence uses stay
 * cached until their room is needed, evicted least recently freed first.
 *
 * A sequence pins the blocks it uses: the cached prefix it found, the blocks it computes, and
 * private blocks for its partial last prompt block and its output. Pinned blocks are never
 * evicted; a sequence is only started when its blocks fit (the engine keeps it queued otherwise).
 *
 * @module
 */

/** 32-bit FNV-1a of `text`, continued from `seed` (chains one block onto its parent). */
function fnv1a(text: string, seed: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** FNV offset basis: the chain's seed before the first block. */
const CHAIN_SEED = 0x811c9dc5;

/**
 * Chained hashes of the full blocks of `tokens`, from `from` tokens on, continuing `parent`
 * (the hash of the block ending at `from`, or the seed at 0). A block's hash covers its tokens
 * and its parent's hash, so two sequences share block i's hash only when they share blocks 0..i.
 */
export function blockHashes(
  tokens: readonly string[],
  blockSize: number,
  from = 0,
  parent = CHAIN_SEED,
): number[] {
  const out: number[] = [];
  let h = parent;
  for (let start = from; start + blockSize <= tokens.length; start += blockSize) {
    h = CHAIN_SEED ^ Math.imul(h, 0x9e3779b1);
    for (let i = start; i < start + blockSize; i++) h = fnv1a(tokens[i] + "\u0000", h);
    // Never 0: 0 would read as "no hash" to a caller that keeps the chain in a typed array.
    out.push(h === 0 ? 1 : h);
  }
  return out;
}

/** What a started sequence holds in the cache; given back once, by `release`. */
export interface CacheLease {
  /** The hashed blocks it pinned, in prompt order (cached prefix first). */
  hashes: number[];
  /** Blocks pinned without a hash (partial prompt block, output). */
  private: number;
  /** Prompt tokens found cached (matched blocks × block size). */
  cachedTokens: number;
  /** Whether `release` ran (a lease is given back once). */
  released: boolean;
}

/** A KV block cache of `numBlocks` blocks of `blockSize` tokens. */
export class KvBlockCache {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Blocks in the cache. */
  readonly numBlocks: number;
  /** Hashed blocks present (pinned or idle) → how many sequences pin it. */
  readonly #refs = new Map<number, number>();
  /** Hashed blocks no sequence pins, least recently freed first (Map order is the LRU). */
  readonly #idle = new Map<number, true>();
  /** Blocks pinned without a hash. */
  #private = 0;

  /** A cache; both sizes are floored at 1. */
  constructor(blockSize: number, numBlocks: number) {
    this.blockSize = Math.max(1, Math.floor(blockSize));
    this.numBlocks = Math.max(1, Math.floor(numBlocks));
  }

  /** Blocks some sequence pins (vLLM's "in use"). */
  get usedBlocks(): number {
    return this.#refs.size - this.#idle.size + this.#private;
  }

  /** Hashed blocks present, pinned or not. */
  get cachedBlocks(): number {
    return this.#refs.size;
  }

  /** Fraction of blocks in use, 0..1 (`vllm:kv_cache_usage_perc`). */
  get usage(): number {
    return this.usedBlocks / this.numBlocks;
  }

  /** Blocks a sequence of `promptTokens` + `outputTokens` needs in all. */
  blocksFor(promptTokens: number, outputTokens: number): number {
    return Math.max(1, Math.ceil((promptTokens + outputTokens) / this.blockSize));
  }

  /** How many leading blocks of `hashes` are cached now. */
  matched(hashes: readonly number[]): number {
    let n = 0;
    while (n < hashes.length && this.#refs.has(hashes[n])) n++;
    return n;
  }

  /**
   * Pins what a sequence needs, or answers undefined (nothing changed) when its blocks do not
   * fit beside the pinned ones. `hashes` are its full prompt blocks; `total` all its blocks.
   */
  tryStart(hashes: readonly number[], total: number): CacheLease | undefined {
    const matched = this.matched(hashes);
    let reused = 0; // matched blocks that were idle: pinning them takes room from eviction
    for (let i = 0; i < matched; i++) if (this.#idle.has(hashes[i])) reused++;
    const pinnedAfter = this.usedBlocks + reused + (total - matched);
    if (pinnedAfter > this.numBlocks) return undefined;
    for (let i = 0; i < hashes.length; i++) this.#pin(hashes[i]);
    const priv = total - hashes.length;
    this.#private += priv;
    this.#trim();
    return {
      hashes: hashes.slice(),
      private: priv,
      cachedTokens: matched * this.blockSize,
      released: false,
    };
  }

  /**
   * Gives a lease back. `more` are the hashes of the blocks its output completed (they turn
   * private blocks into cached ones). Blocks are freed deepest first, so the LRU evicts the
   * tail of a sequence before its shared root.
   */
  release(lease: CacheLease, more: readonly number[] = []): void {
    if (lease.released) return;
    lease.released = true;
    const extra = Math.min(more.length, lease.private);
    this.#private -= lease.private;
    for (let i = 0; i < extra; i++) this.#pin(more[i]);
    for (let i = extra - 1; i >= 0; i--) this.#unpin(more[i]);
    for (let i = lease.hashes.length - 1; i >= 0; i--) this.#unpin(lease.hashes[i]);
  }

  /** Forgets every idle block (vLLM's reset_prefix_cache). */
  reset(): void {
    for (const hash of this.#idle.keys()) this.#refs.delete(hash);
    this.#idle.clear();
  }

  #pin(hash: number): void {
    const refs = this.#refs.get(hash);
    if (refs !== undefined) {
      if (refs === 0) this.#idle.delete(hash);
      this.#refs.set(hash, refs + 1);
      return;
    }
    // A new block: make room from the idle ones, oldest first. tryStart checked it fits.
    this.#refs.set(hash, 1);
    this.#trim();
  }

  /** Evicts idle blocks, oldest first, until everything present fits in the cache. */
  #trim(): void {
    while (this.#refs.size + this.#private > this.numBlocks && this.#idle.size > 0) {
      const oldest = this.#idle.keys().next().value as number;
      this.#idle.delete(oldest);
      this.#refs.delete(oldest);
    }
  }

  #unpin(hash: number): void {
    const refs = this.#refs.get(hash);
    if (refs === undefined || refs === 0) return;
    if (refs === 1) {
      this.#refs.set(hash, 0);
      this.#idle.set(hash, true);
    } else this.#refs.set(hash, refs - 1);
  }
}
