/**
 * Fair share between customer keys waiting for capacity (ADR 0024): the Virtual Token Counter
 * (Sheng et al., OSDI 2024) as the queue discipline of the waiters.
 *
 * Each backlogged key has a virtual counter: the tokens it was served divided by its weight
 * (charged with the estimate at dispatch, corrected with the real count later). When capacity
 * frees, the highest priority band goes first; within it the backlogged key with the lowest
 * counter, and within one key the oldest request. A key that becomes backlogged starts at the
 * smallest counter among the backlogged keys of its band (idle time banks no credit), never
 * below its own counter (a debt is kept).
 *
 * A charge is an estimate, corrected with the real count later: a correction downward banks no
 * credit below where a newcomer would start (the smallest counter of the band's other backlogged
 * keys), so a request that asked for far more than it used does not put its key ahead of keys
 * that joined meanwhile. Counters only grow; once a band's time passes `RENORMALISE_AT` every
 * counter of the band is shifted down by its floor (the order is unchanged), so they stay where
 * a token still counts in a float64.
 *
 * Keys sit in one binary heap per band, indexed so a key's position is fixed in O(log keys)
 * when its counter or oldest request changes; requests of one key are a linked list, so a wait
 * that times out or aborts leaves in O(1) (+ O(log keys) when its key's head changes). Nothing
 * here runs when nothing waits.
 *
 * @module
 */
import type { ShareSettings } from "./key_policy.ts";
import { type Linked, LinkedList } from "./linked_list.ts";

/**
 * What one queue of a group (the workers of a process, ADR 0025) shares with the others, so the
 * group orders its waiters as one queue would: the keys' counters, the bands' last dispatched
 * counter, one arrival order, and each queue's best waiter per band. Every call of the queue
 * comes inside `locked`, so what it reads and writes is one consistent state. The sections are
 * loads and stores only: a round decides under the lock which waiter goes next and tries to admit
 * it outside the lock, then charges it under the lock again.
 */
export interface FairShareGroup {
  /** Runs `fn` holding the group's lock (re-entrant within one queue). */
  locked<R>(fn: () => R): R;
  /** The group's next arrival number. */
  nextSeq(): number;
  /** A key's counter in the group; undefined when the group does not know the key. */
  counter(keyId: string): number | undefined;
  /** Sets a key's counter in the group (the key queues in band `priority`). */
  setCounter(keyId: string, priority: number, value: number): void;
  /**
   * Shifts the counters of every key of band `priority` in the group, and the band's time, down
   * by `offset` (renormalisation; see `RENORMALISE_AT`).
   */
  shift(priority: number, offset: number): void;
  /** Counter of the band's last dispatched key in the group. */
  vtime(priority: number): number;
  /** Sets it. */
  setVtime(priority: number, value: number): void;
  /**
   * Smallest counter of a backlogged key of the band in the other queues (leaving out `except`,
   * a key id); undefined: none.
   */
  othersFloor(priority: number, except?: string): number | undefined;
  /**
   * True when another queue has a waiter that goes before one of (`priority`, `counter`, `seq`)
   * and could still be admitted (it was not found unadmittable since capacity last changed).
   */
  othersFirst(priority: number, counter: number, seq: number): boolean;
  /**
   * The queue's best waiter per band now, after every change; `drained`: the change was a round
   * (`blocked` is then as of now).
   */
  publish(heads: readonly QueueHead[], drained: boolean): void;
}

/** A queue's best waiter of one band, as the group sees it. */
export interface QueueHead {
  /** Priority band. */
  priority: number;
  /** The key with the lowest counter in the band. */
  keyId: string;
  /**
   * The band's next key by counter after `keyId`, if any: where a key of another queue that is
   * `keyId` itself finds the floor of the keys other than it (a correction's `othersFloor`).
   */
  nextKeyId?: string;
  /** Arrival number of its oldest waiter. */
  seq: number;
  /** None of its waiters could be admitted in the queue's last round. */
  blocked: boolean;
}

