import { assert, assertEquals } from "../_assert.ts";
import { core, counts, spec } from "./routing_helpers.ts";
import { hintSource, routeHint } from "../../src/core/route_hint.ts";
import type { RoutingCore } from "../../src/core/routing_core.ts";
import { pickAffinity } from "../../src/core/pick.ts";
import { RECORD_BUDGET } from "../../src/core/affinity.ts";

const NODES = ["a", "b", "c", "d"];

function fleet(extra: Record<string, unknown> = {}) {
  const f = core();
  for (const id of NODES) f.skeid.addNode(spec(id, { max_conns: 64, ...extra }));
  return f;
}

const system = "Answer as the travel desk of a large airline would. ".repeat(40);
const ask = (user: string, extra: Record<string, unknown> = {}) =>
  routeHint({
    model: "m",
    messages: [{ role: "system", content: system }, { role: "user", content: user }],
    ...extra,
  });

/** Picks and admits (the request stays in flight), answering the node id. */
function send(skeid: RoutingCore, hint: ReturnType<typeof routeHint>, pick = "affinity" as const) {
  const node = skeid.pickNode({ model: "m", pick }, hintSource(hint))!;
  assert(skeid.startRequest(node.id));
  return node;
}

Deno.test("least_loaded: the node with the fewest requests in flight; equal loads take turns", () => {
  const { skeid } = fleet();
  const sel = { model: "m", pick: "least_loaded" as const };
  for (let i = 0; i < 3; i++) skeid.startRequest("a");
  skeid.startRequest("b");
  skeid.startRequest("c");
  assertEquals(skeid.pickNode(sel)?.id, "d");
  skeid.startRequest("d");
  // b, c, d at 1: they take turns; a (3) never comes up.
  const ids = Array.from({ length: 6 }, () => skeid.pickNode(sel)!.id);
  assertEquals(counts(ids), { b: 2, c: 2, d: 2 });
  assertEquals(skeid.pickNode(sel)?.route?.pick, "least_loaded");
});

Deno.test("least_loaded reads the node's own queue where a probe reports it", () => {
  const { skeid } = fleet();
  // Traffic from elsewhere: b runs 6 and queues 3 though this gateway sent it nothing.
  skeid.setCapacityReading("b", { source: "prometheus", queue: { running: 6, waiting: 3 } });
  for (const id of ["a", "c", "d"]) skeid.startRequest(id);
  const ids = Array.from(
    { length: 6 },
    () => skeid.pickNode({ model: "m", pick: "least_loaded" })!.id,
  );
  assert(!ids.includes("b"), ids.join(","));
});

Deno.test("round_robin stays the default and reads no hint", () => {
  const { skeid } = fleet();
  let asked = 0;
  const ids = Array.from({ length: 8 }, () =>
    skeid.pickNode({ model: "m" }, {
      routeHint: () => {
        asked++;
        return ask("x");
      },
    })!.id);
  assertEquals(counts(ids), { a: 2, b: 2, c: 2, d: 2 });
  assertEquals(asked, 0);
  assertEquals(skeid.pickNode({ model: "m" })?.route, undefined);
});

Deno.test("affinity: one session stays on one node, and a second frontend places it alike", () => {
  const one = fleet().skeid;
  const two = fleet().skeid;
  for (let s = 0; s < 20; s++) {
    // Prompts of their own: no prefix in common that the first frontend's index would follow.
    const hint = routeHint({
      messages: [{ role: "user", content: `session ${s} asks something ${"long ".repeat(80)}` }],
      prompt_cache_key: `session-${s}`,
    });
    const first = send(one, hint);
    assertEquals(first.route?.key_kind, "prompt_cache_key");
    // The second frontend has no shared state: it ranks the session the same way.
    assertEquals(two.pickNode({ model: "m", pick: "affinity" }, hintSource(hint))?.id, first.id);
    one.finishRequest(first.id, { ok: true });
    for (let turn = 0; turn < 3; turn++) {
      const again = send(one, hint);
      assertEquals(again.id, first.id);
      assertEquals(again.route?.hit, true);
      one.finishRequest(again.id, { ok: true });
    }
  }
});

Deno.test("affinity: a prompt sharing a long prefix goes where that prefix is warm", () => {
  const { skeid } = fleet();
  const home = send(skeid, ask("first user", { user: "alice" }));
  skeid.finishRequest(home.id, { ok: true });
  // Other users, other keys, the same system prompt: the index sends them to the warm node.
  for (const user of ["bob", "carol", "dave"]) {
    const node = skeid.pickNode(
      { model: "m", pick: "affinity" },
      hintSource(ask(`hi from ${user}`, { user })),
    )!;
    assertEquals(node.id, home.id);
    assertEquals(node.route?.hit, true);
    assert(node.route!.cached_tokens > 0);
  }
});

