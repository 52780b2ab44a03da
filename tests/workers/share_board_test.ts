/**
 * Two workers' fair-share queues over one `ShareBoard` (ADR 0025) order their waiters as one
 * queue: the queues and the board run in this isolate, as two workers' would over the shared
 * buffer.
 */
import { assert, assertEquals } from "../_assert.ts";
import { FairShareQueue, RENORMALISE_AT } from "../../src/core/fair_share.ts";
import { InflightTable } from "../../src/core/inflight_table.ts";
import { LOCK_WAIT_MS, ShareBoard } from "../../src/workers/share_board.ts";
import { DEFAULT_SHARE, type ShareSettings } from "../../src/core/key_policy.ts";

const SIZE = { workers: 2, keys: 64 };
const share = (over: Partial<ShareSettings> = {}): ShareSettings => ({ ...DEFAULT_SHARE, ...over });

/** Two queues (workers 0 and 1) on one board; `release()` moves the release generation. */
function pair() {
  const keys = InflightTable.shared(SIZE.keys, SIZE.workers);
  const buffer = ShareBoard.buffer(SIZE);
  let generation = 0;
  const boards = [0, 1].map((w) =>
    new ShareBoard(
      buffer,
      SIZE,
      w,
      new InflightTable(keys.words.buffer, { capacity: SIZE.keys, workers: SIZE.workers }, w),
      () => generation,
    )
  );
  const queues = boards.map((b) => new FairShareQueue<string>(b));
  const supervisor = new ShareBoard(buffer, SIZE, -1, keys, () => generation);
  return {
    queues,
    boards,
    supervisor,
    release: () => generation++,
  };
}

/** One round of `q` with `slots` free: the items admitted, in order. */
function round(q: FairShareQueue<string>, slots: { free: number }, can = (_: string) => true) {
  return q.drain((item) => {
    if (slots.free === 0 || !can(item)) return false;
    slots.free--;
    return true;
  }).map((t) => t.item);
}

Deno.test("share board: two workers' queues serve in one counter order", () => {
  const { queues: [q0, q1] } = pair();
  q0.enqueue("A", share(), "a1", 100);
  q0.enqueue("A", share(), "a2", 100);
  q1.enqueue("B", share(), "b1", 100);
  const slots = { free: 1 };
  // a1 came first (arrival numbers are the group's): worker 0 takes the slot.
  assertEquals(round(q1, slots), [], "worker 1 leaves it to the older waiter of worker 0");
  assertEquals(round(q0, slots), ["a1"]);
  // A was served 100 tokens, B none: B goes next though worker 0 frees the slot.
  slots.free = 1;
  assertEquals(round(q0, slots), [], "worker 0 leaves the slot to B in worker 1");
  assertEquals(round(q1, slots), ["b1"]);
  slots.free = 1;
  assertEquals(round(q1, slots), [], "nothing of worker 1 waits");
  assertEquals(round(q0, slots), ["a2"]);
});

Deno.test("share board: a higher band in another worker goes first", () => {
  const { queues: [q0, q1] } = pair();
  q0.enqueue("lo", share(), "lo1", 10);
  q1.enqueue("hi", share({ priority: 1 }), "hi1", 10);
  const slots = { free: 1 };
  assertEquals(round(q0, slots), [], "the priority-0 waiter yields");
  assertEquals(round(q1, slots), ["hi1"]);
  slots.free = 1;
  assertEquals(round(q0, slots), ["lo1"]);
});

Deno.test("share board: a waiter set aside since the last release is not waited for", () => {
  const { queues: [q0, q1], release } = pair();
  q1.enqueue("B", share(), "b1", 10); // older: it would go first
  q0.enqueue("A", share(), "a1", 10);
  const slots = { free: 1 };
  assertEquals(round(q0, slots), [], "worker 0 yields to the older b1");
  // b1 cannot use what is free (another node, say): worker 1's round sets it aside.
  assertEquals(round(q1, slots, (item) => item !== "b1"), []);
  assertEquals(round(q0, slots), ["a1"], "worker 0 no longer waits for b1");
  // A release anywhere: b1 may be able to take the next slot, so it goes first again.
  q0.enqueue("A", share(), "a2", 10);
  release();
  slots.free = 1;
  assertEquals(round(q0, slots), [], "after a release b1 is waited for again");
  assertEquals(round(q1, slots), ["b1"]);
});

