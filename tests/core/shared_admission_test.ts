import { assert, assertEquals } from "../_assert.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { InflightTable, inflightTableBytes } from "../../src/core/inflight_table.ts";

/** Two cores over one shared table, as two workers of a process see it (ADR 0025). */
function twoWorkers(frontends = 1): [RoutingCore, RoutingCore, InflightTable] {
  const size = { capacity: 16, workers: 2 };
  const buffer = new SharedArrayBuffer(inflightTableBytes(size));
  const tables = [0, 1].map((w) => new InflightTable(buffer, size, w));
  const cores = tables.map((inflight) =>
    new RoutingCore({
      workerCount: 2,
      inflight,
      env: () => undefined,
      routing: { frontend_count: frontends },
    })
  );
  for (const core of cores) core.addNode({ id: "n", url: "http://127.0.0.1:1", max_conns: 4 });
  return [cores[0], cores[1], tables[0]];
}

Deno.test("shared admission: two workers admit max_conns together, not max_conns / 2 each", () => {
  const [a, b, table] = twoWorkers();
  assertEquals(a.workerMaxConns({ max_conns: 4 }), 4, "the workers share one share");
  assert(a.startRequest("n"), "a 1");
  assert(a.startRequest("n"), "a 2");
  assert(a.startRequest("n"), "a 3: more than half, since b holds none");
  assert(b.startRequest("n"), "b 1");
  assertEquals(b.startRequest("n"), false, "the 5th is refused in either worker");
  assertEquals(a.startRequest("n"), false, "and in the other");
  assertEquals(a.nodeMetrics("n")?.inflight, 4, "metrics show the group's inflight");
  assertEquals(a.routeState({ model: "" }).available_count, 0, "nothing available");
  a.finishRequest("n", { ok: true, transport: "answered" });
  assertEquals(b.routeState({ model: "" }).available_count, 1, "a slot freed in a is free in b");
  assert(b.startRequest("n"), "b takes it");
  assertEquals(table.held(table.slot("n"), 1), 2, "b holds 2");
  assertEquals(table.releaseWorker(1), 2, "a dead b gives back its 2");
  assert(a.startRequest("n"), "a takes one of them");
});

Deno.test("shared admission: frontends still divide, and the warnings name only them", () => {
  const [a] = twoWorkers(8);
  assertEquals(a.workerMaxConns({ max_conns: 4 }), 1, "4 / 8 frontends, at least 1");
  const warnings = a.workerShareWarnings();
  assertEquals(warnings.length, 1, "one node cannot be split");
  assert(warnings[0].includes("8 frontends"), warnings[0]);
  assert(!warnings[0].includes("workers"), "workers do not divide a shared table");
});

Deno.test("shared admission: a local table keeps the per-worker divisor", () => {
  const core = new RoutingCore({ workerCount: 2, env: () => undefined });
  assertEquals(core.workerMaxConns({ max_conns: 4 }), 2, "4 / 2 workers");
});

Deno.test("shared admission: a slot of a node removed mid-request goes back", () => {
  const [a, b] = twoWorkers();
  for (let i = 0; i < 4; i++) assert(a.startRequest("n"), `take ${i}`);
  a.removeNode("n");
  for (let i = 0; i < 4; i++) a.finishRequest("n", { ok: true });
  assert(b.startRequest("n"), "the row is empty again");
});

Deno.test("shared admission: a node past the shared table's capacity is refused, never counted alone", () => {
  const size = { capacity: 2, workers: 2 };
  const buffer = new SharedArrayBuffer(inflightTableBytes(size));
  const cores = [0, 1].map((w) =>
    new RoutingCore({
      workerCount: 2,
      inflight: new InflightTable(buffer, size, w),
      env: () => undefined,
    })
  );
  const [a, b] = cores;
  a.replaceNodes([
    { id: "n1", url: "http://127.0.0.1:1", max_conns: 1 },
    { id: "n2", url: "http://127.0.0.1:1", max_conns: 1 },
  ]);
  // A third id has no row: a silent fallback to this worker's own count would let each worker
  // admit max_conns on its own (the group twice the node's limit).
  let added: unknown;
  try {
    added = b.addNode({ id: "n3", url: "http://127.0.0.1:1", max_conns: 1 });
  } catch (err) {
    added = err;
  }
  assert(added instanceof Error, "the add is refused");
  assert(/n3.*shared inflight table.*2 distinct node ids/.test(added.message), added.message);
  assertEquals(b.nodeMetrics("n3"), undefined, "and changes nothing");
  let replaced: unknown;
  try {
    a.replaceNodes([
      { id: "n1", url: "http://127.0.0.1:1", max_conns: 1 },
      { id: "n3", url: "http://127.0.0.1:1", max_conns: 1 },
    ]);
  } catch (err) {
    replaced = err;
  }
  assert(replaced instanceof Error && replaced.message.startsWith("nodes[1].id: "), `${replaced}`);
  assertEquals(
    a.nodeMetrics().map((m) => m.node_id),
    ["n1", "n2"],
    "the config is not half-applied",
  );
});
