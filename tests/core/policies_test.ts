import assert from "node:assert/strict";
import {
  buildPolicySet,
  checkPolicySet,
  PolicyError,
  type PolicySections,
  resolvePolicy,
} from "../../src/core/policies.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { core, spec } from "./routing_helpers.ts";

const ALICE = await keyIdForKey("sk-alice-secret");
const BOB = await keyIdForKey("sk-bob-secret");
const CAROL = await keyIdForKey("sk-carol-secret");

/** Asserts buildPolicySet throws a PolicyError at `path` whose message matches. */
function policyError(sections: PolicySections, path: string, message: RegExp) {
  assert.throws(() => buildPolicySet(sections), (err: unknown) => {
    assert.ok(err instanceof PolicyError, String(err));
    assert.equal(err.path, path);
    assert.match(err.message, message);
    return true;
  });
}

Deno.test("resolvePolicy: deny_tags normalized; no models allows all", () => {
  const policy = resolvePolicy({ deny_tags: ["Cloud", " cloud", "GROQ"] });
  assert.deepEqual(policy.deny_tags, ["cloud", "groq"]);
  assert.equal(policy.models, null);
  assert.equal(resolvePolicy(undefined).models, null);
  const viaSet = core().skeid.setPolicy("standard-local-only", { deny_tags: ["Cloud"] });
  assert.deepEqual(viaSet.deny_tags, ["cloud"]);
  assert.equal(viaSet.models, null);
});

Deno.test("resolvePolicy: a models list is a lookup; '*' means all; 'a, b' splits", () => {
  assert.deepEqual([...resolvePolicy({ models: ["a", "b"] }).models!].sort(), ["a", "b"]);
  assert.equal(resolvePolicy({ models: ["*"] }).models, null);
  assert.equal(resolvePolicy({ models: "*" }).models, null);
  assert.deepEqual([...resolvePolicy({ models: "a, b" }).models!].sort(), ["a", "b"]);
  assert.deepEqual([...resolvePolicy({ aliases: ["house"] }).models!], ["house"]);
  assert.equal(resolvePolicy({ models: [] }).models?.size, 0, "an empty list grants nothing");
  assert.throws(() => resolvePolicy({ models: { a: 1 } }), PolicyError);
  assert.throws(() => resolvePolicy("standard"), PolicyError);
});

Deno.test("an undefined default_policy fails the load at default_policy", () => {
  policyError(
    { policies: { standard: {} }, default_policy: "gold" },
    "default_policy",
    /default_policy 'gold' is not defined in policies/,
  );
});

Deno.test("a keys entry naming an undefined policy fails at its path", () => {
  policyError(
    { policies: { standard: {} }, keys: { [ALICE]: "gold" } },
    `keys.${ALICE}`,
    new RegExp(`key '${ALICE}' references undefined policy 'gold'`),
  );
  policyError(
    { policies: { standard: {} }, names: { alice: ALICE }, keys: { alice: { policy: "gold" } } },
    "keys.alice.policy",
    /key 'alice' references undefined policy 'gold'/,
  );
  policyError({ keys: { [ALICE]: 5 } }, `keys.${ALICE}`, /must be a policy name or a map/);
});

