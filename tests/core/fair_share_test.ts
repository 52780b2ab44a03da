import { assert, assertEquals } from "../_assert.ts";
import { DEFAULT_SHARE, type ShareSettings } from "../../src/core/key_policy.ts";
import { FairShareQueue, type FairShareTicket, RENORMALISE_AT } from "../../src/core/fair_share.ts";

const share = (s: Partial<ShareSettings> = {}): ShareSettings => ({ ...DEFAULT_SHARE, ...s });

Deno.test("within a band the key with the lowest counter goes first; FIFO within a key", () => {
  const q = new FairShareQueue<string>();
  for (let i = 0; i < 4; i++) q.enqueue("A", share(), `a${i}`, 100);
  q.enqueue("B", share(), "b0", 100);
  q.enqueue("B", share(), "b1", 100);
  const order: string[] = [];
  let slots = 6;
  for (const t of q.drain(() => slots-- > 0)) order.push(t.item);
  assertEquals(order, ["a0", "b0", "a1", "b1", "a2", "a3"]);
  assertEquals(q.size, 0);
});

Deno.test("a higher priority band overtakes every waiter of a lower band", () => {
  const q = new FairShareQueue<string>();
  for (let i = 0; i < 5; i++) q.enqueue(`low${i}`, share(), `low${i}`, 10);
  q.enqueue("vip", share({ priority: 1 }), "vip", 10_000);
  q.enqueue("vip", share({ priority: 1 }), "vip2", 10_000);
  let slots = 3;
  const order = q.drain(() => slots-- > 0).map((t) => t.item);
  assertEquals(order, ["vip", "vip2", "low0"], "both priority-1 requests before any priority-0");
});

Deno.test("a waiter that cannot be admitted does not block the others", () => {
  const q = new FairShareQueue<string>();
  q.enqueue("A", share(), "needs-gpu-x", 1);
  q.enqueue("B", share(), "any", 1);
  const admitted = q.drain((item) => item === "any").map((t) => t.item);
  assertEquals(admitted, ["any"]);
  assertEquals(q.queued("A"), 1, "A still waits");
  assertEquals(q.drain(() => true).map((t) => t.item), ["needs-gpu-x"], "and is served later");
});

Deno.test("max_queued refuses at once; remove takes a waiter out (timeout or abort)", () => {
  const q = new FairShareQueue<string>();
  const a = q.enqueue("A", share({ max_queued: 2 }), "a0", 1);
  assert(q.enqueue("A", share({ max_queued: 2 }), "a1", 1) !== null, "second queued");
  assertEquals(q.enqueue("A", share({ max_queued: 2 }), "a2", 1), null, "third: key_queue_full");
  assertEquals(q.enqueue("Z", share({ max_queued: 0 }), "z", 1), null, "max_queued 0: never waits");
  assert(a !== null && q.remove(a), "removed");
  assert(!q.remove(a), "removed once");
  assert(q.enqueue("A", share({ max_queued: 2 }), "a3", 1) !== null, "room again");
  assertEquals(q.drain(() => true).map((t) => t.item), ["a1", "a3"]);
  assertEquals(q.keyCount, 1, "A, idle, keeps the counter it was served beyond the others");
});

Deno.test("a key becoming backlogged starts at the smallest counter: idle time banks no credit", () => {
  const q = new FairShareQueue<string>();
  for (let i = 0; i < 10; i++) q.enqueue("A", share(), `a${i}`, 100);
  let slots = 8;
  q.drain(() => slots-- > 0); // A served 800 tokens alone
  q.enqueue("B", share(), "b0", 100);
  q.enqueue("B", share(), "b1", 100);
  q.enqueue("B", share(), "b2", 100);
  const order = q.drain(() => true).map((t) => t.item);
  assertEquals(order, ["a8", "b0", "a9", "b1", "b2"], "B alternates with A, no burst of B");
});

Deno.test("corrections with the real count move the counter", () => {
  const q = new FairShareQueue<string>();
  q.enqueue("A", share(), "a0", 1000);
  q.enqueue("B", share(), "b0", 1000);
  let slots = 2;
  const [a0] = q.drain(() => slots-- > 0);
  q.correct(a0, 10); // A's first answer was short: its counter drops to 10
  q.enqueue("A", share(), "a1", 1000);
  q.enqueue("B", share(), "b1", 1000);
  q.enqueue("A", share(), "a2", 1000);
  assertEquals(q.drain(() => true).map((t) => t.item), ["a1", "b1", "a2"]);
});

Deno.test("a request that asked far more than it used banks no credit over keys that joined since", () => {
  const q = new FairShareQueue<string>();
  q.enqueue("A", share(), "huge", 1_000_000);
  const [huge] = q.drain(() => true); // A's counter: 1e6
  for (let i = 1; i <= 4; i++) q.enqueue("A", share(), `a${i}`, 10);
  q.enqueue("B", share(), "b", 10); // B starts at A's 1e6
  q.correct(huge, 10); // without the floor: A at 10, ahead of B by ~1e6 tokens
  assertEquals(q.drain(() => true).map((t) => t.item), ["a1", "b", "a2", "a3", "a4"]);
});