Deno.test("share board: a key joining in one worker starts at the group's smallest counter", () => {
  const { queues: [q0, q1], boards: [b0] } = pair();
  // A is served 1000 tokens in worker 0 while B waits in worker 1.
  q1.enqueue("B", share(), "b1", 10);
  q0.charge("A", share(), "direct", 1000);
  assertEquals(b0.counter("A"), 1000, "the charge is the group's");
  // C joins in worker 0: it starts at B's counter (0), not below (banked credit) nor at A's.
  q0.enqueue("C", share(), "c1", 10);
  assertEquals(b0.counter("C"), 0);
  // A's debt is kept: A joining again waits behind B and C.
  q0.enqueue("A", share(), "a1", 10);
  assertEquals(b0.counter("A"), 1000);
  const slots = { free: 3 };
  assertEquals(round(q0, slots), [], "b1 is older and as low as c1");
  assertEquals(round(q1, slots), ["b1"]);
  assertEquals(round(q0, slots), ["c1", "a1"]);
});

Deno.test("share board: the corrected count moves the group's counter", () => {
  const { queues: [q0, q1], boards: [b0, b1] } = pair();
  q0.enqueue("A", share(), "a1", 100);
  q1.enqueue("A", share(), "a2", 100);
  q1.enqueue("B", share(), "b1", 100);
  const [t] = q0.drain(() => true);
  assertEquals(t.item, "a1");
  assertEquals(b1.counter("A"), 100, "worker 1 sees worker 0's dispatch");
  q0.correct(t, 20);
  assertEquals(b1.counter("A"), 20, "and its correction");
  // A (20) is still above B (0): B goes first.
  const slots = { free: 1 };
  assertEquals(round(q1, slots), ["b1"]);
  assertEquals(b0.counter("B"), 100);
  slots.free = 1;
  assertEquals(round(q1, slots), ["a2"]);
});

Deno.test("share board: a correction stops at a key waiting behind the same key in another worker", () => {
  const { queues: [q0, q1], boards: [b0] } = pair();
  // a1 is dispatched in worker 0, charged its estimate of 1000.
  q0.enqueue("A", share(), "a1", 1000);
  const [t] = q0.drain(() => true);
  // In worker 1, A's next requests wait, then B joins: at A's counter, behind A's older waiters,
  // so worker 1 publishes A as its best waiter and B only as the next key.
  q1.enqueue("A", share(), "a2", 10);
  q1.enqueue("A", share(), "a3", 10);
  q1.enqueue("B", share(), "b1", 10);
  assertEquals(b0.counter("B"), 1000);
  // a1 used 8 tokens: A's counter comes down, but not past B, which waits (in worker 1).
  q0.correct(t, 8);
  assertEquals(b0.counter("A"), 1000, "B's counter is the floor of the keys other than A");
  const slots = { free: 1 };
  assertEquals(round(q1, slots), ["a2"], "a tie: the older waiter");
  slots.free = 1;
  assertEquals(round(q1, slots), ["b1"], "then B, not every one of A's");
});

Deno.test("share board: newcomers see another worker's waiters; a dead worker's are cleared", () => {
  const { queues: [q0], boards: [b0, b1], supervisor } = pair();
  assertEquals(b1.othersQueued(), false);
  assertEquals(b1.othersWaiting(), false);
  q0.enqueue("A", share(), "a1", 10);
  assert(b1.othersQueued(), "worker 1 sees worker 0's waiter");
  assert(b1.othersWaiting(), "which could take a free slot");
  assertEquals(b0.othersQueued(), false, "a worker's own waiters are not others'");
  // Worker 0's round cannot admit it: it waits, but not for a slot that is free now.
  q0.drain(() => false);
  assert(b1.othersQueued());
  assertEquals(b1.othersWaiting(), false);
  const pokes = b1.pokes();
  supervisor.workerDied(0);
  assertEquals(b1.othersQueued(), false, "the dead worker's waiters are gone");
  assert(b1.pokes() !== pokes, "and the others are told");
});

Deno.test("share board: a lock left by a dead worker is cleared", () => {
  const { boards: [b0, b1], supervisor } = pair();
  let inside = false;
  b0.locked(() => {
    // Worker 0 "dies" holding the lock: the supervisor clears it, worker 1 can take it.
    supervisor.workerDied(0);
    b1.locked(() => inside = true);
  });
  assert(inside, "worker 1 took the lock");
});