Deno.test("a keys entry that is neither a name nor a customer key id fails at its path", () => {
  const neither =
    /key 'alice' is neither a name in names: nor a customer key id \(k_ followed by 40 hex digits/;
  policyError(
    { policies: { standard: {} }, keys: { alice: { policy: "standard" } } },
    "keys.alice",
    neither,
  );
  policyError(
    { policies: { p: {} }, names: { alcie: ALICE }, keys: { alice: "p" } },
    "keys.alice",
    neither,
  );
  for (const label of ["k_" + "A".repeat(40), "k_" + "a".repeat(39), ALICE.slice(2)]) {
    policyError({ policies: { p: {} }, keys: { [label]: "p" } }, `keys.${label}`, /is neither/);
  }
  // A name, a full id, a short id (deprecated, warned about) and `anonymous` are all keys.
  const set = buildPolicySet({
    policies: { p: { deny_tags: ["cloud"] } },
    names: { alice: ALICE },
    keys: { alice: "p", [BOB]: "p", [CAROL.slice(0, 14)]: "p", anonymous: "p" },
  });
  assert.deepEqual(
    [...set.knownKeyIds].sort(),
    [ALICE, BOB, CAROL.slice(0, 14), "anonymous"].sort(),
  );
  // A name whose value is bad is one error, not a second one at its keys entry.
  const { errors } = checkPolicySet({
    policies: { p: {} },
    names: { bob: "" },
    keys: { bob: "p" },
  });
  assert.deepEqual(errors.map((e) => e.path), ["names.bob"]);
});

Deno.test("a names value that is not a non-empty string fails at names.<name>", () => {
  policyError({ names: { bob: "" } }, "names.bob", /name 'bob' must map to a non-empty key id/);
  policyError({ names: { bob: { id: BOB } } }, "names.bob", /non-empty key id string/);
  // A customer key (or a typo) where its id belongs: refused, and never echoed.
  policyError({ names: { bob: "sk-live-abc123" } }, "names.bob", /k_ followed by 40 hex/);
  assert.throws(
    () => buildPolicySet({ names: { bob: "sk-live-abc123" } }),
    (err: unknown) => err instanceof Error && !err.message.includes("sk-live-abc123"),
    "the value is not echoed",
  );
  policyError({ names: { bob: 42 } }, "names.bob", /non-empty key id string/);
});

Deno.test("two keys entries resolving to one key id fail the load", () => {
  policyError(
    { policies: { p: {} }, names: { alice: ALICE }, keys: { alice: "p", [ALICE]: "p" } },
    `keys.${ALICE}`,
    new RegExp(`resolves to key id '${ALICE}', which another entry \\('alice'\\) already claims`),
  );
});

Deno.test("a short id beside the full id it prefixes fails the load", () => {
  const short = ALICE.slice(0, 14);
  policyError(
    { policies: { p: {} }, keys: { [short]: "p", [ALICE]: "p" } },
    `keys.${short}`,
    new RegExp(`key id '${short}' is the short form of '${ALICE}'.*keep only the full id`),
  );
});

Deno.test("checkPolicySet lists every error of the four sections; buildPolicySet throws the first", () => {
  const sections: PolicySections = {
    policies: { standard: { models: 7, deny_tags: { cloud: true } }, p: {} },
    default_policy: "gold",
    names: { bob: "", alice: ALICE },
    keys: {
      alice: { policy: "silver", manifest: { models: "house" } },
      [BOB]: "bronze",
      [CAROL]: "standard",
      [CAROL.slice(0, 14)]: "p",
    },
  };
  const { errors } = checkPolicySet(sections);
  assert.deepEqual(errors.map((e) => e.path), [
    "policies.standard.models",
    "policies.standard.deny_tags",
    "default_policy",
    "names.bob",
    "keys.alice.policy",
    "keys.alice.manifest",
    `keys.${BOB}`,
    `keys.${CAROL.slice(0, 14)}`,
  ]);
  assert.match(errors[6].message, /references undefined policy 'bronze'/);
  assert.equal(errors.some((e) => e.path === `keys.${CAROL}`), false, "a bad policy is defined");
  policyError(sections, "policies.standard.models", /must be a list of model names/);
});

Deno.test("bad policy fields name their path", () => {
  policyError(
    { policies: { standard: { deny_tags: { cloud: true } } } },
    "policies.standard.deny_tags",
    /^policies\.standard\.deny_tags: /,
  );
  policyError(
    { policies: { p: {} }, keys: { [ALICE]: { overrides: { models: 7 } } } },
    `keys.${ALICE}.overrides.models`,
    /must be a list of model names/,
  );
  policyError(
    { keys: { [ALICE]: { manifest: { models: "house" } } } },
    `keys.${ALICE}.manifest`,
    /manifest must be a map with a models list/,
  );
});

Deno.test("keys entries by name or raw id; names map to ids", () => {
  const set = buildPolicySet({
    policies: { standard: { deny_tags: ["cloud"] }, burstable: {} },
    default_policy: "standard",
    names: { alice: ALICE, bigcorp: BOB },
    keys: { alice: "burstable", [CAROL]: "burstable" },
  });
  assert.equal(set.keyPolicies.get(ALICE), set.policies.get("burstable"));
  assert.equal(set.keyPolicies.get(CAROL), set.policies.get("burstable"));
  assert.equal(set.keyNames.get("bigcorp"), BOB);
  assert.deepEqual([...set.knownKeyIds].sort(), [ALICE, CAROL].sort());
  assert.deepEqual(set.warnings, []);
});

Deno.test("sparse overrides: absent fields keep the base; deny_tags: [] overrides to none", () => {
  const set = buildPolicySet({
    policies: { standard: { deny_tags: ["cloud"] }, burstable: {} },
    default_policy: "standard",
    keys: {
      [ALICE]: { models: ["house-model"] },
      [BOB]: { policy: "standard", deny_tags: [] },
      [CAROL]: { policy: "burstable", overrides: { models: "house-model", deny_tags: ["GPU"] } },
    },
  });
  const alice = set.keyPolicies.get(ALICE)!;
  assert.deepEqual([...alice.models!], ["house-model"]);
  assert.deepEqual(alice.deny_tags, ["cloud"], "kept from the default policy");
  const bob = set.keyPolicies.get(BOB)!;
  assert.deepEqual(bob.deny_tags, []);
  assert.equal(bob.models, null);
  const carol = set.keyPolicies.get(CAROL)!;
  assert.deepEqual([...carol.models!], ["house-model"]);
  assert.deepEqual(carol.deny_tags, ["gpu"]);
});

Deno.test("identical resolutions share one policy object; default-equal keys are not stored", () => {
  const set = buildPolicySet({
    policies: { standard: { deny_tags: ["cloud"] }, open: {} },
    default_policy: "standard",
    keys: {
      [ALICE]: { models: ["a", "b"] },
      [BOB]: { policy: "standard", models: "b, a" },
      [CAROL]: { policy: "open", deny_tags: ["cloud"] },
      k_1111111111111111111111111111111111111111: "standard",
    },
  });
  assert.equal(set.keyPolicies.get(ALICE), set.keyPolicies.get(BOB));
  assert.equal(set.keyPolicies.has(CAROL), false, "resolves to exactly the default");
  assert.equal(set.keyPolicies.has("k_1111111111111111111111111111111111111111"), false);
  assert.equal(set.knownKeyIds.has(CAROL), true);
  assert.equal(set.keyPolicies.size, 2);
  assert.equal(new Set(set.keyPolicies.values()).size, 1, "two keys, one object");
});

Deno.test("manifest models ride on the key's policy", () => {
  const set = buildPolicySet({
    names: { alice: ALICE },
    keys: { alice: { manifest: { models: ["house-model", "qwen3", "house-model"] } } },
  });
  assert.deepEqual(set.keyPolicies.get(ALICE)?.manifest_models, ["house-model", "qwen3"]);
});

Deno.test("policyForKey: unlisted → default; listed → its profile; null with no policies", () => {
  const { skeid } = core();
  assert.equal(skeid.policyForKey(ALICE), null);
  assert.equal(skeid.policyForKey(undefined), null);
  skeid.replacePolicySet(buildPolicySet({
    policies: { standard: { deny_tags: ["cloud"] }, burstable: {} },
    default_policy: "standard",
    names: { alice: ALICE },
    keys: { alice: "burstable" },
  }));
  const standard = skeid.policySet.policies.get("standard");
  assert.equal(skeid.policyForKey(ALICE), skeid.policySet.policies.get("burstable"));
  assert.equal(skeid.policyForKey(BOB), standard);
  assert.equal(skeid.policyForKey(undefined), standard);
  assert.equal(skeid.keyIdForName("alice"), ALICE);
  assert.equal(skeid.keyIdForName("mallory"), undefined);
  assert.equal(skeid.isKnownKey(ALICE), true);
  assert.equal(skeid.isKnownKey(BOB), false);
});

Deno.test("a short id matches the full id that starts with it, with one warning", () => {
  const { skeid, logger } = core();
  const short = ALICE.slice(0, 14);
  const set = buildPolicySet({
    policies: { standard: { deny_tags: ["cloud"] }, burstable: {} },
    default_policy: "standard",
    keys: { [short]: "burstable" },
  });
  assert.equal(set.warnings.length, 1);
  assert.match(set.warnings[0], new RegExp(`'${short}' is a short key id`));
  skeid.replacePolicySet(set);
  for (let i = 0; i < 3; i++) {
    assert.equal(skeid.policyForKey(ALICE), set.policies.get("burstable"));
  }
  assert.equal(skeid.isKnownKey(ALICE), true);
  assert.equal(skeid.policyForKey(BOB), set.policies.get("standard"));
  assert.equal(skeid.policyForKey(short.padEnd(42, "g")), set.policies.get("standard"));
  skeid.replacePolicySet(set);
  const warnings = logger.lines.filter((l) => l.event === "policy_warning");
  assert.equal(warnings.length, 1, "said once, however often it matches or reloads");
  assert.match(String(warnings[0].message), new RegExp(short));
});

Deno.test("a short id with no policy of its own only warns when a request hits it", () => {
  const { skeid, logger } = core();
  const short = BOB.slice(0, 14);
  const set = buildPolicySet({ keys: { [short]: {} } });
  set.warnings.length = 0; // installed without load-time warnings: the hit has to say it
  skeid.replacePolicySet(set);
  assert.equal(logger.lines.length, 0);
  assert.equal(skeid.policyForKey(BOB)?.models, null);
  assert.equal(skeid.policyForKey(BOB)?.models, null);
  assert.equal(logger.lines.filter((l) => l.event === "policy_warning").length, 1);
});

Deno.test("route plan under policies: denied tiers dropped, refusals are not capacity errors", () => {
  const { skeid } = core();
  skeid.setModelAlias("house-model", [
    { tags: ["local"], model: "qwen3-32b", wait_ms: 200 },
    { tags: ["cloud"], model: "llama" },
  ]);
  skeid.setModelAlias("cloud-only", [{ tags: ["cloud"], model: "llama" }]);
  skeid.replacePolicySet(buildPolicySet({
    policies: { open: {}, local: { deny_tags: ["cloud"] }, narrow: { models: ["house-model"] } },
    default_policy: "open",
    keys: { [ALICE]: "local", [BOB]: "narrow" },
  }));
  const open = skeid.routePlan({ model: "house-model", api_key_id: CAROL });
  assert.deepEqual(open.tiers.map((t) => t.model), ["qwen3-32b", "llama"]);

  const local = skeid.routePlan({ model: "house-model", api_key_id: ALICE });
  assert.equal(local.permitted, true);
  assert.deepEqual(local.tiers.map((t) => [t.model, t.deny_tags]), [["qwen3-32b", ["cloud"]]]);

  assert.deepEqual(skeid.routePlan({ model: "qwen3-32b", api_key_id: BOB }), {
    tiers: [],
    permitted: false,
    reason: "model_not_permitted",
  });
  assert.deepEqual(skeid.routePlan({ model: "cloud-only", api_key_id: ALICE }), {
    tiers: [],
    permitted: false,
    reason: "all_tiers_denied",
  });
  const raw = skeid.routePlan({ model: "llama", api_key_id: ALICE });
  assert.equal(raw.permitted, true);
  assert.deepEqual(raw.tiers[0].deny_tags, ["cloud"], "the deny rides into node selection");
});

Deno.test("a denied node cannot be reached by asking for its raw model name", () => {
  const { skeid } = core();
  skeid.addNode(spec("groq-1", { model: "llama", tags: ["cloud"] }));
  skeid.replacePolicySet(buildPolicySet({
    policies: { local: { deny_tags: ["cloud"] } },
    keys: { [ALICE]: "local" },
  }));
  const [tier] = skeid.routePlan({ model: "llama", api_key_id: ALICE }).tiers;
  assert.equal(skeid.pickNode(tier), undefined);
  assert.equal(skeid.routeState(tier).has_eligible, false);
  const [open] = skeid.routePlan({ model: "llama", api_key_id: BOB }).tiers;
  assert.equal(skeid.pickNode(open)?.id, "groq-1", "an undenied key may");
});

Deno.test("a policy set replaced later changes plans at once", () => {
  const { skeid } = core();
  skeid.setModelAlias("house-model", [{ tags: ["cloud"] }]);
  assert.equal(skeid.routePlan({ model: "house-model", api_key_id: ALICE }).permitted, true);
  skeid.replacePolicySet(buildPolicySet({
    policies: { local: { deny_tags: ["cloud"] } },
    default_policy: "local",
  }));
  assert.equal(skeid.routePlan({ model: "house-model", api_key_id: ALICE }).permitted, false);
  skeid.setPolicy("extra", { models: "a" });
  assert.deepEqual([...skeid.policySet.policies.get("extra")!.models!], ["a"]);
  assert.throws(() => skeid.setPolicy("bad", { deny_tags: { cloud: 1 } }), (err: unknown) => {
    assert.ok(err instanceof PolicyError);
    assert.equal(err.path, "policies.bad.deny_tags");
    return true;
  });
});

Deno.test("listModels: distinct names, sorted, aliases with engine '', narrowed by policy", () => {
  const { skeid } = core();
  skeid.addNode(spec("gpu-2", { model: "qwen3-32b", engine: "sglang", tags: ["local"] }));
  skeid.addNode(spec("gpu-1", { model: "qwen3-32b", engine: "vllm", tags: ["local"] }));
  skeid.addNode(spec("groq-1", { model: "llama", engine: "groq", tags: ["cloud"] }));
  skeid.addNode(spec("wild", { model: "" }));
  skeid.setModelAlias("house-model", [{ tags: ["local"], model: "qwen3-32b" }, {
    tags: ["cloud"],
    model: "llama",
  }]);
  skeid.setModelAlias("cloud-only", [{ tags: ["cloud"], model: "llama" }]);
  skeid.setModelAlias("qwen3-32b", [{ tags: ["local"] }]);
  assert.deepEqual(skeid.listModels(), [
    { model: "cloud-only", engine: "" },
    { model: "house-model", engine: "" },
    { model: "llama", engine: "groq" },
    { model: "qwen3-32b", engine: "sglang" },
  ]);
  skeid.replacePolicySet(buildPolicySet({
    policies: {
      local: { deny_tags: ["cloud"] },
      narrow: { models: ["house-model", "llama", "nobody-serves-this"] },
    },
    keys: { [ALICE]: "local", [BOB]: "narrow" },
  }));
  assert.deepEqual(skeid.listModels({ api_key_id: ALICE }).map((m) => m.model), [
    "house-model",
    "qwen3-32b",
  ]);
  assert.deepEqual(skeid.listModels({ api_key_id: BOB }).map((m) => m.model), [
    "house-model",
    "llama",
  ]);
});
