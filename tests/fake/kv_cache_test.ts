import { assert, assertEquals } from "../_assert.ts";
import { blockHashes, KvBlockCache } from "../../src/fake/kv_cache.ts";

const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

Deno.test("block hashes are chained: a shared prefix shares hashes, a change breaks the rest", () => {
  const a = [...words("s", 8), ...words("a", 8)];
  const b = [...words("s", 8), ...words("b", 8)];
  const ha = blockHashes(a, 4);
  const hb = blockHashes(b, 4);
  assertEquals(ha.length, 4);
  assertEquals(ha.slice(0, 2), hb.slice(0, 2));
  assert(ha[2] !== hb[2] && ha[3] !== hb[3]);
  // The same block content after a different parent hashes differently.
  const c = [...words("x", 4), ...words("s", 4)];
  assert(blockHashes(c, 4)[1] !== ha[0]);
  // A partial block has no hash; continuing the chain gives the same hashes as hashing at once.
  assertEquals(blockHashes(a.slice(0, 7), 4).length, 1);
  assertEquals(blockHashes(a, 4, 8, ha[1]), ha.slice(2));
});

Deno.test("KV cache: a released sequence's blocks are found by the next one sharing the prefix", () => {
  const cache = new KvBlockCache(4, 16);
  const prompt = words("p", 12);
  const first = cache.tryStart(blockHashes(prompt, 4), cache.blocksFor(12, 4))!;
  assertEquals(first.cachedTokens, 0);
  assertEquals(cache.usedBlocks, 4);
  cache.release(first);
  assertEquals(cache.usedBlocks, 0);
  assertEquals(cache.cachedBlocks, 3);
  const second = cache.tryStart(blockHashes([...prompt, "q"], 4), cache.blocksFor(13, 4))!;
  assertEquals(second.cachedTokens, 12);
});

Deno.test("KV cache: idle blocks are evicted least recently freed first, pinned ones never", () => {
  const cache = new KvBlockCache(2, 6);
  const a = cache.tryStart(blockHashes(words("a", 4), 2), 2)!; // 2 hashed blocks
  assert(cache.tryStart(blockHashes(words("b", 4), 2), 2) !== undefined);
  cache.release(a);
  // c needs 3 new blocks beside b's 2 pinned: one of a's 2 idle blocks goes — its deeper one,
  // freed first — so a's root block is still found; b's pinned blocks stay.
  assert(cache.tryStart(blockHashes(words("c", 6), 2), 3) !== undefined);
  assertEquals(cache.matched(blockHashes(words("a", 4), 2)), 1);
  assertEquals(cache.matched(blockHashes(words("b", 4), 2)), 2);
  // Nothing fits beside 5 pinned blocks when 2 are needed.
  assertEquals(cache.tryStart(blockHashes(words("d", 4), 2), 2), undefined);
  assertEquals(cache.usedBlocks, 5);
});

Deno.test("KV cache: a sequence's output blocks are cached when it ends", () => {
  const cache = new KvBlockCache(2, 8);
  const prompt = words("p", 3);
  const output = words("o", 3);
  const hashes = blockHashes(prompt, 2);
  const lease = cache.tryStart(hashes, cache.blocksFor(3, 3))!;
  const more = blockHashes([...prompt.slice(2), ...output], 2, 0, hashes[0]);
  cache.release(lease, more);
  // The next turn sends prompt + output back: all three full blocks are cached.
  assertEquals(cache.matched(blockHashes([...prompt, ...output, "next"], 2)), 3);
});
