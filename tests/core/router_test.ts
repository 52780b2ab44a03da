import assert from "node:assert/strict";
import { routeKey, RouteTable } from "../../src/core/router.ts";
import { type NodeRecord, normalizeNode } from "../../src/core/inventory.ts";
import { NodeCounters } from "../../src/core/admission.ts";
import { UnknownEngineError } from "../../src/core/engines.ts";
import { core, counts, picks, spec } from "./routing_helpers.ts";

Deno.test("weighted round-robin: weights 1/2/3 give exactly 100/200/300 over 600 picks", () => {
  const { skeid } = core();
  skeid.addNode(spec("c", { weight: 3 }));
  skeid.addNode(spec("a", { weight: 1 }));
  skeid.addNode(spec("b", { weight: 2 }));
  const ids = picks(skeid, { model: "m" }, 600);
  assert.deepEqual(counts(ids), { a: 100, b: 200, c: 300 });
  // Smooth, not bursty: every run of 6 consecutive picks holds the exact shares.
  for (let i = 0; i < 600; i += 6) {
    assert.deepEqual(counts(ids.slice(i, i + 6)), { a: 1, b: 2, c: 3 }, `picks ${i}..${i + 5}`);
  }
  assert.equal(skeid.nodeMetrics("c")?.started, 0, "picking does not admit");
});

Deno.test("pickNode returns a copy of the node with inflight and route_key", () => {
  const { skeid } = core();
  skeid.addNode(spec("gpu-1", { engine: "vllm", max_conns: 2, tags: ["local"] }));
  skeid.startRequest("gpu-1");
  const picked = skeid.pickNode({ model: "m", tags: ["local"] })!;
  assert.deepEqual(picked, {
    ...skeid.getNode("gpu-1"),
    inflight: 1,
    route_key: "m||local",
  });
  picked.healthy = false;
  assert.equal(skeid.getNode("gpu-1")?.healthy, true);
});

Deno.test("two nodes max_conns 1: after starting the first pick, the next pick is the other", () => {
  const { skeid } = core();
  skeid.addNode(spec("n1", { max_conns: 1 }));
  skeid.addNode(spec("n2", { max_conns: 1 }));
  const first = skeid.pickNode({ model: "m" })!;
  assert.equal(skeid.startRequest(first.id), true);
  const second = skeid.pickNode({ model: "m" })!;
  assert.notEqual(second.id, first.id);
  assert.equal(skeid.startRequest(second.id), true);
  assert.equal(skeid.pickNode({ model: "m" }), undefined, "both full");
  const state = skeid.routeState({ model: "m" });
  assert.equal(state.has_eligible, true);
  assert.equal(state.has_available, false);
});

Deno.test("an unhealthy node is never picked; route state counts the healthy one", () => {
  const { skeid } = core();
  skeid.addNode(spec("up"));
  skeid.addNode(spec("down", { healthy: false }));
  assert.deepEqual(counts(picks(skeid, { model: "m" }, 10)), { up: 10 });
  assert.deepEqual(skeid.routeState({ model: "m" }), {
    model: "m",
    engine: "",
    tags: [],
    deny_tags: [],
    eligible_count: 1,
    available_count: 1,
    has_eligible: true,
    has_available: true,
  });
});

Deno.test("tagged picks stay in the tag set; an unmatched tag picks nothing", () => {
  const { skeid } = core();
  skeid.addNode(spec("local-1", { tags: ["local"] }));
  skeid.addNode(spec("local-2", { tags: ["local", "gb10"] }));
  skeid.addNode(spec("cloud-1", { tags: ["cloud"] }));
  assert.deepEqual(counts(picks(skeid, { model: "m", tags: ["local"] }, 6)), {
    "local-1": 3,
    "local-2": 3,
  });
  assert.equal(skeid.pickNode({ model: "m", tags: ["gpu-rack-9"] }), undefined);
  assert.equal(skeid.routeState({ model: "m", tags: ["local"] }).eligible_count, 2);
  assert.equal(skeid.routeState({ model: "m", tags: ["LOCAL", "gb10"] }).eligible_count, 1);
  assert.equal(skeid.routeState({ model: "m", tags: ["gpu-rack-9"] }).has_eligible, false);
  assert.deepEqual(counts(picks(skeid, { model: "m", deny_tags: ["local"] }, 3)), {
    "cloud-1": 3,
  });
});