/** A waiting request (returned by `enqueue`; pass it to `remove` on timeout or abort). */
export interface FairShareTicket<T> {
  /** The customer key id. */
  readonly keyId: string;
  /** What the caller queued. */
  readonly item: T;
  /** Tokens charged at dispatch (input estimate + output limit). */
  readonly estimate: number;
  /** Arrival order. */
  readonly seq: number;
  /** Still waiting. */
  readonly waiting: boolean;
}

/** One backlogged key (metrics). */
export interface BackloggedKey {
  /** The customer key id. */
  keyId: string;
  /** Priority band. */
  priority: number;
  /** Weight in force. */
  weight: number;
  /** Waiting requests. */
  queued: number;
  /** Virtual counter (weighted tokens served). */
  counter: number;
}

interface Ticket<T> extends FairShareTicket<T>, Linked<Ticket<T>> {
  waiting: boolean;
  key: KeyState<T>;
  charged: number;
}

interface KeyState<T> {
  readonly keyId: string;
  counter: number;
  weight: number;
  band: Band<T>;
  /** Its waiting requests, oldest first. */
  readonly waiters: LinkedList<Ticket<T>>;
  /** Dispatched requests whose charge is not corrected yet (the key is kept while any is). */
  open: number;
  /** Position in the band's heap; -1 when not backlogged. */
  index: number;
  /** Set aside in the queue's last round: none of its waiters could be admitted (for the group). */
  blocked: boolean;
}

interface Band<T> {
  readonly priority: number;
  readonly heap: KeyState<T>[];
  /** Counter of the last key dispatched: where a key joining an empty band starts. */
  vtime: number;
}

/**
 * A section of the queue under the group's lock: a `whole` change (read the group afresh first,
 * publish after), or the part of a round: `opens` (reads), `inside` (neither: the order read at
 * the start holds), `closes` (publishes the round's end state once, so a round announces one
 * change and a worker is not woken by its own round's intermediate states).
 */
type Section = "whole" | "opens" | "inside" | "closes";

/**
 * A band's time past which its counters are shifted down by the band's floor: far below 2^53,
 * where adding a token to a float64 counter would no longer change it.
 */
export const RENORMALISE_AT = 2 ** 40;

/** The counter order; ties go to the key whose oldest request came first (FIFO). */
function before<T>(a: KeyState<T>, b: KeyState<T>): boolean {
  if (a.counter !== b.counter) return a.counter < b.counter;
  return a.waiters.first!.seq < b.waiters.first!.seq;
}

/** The key with the smallest counter after a band heap's top: one of the top's two children. */
function nextAfterTop<K extends { counter: number }>(heap: readonly K[]): K | undefined {
  return heap.length > 2 && heap[2].counter < heap[1].counter ? heap[2] : heap[1];
}

/** Waiting requests ordered by priority band, then virtual counter, then arrival. */
export class FairShareQueue<T> {
  readonly #keys = new Map<string, KeyState<T>>();
  readonly #bands = new Map<number, Band<T>>();
  /** Band priorities, highest first. */
  #order: number[] = [];
  #seq = 0;
  #size = 0;
  readonly #group: FairShareGroup | undefined;
  /** Depth of calls inside the group's lock (state is refreshed on entry, published on exit). */
  #depth = 0;
  /** The change in the group's lock ran a round. */
  #drained = false;

  /**
   * A queue of its own (no `group`), or ordering its waiters with the other queues of `group` as
   * one queue (ADR 0025): counters, arrival numbers and band times come from the group, and a
   * round leaves capacity to a better waiter of another queue.
   */
  constructor(group?: FairShareGroup) {
    this.#group = group;
  }

  /** Waiting requests. */
  get size(): number {
    return this.#size;
  }

  /** Waiting requests of one key. */
  queued(keyId: string): number {
    return this.#keys.get(keyId)?.waiters.size ?? 0;
  }

