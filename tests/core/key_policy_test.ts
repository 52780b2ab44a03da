import { assert, assertEquals, assertThrows } from "../_assert.ts";
import {
  buildPolicySet,
  checkPolicySet,
  PolicyError,
  type PolicySections,
} from "../../src/core/policies.ts";
import { DEFAULT_SHARE, keyPolicyOf } from "../../src/core/key_policy.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";

const ALICE = "k_" + "a".repeat(40);
const BOB = "k_" + "b".repeat(40);
const CAROL = "k_" + "c".repeat(40);

const SECTIONS: PolicySections = {
  policies: {
    standard: {
      deny_tags: ["cloud"],
      limits: { rpm: 600, tpm: 200000, max_inflight: 8 },
      budget: { usd: 50, tokens: 20000000, period: "month", warn_at: 0.8 },
      share: { weight: 1, priority: 0, max_queued: 64 },
    },
    premium: { share: { weight: 4 } },
    open: {},
  },
  default_policy: "standard",
  names: { alice: ALICE },
  keys: {
    alice: { policy: "standard", budget: { usd: 200 }, limits: { rpm: 60 }, share: { weight: 2 } },
    [BOB]: "premium",
    [CAROL]: { policy: "standard", overrides: { limits: { tpm: null }, budget: null } },
  },
};

function skeidWith(sections: PolicySections): RoutingCore {
  const skeid = new RoutingCore();
  skeid.replacePolicySet(buildPolicySet(sections));
  return skeid;
}

Deno.test("keyPolicy: a policy's limits, budget and share, with defaults filled in", () => {
  const skeid = skeidWith(SECTIONS);
  const kp = skeid.keyPolicy("k_" + "d".repeat(40)); // unlisted: the default policy
  assertEquals(kp.limits, { rpm: 600, tpm: 200000, max_inflight: 8 });
  assertEquals(kp.budget, {
    usd: 50,
    tokens: 20000000,
    period: "month",
    warn_at: 0.8,
    default_reserve_tokens: 4096,
  });
  assertEquals(kp.share, { weight: 1, priority: 0, max_queued: 64 });
  assert(skeid.keyPolicy(undefined) === kp, "the same object for every key on one policy");
});

Deno.test("keyPolicy: key entries override field by field, null lifts a limit or budget", () => {
  const skeid = skeidWith(SECTIONS);
  const alice = skeid.keyPolicy(ALICE);
  assertEquals(alice.limits, { rpm: 60, tpm: 200000, max_inflight: 8 }, "alice limits");
  assertEquals(alice.budget?.usd, 200, "alice usd");
  assertEquals(alice.budget?.period, "month", "the period comes from the policy");
  assertEquals(alice.budget?.tokens, 20000000, "alice tokens");
  assertEquals(alice.share, { weight: 2, priority: 0, max_queued: 64 }, "alice share");
  const bob = skeid.keyPolicy(BOB);
  assertEquals(bob.limits, null, "premium has no limits");
  assertEquals(bob.budget, null, "premium has no budget");
  assertEquals(bob.share, { weight: 4, priority: 0, max_queued: null }, "premium share");
  const carol = skeid.keyPolicy(CAROL);
  assertEquals(carol.limits, { rpm: 600, tpm: null, max_inflight: 8 }, "carol limits");
  assertEquals(carol.budget, null, "budget: null removes the budget");
});

Deno.test("keyPolicy: no policies configured → unlimited, default share", () => {
  const kp = new RoutingCore().keyPolicy(ALICE);
  assertEquals(kp.limits, null);
  assertEquals(kp.budget, null);
  assert(kp.share === DEFAULT_SHARE, "the shared default share");
  assertEquals(keyPolicyOf(null), kp);
});

Deno.test("policies with different tenancy fields are distinct; equal ones are interned", () => {
  const set = buildPolicySet({
    policies: { a: { limits: { rpm: 1 } }, b: { limits: { rpm: 2 } }, c: { limits: { rpm: 1 } } },
  });
  assert(set.policies.get("a") !== set.policies.get("b"), "rpm 1 and rpm 2 differ");
  assert(set.policies.get("a") === set.policies.get("c"), "equal resolutions share one object");
});

