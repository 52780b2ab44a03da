import assert from "node:assert/strict";
import { NodeSpecError, normalizeNode, normalizeNodeList } from "../../src/core/inventory.ts";
import { SUPPORTED_ENGINE_IDS } from "../../src/core/engines.ts";
import type { Node, NodeSpec } from "../../src/core/types.ts";
import { core, spec } from "./routing_helpers.ts";

/** Asserts `fn` throws a NodeSpecError on `field` whose message matches. */
function specError(fn: () => unknown, field: string, message: RegExp | string) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof NodeSpecError, String(err));
    assert.equal(err.field, field);
    if (typeof message === "string") assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

Deno.test("node defaults: model '', engine openaibase, weight 1, unlimited, healthy, /v1", () => {
  assert.deepEqual(normalizeNode({ id: "a", url: "http://a:8000" }), {
    id: "a",
    url: "http://a:8000/v1",
    model: "",
    engine: "openaibase",
    weight: 1,
    max_conns: 0,
    healthy: true,
    tags: [],
    metadata: {},
  });
});

Deno.test("node url: trailing slashes removed, /v1 appended only when missing", () => {
  const url = (u: string) => normalizeNode({ id: "a", url: u })?.url;
  assert.equal(url("http://a:1/v1"), "http://a:1/v1");
  assert.equal(url("http://a:1/v1//"), "http://a:1/v1");
  assert.equal(url("http://a:1/"), "http://a:1/v1");
  assert.equal(url("https://api.groq.com/openai"), "https://api.groq.com/openai/v1");
  specError(() => normalizeNode({ id: "a", url: "ftp://a/" }), "url", /http\(s\)/);
  specError(() => normalizeNode({ id: "a", url: "gpu-1:8000" }), "url", /http\(s\)/);
});

Deno.test("node without id or url is undefined (the caller warns and skips)", () => {
  assert.equal(normalizeNode({ url: "http://a:1" }), undefined);
  assert.equal(normalizeNode({ id: "a" }), undefined);
  assert.equal(normalizeNode({ id: " ", url: "http://a:1" }), undefined);
});

Deno.test("node engine: OpenAIBase normalizes; openai-compatible fails naming the list", () => {
  assert.equal(normalizeNode({ ...spec("a"), engine: "OpenAIBase" })?.engine, "openaibase");
  assert.equal(normalizeNode({ ...spec("a"), engine: "Langertha::Engine::vLLM" })?.engine, "vllm");
  assert.equal(normalizeNode({ ...spec("a"), engine: "" })?.engine, "openaibase");
  specError(
    () => normalizeNode({ ...spec("a"), engine: "openai-compatible" }),
    "engine",
    `unknown engine 'openai-compatible' (expected one of: ${SUPPORTED_ENGINE_IDS.join(", ")})`,
  );
});

Deno.test("node weight: an integer, below 1 counts as 1; not a number is refused", () => {
  const weight = (w: unknown) => normalizeNode({ ...spec("a"), weight: w })?.weight;
  assert.equal(weight(3), 3);
  assert.equal(weight(2.7), 2);
  assert.equal(weight(0), 1);
  assert.equal(weight(-4), 1);
  assert.equal(weight("5"), 5);
  specError(() => weight("heavy"), "weight", "weight must be a number");
  specError(() => weight([2]), "weight", "weight must be a number");
});

Deno.test("node max_conns: 0 is unlimited; negative or not a number is refused", () => {
  assert.equal(normalizeNode({ ...spec("a"), max_conns: 8 })?.max_conns, 8);
  specError(() => normalizeNode({ ...spec("a"), max_conns: -1 }), "max_conns", /max_conns/);
  specError(() => normalizeNode({ ...spec("a"), max_conns: "lots" }), "max_conns", /max_conns/);
});

Deno.test("node healthy: boolean-ish values; anything else is refused", () => {
  const healthy = (h: unknown) => normalizeNode({ ...spec("a"), healthy: h })?.healthy;
  assert.equal(healthy(false), false);
  assert.equal(healthy(0), false);
  assert.equal(healthy("false"), false);
  assert.equal(healthy("off"), false);
  assert.equal(healthy(1), true);
  assert.equal(healthy("yes"), true);
  specError(() => healthy("maybe"), "healthy", /healthy/);
  specError(() => healthy({}), "healthy", /healthy/);
});

