import { assert, assertEquals } from "../_assert.ts";
import { keyHash, MAX_HASHED_CHARS, rendezvousOrder } from "../../src/core/rendezvous.ts";

const nodes = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `n${i}`, weight: 1 }));
const first = (key: string, list: { id: string; weight: number }[]) =>
  list[rendezvousOrder(keyHash(key), list, (n) => keyHash(n.id), (n) => n.weight)[0]].id;

Deno.test("rendezvous: keys spread evenly, and by weight", () => {
  const list = nodes(4);
  const counts: Record<string, number> = {};
  for (let i = 0; i < 8000; i++) {
    counts[first(`session-${i}`, list)] = (counts[first(`session-${i}`, list)] ?? 0) + 1;
  }
  for (const id of ["n0", "n1", "n2", "n3"]) {
    assert(counts[id] > 1700 && counts[id] < 2300, `${id}: ${counts[id]}`);
  }
  const weighted = [{ id: "big", weight: 3 }, { id: "small", weight: 1 }];
  let big = 0;
  for (let i = 0; i < 8000; i++) if (first(`s${i}`, weighted) === "big") big++;
  assert(big > 5700 && big < 6300, `big took ${big} of 8000`);
});

Deno.test("rendezvous: removing a node moves only the sessions it held", () => {
  const four = nodes(4);
  const three = four.filter((n) => n.id !== "n2");
  let moved = 0;
  for (let i = 0; i < 4000; i++) {
    const before = first(`k${i}`, four);
    const after = first(`k${i}`, three);
    if (before !== after) {
      moved++;
      assertEquals(before, "n2");
    }
  }
  assert(moved > 800 && moved < 1200, `moved ${moved}`);
});

Deno.test("a megabyte key hashes in bounded time: head, tail and length", () => {
  const big = "x".repeat(1 << 20);
  const started = performance.now();
  for (let i = 0; i < 100; i++) keyHash(big);
  assert(performance.now() - started < 500, "100 hashes of a 1 MB key");
  assert(keyHash(big) !== keyHash(big + "y"), "the tail counts");
  assert(keyHash("y" + big) !== keyHash(big + "x"), "the head counts");
  assert(keyHash("x".repeat(MAX_HASHED_CHARS)) !== keyHash("x".repeat(MAX_HASHED_CHARS + 1)));
});
