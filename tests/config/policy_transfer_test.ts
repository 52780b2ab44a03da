import { assert, assertEquals } from "../_assert.ts";
import { buildPolicySet } from "../../src/core/policies.ts";
import {
  PIECE_ENTRIES,
  PolicySetAssembly,
  policyTransfer,
} from "../../src/config/policy_transfer.ts";

const id = (i: number) => `k_${i.toString(16).padStart(40, "0")}`;

/** `n` keys: every third on a named policy, the rest with an override of their own. */
function sections(n: number) {
  const keys: Record<string, unknown> = {};
  const names: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    keys[id(i)] = i % 3 === 0 ? "standard" : { policy: "other", deny_tags: [`t${i}`] };
  }
  for (let i = 0; i < 5; i++) names[`team-${i}`] = id(i);
  keys["k_00000000abcd"] = "standard";
  return {
    policies: { standard: { models: ["m"] }, other: { models: ["m", "n"] } },
    default_policy: "other",
    names,
    keys,
  };
}

Deno.test("policy transfer: pieces are bounded and assemble to the same set", () => {
  const n = PIECE_ENTRIES * 3 + 17;
  const set = buildPolicySet(sections(n));
  const { head, pieces } = policyTransfer(set);
  for (const piece of pieces) {
    const size = "ids" in piece ? piece.ids.length : piece.entries.length;
    assert(size > 0 && size <= PIECE_ENTRIES, `a piece of ${size} entries`);
  }
  // Each message is its own structured clone, as between the worker and the serving thread.
  const assembly = new PolicySetAssembly(structuredClone(head));
  for (const piece of pieces) assembly.add(structuredClone(piece));
  const got = assembly.finish();

  assertEquals(got.keyPolicies.size, set.keyPolicies.size);
  assertEquals(got.shortKeyPolicies.size, 1);
  assertEquals([...got.knownKeyIds].sort(), [...set.knownKeyIds].sort());
  assertEquals([...got.keyNames], [...set.keyNames]);
  assertEquals(got.warnings, set.warnings);
  for (const [key, policy] of set.keyPolicies) {
    assertEquals(got.keyPolicies.get(key), policy, `the policy of ${key}`);
  }
  // A key on a named policy holds that very object, across pieces, and so does the default.
  const standard = got.policies.get("standard");
  assert(standard !== undefined && Object.isFrozen(standard), "named policies are frozen again");
  assert(got.keyPolicies.get(id(0)) === standard, "first piece shares the named policy");
  assert(got.keyPolicies.get(id(n - 2)) === standard, "last piece shares the named policy");
  assert(got.defaultPolicy === got.policies.get("other"), "the default policy is the named one");
  const own = got.keyPolicies.get(id(1));
  assert(own !== undefined && Object.isFrozen(own) && Object.isFrozen(own.deny_tags), "frozen");
  assertEquals(own.deny_tags, ["t1"]);
});