Deno.test("node tags, metadata and key references are kept; bad types name their field", () => {
  const node = normalizeNode({
    ...spec("a"),
    tags: "Local, GB10",
    metadata: { rack: "b2", slots: [1, 2] },
    api_key_ref: "secret/skeid/remote/groq",
    api_key_env: "GROQ_API_KEY",
  })!;
  assert.deepEqual(node.tags, ["local", "gb10"]);
  assert.deepEqual(node.metadata, { rack: "b2", slots: [1, 2] });
  assert.equal(node.api_key_ref, "secret/skeid/remote/groq");
  assert.equal(node.api_key_env, "GROQ_API_KEY");
  specError(() => normalizeNode({ ...spec("a"), tags: { local: 1 } }), "tags", /tags/);
  specError(() => normalizeNode({ ...spec("a"), metadata: ["x"] }), "metadata", /metadata/);
  specError(() => normalizeNode({ ...spec("a"), api_key_env: 5 }), "api_key_env", /string/);
  specError(() => normalizeNode({ ...spec("a"), model: { m: 1 } }), "model", /model/);
});

Deno.test("capacity block: probe (or type) lowercased, default inflight, interval 2000", () => {
  const cap = (c: unknown) => normalizeNode({ ...spec("a"), capacity: c })?.capacity;
  assert.deepEqual(cap({}), { probe: "inflight", interval_ms: 2000 });
  assert.deepEqual(cap({ type: "Prometheus", running: "vllm:num_requests_running" }), {
    type: "Prometheus",
    probe: "prometheus",
    interval_ms: 2000,
    running: "vllm:num_requests_running",
  });
  assert.deepEqual(cap({ probe: "RateLimit", interval_ms: 500 }), {
    probe: "ratelimit",
    interval_ms: 500,
  });
  assert.equal(cap(undefined), undefined);
  specError(() => cap({ probe: "bogus" }), "capacity.probe", "unknown capacity probe 'bogus'");
  specError(() => cap({ probe: "custom", interval_ms: 0 }), "capacity.interval_ms", /> 0/);
  specError(() => cap("prometheus"), "capacity", /map/);
});

Deno.test("a normalized node's nested fields do not alias the spec and cannot be mutated", () => {
  const raw = { ...spec("a"), tags: ["x"], metadata: { rack: "b2" } };
  const node = normalizeNode(raw)!;
  raw.tags.push("y");
  raw.metadata.rack = "c3";
  assert.deepEqual(node.tags, ["x"]);
  assert.equal(node.metadata.rack, "b2");
  assert.throws(() => node.tags.push("z"), TypeError);
});

Deno.test("normalizeNodeList: paths name the entry; skipped and duplicate entries warn", () => {
  specError(
    () => normalizeNodeList([spec("a"), { ...spec("b"), engine: "nope" }]),
    "nodes[1].engine",
    /^nodes\[1\]\.engine: unknown engine 'nope'/,
  );
  const { nodes, warnings } = normalizeNodeList([
    { url: "http://x:1" },
    spec("a", { weight: 1 }),
    spec("b"),
    spec("a", { weight: 5 }),
  ]);
  assert.deepEqual(nodes.map((n) => [n.id, n.weight]), [["b", 1], ["a", 5]]);
  assert.deepEqual(warnings, [
    "nodes[0]: skipped, a node needs an id and a url",
    "nodes[3].id: duplicate node id 'a' (also nodes[1]); the later entry wins",
  ]);
  specError(() => normalizeNodeList({ a: 1 }), "nodes", /list/);
});

Deno.test("addNode fills defaults and replaces a node with the same id", () => {
  const { skeid } = core();
  const added = skeid.addNode({ id: "gpu-1", url: "http://gpu-1:8000", engine: "vLLM" });
  assert.equal(added.engine, "vllm");
  skeid.addNode({ id: "gpu-1", url: "http://gpu-1b:8000/v1", model: "qwen3" });
  const nodes = skeid.listNodes();
  assert.equal(nodes.length, 1);
  assert.equal(nodes[0].url, "http://gpu-1b:8000/v1");
  assert.equal(nodes[0].model, "qwen3");
  assert.equal(nodes[0].engine, "openaibase");
});