Deno.test("counters past RENORMALISE_AT are shifted down: the order holds, a token still counts", () => {
  const q = new FairShareQueue<string>();
  // Weight 1e-6: each 1,000-token charge adds 1e9 to a counter; 3,000 of them pass 2^41.
  const light = share({ weight: 1e-6 });
  for (let i = 0; i < 3000; i++) {
    q.enqueue("A", light, `a${i}`, 1000);
    q.enqueue("B", light, `b${i}`, 1000);
    let slots = 2;
    q.drain(() => slots-- > 0);
  }
  assertEquals(q.size, 0, "nothing left waiting");
  q.enqueue("A", light, "a", 1000);
  q.enqueue("B", light, "b", 1);
  let slots = 2;
  assertEquals(q.drain(() => slots-- > 0).map((t) => t.item), ["a", "b"]);
  q.enqueue("B", light, "b+", 1); // B first: A, joining after, cannot lift it
  q.enqueue("A", light, "a+", 1);
  const [k1, k2] = q.backlogged();
  assert(k1.counter < RENORMALISE_AT * 2 && k2.counter < RENORMALISE_AT * 2, `${k1.counter}`);
  assertEquals(k1.keyId, "B", "B was charged 1 token, A 1,000: B is served first");
  assert(k2.counter - k1.counter > 9e8, "the difference of 999 tokens at weight 1e-6 still counts");
});

Deno.test("charge: a request served without waiting counts only while others wait", () => {
  const q = new FairShareQueue<string>();
  assertEquals(q.charge("A", share(), "direct", 100), null, "nobody waits: nothing to do");
  q.enqueue("B", share(), "b0", 100);
  q.enqueue("B", share(), "b1", 100);
  const c = q.charge("A", share(), "a-direct", 500);
  assert(c !== null, "charged under contention");
  assertEquals(q.size, 2, "a charge does not wait");
  q.enqueue("A", share(), "a0", 100);
  let slots = 3;
  assertEquals(q.drain(() => slots-- > 0).map((t) => t.item), ["b0", "b1", "a0"]);
  q.correct(c, 0);
});

// ---- simulation: a node with 4 slots, time in ms, one step = 10 ms ----

interface SimKey {
  keyId: string;
  share: ShareSettings;
  /** One request every `everyMs`, from `fromMs`. */
  everyMs: number;
  fromMs?: number;
}

interface SimResult {
  /** Output tokens served per key within [fromMs, toMs) of dispatch. */
  served: (keyId: string, fromMs?: number, toMs?: number) => number;
  /** Requests that waited past `waitMs` (fell through to the next tier). */
  spilled: Map<string, number>;
  /** Longest wait per key, ms. */
  maxWait: Map<string, number>;
}

function simulate(keys: SimKey[], opts: { fifo?: boolean; waitMs?: number } = {}): SimResult {
  const SLOTS = 4;
  const SERVICE_MS = 1000;
  const TOKENS = 100;
  const END = 30_000;
  const waitMs = opts.waitMs ?? 5_000;
  interface Req {
    keyId: string;
    at: number;
  }
  const q = new FairShareQueue<Req>();
  const waiting: { ticket: FairShareTicket<Req>; deadline: number }[] = [];
  const running: { end: number; ticket: FairShareTicket<Req> | null }[] = [];
  const dispatches: { keyId: string; at: number }[] = [];
  const spilled = new Map<string, number>();
  const maxWait = new Map<string, number>();
  for (let now = 0; now < END; now += 10) {
    for (let i = running.length - 1; i >= 0; i--) {
      if (running[i].end > now) continue;
      const t = running[i].ticket;
      if (t) q.correct(t, TOKENS);
      running.splice(i, 1);
    }
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (waiting[i].deadline > now) continue;
      const { ticket } = waiting[i];
      if (q.remove(ticket)) {
        spilled.set(ticket.item.keyId, (spilled.get(ticket.item.keyId) ?? 0) + 1);
      }
      waiting.splice(i, 1);
    }
    for (const k of keys) {
      const from = k.fromMs ?? 0;
      if (now < from || (now - from) % k.everyMs !== 0) continue;
      const req = { keyId: k.keyId, at: now };
      if (q.size === 0 && running.length < SLOTS) {
        running.push({ end: now + SERVICE_MS, ticket: null });
        dispatches.push({ keyId: k.keyId, at: now });
        continue;
      }
      const ticket = q.enqueue(opts.fifo ? "all" : k.keyId, k.share, req, TOKENS);
      assert(ticket !== null, "no max_queued in the simulation");
      waiting.push({ ticket, deadline: now + waitMs });
    }
    let free = SLOTS - running.length;
    for (const t of q.drain(() => free > 0 && free-- > 0)) {
      running.push({ end: now + SERVICE_MS, ticket: t });
      dispatches.push({ keyId: t.item.keyId, at: now });
      const waited = now - t.item.at;
      maxWait.set(t.item.keyId, Math.max(maxWait.get(t.item.keyId) ?? 0, waited));
      const idx = waiting.findIndex((w) => w.ticket === t);
      if (idx >= 0) waiting.splice(idx, 1);
    }
  }
  const served = (keyId: string, fromMs = 0, toMs = END) =>
    dispatches.filter((d) => d.keyId === keyId && d.at >= fromMs && d.at < toMs).length * TOKENS;
  return { served, spilled, maxWait };
}

