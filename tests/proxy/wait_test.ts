import { deepStrictEqual, strictEqual } from "node:assert/strict";
import {
  type ShareTicket,
  type Timers,
  type Waiter,
  WaiterQueue,
  type WaitResult,
} from "../../src/proxy/wait.ts";
import { assert, assertEquals } from "../_assert.ts";

/** A manual clock and timer table: time moves only when the test says so. */
class ManualClock implements Timers {
  t = 1_000;
  #next = 1;
  timers = new Map<number, { at: number; fn: () => void }>();
  now = () => this.t;
  set(fn: () => void, ms: number): number {
    const id = this.#next++;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clear(id: unknown): void {
    this.timers.delete(id as number);
  }
  /** Advances to `t`, firing due timers in time order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (let guard = 0; guard < 10_000; guard++) {
      let first: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) {
        if (e[1].at <= end && (!first || e[1].at < first[1].at)) first = e;
      }
      if (!first) break;
      this.timers.delete(first[0]);
      this.t = first[1].at;
      first[1].fn();
    }
    this.t = end;
  }
}

/** A pool of `slots` that waiters take. */
class Pool {
  free = 0;
  listeners: (() => void)[] = [];
  subscribe = (l: () => void) => {
    this.listeners.push(l);
    return () => {
      this.listeners = this.listeners.filter((x) => x !== l);
    };
  };
  release(): void {
    this.free++;
    for (const l of this.listeners) l();
  }
}

class Taker implements Waiter {
  constructor(readonly pool: Pool, readonly name: string, readonly log: string[]) {}
  tries = 0;
  tryAdmit(): boolean {
    this.tries++;
    if (this.pool.free > 0) {
      this.pool.free--;
      this.log.push(this.name);
      return true;
    }
    return false;
  }
}

function setup(pollMs = 25, nextChangeAt?: () => number | undefined) {
  const clock = new ManualClock();
  const pool = new Pool();
  const q = new WaiterQueue({
    now: clock.now,
    subscribe: pool.subscribe,
    pollMs: () => pollMs,
    nextChangeAt,
    timers: clock,
  });
  return { clock, pool, q };
}

Deno.test("wait: a freed slot admits the first waiter at once (event, not timer)", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const a = q.wait(new Taker(pool, "a", log), clock.t + 5000);
  const b = q.wait(new Taker(pool, "b", log), clock.t + 5000);
  strictEqual(q.size, 2);
  pool.release();
  strictEqual(await a, "admitted");
  deepStrictEqual(log, ["a"]);
  pool.release();
  strictEqual(await b, "admitted");
  deepStrictEqual(log, ["a", "b"]);
  strictEqual(q.size, 0);
  strictEqual(clock.timers.size, 0, "no timer left once the queue is empty");
  q.close();
});

Deno.test("wait: first come first served — a later waiter never overtakes", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const waits: Promise<WaitResult>[] = [];
  for (const n of ["1", "2", "3", "4"]) waits.push(q.wait(new Taker(pool, n, log), clock.t + 100));
  pool.release();
  pool.release();
  pool.release();
  pool.release();
  await Promise.all(waits);
  deepStrictEqual(log, ["1", "2", "3", "4"]);
  q.close();
});

Deno.test("wait: the deadline ends the wait with one timer, not a busy loop", async () => {
  const { clock, pool, q } = setup(25);
  const t = new Taker(pool, "a", []);
  const w = q.wait(t, clock.t + 100);
  strictEqual(clock.timers.size, 1, "one timer for the whole queue");
  clock.advance(99);
  strictEqual(q.size, 1);
  clock.advance(1);
  strictEqual(await w, "timeout");
  // Safety-net polls at 25 ms: 1000+25, +50, +75 and the deadline at +100 → at most 4 tries.
  strictEqual(t.tries <= 5, true, `tries ${t.tries}`);
  strictEqual(clock.timers.size, 0);
  q.close();
});

Deno.test("wait: the safety-net poll admits when no event came", async () => {
  const { clock, pool, q } = setup(25);
  const w = q.wait(new Taker(pool, "a", []), clock.t + 1000);
  pool.free = 1; // capacity appeared without an announcement
  clock.advance(25);
  strictEqual(await w, "admitted");
  q.close();
});

Deno.test("wait: the core's next change moment sets the timer (backoff end)", async () => {
  let backoffEnd: number | undefined = 1_050;
  const { clock, pool, q } = setup(1_000_000, () => backoffEnd);
  const t = new Taker(pool, "a", []);
  const w = q.wait(t, clock.t + 1000);
  const [timer] = clock.timers.values();
  strictEqual(timer.at, 1_050);
  pool.free = 1;
  backoffEnd = undefined;
  clock.advance(50);
  strictEqual(await w, "admitted");
  q.close();
});

