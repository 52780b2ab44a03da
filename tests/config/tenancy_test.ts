import { assert, assertEquals } from "../_assert.ts";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { loadConfigText } from "../../src/config/load.ts";
import { keyPolicyOf } from "../../src/core/key_policy.ts";

const env = () => undefined;
const ALICE = "k_" + "a".repeat(40);

function loadErrors(text: string): string[] {
  try {
    loadConfigText(text, { env });
  } catch (e) {
    if (e instanceof ConfigLoadError) return e.issues.map(formatIssue);
    throw e;
  }
  throw new Error("expected the config to fail");
}

Deno.test("config: limits, budget and share load on policies and keys", () => {
  const loaded = loadConfigText(
    [
      "policies:",
      "  standard:",
      "    deny_tags: [cloud]",
      "    limits: { rpm: 600, tpm: 200000, max_inflight: 8 }",
      "    budget: { usd: 50, tokens: 20000000, period: month, warn_at: 0.8 }",
      "    share: { weight: 1, priority: 0, max_queued: 64 }",
      "default_policy: standard",
      "names:",
      `  alice: ${ALICE}`,
      "keys:",
      "  alice:",
      "    policy: standard",
      "    budget: { usd: 200 }",
      "    limits: { rpm: 60 }",
      "",
    ].join("\n"),
    { env },
  );
  const set = loaded.policySet;
  assert(set !== undefined, "a policy set");
  const alice = keyPolicyOf(set.keyPolicies.get(ALICE));
  assertEquals(alice.limits, { rpm: 60, tpm: 200000, max_inflight: 8 });
  assertEquals(alice.budget?.usd, 200);
  assertEquals(alice.budget?.period, "month");
  assertEquals(keyPolicyOf(set.defaultPolicy).budget?.usd, 50);
});

Deno.test("config: a bad budget period names its path and line", () => {
  const errors = loadErrors(
    [
      "policies:", // 1
      "  standard:", // 2
      "    budget:", // 3
      "      usd: 50", // 4
      "      period: year", // 5
      "",
    ].join("\n"),
  );
  assertEquals(errors, [
    "policies.standard.budget.period (line 5): must be one of: day, week, month, total",
  ]);
});

Deno.test("config: a bad key override names the key's path", () => {
  const errors = loadErrors(
    [
      "policies:", // 1
      "  standard: {}", // 2
      "names:", // 3
      `  alice: ${ALICE}`, // 4
      "keys:", // 5
      "  alice:", // 6
      "    policy: standard", // 7
      "    limits: { rpm: -5 }", // 8
      "",
    ].join("\n"),
  );
  assertEquals(errors, ["keys.alice.limits.rpm (line 8): must be an integer > 0 (got -5)"]);
});
