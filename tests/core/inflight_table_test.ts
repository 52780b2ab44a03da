import { assert, assertEquals } from "../_assert.ts";
import { InflightTable, inflightTableBytes, nodeIdHash } from "../../src/core/inflight_table.ts";

Deno.test("inflight table: a slot per node id, taken up to the limit, given back", () => {
  const t = InflightTable.local(8);
  const a = t.slot("a");
  const b = t.slot("b");
  assert(a !== b, "two ids, two rows");
  assertEquals(t.slot("a"), a, "the same id finds its row again");
  assert(t.tryTake(a, 2), "first");
  assert(t.tryTake(a, 2), "second");
  assertEquals(t.tryTake(a, 2), false, "third refused at limit 2");
  assert(t.tryTake(b, 0), "limit 0 = unlimited");
  assertEquals([t.total(a), t.total(b)], [2, 1]);
  t.release(a);
  assertEquals(t.total(a), 1);
  t.release(b);
  t.release(b);
  assertEquals(t.total(b), 0, "never below 0: a second release of one take is a no-op");
  assertEquals(t.generation(), 2, "each real release bumps the generation once");
});

Deno.test("inflight table: a full table answers -1 and colliding hashes probe on", () => {
  const t = InflightTable.local(3);
  const rows = new Set(["x", "y", "z"].map((id) => t.slot(id)));
  assertEquals(rows.size, 3);
  assertEquals(t.slot("w"), -1, "no room for a fourth id");
  assertEquals(t.slot("y"), [...rows][1], "known ids still found");
});

Deno.test("inflight table: node id hashes differ and are never 0:0", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 10_000; i++) seen.add(nodeIdHash(`node-${i}`).join(":"));
  assertEquals(seen.size, 10_000);
  assert(nodeIdHash("").join(":") !== "0:0");
});

Deno.test("inflight table: two workers on one shared buffer never pass the limit together", async () => {
  const size = { capacity: 16, workers: 2 };
  const buffer = new SharedArrayBuffer(inflightTableBytes(size));
  const url = new URL("./_workers/inflight_hammer.ts", import.meta.url);
  const run = (worker: number, hold: boolean) =>
    new Promise<{ taken: number; over: number; held: number }>((resolve, reject) => {
      const w = new Worker(url, { type: "module" });
      w.onmessage = (e) => {
        w.terminate();
        resolve(e.data);
      };
      w.onerror = (e) => {
        w.terminate();
        reject(e);
      };
      w.postMessage({ buffer, size, worker, rounds: 50_000, limit: 4, hold });
    });
  const [a, b] = await Promise.all([run(0, false), run(1, false)]);
  assertEquals(a.over + b.over, 0, "the group total never passed 4");
  assert(a.taken > 0 && b.taken > 0, `both took slots (${a.taken}, ${b.taken})`);
  const main = new InflightTable(buffer, size, 0);
  const row = main.slot("node-a");
  assertEquals(main.total(row), 0, "every take was given back");

  // Holding: the two workers together take exactly the limit; a dead one's slots come back.
  const [c, d] = await Promise.all([run(0, true), run(1, true)]);
  assertEquals(c.taken + d.taken, 4, "exactly 4 slots taken across both workers");
  assertEquals(main.total(row), 4);
  assertEquals(main.releaseWorker(1), d.held, "worker 1's holdings given back");
  assertEquals(main.total(row), c.held);
});

Deno.test("inflight table: a release in one worker wakes a waiter in another", async () => {
  const size = { capacity: 4, workers: 2 };
  const buffer = new SharedArrayBuffer(inflightTableBytes(size));
  const mine = new InflightTable(buffer, size, 0);
  const theirs = new InflightTable(buffer, size, 1);
  const row = theirs.slot("n");
  assert(theirs.tryTake(row, 1));
  const seen = mine.generation();
  const woken = mine.released(seen);
  theirs.release(row);
  await woken;
  assert(mine.generation() > seen, "the generation moved");
  assert(mine.tryTake(mine.slot("n"), 1), "the freed slot is taken by the other worker");
});