Deno.test("route keys: model|engine, tags and denied tags make their own key and cursor", () => {
  assert.equal(routeKey("m", "", [], []), "m|");
  assert.equal(routeKey("m", "vllm", ["local"], []), "m|vllm|local");
  assert.equal(routeKey("m", "", ["local", "gb10"], ["cloud"]), "m||local,gb10|-cloud");
  assert.equal(routeKey("m", "", [], ["cloud"]), "m|||-cloud");

  const { skeid } = core();
  skeid.addNode(spec("a", { tags: ["local"] }));
  skeid.addNode(spec("b", { tags: ["local"] }));
  const all = skeid.pickNode({ model: "m" })!;
  const local = skeid.pickNode({ model: "m", tags: ["Local "] })!;
  assert.equal(all.route_key, "m|");
  assert.equal(local.route_key, "m||local");
  // Separate cursors: each selection starts at its own beginning and alternates on its own.
  assert.equal(all.id, "a");
  assert.equal(local.id, "a");
  assert.deepEqual(picks(skeid, { model: "m" }, 3), ["b", "a", "b"]);
  assert.deepEqual(picks(skeid, { model: "m", tags: ["local"] }, 1), ["b"]);
});

Deno.test("setting the health a node already has keeps the round-robin position", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  skeid.addNode(spec("b"));
  assert.equal(skeid.pickNode({ model: "m" })?.id, "a");
  assert.equal(skeid.setNodeHealth("a", true), true);
  assert.equal(skeid.pickNode({ model: "m" })?.id, "b", "cursor kept");
  assert.equal(skeid.pickNode({ model: "m" })?.id, "a");
});

Deno.test("draining both nodes: nothing to pick and eligible 0 at once; re-enable picks again", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { tags: ["local"] }));
  skeid.addNode(spec("b", { tags: ["local"] }));
  assert.ok(skeid.pickNode({ model: "m", tags: ["local"] }));
  skeid.setNodeHealth("a", false);
  skeid.setNodeHealth("b", false);
  assert.equal(skeid.pickNode({ model: "m", tags: ["local"] }), undefined);
  const state = skeid.routeState({ model: "m", tags: ["local"] });
  assert.equal(state.eligible_count, 0, "no eligible node: a 503, not a wait");
  assert.equal(state.has_eligible, false);
  skeid.setNodeHealth("b", true);
  assert.equal(skeid.pickNode({ model: "m", tags: ["local"] })?.id, "b");
});

Deno.test("model and engine matching: '' on either side matches anything", () => {
  const { skeid } = core();
  skeid.addNode(spec("any", { model: "", engine: "sglang" }));
  skeid.addNode(spec("vllm-1", { model: "qwen3", engine: "vllm" }));
  const eligible = (sel: Parameters<typeof skeid.routeState>[0]) =>
    skeid.routeState(sel).eligible_count;
  assert.equal(eligible({ model: "qwen3" }), 2, "a node without model serves any name");
  assert.equal(eligible({ model: "llama" }), 1);
  assert.equal(eligible({ model: "qwen3", engine: "vLLM" }), 1, "engine constraint normalized");
  assert.equal(eligible({ model: "qwen3", engine: "sglang" }), 1);
  assert.equal(eligible({ model: "qwen3", engine: "" }), 2);
  assert.equal(skeid.routeState({ model: "qwen3", engine: "VLLM" }).engine, "vllm");
  assert.throws(
    () => skeid.pickNode({ model: "m", engine: "openai-compatible" }),
    UnknownEngineError,
  );
});

Deno.test("picks skip a node admission refuses and resume their shares after", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { max_conns: 1 }));
  skeid.addNode(spec("b"));
  assert.equal(skeid.startRequest("a"), true);
  assert.deepEqual(counts(picks(skeid, { model: "m" }, 4)), { b: 4 });
  skeid.finishRequest("a", { ok: true });
  assert.deepEqual(counts(picks(skeid, { model: "m" }, 4)), { a: 2, b: 2 });
});

Deno.test("the selection cache is bounded: client-chosen model names cannot grow it", () => {
  const node = normalizeNode({ id: "any", url: "http://any:1" })!;
  const records: NodeRecord[] = [{ node, counters: new NodeCounters(), share: 0 }];
  const table = new RouteTable(() => records, 16);
  for (let i = 0; i < 100; i++) assert.equal(table.entry({ model: `m${i}` }).nodes.length, 1);
  assert.ok(table.size <= 16, `size ${table.size}`);
  const again = table.entry({ model: "m99" });
  assert.equal(table.entry({ model: "m99" }), again, "a hit is the same entry");
  assert.equal(table.entry({ model: "m99", tags: [] }), again, "equal selections share one");
});