function jain(xs: number[]): number {
  const sum = xs.reduce((a, b) => a + b, 0);
  return (sum * sum) / (xs.length * xs.reduce((a, b) => a + b * b, 0));
}

const A_LOAD = 80; // 12.5 requests/s: 4× B
const B_LOAD = 320; // 3.1 requests/s; the node serves 4/s

Deno.test("simulation: A offering 4× B's load gets 1:1 with equal weights (FIFO gives ~4:1)", () => {
  const keys = [
    { keyId: "A", share: share(), everyMs: A_LOAD },
    { keyId: "B", share: share(), everyMs: B_LOAD },
  ];
  const fair = simulate(keys);
  const [a, b] = [fair.served("A", 5_000), fair.served("B", 5_000)];
  const ratio = a / b;
  assert(ratio >= 0.9 && ratio <= 1.1, `A:B within 10% of 1:1 (got ${ratio.toFixed(3)})`);
  const j = jain([a, b]);
  assert(j >= 0.95, `Jain index ${j.toFixed(4)} >= 0.95`);
  for (const k of ["A", "B"]) {
    assert((fair.maxWait.get(k) ?? 0) <= 5_000, `no ${k} request waits longer than wait_ms`);
  }
  const fifo = simulate(keys, { fifo: true });
  const fifoRatio = fifo.served("A", 5_000) / fifo.served("B", 5_000);
  assert(fifoRatio > 3, `FIFO serves the offered load instead (A:B ${fifoRatio.toFixed(2)})`);
});

Deno.test("simulation: weights 2:1 give 2:1", () => {
  const r = simulate([
    { keyId: "A", share: share({ weight: 2 }), everyMs: A_LOAD },
    { keyId: "B", share: share(), everyMs: B_LOAD },
  ]);
  const ratio = r.served("A", 5_000) / r.served("B", 5_000);
  assert(ratio >= 1.8 && ratio <= 2.2, `A:B within 10% of 2:1 (got ${ratio.toFixed(3)})`);
});

Deno.test("simulation: B joining 10 s late reaches its share within 2 s, without a burst", () => {
  const r = simulate([
    { keyId: "A", share: share(), everyMs: A_LOAD },
    { keyId: "B", share: share(), everyMs: B_LOAD, fromMs: 10_000 },
  ]);
  const ratio = r.served("A", 12_000) / r.served("B", 12_000);
  assert(ratio >= 0.9 && ratio <= 1.1, `from 12 s on A:B within 10% of 1:1 (${ratio.toFixed(3)})`);
  const early = r.served("B", 10_000, 12_000) /
    (r.served("A", 10_000, 12_000) + r.served("B", 10_000, 12_000));
  assert(
    early <= 0.6,
    `B's first 2 s are no burst on banked credit (${early.toFixed(2)} of the node)`,
  );
});

Deno.test("simulation: the key over its share spills to the next tier, the light key stays", () => {
  const keys = [
    { keyId: "A", share: share(), everyMs: A_LOAD },
    { keyId: "B", share: share(), everyMs: 1_000 }, // 1/s: within its share of 2/s
  ];
  const fair = simulate(keys, { waitMs: 500 });
  assert((fair.spilled.get("A") ?? 0) > 100, `A spills (${fair.spilled.get("A")})`);
  assertEquals(fair.spilled.get("B") ?? 0, 0, "B never spills under fair share");
  const fifo = simulate(keys, { waitMs: 500, fifo: true });
  assert((fifo.spilled.get("B") ?? 0) > 0, `under FIFO B spills too (${fifo.spilled.get("B")})`);
});

Deno.test("a key idle with charges still open keeps its state: corrections land on it", () => {
  const q = new FairShareQueue<string>();
  q.enqueue("A", share(), "a0", 10);
  q.enqueue("B", share(), "b0", 10);
  q.enqueue("B", share(), "b1", 10);
  const [, b0, b1] = q.drain(() => true); // B idle with two charges open
  q.correct(b0, 0); // short answers: B is owed, not in debt
  q.enqueue("B", share(), "b2", 10); // B queues again before its second correction
  q.enqueue("A", share(), "a1", 10);
  q.correct(b1, 0);
  q.enqueue("B", share(), "b3", 10);
  assertEquals(q.backlogged().map((k) => k.keyId).sort(), ["A", "B"], "B once in its band");
  assertEquals(q.drain(() => true).map((t) => t.item), ["b2", "a1", "b3"]);
});
