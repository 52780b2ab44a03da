/**
 * Rendezvous (highest random weight) hashing: a session key ranks the nodes the same way in every
 * worker and every frontend, with no shared state; adding or removing a node moves only the
 * sessions whose first choice it is (or becomes). Weighted as Schindelhauer and Schomaker's
 * logarithmic method: a node of weight w wins w / Σw of the keys.
 *
 * Keys are client input (a `prompt_cache_key`, a session header): `keyHash` reads at most
 * {@link MAX_HASHED_CHARS} characters of one, in two fixed windows, so a megabyte key costs what
 * a short one costs and is never kept.
 *
 * @module
 */

/** Characters of a key that are hashed: the first and last half of this, and its length. */
export const MAX_HASHED_CHARS = 8192;

/** 32-bit FNV-1a of `text[from, to)`, continued from `seed`. */
export function fnv1a32(text: string, seed = 0x811c9dc5, from = 0, to = text.length): number {
  let h = seed >>> 0;
  for (let i = from; i < to; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A final avalanche (murmur3's fmix32): FNV's low bits alone spread poorly. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The 32-bit hash of a key in bounded time: all of a short key; of a long one, its first and last
 * `MAX_HASHED_CHARS / 2` characters and its length (two long keys that differ only in their middle
 * collide — they are hints for placement, not identities).
 */
export function keyHash(key: string): number {
  if (key.length <= MAX_HASHED_CHARS) return mix32(fnv1a32(key));
  const half = MAX_HASHED_CHARS / 2;
  let h = fnv1a32(key, 0x811c9dc5, 0, half);
  h = fnv1a32(key, h, key.length - half, key.length);
  return mix32(h ^ Math.imul(key.length, 0x9e3779b1));
}

/**
 * The rendezvous score of one node for one key: higher wins. `weight` ≤ 0 never wins over a
 * positive one. `-w / ln(u)` with u uniform in (0, 1) drawn from the pair's hash.
 */
export function rendezvousScore(key: number, node: number, weight: number): number {
  const u = (mix32((key ^ Math.imul(node, 0x27d4eb2d)) >>> 0) + 0.5) / 4294967296;
  return weight > 0 ? -weight / Math.log(u) : -Infinity;
}

/**
 * Indexes of `nodes` from the key's first choice to its last (ties by index). `hashOf` answers a
 * node's stable hash (of its id), `weightOf` its weight.
 */
export function rendezvousOrder<T>(
  key: number,
  nodes: readonly T[],
  hashOf: (node: T) => number,
  weightOf: (node: T) => number,
): number[] {
  const scores = nodes.map((n) => rendezvousScore(key, hashOf(n), weightOf(n)));
  const order = nodes.map((_, i) => i);
  order.sort((a, b) => scores[b] - scores[a] || a - b);
  return order;
}