Deno.test("share board: a band past RENORMALISE_AT is shifted down in every worker", () => {
  const { queues: [q0, q1], boards: [b0, b1] } = pair();
  const light = share({ weight: 1e-6 }); // 1,000 tokens: 1e9 on the counter
  const slots = { free: 0 };
  for (let i = 0; i < 3000; i++) {
    q0.enqueue("A", light, `a${i}`, 1000);
    q1.enqueue("B", light, `b${i}`, 1000);
    slots.free = 1;
    round(q0, slots);
    round(q1, slots);
    slots.free = 1;
    round(q1, slots);
    round(q0, slots);
  }
  const a = b1.counter("A")!;
  const b = b0.counter("B")!;
  assert(a < 2 * RENORMALISE_AT && b < 2 * RENORMALISE_AT, `A ${a}, B ${b}`);
  assert(Math.abs(a - b) <= 1e9, `the keys kept their distance: A ${a}, B ${b}`);
  // One more of each: B asks 1 token, A 1,000; B's next request goes first in either worker.
  q1.enqueue("B", light, "b", 1);
  q0.enqueue("A", light, "a", 1000);
  slots.free = 2;
  assertEquals([...round(q0, slots), ...round(q1, slots), ...round(q0, slots)], ["b", "a"]);
  q1.enqueue("B", light, "b+", 1);
  q0.enqueue("A", light, "a+", 1);
  slots.free = 1;
  assertEquals(round(q0, slots), [], "worker 0 leaves the slot to B");
  assertEquals(round(q1, slots), ["b+"]);
});

/**
 * Worker 1 (a real Worker) tries the lock while `hold` (on this thread) holds it: answers what
 * the worker saw (1 timed out, 2 got it, 3 another error; 0 nothing within 5 s) and how long it
 * waited, ms.
 */
async function contend(hold: (inside: () => void) => void): Promise<[number, number]> {
  const keys = InflightTable.shared(SIZE.keys, SIZE.workers);
  const buffer = ShareBoard.buffer(SIZE);
  const signal = new SharedArrayBuffer(12);
  const words = new Int32Array(signal);
  const worker = new Worker(new URL("./_lock_contender.ts", import.meta.url), { type: "module" });
  try {
    const ready = new Promise((r) => worker.onmessage = r);
    worker.postMessage({ board: buffer, keys: keys.words.buffer, size: SIZE, signal });
    await ready;
    const boards = {
      worker0: new ShareBoard(buffer, SIZE, 0, keys, () => 0),
      supervisor: new ShareBoard(buffer, SIZE, -1, keys, () => 0),
    };
    hold.call(boards, () => {
      Atomics.store(words, 0, 1);
      Atomics.notify(words, 0);
      // This thread holds the lock until the worker answers (or 5 s pass: a wait without bound).
      Atomics.wait(words, 1, 0, 5000);
    });
    return [Atomics.load(words, 1), Atomics.load(words, 2)];
  } finally {
    worker.terminate();
  }
}

Deno.test("share board: a wait for the lock is bounded, and the supervisor's lock is a lock", async () => {
  const keys = InflightTable.shared(SIZE.keys, SIZE.workers);
  const buffer = ShareBoard.buffer(SIZE);
  const [worker0, supervisor] = [0, -1].map((w) => new ShareBoard(buffer, SIZE, w, keys, () => 0));
  worker0.locked(() => assertEquals(worker0.holder(), 1, "worker 0 holds it as 1"));
  supervisor.locked(() =>
    assertEquals(supervisor.holder(), SIZE.workers + 1, "the supervisor as 3")
  );
  assertEquals(supervisor.holder(), 0, "let go");
  for (const who of ["worker0", "supervisor"] as const) {
    const [result, waited] = await contend(function (this: Record<string, ShareBoard>, inside) {
      this[who].locked(inside);
    });
    assertEquals(
      result,
      1,
      `${who} holding: the other worker's wait ends in ShareBoardLockTimeout`,
    );
    assert(waited >= LOCK_WAIT_MS && waited < 5000, `it waited ${waited} ms`);
  }
});

Deno.test("share board: a round tries its admissions outside the lock; what they throw is not swallowed", () => {
  const { queues: [q0, q1], boards: [b0] } = pair();
  q0.enqueue("A", share(), "a1", 10);
  q1.enqueue("B", share(), "b1", 10);
  const holders: number[] = [];
  const admitted = round(q0, { free: 1 }, () => {
    holders.push(b0.holder());
    return true;
  });
  assertEquals(admitted, ["a1"]);
  assertEquals(holders, [0], "nobody holds the board's lock while a slot is tried");
  let thrown: unknown;
  try {
    q1.drain(() => {
      throw new RangeError("admission broke");
    });
  } catch (err) {
    thrown = err;
  }
  assert(thrown instanceof RangeError, "the round's error reaches its caller");
  assertEquals(b0.holder(), 0, "and the lock is let go");
  assertEquals(round(q1, { free: 1 }), ["b1"], "the queue is whole: its waiter is served next");
});
