import { assert, assertEquals } from "../_assert.ts";
import { EjectionTable } from "../../src/core/ejection.ts";
import type { RoutingCore } from "../../src/core/routing_core.ts";
import { core, counts, picks, spec } from "./routing_helpers.ts";

function table(opts: { failures?: number; maxShare?: number } = {}) {
  const clock = { now: 1_000_000 };
  const t = new EjectionTable({ now: () => clock.now, baseMs: 1000, maxMs: 60_000, ...opts });
  return { t, clock };
}

/** One failed request to `id`. */
function fail(t: EjectionTable, id: string): void {
  t.start(id);
  t.record(id, "failure");
}

Deno.test("ejection: consecutive transport failures eject; an answer in between resets", () => {
  const { t } = table();
  fail(t, "a");
  assert(t.admits("a"), "one failure does not eject");
  t.record("a", "answered");
  fail(t, "a");
  assert(t.admits("a"), "the count started again after the answer");
  fail(t, "a");
  assertEquals(t.admits("a"), false, "two in a row eject");
  assertEquals(t.snapshot("a").state, "ejected");
  assertEquals(t.snapshot("a").ejected_until, 1_001_000);
  assertEquals(t.nextChangeAt(), 1_001_000);
});

Deno.test("ejection: half-open lets one trial through; a failure doubles, an answer closes", () => {
  const { t, clock } = table();
  fail(t, "a");
  fail(t, "a");
  clock.now += 999;
  assertEquals(t.admits("a"), false, "still ejected");
  clock.now += 1;
  assert(t.admits("a"), "the ejection time is over: a trial may go");
  assertEquals(t.snapshot("a").state, "due");
  assertEquals(t.start("a"), true, "this request is the trial");
  assertEquals(t.admits("a"), false, "no second request while the trial is in flight");
  assertEquals(t.snapshot("a").state, "trial");
  t.record("a", "failure");
  assertEquals(t.snapshot("a").ejected_until, clock.now + 2000, "ejected again for twice as long");
  // 1 s, 2 s, 4 s, ... up to 60 s.
  const times: number[] = [];
  for (let i = 0; i < 8; i++) {
    const until = t.snapshot("a").ejected_until!;
    times.push(until - clock.now);
    clock.now = until;
    assert(t.start("a"), `trial ${i}`);
    t.record("a", "failure");
  }
  assertEquals(times, [2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  clock.now = t.snapshot("a").ejected_until!;
  assert(t.start("a"), "a trial");
  t.record("a", "answered");
  assertEquals(t.snapshot("a").state, "closed");
  assertEquals(t.any, false);
  fail(t, "a");
  assertEquals(t.admits("a"), true, "the history is gone: one failure ejects no more");
  assertEquals(t.snapshot("a").ejections_total, 10);
});

Deno.test("ejection: an aborted trial lets another trial go; 429 is an answer", () => {
  const { t, clock } = table({ failures: 1 });
  fail(t, "a");
  clock.now += 1000;
  assert(t.start("a"), "the trial");
  t.record("a", "aborted");
  assert(t.admits("a"), "the aborted trial says nothing: another may go");
  assert(t.start("a"), "another trial");
  t.record("a", "answered"); // an upstream 429 is an answer: the node is reachable
  assertEquals(t.snapshot("a").state, "closed");
});

Deno.test("ejection: never more than the share of a selection's nodes held out", () => {
  const { t, clock } = table({ failures: 1 });
  const ids = ["a", "b", "c", "d"];
  fail(t, "c");
  assertEquals([...t.ejectedAmong(ids)], ["c"]);
  fail(t, "a");
  fail(t, "a"); // a has failed longer
  assertEquals([...t.ejectedAmong(ids)].sort(), ["a", "c"], "2 of 4 is the 50% share");
  clock.now += 10;
  fail(t, "b"); // b was ejected after c
  assertEquals(t.admits("b"), false, "b on its own is ejected");
  assertEquals([...t.ejectedAmong(ids)].sort(), ["a", "c"], "but a third of four is let through");
  assertEquals([...t.ejectedAmong(["b"])], [], "a selection of one node is never emptied");
  assertEquals([...t.ejectedAmong(["b", "d"])], ["b"]);
  assertEquals([...t.ejectedAmong(["d"])], []);
  const all = table({ failures: 1, maxShare: 1 }).t;
  fail(all, "x");
  assertEquals([...all.ejectedAmong(["x"])], ["x"], "share 1 may hold out every node");
});

Deno.test("ejection: snapshot and forget", () => {
  const { t } = table({ failures: 1 });
  assertEquals(t.snapshot(), []);
  assertEquals(t.snapshot("z").state, "closed");
  fail(t, "a");
  fail(t, "b");
  assertEquals(t.snapshot().map((s) => [s.node_id, s.state, s.consecutive_failures]), [
    ["a", "ejected", 1],
    ["b", "ejected", 1],
  ]);
  t.forget("a");
  assert(t.admits("a"), "a forgotten node is admitted");
  assertEquals(t.any, true);
  t.forget();
  assertEquals(t.any, false);
  assertEquals(t.nextChangeAt(), undefined);
});

// --- In the core's admission ---

/** One admitted request to `id` that failed in transport. */
function failIn(skeid: RoutingCore, id: string): void {
  assert(skeid.startRequest(id), `admitted to ${id}`);
  skeid.finishRequest(id, { ok: false, transport: "failure" });
}

Deno.test("core: an ejected node is out of picks (within the share), back after a trial", () => {
  const { skeid, clock } = core({ ejection: { failures: 2, baseMs: 1000 } });
  for (const id of ["a", "b", "c", "d"]) skeid.addNode(spec(id));
  const sel = { model: "m" };
  failIn(skeid, "a");
  failIn(skeid, "a");
  assertEquals(counts(picks(skeid, sel, 30)).a, undefined, "a is not picked while ejected");
  assertEquals(skeid.routeState(sel).available_count, 3);
  assertEquals(skeid.getNode("a")?.healthy, true, "health is the operator's");
  assertEquals(skeid.nextCapacityChangeAt(), clock.t + 1000, "waiters wake when it ends");
  // Two more ejected: 50% of four is two, the third is let through.
  failIn(skeid, "b");
  failIn(skeid, "b");
  failIn(skeid, "c");
  failIn(skeid, "c");
  assertEquals(skeid.routeState(sel).available_count, 2, "never more than half held out");
  clock.t += 1000;
  // The trial: picked, admitted, and nothing else goes to a until it ends.
  assertEquals(skeid.nodeEjections("a").state, "due");
  assert(skeid.startRequest("a"), "the trial is admitted");
  assertEquals(skeid.nodeEjections("a").state, "trial");
  assertEquals(counts(picks(skeid, sel, 30)).a, undefined, "no second request during the trial");
  skeid.finishRequest("a", { ok: false, transport: "answered" }); // a 429 still is an answer
  assertEquals(skeid.nodeEjections("a").state, "closed");
  assert((counts(picks(skeid, sel, 30)).a ?? 0) > 0, "a is picked again");
  assertEquals(skeid.nodeEjections().map((e) => e.node_id).sort(), ["a", "b", "c"]);
});

Deno.test("core: finishes without a transport outcome leave ejection alone; removal forgets", () => {
  const { skeid } = core({ ejection: { failures: 1 } });
  skeid.addNode(spec("a"));
  skeid.addNode(spec("b"));
  for (let i = 0; i < 5; i++) {
    skeid.startRequest("a");
    skeid.finishRequest("a", { ok: false }); // an upstream 5xx, as finished today
  }
  assertEquals(skeid.nodeEjections("a").state, "closed");
  failIn(skeid, "a");
  assertEquals(skeid.nodeEjections("a").state, "ejected");
  skeid.removeNode("a");
  skeid.addNode(spec("a"));
  assertEquals(skeid.nodeEjections("a").state, "closed", "a node added again starts afresh");
});

Deno.test("core: a trial finished without a transport outcome is freed, not stuck", () => {
  const { skeid, clock } = core({ ejection: { failures: 1, maxShare: 1 } });
  skeid.addNode(spec("a"));
  failIn(skeid, "a");
  clock.t += 1000;
  assert(skeid.startRequest("a"), "the trial");
  assertEquals(skeid.pickNode({ model: "m" }), undefined, "held out during the trial");
  skeid.finishRequest("a", { ok: false }); // a finish path that says nothing about transport
  assertEquals(skeid.pickNode({ model: "m" })?.id, "a", "the next request is the trial");
});
