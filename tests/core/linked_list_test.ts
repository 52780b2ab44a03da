import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { type Linked, LinkedList } from "../../src/core/linked_list.ts";

class Item implements Linked<Item> {
  linkPrev?: Item;
  linkNext?: Item;
  linkList?: object;
  constructor(readonly name: string) {}
}

const names = (list: LinkedList<Item>) => [...list].map((i) => i.name);

Deno.test("linked list: add, delete anywhere, insertion order, size", () => {
  const list = new LinkedList<Item>();
  const [a, b, c, d] = ["a", "b", "c", "d"].map((n) => new Item(n));
  for (const i of [a, b, c, d]) list.add(i);
  list.add(b); // already listed: no change
  deepStrictEqual(names(list), ["a", "b", "c", "d"]);
  strictEqual(list.delete(b), true);
  strictEqual(list.delete(b), false, "a second delete is a no-op");
  strictEqual(list.delete(a), true); // head
  strictEqual(list.delete(d), true); // tail
  deepStrictEqual(names(list), ["c"]);
  strictEqual(list.size, 1);
  list.add(a);
  deepStrictEqual(names(list), ["c", "a"]);
  // A deleted item keeps no link to its old neighbours or list.
  deepStrictEqual([b.linkPrev, b.linkNext, b.linkList, list.has(b)], [
    undefined,
    undefined,
    undefined,
    false,
  ]);
});

Deno.test("linked list: deleting the current item while iterating; clear; moving lists", () => {
  const list = new LinkedList<Item>();
  const items = ["a", "b", "c"].map((n) => new Item(n));
  for (const i of items) list.add(i);
  const seen: string[] = [];
  for (const i of list) {
    seen.push(i.name);
    list.delete(i);
  }
  deepStrictEqual(seen, ["a", "b", "c"]);
  strictEqual(list.size, 0);
  for (const i of items) list.add(i);
  const other = new LinkedList<Item>();
  other.add(items[1]); // moves it
  deepStrictEqual([names(list), names(other)], [["a", "c"], ["b"]]);
  list.clear();
  deepStrictEqual([list.size, names(list), items[0].linkList], [0, [], undefined]);
});
