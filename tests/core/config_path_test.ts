import { assertEquals, assertThrows } from "../_assert.ts";
import { formatPath } from "../../src/core/config_path.ts";
import { AliasError, normalizeAlias } from "../../src/core/aliases.ts";
import { buildPolicySet, PolicyError } from "../../src/core/policies.ts";
import { PricingError, validatePricingRule } from "../../src/core/pricing.ts";
import { NodeSpecError, normalizeNodeList } from "../../src/core/inventory.ts";

Deno.test("formatPath prints segments as errors name them", () => {
  assertEquals(formatPath(["nodes", 2, "engine"]), "nodes[2].engine");
  assertEquals(
    formatPath(["pricing", "gpt-4.1", "input_per_million"]),
    'pricing["gpt-4.1"].input_per_million',
  );
  assertEquals(formatPath([]), "");
});

Deno.test("core spec errors carry their path as segments and a message without it", () => {
  const alias = assertThrows(() => normalizeAlias("a", [{}, { wait_ms: -1 }]), AliasError);
  assertEquals(alias.segments, [1, "wait_ms"], "a bare list of tiers has no tiers key");
  assertEquals(alias.detail, "must be a number >= 0");
  assertEquals(alias.message, "alias 'a': tiers[1].wait_ms must be a number >= 0");

  const price = assertThrows(
    () => validatePricingRule("m", { output_per_million: -1 }),
    PricingError,
  );
  assertEquals(price.segments, ["output_per_million"]);
  assertEquals(price.detail, "output_per_million must be a number >= 0");

  // A key label with a dot stays one segment (a dotted path could not tell it apart).
  const policy = assertThrows(
    () => buildPolicySet({ policies: { "v1.2": { models: 3 } } }),
    PolicyError,
  );
  assertEquals(policy.segments, ["policies", "v1.2", "models"]);
  assertEquals(policy.detail, "must be a list of model names or a comma-separated string");

  const node = assertThrows(
    () => normalizeNodeList([{ id: "a", url: "http://a", capacity: { probe: "x" } }]),
    NodeSpecError,
  );
  assertEquals(node.segments, ["nodes", 0, "capacity", "probe"]);
});