Deno.test("affinity: a key sent on every request (pinning a node) is held by the bound", () => {
  // Nodes that run 8 at once: beyond the bound each request counts as queued there.
  const { skeid } = fleet({ max_conns: 8 });
  const hint = ask("the same question", { prompt_cache_key: "pinned" });
  const held: string[] = [];
  let spilled = 0;
  for (let i = 0; i < 24; i++) {
    const node = send(skeid, hint);
    held.push(node.id);
    if (node.route?.spilled) spilled++;
  }
  const loads = skeid.nodeMetrics().map((m) => m.inflight);
  assert(spilled > 0);
  // 24 in flight over 4 nodes: the bound's ceiling is 8; none beyond it, all four used.
  assert(Math.max(...loads) <= Math.ceil((1.25 * 25) / 4), `loads ${loads}`);
  assertEquals(Object.keys(counts(held)).length, 4, JSON.stringify(counts(held)));
});

Deno.test("affinity: a conversation's next turn stays on its node while a slot is free", () => {
  // Nodes that run 8 at once; the conversation's node busier than the bound's ceiling.
  const { skeid, clock } = fleet({ max_conns: 8 });
  const turn = (n: number) =>
    routeHint({
      model: "m",
      messages: Array.from({ length: n }, (_, i) => ({
        role: i % 2 === 0 ? "user" : "assistant",
        content: `turn ${i} of the conversation ${"says a good deal more ".repeat(40)}`,
      })),
    });
  const home = send(skeid, turn(1));
  skeid.finishRequest(home.id, { ok: true });
  // Other traffic: the home node at 5 in flight, the others at 1 (mean 2, ceiling 3 with this
  // request): over the bound's line, with three slots free.
  for (let i = 0; i < 5; i++) assert(skeid.startRequest(home.id));
  for (const id of NODES) if (id !== home.id) assert(skeid.startRequest(id));
  // The next turn comes after the answer: it stays, where its history is.
  clock.t += 5_000;
  const next = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(turn(3)))!;
  assertEquals([next.id, next.route?.hit], [home.id, true]);
  // Many requests of one session at once are a hot key: the bound spreads them.
  const now = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(turn(3)))!;
  assert(now.id !== home.id, "a request of a session picked a moment ago is not exempt");
});

Deno.test("affinity chooses only among nodes that admit now; excluded nodes are left out", () => {
  const { skeid } = fleet({ max_conns: 1 });
  const hint = ask("q", { prompt_cache_key: "k" });
  const home = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint))!.id;
  const first = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint))!;
  assertEquals(first.route?.hit, true, "the affinity node itself");
  skeid.startRequest(home);
  const next = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint))!;
  assert(next.id !== home, "a full node is not admitted, whatever its cache");
  // The affinity node is the full one: a pick elsewhere is no hit, and no spill (admission
  // ruled it out, not the bound).
  assertEquals([next.route?.hit, next.route?.spilled], [false, false]);
  const exclude = new Set(NODES.filter((id) => id !== "c"));
  assertEquals(
    skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint), exclude)?.id,
    home === "c" ? undefined : "c",
  );
  for (const id of NODES) skeid.startRequest(id);
  assertEquals(skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint)), undefined);
});

Deno.test("routing.pick sets the default; a tier's pick wins over it", () => {
  const { skeid } = fleet();
  skeid.setRouting({ pick: "least_loaded" });
  assertEquals(skeid.pickNode({ model: "m" })?.route?.pick, "least_loaded");
  assertEquals(skeid.pickNode({ model: "m", pick: "round_robin" })?.route, undefined);
  skeid.setModelAlias("chat", [{ tags: [], model: "m", pick: "affinity" }]);
  const tier = skeid.routePlan({ model: "chat" }).tiers[0];
  assertEquals(tier.pick, "affinity");
  assertEquals(skeid.pickNode(tier, hintSource(ask("q")))?.route?.pick, "affinity");
});

Deno.test("the index forgets a node whose prefix-cache counter went back (a restart)", () => {
  const { skeid } = fleet();
  skeid.setCapacityReading("a", {
    source: "prometheus",
    queue: { running: 0, waiting: 0, prefix_queries: 500 },
  });
  const hint = ask("q", { user: "u" });
  const home = send(skeid, hint).id;
  skeid.finishRequest(home, { ok: true });
  const cached = () =>
    skeid.explainPick({ model: "m", pick: "affinity" }, hint)!.candidates.find((c) =>
      c.node_id === home
    )!.cached_tokens;
  assert(cached() > 0);
  skeid.setCapacityReading(home, {
    source: "prometheus",
    queue: { running: 0, waiting: 0, prefix_queries: 900 },
  });
  assert(cached() > 0, "counting up: same engine");
  skeid.setCapacityReading(home, {
    source: "prometheus",
    queue: { running: 0, waiting: 0, prefix_queries: 3 },
  });
  assertEquals(cached(), 0);
});

