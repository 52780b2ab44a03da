import { assertEquals } from "../_assert.ts";
import { readingFromSnapshot } from "../../src/registry/reading.ts";

const NOW = 1_700_000_000_000; // ms
const NOW_S = NOW / 1000;

function node(fields: Record<string, unknown>): Record<string, unknown> {
  return { id: "n", tags: [], healthy: true, inflight: 0, max_conns: 0, ...fields };
}

function read(nodes: unknown[], tags?: string[]) {
  return readingFromSnapshot({ version: 1, nodes }, { now: NOW, tags });
}

Deno.test("reading: free per node is max_conns − inflight; used = Σlimit − Σfree", () => {
  assertEquals(
    read([node({ id: "a", max_conns: 8, inflight: 3 }), node({ id: "b", max_conns: 8 })]),
    { used: 3, limit: 16 },
  );
});

Deno.test("reading: a node's own limited reading caps its free slots", () => {
  // max_conns 8, inflight 1 → 7 free, but its probe says 6 of 8 used → 2 free.
  assertEquals(
    read([node({ max_conns: 8, inflight: 1, capacity: { used: 6, limit: 8, source: "p" } })]),
    { used: 6, limit: 8 },
  );
  // A roomy reading never frees more than max_conns − inflight.
  assertEquals(
    read([node({ max_conns: 4, inflight: 3, capacity: { used: 0, limit: 100 } })]),
    { used: 3, limit: 4 },
  );
});

Deno.test("reading: without max_conns the reading's limit is the node's limit", () => {
  assertEquals(read([node({ max_conns: 0, capacity: { used: 5, limit: 20 } })]), {
    used: 5,
    limit: 20,
  });
});

Deno.test("reading: a pending backoff leaves 0 free; an expired one is ignored", () => {
  const backoff = (at: number) => node({ max_conns: 4, capacity: { retry_after: at } });
  assertEquals(read([backoff(NOW_S + 2)]), { used: 4, limit: 4 });
  assertEquals(read([backoff(NOW_S - 2)]), { used: 0, limit: 4 });
});

Deno.test("reading: free is clamped to [0, limit]", () => {
  assertEquals(read([node({ max_conns: 4, inflight: 9 })]), { used: 4, limit: 4 }, "never < 0");
  assertEquals(
    read([node({ max_conns: 4, inflight: -3 })]),
    { used: 0, limit: 4 },
    "never above the node's limit",
  );
});

Deno.test("reading: one unbounded node makes the whole downstream unbounded", () => {
  assertEquals(read([node({ id: "a", max_conns: 8 }), node({ id: "b", max_conns: 0 })]), {
    used: null,
    limit: null,
  });
  // Unless that node is backing off: then it simply has no slots to offer.
  assertEquals(
    read([
      node({ id: "a", max_conns: 8, inflight: 2 }),
      node({ id: "b", max_conns: 0, capacity: { retry_after: NOW_S + 5 } }),
    ]),
    { used: 2, limit: 8 },
  );
});

Deno.test("reading: no healthy selected node reads as full (1 of 1)", () => {
  assertEquals(read([]), { used: 1, limit: 1 });
  assertEquals(read([node({ max_conns: 8, healthy: false })]), { used: 1, limit: 1 });
  assertEquals(read([node({ max_conns: 8, healthy: 0 })]), { used: 1, limit: 1 }, "0 is unhealthy");
  assertEquals(readingFromSnapshot("not a snapshot", { now: NOW }), { used: 1, limit: 1 });
  // Only unbounded-and-backing-off nodes: selected but Σlimit 0 → full.
  assertEquals(read([node({ max_conns: 0, capacity: { retry_after: NOW_S + 5 } })]), {
    used: 1,
    limit: 1,
  });
});

Deno.test("reading: tags filter the downstream nodes (all wanted tags, case-insensitive)", () => {
  const nodes = [
    node({ id: "a", tags: ["local", "gb10"], max_conns: 4, inflight: 1 }),
    node({ id: "b", tags: ["local"], max_conns: 8, inflight: 8 }),
    node({ id: "c", tags: ["cloud"], max_conns: 0 }),
  ];
  assertEquals(read(nodes, ["Local"]), { used: 9, limit: 12 });
  assertEquals(read(nodes, ["local", "gb10"]), { used: 1, limit: 4 });
  assertEquals(read(nodes, ["gpu-x"]), { used: 1, limit: 1 }, "none carries it: full");
  assertEquals(read(nodes), { used: null, limit: null }, "no filter: the cloud node is unbounded");
});

Deno.test("reading: numeric strings count, anything else is 0 (1/0 healthy accepted)", () => {
  assertEquals(read([node({ max_conns: "8", inflight: "2", healthy: 1 })]), { used: 2, limit: 8 });
  assertEquals(read([node({ max_conns: 8, inflight: "many" })]), { used: 0, limit: 8 });
});