  /**
   * Queues a request of `keyId` under its share settings (read now, so a reload applies to the
   * next request). Returns null when the key already has `max_queued` requests waiting (429
   * `key_queue_full`).
   */
  enqueue(
    keyId: string,
    share: ShareSettings,
    item: T,
    estimateTokens: number,
  ): FairShareTicket<T> | null {
    return this.#run(() => this.#enqueue(keyId, share, item, estimateTokens));
  }

  #enqueue(
    keyId: string,
    share: ShareSettings,
    item: T,
    estimateTokens: number,
  ): FairShareTicket<T> | null {
    const band = this.#band(share.priority);
    let key = this.#keys.get(keyId);
    if (key && share.max_queued !== null && key.waiters.size >= share.max_queued) return null;
    if (!key) {
      if (share.max_queued === 0) return null;
      key = {
        keyId,
        counter: this.#group?.counter(keyId) ?? 0,
        weight: share.weight,
        band,
        waiters: new LinkedList(),
        open: 0,
        index: -1,
        blocked: false,
      };
      this.#keys.set(keyId, key);
    }
    key.weight = share.weight;
    const ticket: Ticket<T> = {
      keyId,
      item,
      estimate: Math.max(0, estimateTokens),
      seq: this.#group ? this.#group.nextSeq() : this.#seq++,
      waiting: true,
      key,
      linkPrev: undefined,
      linkNext: undefined,
      linkList: undefined,
      charged: 0,
    };
    if (key.waiters.size === 0) {
      // Becoming backlogged: start at the band's smallest counter, keep a debt, bank no credit.
      if (key.band !== band) {
        key.band = band;
        key.counter = 0;
      }
      this.#setCounter(key, Math.max(key.counter, this.#floor(band)));
    }
    key.waiters.add(ticket);
    this.#size++;
    if (key.index < 0) this.#push(key);
    return ticket;
  }

  /**
   * Takes a waiting request out (timeout, abort). False when it no longer waits. When the group's
   * lock cannot be had, the request still leaves this queue (its own memory) and the error is
   * thrown after: the group sees the change with the next publish.
   */
  remove(ticket: FairShareTicket<T>): boolean {
    const t = ticket as Ticket<T>;
    try {
      return this.#run(() => this.#remove(t));
    } catch (err) {
      this.#remove(t);
      throw err;
    }
  }

  #remove(t: Ticket<T>): boolean {
    if (!t.waiting) return false;
    const key = t.key;
    const wasHead = key.waiters.first === t;
    this.#unlink(t);
    if (key.waiters.size === 0) {
      this.#removeFromHeap(key);
      this.#maybeForget(key);
    } else if (wasHead) this.#fix(key);
    return true;
  }

  /**
   * Offers capacity to the waiters in fair-share order until none can take it: the highest band
   * first, in it the key with the lowest counter, its oldest request first. `tryAdmit` takes a
   * slot for a request (true) or says it cannot (false); it runs outside the group's lock, and a
   * throw from it ends the round and propagates (the queue left whole). A key none of whose
   * requests is admitted is set aside for the rest of the round. Returns the admitted tickets in
   * dispatch order, their keys already charged with the estimate.
   */
  drain(tryAdmit: (item: T) => boolean): FairShareTicket<T>[] {
    if (this.#size === 0) return [];
    const admitted: FairShareTicket<T>[] = [];
    // Decided under the lock: which key's waiters are offered what is free next; "yield" when a
    // better waiter of another queue may take it (the round ends there), undefined: none left.
    const pick = (band: Band<T>): KeyState<T> | "yield" | undefined => {
      const key = band.heap[0];
      if (key === undefined) return undefined;
      if (this.#group?.othersFirst(band.priority, key.counter, key.waiters.first!.seq)) {
        return "yield";
      }
      return key;
    };
    const aside: KeyState<T>[] = [];
    try {
      this.#run(() => {
        for (const key of this.#keys.values()) key.blocked = false;
      }, "opens");
      let yielded = false;
      for (const priority of this.#order) {
        const band = this.#bands.get(priority)!;
        for (;;) {
          const key = this.#run(() => pick(band), "inside");
          if (key === "yield") yielded = true;
          if (key === undefined || key === "yield") break;
          // Acted on outside the lock: the admission attempts of the key's waiters.
          let taken: Ticket<T> | undefined;
          for (let t = key.waiters.first; t && !taken; t = t.linkNext) {
            if (tryAdmit(t.item)) taken = t;
          }
          this.#run(
            () => taken ? this.#dispatch(band, key, taken) : this.#setAside(key, aside),
            "inside",
          );
          if (taken) admitted.push(taken);
        }
        // The set-aside keys back in their band (this queue's own memory: no lock).
        this.#pushAll(aside);
        if (yielded) break;
      }
    } finally {
      this.#drained = this.#group !== undefined;
      // The round's one publish: what the group sees of it is its end state.
      this.#run(() => this.#pushAll(aside), "closes");
    }
    return admitted;
  }

  /** A waiter of `key` took a slot: it leaves, the key is charged its estimate. */
  #dispatch(band: Band<T>, key: KeyState<T>, taken: Ticket<T>): void {
    // Other queues may have moved the key's counter since the round began.
    const counter = this.#group?.counter(key.keyId);
    if (counter !== undefined) key.counter = counter;
    key.blocked = false;
    this.#unlink(taken);
    this.#setVtime(band, Math.max(this.#group?.vtime(band.priority) ?? band.vtime, key.counter));
    taken.charged = key.weight;
    key.open++;
    this.#setCounter(key, key.counter + taken.estimate / key.weight);
    if (band.vtime > RENORMALISE_AT) this.#renormalise(band);
    if (key.waiters.size === 0) this.#removeFromHeap(key);
    else this.#fix(key);
  }

  /** None of `key`'s waiters could be admitted: out of its band's heap for the round's rest. */
  #setAside(key: KeyState<T>, aside: KeyState<T>[]): void {
    key.blocked = true;
    this.#removeFromHeap(key);
    aside.push(key);
  }

  /** The keys set aside in a band go back into its heap. */
  #pushAll(aside: KeyState<T>[]): void {
    for (const key of aside) if (key.index < 0 && key.waiters.size > 0) this.#push(key);
    aside.length = 0;
  }

  /**
   * Charges a request that took a free slot without waiting while other keys of its band wait
   * (contention): its tokens count as service like a dispatched waiter's. Returns the charge to
   * `correct` later, or null when its band has no waiters (nothing to be fair against: the path
   * where nothing waits stays free of work).
   */
  charge(
    keyId: string,
    share: ShareSettings,
    item: T,
    estimateTokens: number,
  ): FairShareTicket<T> | null {
    return this.#run(() => {
      const band = this.#bands.get(share.priority);
      const waiting = band !== undefined && band.heap.length > 0;
      if (!waiting && this.#group?.othersFloor(share.priority) === undefined) return null;
      const ticket = this.#enqueue(keyId, { ...share, max_queued: null }, item, estimateTokens);
      if (!ticket) return null;
      const t = ticket as Ticket<T>;
      const key = t.key;
      this.#unlink(t);
      t.charged = key.weight;
      key.open++;
      this.#setCounter(key, key.counter + t.estimate / key.weight);
      if (key.counter > RENORMALISE_AT) this.#renormalise(key.band);
      if (key.waiters.size === 0) this.#removeFromHeap(key);
      else this.#fix(key);
      return t;
    });
  }

  /**
   * Corrects a dispatched request's charge with its real token count (input + output of its
   * usage event): the key's counter moves by the difference divided by the weight it was
   * charged at, but not down past the smallest counter of the band's other backlogged keys
   * (a key already below it stays where it is).
   */
  correct(ticket: FairShareTicket<T>, actualTokens: number): void {
    const t = ticket as Ticket<T>;
    if (t.waiting || t.charged === 0) return;
    this.#run(() => {
      const key = t.key;
      let counter = key.counter + (Math.max(0, actualTokens) - t.estimate) / t.charged;
      if (counter < key.counter) {
        const others = this.#othersFloor(key);
        if (others !== undefined) counter = Math.max(counter, Math.min(key.counter, others));
      }
      this.#setCounter(key, counter);
      t.charged = 0;
      key.open--;
      if (key.index >= 0) this.#fix(key);
      else this.#maybeForget(key);
    });
  }

  /** Every waiting request, in no particular order (deadline scans). */
  *tickets(): IterableIterator<FairShareTicket<T>> {
    for (const key of this.#keys.values()) {
      for (let t = key.waiters.first; t; t = t.linkNext) yield t;
    }
  }

  /** The backlogged keys, highest band first, each band in dispatch order (metrics). */
  backlogged(): BackloggedKey[] {
    const out: BackloggedKey[] = [];
    for (const priority of this.#order) {
      const keys = [...this.#bands.get(priority)!.heap].sort((a, b) => before(a, b) ? -1 : 1);
      for (const k of keys) {
        out.push({
          keyId: k.keyId,
          priority,
          weight: k.weight,
          queued: k.waiters.size,
          counter: k.counter,
        });
      }
    }
    return out;
  }

  /** Customer keys with state (backlogged, or idle with a debt still counted). */
  get keyCount(): number {
    return this.#keys.size;
  }

  #band(priority: number): Band<T> {
    let band = this.#bands.get(priority);
    if (!band) {
      band = { priority, heap: [], vtime: 0 };
      this.#bands.set(priority, band);
      this.#order = [...this.#bands.keys()].sort((a, b) => b - a);
    }
    return band;
  }

  /**
   * Where a key joining the band starts: its smallest backlogged counter (in the group: of every
   * queue), else the counter of the band's last dispatched key.
   */
  #floor(band: Band<T>): number {
    const own = band.heap.length > 0 ? band.heap[0].counter : undefined;
    const others = this.#group?.othersFloor(band.priority);
    if (own === undefined) return others ?? band.vtime;
    return others === undefined ? own : Math.min(own, others);
  }

  /** The smallest counter of a backlogged key of `key`'s band other than `key` (every queue). */
  #othersFloor(key: KeyState<T>): number | undefined {
    const heap = key.band.heap;
    const floor = heap.length > 0 && heap[0] !== key
      ? heap[0].counter
      : nextAfterTop(heap)?.counter;
    const group = this.#group?.othersFloor(key.band.priority, key.keyId);
    return group === undefined ? floor : floor === undefined ? group : Math.min(floor, group);
  }

  /**
   * Shifts every counter of `band` and its time down by the band's floor (in the group: of every
   * queue): comparisons within a band are all a band's order uses, and they are unchanged.
   */
  #renormalise(band: Band<T>): void {
    const offset = Math.min(this.#floor(band), band.vtime);
    // A floor held low (a waiter no slot suits, until its wait ends) would make this a pass over
    // every key per dispatch for little gain: shift only by a large step.
    if (!(offset >= RENORMALISE_AT / 2)) return;
    const group = this.#group;
    group?.shift(band.priority, offset);
    for (const key of this.#keys.values()) {
      if (key.band !== band) continue;
      key.counter = group?.counter(key.keyId) ?? key.counter - offset;
    }
    band.vtime = group === undefined ? band.vtime - offset : group.vtime(band.priority);
    const heap = band.heap;
    for (let i = (heap.length >> 1) - 1; i >= 0; i--) this.#down(heap, i);
  }

  #setCounter(key: KeyState<T>, value: number): void {
    key.counter = value;
    this.#group?.setCounter(key.keyId, key.band.priority, value);
  }

  #setVtime(band: Band<T>, value: number): void {
    band.vtime = value;
    this.#group?.setVtime(band.priority, value);
  }

  /**
   * Runs a change of the queue. In a group: inside the group's lock, on the group's counters
   * (read afresh first: other queues move them), and the queue's best waiters are published after
   * (see `Section` for the parts of a round). A round's later sections keep the order read at its
   * start (each charge reads its own key's counter afresh).
   */
  #run<R>(fn: () => R, section: Section = "whole"): R {
    const group = this.#group;
    if (!group) return fn();
    return group.locked(() => {
      const outer = this.#depth++ === 0;
      if (outer && (section === "whole" || section === "opens")) this.#refresh(group);
      try {
        return fn();
      } finally {
        if (--this.#depth === 0 && (section === "whole" || section === "closes")) {
          group.publish(this.#heads(), this.#drained);
          this.#drained = false;
        }
      }
    });
  }

  /** Reads the group's counters and band times, and orders every band's heap by them again. */
  #refresh(group: FairShareGroup): void {
    for (const key of this.#keys.values()) {
      const counter = group.counter(key.keyId);
      if (counter !== undefined) key.counter = counter;
    }
    for (const band of this.#bands.values()) {
      band.vtime = group.vtime(band.priority);
      const heap = band.heap;
      for (let i = (heap.length >> 1) - 1; i >= 0; i--) this.#down(heap, i);
    }
  }

  /** The best waiter of each band, for the group. */
  #heads(): QueueHead[] {
    const heads: QueueHead[] = [];
    for (const priority of this.#order) {
      const heap = this.#bands.get(priority)!.heap;
      const top = heap[0];
      if (top === undefined) continue;
      const head: QueueHead = {
        priority,
        keyId: top.keyId,
        seq: top.waiters.first!.seq,
        blocked: top.blocked,
      };
      const next = nextAfterTop(heap);
      if (next !== undefined) head.nextKeyId = next.keyId;
      heads.push(head);
    }
    return heads;
  }

  /**
   * An idle key without a debt is forgotten: joining again starts at the floor anyway. A key with
   * a charge still to correct is kept, so the correction reaches the state the key queues on.
   */
  #maybeForget(key: KeyState<T>): void {
    if (key.waiters.size > 0 || key.open > 0 || key.counter > this.#floor(key.band)) return;
    if (this.#keys.get(key.keyId) === key) this.#keys.delete(key.keyId);
  }

  #unlink(t: Ticket<T>): void {
    const key = t.key;
    key.waiters.delete(t);
    t.waiting = false;
    this.#size--;
  }

  // ---- the indexed binary heap of a band ----

  #push(key: KeyState<T>): void {
    const heap = key.band.heap;
    key.index = heap.length;
    heap.push(key);
    this.#up(heap, key.index);
  }

  #removeFromHeap(key: KeyState<T>): void {
    const i = key.index;
    if (i < 0) return;
    const heap = key.band.heap;
    const last = heap.pop()!;
    key.index = -1;
    if (last === key) return;
    heap[i] = last;
    last.index = i;
    this.#fix(last);
  }

  #fix(key: KeyState<T>): void {
    const heap = key.band.heap;
    if (!this.#up(heap, key.index)) this.#down(heap, key.index);
  }

  #up(heap: KeyState<T>[], i: number): boolean {
    const key = heap[i];
    let moved = false;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(key, heap[parent])) break;
      heap[i] = heap[parent];
      heap[i].index = i;
      i = parent;
      moved = true;
    }
    heap[i] = key;
    key.index = i;
    return moved;
  }

  #down(heap: KeyState<T>[], i: number): void {
    const key = heap[i];
    const n = heap.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(heap[r], heap[l]) ? r : l;
      if (!before(heap[c], key)) break;
      heap[i] = heap[c];
      heap[i].index = i;
      i = c;
    }
    heap[i] = key;
    key.index = i;
  }
}