Deno.test("affinity: a node seen running a few with nothing waiting is not taken for full", () => {
  const { skeid } = fleet();
  const hint = ask("a turn of a conversation", { user: "erin" });
  const home = send(skeid, hint).id;
  skeid.finishRequest(home, { ok: true });
  // Three in flight everywhere; the probe saw the home node running its three, none waiting:
  // the node had room for more, so three is not where its queue starts.
  for (const id of NODES) for (let i = 0; i < 3; i++) skeid.startRequest(id);
  skeid.setCapacityReading(home, { source: "prometheus", queue: { running: 3, waiting: 0 } });
  const next = skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(hint))!;
  assertEquals(next.id, home, JSON.stringify(next.route));
  assertEquals(next.route?.hit, true);
  // Seen running three with others waiting: three is its limit, and a fourth would queue.
  skeid.setCapacityReading(home, { source: "prometheus", queue: { running: 3, waiting: 1 } });
  const wait = skeid.explainPick({ model: "m", pick: "affinity" }, hint)!.candidates
    .find((c) => c.node_id === home)!.wait_ms;
  assert(wait > 0, `wait ${wait}`);
});

Deno.test("affinity: among nodes holding the same prefix the less loaded wins, and it is a hit", () => {
  const node = (index: number, load: number, cachedTokens: number, prefill: number) => ({
    index,
    id: `n${index}`,
    hash: 1000 + index,
    weight: 1,
    load,
    slots: 8,
    prefillMsPerToken: prefill,
    serviceMs: 500,
    cachedTokens,
  });
  const args = { key: 7, keyKind: "prompt" as const, promptTokens: 3100, bound: 1.25 };
  // Both warm with free slots; learned costs a little apart: a tie, taken by load.
  const d = pickAffinity([node(0, 5, 3072, 0.09), node(1, 2, 3072, 0.1), node(2, 0, 0, 0.1)], {
    ...args,
    explore: false,
  });
  assertEquals([d.node_id, d.hit, d.spilled], ["n1", true, false]);
  // An eligible node that cannot take it holds more: the pick is no hit.
  const away = pickAffinity([node(0, 5, 3072, 0.09), node(1, 2, 3072, 0.1)], {
    ...args,
    explore: false,
    elsewhere: { cachedTokens: 3100, rank: 0 },
  });
  assertEquals([away.hit, away.spilled], [false, false]);
});

Deno.test("affinity: a long prompt is remembered a bounded part per pick, all of it soon after", () => {
  const { skeid } = fleet();
  // 200 index blocks (256 bytes each) of a long document, sent to a node holding none of it.
  const document = "The quarterly report of the northern division, page after page. ".repeat(800);
  const long = routeHint({ model: "m", messages: [{ role: "user", content: document }] });
  assertEquals(long.blocks.length, 200);
  const home = send(skeid, long).id;
  const held = () =>
    skeid.explainPick({ model: "m", pick: "affinity" }, long)!.candidates.find((c) =>
      c.node_id === home
    )!.cached_tokens / 64;
  // The pick wrote its first RECORD_BUDGET blocks; a prefix of the prompt, never more.
  assertEquals(held(), RECORD_BUDGET);
  // Every later pick writes as many again of the rest, whatever it routes.
  const picksToFinish = Math.ceil((200 - RECORD_BUDGET) / RECORD_BUDGET);
  for (let i = 0; i < picksToFinish; i++) {
    const other = send(skeid, ask(`short question ${i}`, { user: `u${i}` }));
    skeid.finishRequest(other.id, { ok: true });
    assertEquals(held(), Math.min(200, RECORD_BUDGET * (i + 2)));
  }
  assertEquals(held(), 200);
});

Deno.test("affinity: what is still to be written of a node's prompts goes when it is forgotten", () => {
  const { skeid } = fleet();
  const document = "Minutes of the board, item by item, with every vote recorded. ".repeat(800);
  const long = routeHint({ model: "m", messages: [{ role: "user", content: document }] });
  const home = send(skeid, long).id;
  skeid.setCapacityReading(home, {
    source: "prometheus",
    queue: { running: 1, waiting: 0, prefix_queries: 900 },
  });
  // Its prefix-cache counter went back: a restart. Nothing of the prompt comes back after it.
  skeid.setCapacityReading(home, {
    source: "prometheus",
    queue: { running: 1, waiting: 0, prefix_queries: 3 },
  });
  for (let i = 0; i < 10; i++) {
    skeid.pickNode({ model: "m", pick: "affinity" }, hintSource(ask(`q${i}`)));
  }
  const cached = skeid.explainPick({ model: "m", pick: "affinity" }, long)!.candidates
    .find((c) => c.node_id === home)!.cached_tokens;
  assertEquals(cached, 0);
});
