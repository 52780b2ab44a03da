import { assert, assertEquals } from "../_assert.ts";
import { RouteTable } from "../../src/core/router.ts";
import { type NodeRecord, normalizeNode } from "../../src/core/inventory.ts";
import { NodeCounters } from "../../src/core/admission.ts";

Deno.test("the selection cache keeps no selection that matches no node (unknown models)", () => {
  const node = normalizeNode({ id: "a", url: "http://a:1", model: "m1" })!;
  const records: NodeRecord[] = [{ node, counters: new NodeCounters(), share: 0 }];
  const table = new RouteTable(() => records, 16);
  const known = table.entry({ model: "m1" });
  for (let i = 0; i < 100; i++) {
    assertEquals(table.entry({ model: `${i}-${"x".repeat(1000)}` }).nodes.length, 0, "no node");
  }
  assertEquals(table.size, 1, "only the known model's selection is kept");
  assert(table.entry({ model: "m1" }) === known, "the known selection is still the cached one");
});