Deno.test("wait: an aborted waiter leaves the queue without taking a slot", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const ac = new AbortController();
  const a = q.wait(new Taker(pool, "a", log), clock.t + 1000, ac.signal);
  const b = q.wait(new Taker(pool, "b", log), clock.t + 1000);
  ac.abort();
  strictEqual(await a, "aborted");
  strictEqual(q.size, 1);
  pool.release();
  strictEqual(await b, "admitted");
  deepStrictEqual(log, ["b"]);
  strictEqual(await q.wait(new Taker(pool, "c", log), clock.t + 10, ac.signal), "aborted");
  q.close();
});

Deno.test("wait: a past deadline answers timeout at once; close ends waits and unsubscribes", async () => {
  const { clock, pool, q } = setup();
  strictEqual(await q.wait(new Taker(pool, "a", []), clock.t), "timeout");
  const w = q.wait(new Taker(pool, "b", []), clock.t + 1000);
  q.close();
  strictEqual(await w, "timeout");
  strictEqual(pool.listeners.length, 0);
  strictEqual(clock.timers.size, 0);
});

Deno.test("wait: a change announced during admission runs another round", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  // "a" admits and, doing so, frees another slot (announces a change re-entrantly).
  const reentrant: Waiter = {
    tryAdmit() {
      if (pool.free === 0) return false;
      pool.free--;
      log.push("a");
      pool.release();
      return true;
    },
  };
  const a = q.wait(reentrant, clock.t + 1000);
  const b = q.wait(new Taker(pool, "b", log), clock.t + 1000);
  pool.release();
  await Promise.all([a, b]);
  deepStrictEqual(log, ["a", "b"]);
  q.close();
});

Deno.test("wait: real timers — a deadline is honoured and nothing leaks", async () => {
  const pool = new Pool();
  const q = new WaiterQueue({ now: Date.now, subscribe: pool.subscribe, pollMs: () => 5 });
  const start = Date.now();
  strictEqual(await q.wait(new Taker(pool, "a", []), start + 30), "timeout");
  strictEqual(Date.now() - start >= 29, true);
  q.close();
});

/** A Taker counted to a customer key, with its share and token estimate. */
class KeyTaker extends Taker {
  constructor(
    pool: Pool,
    name: string,
    log: string[],
    readonly keyId: string,
    readonly share = { weight: 1, priority: 0, max_queued: null as number | null },
  ) {
    super(pool, name, log);
  }
  shareTicket?: ShareTicket;
  estimateTokens(): number {
    return 10;
  }
}

Deno.test("wait: fair share between keys — a burst of one key does not push the other back", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const waits: Promise<WaitResult>[] = [];
  for (const n of ["a1", "a2", "a3", "a4"]) {
    waits.push(q.wait(new KeyTaker(pool, n, log, "A"), clock.t + 5000));
  }
  const b = new KeyTaker(pool, "b1", log, "B");
  waits.push(q.wait(b, clock.t + 5000));
  for (let i = 0; i < 5; i++) pool.release();
  await Promise.all(waits);
  assertEquals(log, ["a1", "b1", "a2", "a3", "a4"], "B's one request is second, not last");
  assert(b.shareTicket !== undefined, "the admission's charge is handed to the waiter");
  q.served(b, { api_key_id: "B", input_tokens: 1, output_tokens: 1 });
  q.close();
});

Deno.test("wait: a key at share.max_queued gets queue_full at once; direct admissions are charged", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const share = { weight: 1, priority: 0, max_queued: 1 };
  const first = q.wait(new KeyTaker(pool, "a1", log, "A", share), clock.t + 5000);
  assertEquals(
    await q.wait(new KeyTaker(pool, "a2", log, "A", share), clock.t + 5000),
    "queue_full",
  );
  assertEquals(q.size, 1);
  assert(q.charge(new KeyTaker(pool, "b-direct", log, "B")) !== undefined, "charged while A waits");
  pool.release();
  assertEquals(await first, "admitted");
  assertEquals(q.charge(new KeyTaker(pool, "b-idle", log, "B")), undefined, "nobody waits: free");
  q.close();
});

Deno.test("wait: a waiter whose admission throws fails with that error; the others are served", async () => {
  const { clock, pool, q } = setup(1_000_000);
  const log: string[] = [];
  const broken: Waiter = {
    tryAdmit(): boolean {
      throw new RangeError("admission broke");
    },
  };
  const bad = q.wait(broken, clock.t + 5000);
  const good = q.wait(new Taker(pool, "good", log), clock.t + 5000);
  pool.release();
  let thrown: unknown;
  try {
    await bad;
  } catch (err) {
    thrown = err;
  }
  assert(thrown instanceof RangeError, `the wait ends with the error (got ${String(thrown)})`);
  strictEqual(await good, "admitted");
  strictEqual(q.size, 0, "nothing is left waiting");
  q.close();
});
