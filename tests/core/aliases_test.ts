import assert from "node:assert/strict";
import { AliasError, normalizeAlias } from "../../src/core/aliases.ts";
import { core, spec } from "./routing_helpers.ts";

/** Asserts `fn` throws an AliasError at `path` whose message matches. */
function aliasError(fn: () => unknown, path: string, message: RegExp) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AliasError, String(err));
    assert.equal(err.path, path);
    assert.match(err.message, message);
    return true;
  });
}

Deno.test("alias tiers come in order; wait_ms defaults to 0; no model means the alias name", () => {
  const alias = normalizeAlias("house-model", {
    tiers: [
      { tags: ["Local"], model: "qwen3-32b", wait_ms: 200 },
      { tags: "cloud, groq", model: "llama-3.3-70b-versatile", engine: "Groq" },
      { tags: [] },
    ],
  });
  assert.deepEqual(alias, {
    tiers: [
      { tags: ["local"], model: "qwen3-32b", engine: "", wait_ms: 200 },
      { tags: ["cloud", "groq"], model: "llama-3.3-70b-versatile", engine: "groq", wait_ms: 0 },
      { tags: [], model: "house-model", engine: "", wait_ms: 0 },
    ],
  });
});

Deno.test("a bare list of tiers is shorthand for {tiers}", () => {
  assert.deepEqual(
    normalizeAlias("fast", [{ tags: ["local"] }]),
    normalizeAlias("fast", { tiers: [{ tags: ["local"] }] }),
  );
});

Deno.test("alias errors: empty tiers, scalar spec, bad tier fields, each with its path", () => {
  aliasError(() => normalizeAlias("a", { tiers: [] }), "tiers", /alias 'a': tiers needs at least/);
  aliasError(() => normalizeAlias("a", []), "tiers", /at least one tier/);
  aliasError(() => normalizeAlias("a", "qwen3"), "", /alias 'a': must be a map with tiers/);
  aliasError(() => normalizeAlias("a", 5), "", /must be a map with tiers/);
  aliasError(() => normalizeAlias("a", null), "", /must be a map with tiers/);
  aliasError(() => normalizeAlias("a", { tiers: "local" }), "tiers", /must be a list/);
  aliasError(() => normalizeAlias("a", ["local"]), "tiers[0]", /tiers\[0\] must be a map/);
  aliasError(
    () => normalizeAlias("a", [{}, { wait_ms: -1 }]),
    "tiers[1].wait_ms",
    /alias 'a': tiers\[1\]\.wait_ms must be a number >= 0/,
  );
  aliasError(() => normalizeAlias("a", [{ wait_ms: "soon" }]), "tiers[0].wait_ms", />= 0/);
  aliasError(
    () => normalizeAlias("a", [{ engine: "openai-compatible" }]),
    "tiers[0].engine",
    /unknown engine 'openai-compatible'/,
  );
  aliasError(() => normalizeAlias("a", [{ tags: { x: 1 } }]), "tiers[0].tags", /tags must be/);
});

Deno.test("a model without an alias is one implicit tier with the global wait", () => {
  const { skeid } = core({ routing: { wait_timeout_ms: 1234 } });
  assert.deepEqual(skeid.routePlan({ model: "qwen3", engine: "vLLM" }), {
    tiers: [{ tags: [], model: "qwen3", engine: "vllm", wait_ms: 1234, deny_tags: [] }],
    permitted: true,
    reason: "",
  });
  skeid.setRouting({ wait_timeout_ms: 50 });
  assert.equal(skeid.routePlan({ model: "qwen3" }).tiers[0].wait_ms, 50);
});

Deno.test("an aliased model plans its tiers in order, and a redefinition takes over", () => {
  const { skeid } = core();
  skeid.setModelAlias("house-model", [
    { tags: ["local"], model: "qwen3-32b", wait_ms: 200 },
    { tags: ["cloud"], model: "llama" },
  ]);
  const plan = skeid.routePlan({ model: "house-model" });
  assert.equal(plan.permitted, true);
  assert.deepEqual(plan.tiers.map((t) => [t.model, t.tags, t.wait_ms, t.deny_tags]), [
    ["qwen3-32b", ["local"], 200, []],
    ["llama", ["cloud"], 0, []],
  ]);
  skeid.setModelAlias("house-model", [{ tags: ["cloud"], model: "llama" }]);
  assert.deepEqual(skeid.routePlan({ model: "house-model" }).tiers.map((t) => t.model), ["llama"]);
  skeid.replaceAliases(new Map());
  assert.equal(skeid.routePlan({ model: "house-model" }).tiers[0].model, "house-model");
  assert.equal(skeid.aliases.size, 0);
});

Deno.test("a plan's tier selects the nodes that serve it", () => {
  const { skeid } = core();
  skeid.addNode(spec("local-1", { model: "qwen3-32b", tags: ["local"] }));
  skeid.addNode(spec("groq-1", { model: "llama", tags: ["cloud"] }));
  skeid.setModelAlias("house-model", [
    { tags: ["local"], model: "qwen3-32b" },
    { tags: ["cloud"], model: "llama" },
  ]);
  const [local, cloud] = skeid.routePlan({ model: "house-model" }).tiers;
  assert.equal(skeid.pickNode(local)?.id, "local-1");
  assert.equal(skeid.pickNode(cloud)?.id, "groq-1");
  assert.equal(skeid.routeState({ ...local, model: "llama" }).has_eligible, false);
});