function errorAt(sections: PolicySections): PolicyError {
  let caught: unknown;
  try {
    buildPolicySet(sections);
  } catch (e) {
    caught = e;
  }
  assert(caught instanceof PolicyError, `expected a PolicyError, got ${caught}`);
  return caught;
}

Deno.test("bad tenancy fields name their path", () => {
  const cases: [PolicySections, string, RegExp][] = [
    [
      { policies: { standard: { budget: { period: "year" } } } },
      "policies.standard.budget.period",
      /one of: day, week, month, total/,
    ],
    [
      { policies: { standard: { limits: { rpm: 0 } } } },
      "policies.standard.limits.rpm",
      /integer > 0 \(got 0\)/,
    ],
    [
      { policies: { standard: { limits: { rmp: 10 } } } },
      "policies.standard.limits.rmp",
      /unknown field/,
    ],
    [{ policies: { standard: { limits: 60 } } }, "policies.standard.limits", /must be a map/],
    [{ policies: { standard: { budget: { usd: -1 } } } }, "policies.standard.budget.usd", />= 0/],
    [
      { policies: { standard: { budget: { warn_at: 1.5 } } } },
      "policies.standard.budget.warn_at",
      /<= 1/,
    ],
    [{ policies: { standard: { share: { weight: 0 } } } }, "policies.standard.share.weight", /> 0/],
    [
      { policies: { standard: { share: { priority: 0.5 } } } },
      "policies.standard.share.priority",
      /integer/,
    ],
    [
      {
        policies: { s: {} },
        names: { alice: ALICE },
        keys: { alice: { policy: "s", share: { max_queued: -1 } } },
      },
      "keys.alice.share.max_queued",
      />= 0/,
    ],
    [
      {
        policies: { s: {} },
        keys: { [BOB]: { policy: "s", overrides: { budget: { tokens: 1.5 } } } },
      },
      `keys.${BOB}.overrides.budget.tokens`,
      /integer/,
    ],
  ];
  for (const [sections, path, message] of cases) {
    const err = errorAt(sections);
    assertEquals(err.path, path, `path of ${JSON.stringify(sections)}`);
    assert(message.test(err.message), `${err.message} should match ${message}`);
  }
});

Deno.test("every bad tenancy field is an error, not only the first", () => {
  const { errors } = checkPolicySet({
    policies: {
      standard: {
        budget: { usd: 5, period: "yearly" },
        limits: { rpm: -3, rps: 4 },
        share: { wieght: 2, weight: 0, max_queued: -1 },
      },
      open: { limits: "lots" },
    },
    keys: { [ALICE]: { policy: "standard", overrides: { budget: { tokens: 1.5, warn_at: 2 } } } },
  });
  assertEquals(errors.map((e) => e.path), [
    "policies.standard.limits.rps",
    "policies.standard.limits.rpm",
    "policies.standard.budget.period",
    "policies.standard.share.wieght",
    "policies.standard.share.weight",
    "policies.standard.share.max_queued",
    "policies.open.limits",
    `keys.${ALICE}.overrides.budget.tokens`,
    `keys.${ALICE}.overrides.budget.warn_at`,
  ]);
  assertEquals(errors[1].detail, "must be an integer > 0 (got -3)");
  assertThrows(
    () => buildPolicySet({ policies: { s: { limits: { rpm: -3, rps: 4 } } } }),
    PolicyError,
  );
});

Deno.test("numbers written as strings are read", () => {
  const set = buildPolicySet({
    policies: { s: { limits: { rpm: "60" }, share: { weight: "2.5" } } },
  });
  const kp = keyPolicyOf(set.policies.get("s"));
  assertEquals(kp.limits?.rpm, 60);
  assertEquals(kp.share.weight, 2.5);
  assertThrows(() => buildPolicySet({ policies: { s: { limits: { rpm: "lots" } } } }), PolicyError);
});