Deno.test("addNode without id or url, or with a bad field, throws and changes nothing", () => {
  const { skeid } = core();
  specError(() => skeid.addNode({ url: "http://a:1" }), "id", "node id required");
  specError(() => skeid.addNode({ id: "a" }), "url", "node url required");
  specError(
    () => skeid.addNode({ ...spec("a"), engine: "openai-compatible" }),
    "engine",
    /unknown engine 'openai-compatible'/,
  );
  assert.equal(skeid.listNodes().length, 0);
  assert.equal(skeid.generation, 0);
});

Deno.test("listNodes/getNode return copies: changing one changes nothing inside", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  const copy = skeid.listNodes()[0];
  copy.healthy = false;
  copy.model = "other";
  (skeid.getNode("a") as Node).weight = 99;
  assert.deepEqual(
    [skeid.getNode("a")?.healthy, skeid.getNode("a")?.model, skeid.getNode("a")?.weight],
    [true, "m", 1],
  );
  assert.equal(skeid.pickNode({ model: "m" })?.id, "a");
  assert.equal(skeid.getNode("zzz"), undefined);
});

Deno.test("removeNode: true once, false after; removed nodes stop being picked at once", () => {
  const { skeid } = core();
  skeid.addNode(spec("a"));
  skeid.addNode(spec("b"));
  assert.equal(skeid.removeNode("a"), true);
  assert.equal(skeid.removeNode("a"), false);
  for (let i = 0; i < 4; i++) assert.equal(skeid.pickNode({ model: "m" })?.id, "b");
  skeid.addNode(spec("c"));
  const seen = new Set([0, 1, 2, 3].map(() => skeid.pickNode({ model: "m" })?.id));
  assert.deepEqual([...seen].sort(), ["b", "c"], "added nodes are picked at once");
});

Deno.test("a removed and re-added id starts clean: no reading, no counters, no failures", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { max_conns: 4 }));
  skeid.setCapacityReading("a", { used: 1, limit: 10, source: "prometheus" });
  assert.equal(skeid.startRequest("a"), true);
  skeid.finishRequest("a", { ok: false, duration_ms: 30 });
  assert.equal(skeid.nodeFailures("a").errors_in_window, 1);
  skeid.removeNode("a");
  skeid.addNode(spec("a", { max_conns: 4 }));
  assert.equal(skeid.capacityReading("a"), undefined);
  assert.deepEqual(skeid.nodeMetrics("a"), {
    node_id: "a",
    inflight: 0,
    started: 0,
    ok: 0,
    error: 0,
    aborted: 0,
    duration_ms_total: 0,
  });
  assert.deepEqual(skeid.nodeFailures("a"), { errors_in_window: 0, last_failure_at: null });
});

Deno.test("addNode replacing an id keeps inflight (requests are real) but drops its reading", () => {
  const { skeid } = core();
  skeid.addNode(spec("a", { max_conns: 1 }));
  skeid.setCapacityReading("a", { used: 0, limit: 10 });
  assert.equal(skeid.startRequest("a"), true);
  skeid.addNode(spec("a", { max_conns: 1, weight: 2 }));
  assert.equal(skeid.nodeMetrics("a")?.inflight, 1);
  assert.equal(skeid.startRequest("a"), false, "the running request still holds the slot");
  assert.equal(skeid.capacityReading("a"), undefined);
});

Deno.test("replaceNodes is all or nothing: a bad entry changes nothing", () => {
  const { skeid } = core();
  skeid.addNode(spec("old"));
  const generation = skeid.generation;
  specError(
    () => skeid.replaceNodes([spec("new-1"), { ...spec("new-2"), weight: "x" }]),
    "nodes[1].weight",
    /^nodes\[1\]\.weight: weight must be a number/,
  );
  assert.deepEqual(skeid.listNodes().map((n) => n.id), ["old"]);
  assert.equal(skeid.generation, generation);
  assert.equal(skeid.pickNode({ model: "m" })?.id, "old");
});

