import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { RoutingCore } from "../../src/core/routing_core.ts";
import type { Tier } from "../../src/core/types.ts";
import { RouteWalk } from "../../src/proxy/walk.ts";
import { WaiterQueue } from "../../src/proxy/wait.ts";

function setup(nodes: Record<string, unknown>[]) {
  const skeid = new RoutingCore({ env: () => undefined });
  for (const n of nodes) skeid.addNode({ url: "http://127.0.0.1:1", ...n });
  const queue = new WaiterQueue({
    now: skeid.now,
    subscribe: (l) => skeid.onCapacityChange(l),
    nextChangeAt: () => skeid.nextCapacityChangeAt(),
    pollMs: () => 1000,
  });
  return { skeid, queue };
}

const tier = (model: string, extra: Partial<Tier> = {}): Tier => ({
  tags: [],
  model,
  engine: "",
  wait_ms: 0,
  deny_tags: [],
  ...extra,
});

Deno.test("walk: admits on the first tier with room; the slot is taken", async () => {
  const { skeid, queue } = setup([{ id: "a", model: "m", max_conns: 1 }]);
  const r = await new RouteWalk(skeid, queue, [tier("m")], "m").next();
  strictEqual(r.kind, "admitted");
  strictEqual(r.kind === "admitted" && r.node.id, "a");
  strictEqual(skeid.nodeMetrics("a")!.inflight, 1);
  skeid.finishRequest("a", { ok: true });
  queue.close();
});

Deno.test("walk: 503 when no tier had an eligible node; 403 when only deny_tags removed them", async () => {
  const { skeid, queue } = setup([{ id: "c", model: "m", tags: ["cloud"] }]);
  const none = await new RouteWalk(skeid, queue, [tier("x")], "x").next();
  deepStrictEqual(none.kind === "refused" && [none.status, none.type], [503, "model_not_found"]);
  const denied = await new RouteWalk(skeid, queue, [tier("m", { deny_tags: ["cloud"] })], "m")
    .next();
  deepStrictEqual(
    denied.kind === "refused" && [denied.status, denied.type, denied.message],
    [403, "permission_error", "Model 'm' is not available for this key"],
  );
  queue.close();
});

Deno.test("walk: 429 when eligible but never admitted; message names the model", async () => {
  const { skeid, queue } = setup([{ id: "a", model: "m", max_conns: 1 }]);
  ok(skeid.startRequest("a"));
  const r = await new RouteWalk(skeid, queue, [tier("m", { wait_ms: 20 })], "m").next();
  strictEqual(r.kind, "refused");
  if (r.kind === "refused") {
    strictEqual(r.status, 429);
    ok(/^Timed out waiting for free capacity for model 'm' \(waited \d+ms\)$/.test(r.message));
  }
  skeid.finishRequest("a", { ok: true });
  queue.close();
});

Deno.test("walk: a waiter is admitted by a finish, in the tier it waits in", async () => {
  const { skeid, queue } = setup([
    { id: "a", model: "m", max_conns: 1, tags: ["local"] },
    { id: "b", model: "m", tags: ["cloud"] },
  ]);
  ok(skeid.startRequest("a"));
  const walk = new RouteWalk(skeid, queue, [
    tier("m", { tags: ["local"], wait_ms: 60_000 }),
    tier("m", { tags: ["cloud"] }),
  ], "m");
  const pending = walk.next();
  strictEqual(queue.size, 1);
  skeid.finishRequest("a", { ok: true });
  const r = await pending;
  strictEqual(r.kind === "admitted" && r.node.id, "a");
  skeid.finishRequest("a", { ok: true });
  queue.close();
});

Deno.test("walk: failover excludes tried nodes, this tier first, then the next, no second wait", async () => {
  const { skeid, queue } = setup([
    { id: "a1", model: "m", tags: ["local"] },
    { id: "a2", model: "m", tags: ["local"] },
    { id: "b", model: "m", tags: ["cloud"] },
  ]);
  const walk = new RouteWalk(skeid, queue, [
    tier("m", { tags: ["local"], wait_ms: 60_000 }),
    tier("m", { tags: ["cloud"] }),
  ], "m");
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await walk.next();
    if (r.kind !== "admitted") throw new Error(`expected a node, got ${r.kind}`);
    seen.push(r.node.id);
    skeid.finishRequest(r.node.id, { ok: false });
    walk.exclude(r.node.id);
  }
  deepStrictEqual(seen.slice(0, 2).sort(), ["a1", "a2"]);
  strictEqual(seen[2], "b");
  const end = await walk.next();
  strictEqual(end.kind, "refused");
  strictEqual(queue.size, 0, "never waited for an excluded node");
  queue.close();
});

Deno.test("walk: an aborted wait answers aborted and takes nothing", async () => {
  const { skeid, queue } = setup([{ id: "a", model: "m", max_conns: 1 }]);
  ok(skeid.startRequest("a"));
  const ac = new AbortController();
  const pending = new RouteWalk(skeid, queue, [tier("m", { wait_ms: 60_000 })], "m").next(ac);
  ac.abort();
  strictEqual((await pending).kind, "aborted");
  skeid.finishRequest("a", { ok: true });
  strictEqual(skeid.nodeMetrics("a")!.inflight, 0);
  queue.close();
});
