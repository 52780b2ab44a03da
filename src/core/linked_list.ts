/**
 * The one intrusive doubly-linked list of the tree: the things in flight (requests, watched
 * upstream waits, requests waiting for capacity), a key's waiters in fair share, and the client
 * connections the listener times out (never served yet, idle).
 *
 * Why not a `Set`: a long-lived Set that gets one add and one delete per request reallocates its
 * hash table every few dozen requests, and an old table that was promoted to V8's old generation
 * still points at the requests it held when it was replaced. Until the next full collection those
 * dead tables keep young request objects (and everything they reference: the Request, its
 * headers, the parsed body) alive through every scavenge, so they get promoted too — measured:
 * 15% of the young generation surviving each scavenge, 9 ms pauses, a sixth of the gateway's CPU
 * at 15k req/s. Links on the items themselves are cleared when an item leaves: nothing stale
 * points at a finished request.
 *
 * @module
 */

/** What the list links through (the fields belong to the list; items only carry them). */
export interface Linked<T> {
  /** The previous item, while listed. */
  linkPrev?: T;
  /** The next item, while listed. */
  linkNext?: T;
  /** The list holding the item, while listed. */
  linkList?: object;
}

/** An intrusive list: O(1) add and delete, iteration in insertion order. */
export class LinkedList<T extends Linked<T>> {
  #head: T | undefined;
  #tail: T | undefined;
  #size = 0;

  /** Items listed. */
  get size(): number {
    return this.#size;
  }

  /** The first item (the oldest), or undefined when empty; walk on with `linkNext`. */
  get first(): T | undefined {
    return this.#head;
  }

  /** Whether `item` is in this list. */
  has(item: T): boolean {
    return item.linkList === this;
  }

  /** Appends `item` (no-op when already listed here). */
  add(item: T): void {
    if (item.linkList === this) return;
    if (item.linkList !== undefined) (item.linkList as LinkedList<T>).delete(item);
    item.linkList = this;
    item.linkPrev = this.#tail;
    item.linkNext = undefined;
    if (this.#tail !== undefined) this.#tail.linkNext = item;
    else this.#head = item;
    this.#tail = item;
    this.#size++;
  }

  /** Removes `item`; false when it was not listed here. */
  delete(item: T): boolean {
    if (item.linkList !== this) return false;
    const prev = item.linkPrev;
    const next = item.linkNext;
    if (prev !== undefined) prev.linkNext = next;
    else this.#head = next;
    if (next !== undefined) next.linkPrev = prev;
    else this.#tail = prev;
    item.linkPrev = item.linkNext = item.linkList = undefined;
    this.#size--;
    return true;
  }

  /** Removes every item. */
  clear(): void {
    for (let item = this.#head; item !== undefined;) {
      const next = item.linkNext;
      item.linkPrev = item.linkNext = item.linkList = undefined;
      item = next;
    }
    this.#head = this.#tail = undefined;
    this.#size = 0;
  }

  /** The items in insertion order; deleting the current item while iterating is safe. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let item = this.#head; item !== undefined;) {
      const next = item.linkNext;
      yield item;
      item = next;
    }
  }
}