Deno.test("replaceNodes: skipped entries are logged; staying ids keep their state", () => {
  const { skeid, logger } = core();
  skeid.addNode(spec("stay"));
  skeid.addNode(spec("gone"));
  skeid.setCapacityReading("stay", { used: 1, limit: 4 });
  skeid.setCapacityReading("gone", { used: 1, limit: 4 });
  skeid.startRequest("stay");
  const nodes = skeid.replaceNodes([{ url: "http://no-id:1" }, spec("stay"), spec("fresh")]);
  assert.deepEqual(nodes.map((n) => n.id), ["stay", "fresh"]);
  assert.deepEqual(logger.lines.map((l) => [l.level, l.event, l.message]), [
    ["warn", "node_warning", "nodes[0]: skipped, a node needs an id and a url"],
  ]);
  assert.equal(skeid.nodeMetrics("stay")?.inflight, 1);
  assert.equal(skeid.capacityReading("stay")?.used, 1);
  assert.equal(skeid.capacityReading("gone"), undefined);
  skeid.addNode(spec("gone"));
  assert.equal(skeid.capacityReading("gone"), undefined, "a departed node's reading is gone");
});

Deno.test("replacing the node list invalidates selections (a retag moves the route)", () => {
  const { skeid } = core();
  skeid.replaceNodes([spec("a", { tags: ["local"] })]);
  assert.equal(skeid.pickNode({ model: "m", tags: ["local"] })?.id, "a");
  skeid.replaceNodes([spec("a", { tags: ["cloud"] })]);
  assert.equal(skeid.pickNode({ model: "m", tags: ["local"] }), undefined);
  assert.equal(skeid.pickNode({ model: "m", tags: ["cloud"] })?.id, "a");
});

Deno.test("generation: bumped by add, remove, replace and a real health change only", () => {
  const { skeid } = core();
  const g0 = skeid.generation;
  skeid.addNode(spec("a"));
  assert.ok(skeid.generation > g0);
  const g1 = skeid.generation;
  skeid.replaceNodes([spec("a"), spec("b")]);
  assert.ok(skeid.generation > g1);
  const g2 = skeid.generation;
  assert.equal(skeid.setNodeHealth("a", true), true, "known node");
  assert.equal(skeid.generation, g2, "same health changes nothing");
  skeid.setNodeHealth("a", false);
  assert.ok(skeid.generation > g2);
  const g3 = skeid.generation;
  assert.equal(skeid.removeNode("nope"), false);
  assert.equal(skeid.setNodeHealth("nope", false), false, "unknown node");
  assert.equal(skeid.generation, g3);
  skeid.removeNode("b");
  assert.ok(skeid.generation > g3);
});

Deno.test("selectNodes: tags are AND, deny is ANY, none selects all, health ignored, copies", () => {
  const { skeid } = core();
  skeid.addNode(spec("local-1", { tags: ["local", "gb10"] }));
  skeid.addNode(spec("groq-1", { tags: ["cloud", "groq"], healthy: false }));
  const ids = (args?: Parameters<typeof skeid.selectNodes>[0]) =>
    skeid.selectNodes(args).map((n) => n.id);
  assert.deepEqual(ids(), ["local-1", "groq-1"]);
  assert.deepEqual(ids({ tags: ["local"] }), ["local-1"]);
  assert.deepEqual(ids({ tags: ["Cloud"] }), ["groq-1"], "unhealthy still selected");
  assert.deepEqual(ids({ tags: ["local", "groq"] }), []);
  assert.deepEqual(ids({ deny_tags: ["groq"] }), ["local-1"]);
  const copy = skeid.selectNodes({ tags: ["local"] })[0];
  copy.id = "changed";
  assert.deepEqual(ids({ tags: ["local"] }), ["local-1"]);
});

Deno.test("validateNode: what it throws fails the add on capacity, before any change", () => {
  const { skeid } = core({
    validateNode: (node: Node) => {
      if (node.capacity?.probe === "registry" && !node.capacity.secret_env) {
        throw new Error("capacity probe 'registry' needs secret_env");
      }
    },
  });
  const bad: NodeSpec = { ...spec("r"), capacity: { probe: "registry" } };
  specError(() => skeid.addNode(bad), "capacity", /needs secret_env/);
  specError(() => skeid.replaceNodes([bad]), "nodes[0].capacity", /needs secret_env/);
  assert.equal(skeid.listNodes().length, 0);
  skeid.addNode({ ...bad, capacity: { probe: "registry", secret_env: "S" } });
  assert.equal(skeid.listNodes().length, 1);
});
