import { assert, assertEquals } from "../_assert.ts";
import { PrefixIndex, prefixIndexBytes } from "../../src/core/prefix_index.ts";

const chain = (seed: number, n: number) =>
  Uint32Array.from({ length: n }, (_, i) => seed * 1000 + i + 1);

Deno.test("prefix index: the longest remembered prefix per node", () => {
  const clock = { t: 1_700_000_000_000 };
  const index = new PrefixIndex({ capacity: 4096, ttlMs: 60_000, now: () => clock.t });
  const prompt = chain(1, 40);
  index.record(7, prompt.subarray(0, 25));
  assertEquals(index.matched(7, prompt), 25);
  assertEquals(index.matched(8, prompt), 0, "another node holds nothing");
  assertEquals(index.matched(7, chain(2, 40)), 0, "another prompt matches nothing");
  clock.t += 61_000;
  assertEquals(index.matched(7, prompt), 0, "past the time-to-live");
  index.record(7, prompt);
  index.forgetNode(7);
  assertEquals(index.matched(7, prompt), 0, "forgotten");
});

Deno.test("prefix index: memory is fixed; a million blocks fit in 12 MB, newest kept", () => {
  assertEquals(prefixIndexBytes(1_000_000), 12_000_000);
  const clock = { t: 1_700_000_000_000 };
  const index = new PrefixIndex({ capacity: 1024, ttlMs: 600_000, now: () => clock.t });
  for (let s = 1; s <= 200; s++) {
    index.record(1, chain(s, 16));
    clock.t += 1000;
  }
  assert(index.size() <= 1024);
  assertEquals(index.matched(1, chain(200, 16)), 16, "the newest prompt is all there");
  assert(index.matched(1, chain(1, 16)) < 16, "the oldest made room");
});

Deno.test("prefix index: two indexes over one shared buffer see each other's entries", () => {
  const buffer = PrefixIndex.buffer(4096);
  const now = () => 1_700_000_000_000;
  const a = new PrefixIndex({ capacity: 4096, ttlMs: 60_000, now, buffer });
  const b = new PrefixIndex({ capacity: 4096, ttlMs: 60_000, now, buffer });
  a.record(3, chain(5, 10));
  assertEquals(b.matched(3, chain(5, 10)), 10);
});

Deno.test("prefix index: a fresh chain is extended by its new blocks; a stale one refreshed whole", () => {
  const clock = { t: 1_700_000_000_000 };
  const index = new PrefixIndex({ capacity: 4096, ttlMs: 80_000, now: () => clock.t });
  const prompt = chain(3, 30);
  index.record(1, prompt.subarray(0, 20));
  clock.t += 5_000; // within an eighth of the time-to-live: only blocks 20.. are written
  index.record(1, prompt, 20);
  assertEquals(index.matched(1, prompt), 30);
  clock.t += 76_000; // blocks 0..19 are 81 s old, 20..29 are 76 s: the head expired
  assertEquals(index.matched(1, prompt), 0);
  index.record(1, prompt, 0);
  clock.t += 20_000; // older than an eighth now: a record with known blocks refreshes them all
  index.record(1, prompt, 30);
  clock.t += 70_000;
  assertEquals(index.matched(1, prompt), 30, "refreshed 70 s ago, within the 80 s");
});

Deno.test("prefix index: matched asks the first block, then the last, then bisects", () => {
  const index = new PrefixIndex({ capacity: 4096, ttlMs: 60_000, now: () => 1_700_000_000_000 });
  const prompt = chain(3, 100);
  assertEquals(index.matched(1, new Uint32Array(0)), 0);
  index.record(1, prompt);
  assertEquals(index.matched(1, prompt), 100, "all of it");
  assertEquals(index.matched(1, prompt.subarray(0, 1)), 1, "one block");
  index.record(2, prompt.subarray(0, 37));
  assertEquals(index.matched(2, prompt), 37, "a part of it");
  index.record(3, prompt.subarray(0, 1));
  assertEquals(index.matched(3, prompt), 1, "its first block only");
  assertEquals(index.matched(4, prompt), 0, "none of it");
});
