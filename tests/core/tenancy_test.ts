import { assert, assertEquals } from "../_assert.ts";
import { buildPolicySet, type PolicySections } from "../../src/core/policies.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { type KeyHold, Tenancy } from "../../src/core/tenancy.ts";

const ALICE = "k_" + "a".repeat(40);
const BOB = "k_" + "b".repeat(40);
const LOCAL = { input_per_million: 0, output_per_million: 0 };
const CLOUD = { input_per_million: 1, output_per_million: 2 };
const NOW = Date.UTC(2026, 11, 10, 12, 0, 0);

function setup(sections: PolicySections): { skeid: RoutingCore; tenancy: Tenancy } {
  const skeid = new RoutingCore();
  skeid.replacePolicySet(buildPolicySet(sections));
  return { skeid, tenancy: new Tenancy((id) => skeid.keyPolicy(id)) };
}

function held(d: ReturnType<Tenancy["admit"]>): KeyHold {
  assert(d.ok, `admitted (${d.ok ? "" : d.message})`);
  return d.hold;
}

Deno.test("tenancy: a key without limits or budget is admitted with nothing held", () => {
  const { tenancy } = setup({});
  const d = tenancy.admit(ALICE, NOW, { inputTokens: 10, rules: [CLOUD] });
  const hold = held(d);
  assertEquals([hold.ticket, hold.reservation], [null, null]);
  assertEquals(d.ok && d.headers, {});
});

Deno.test("tenancy: rate limit refusal → 429 key_rate_limited; budget refusal → 403, nothing held", () => {
  const { tenancy } = setup({
    policies: { p: { limits: { rpm: 2 }, budget: { usd: 0.01, period: "day" } } },
    default_policy: "p",
  });
  // $0.001 input + $0.008 output (max_tokens 4000) at the cloud rule = $0.009 reserved.
  const req = { inputTokens: 1000, outputLimit: 4000, rules: [LOCAL, CLOUD] };
  const first = held(tenancy.admit(ALICE, NOW, req));
  const usd = first.reservation?.amount.usd ?? 0;
  assert(Math.abs(usd - 0.009) < 1e-12, `priced at the most expensive tier: ${usd}`);
  const second = tenancy.admit(ALICE, NOW, req);
  assert(!second.ok && second.status === 403, "the budget refuses the second");
  assertEquals(second.code, "budget_exceeded");
  assertEquals(tenancy.rates.state(ALICE, NOW).requests, 1, "the refused one does not count");
  tenancy.cancel(first, NOW); // e.g. no node took it
  assertEquals(tenancy.budgets.status(ALICE, NOW)?.reserved.usd, 0);
  held(tenancy.admit(ALICE, NOW, req));
  held(tenancy.admit(BOB, NOW, { ...req, outputLimit: 0 }));
  held(tenancy.admit(BOB, NOW, { ...req, outputLimit: 0 }));
  const third = tenancy.admit(BOB, NOW, { ...req, outputLimit: 0 });
  assert(!third.ok && third.status === 429, "rpm 2 refuses BOB's third");
  assertEquals(third.code, "key_rate_limited");
  assertEquals(third.headers["x-ratelimit-remaining-requests"], "0");
  const reserved = tenancy.budgets.status(BOB, NOW)?.reserved.usd ?? 0;
  assert(Math.abs(reserved - 0.002) < 1e-12, `the refused one reserves nothing: ${reserved}`);
});

Deno.test("tenancy: max_inflight 2 with 5 concurrent requests → 2 admitted, 3 refused", () => {
  const { tenancy } = setup({
    policies: { p: { limits: { max_inflight: 2 } } },
    default_policy: "p",
  });
  const results = Array.from(
    { length: 5 },
    () => tenancy.admit(ALICE, NOW, { inputTokens: 1, rules: [] }),
  );
  assertEquals(results.filter((r) => r.ok).length, 2);
  assertEquals(results.filter((r) => !r.ok && r.status === 429).length, 3);
  const first = results.find((r) => r.ok);
  tenancy.release(first?.ok ? first.hold : null);
  assert(tenancy.admit(ALICE, NOW, { inputTokens: 1, rules: [] }).ok, "a place freed");
});

Deno.test("tenancy: settle replaces the estimate (an aborted stream settles from its estimate)", () => {
  const { tenancy } = setup({
    policies: { p: { limits: { tpm: 10_000 }, budget: { usd: 1, tokens: 100_000 } } },
    default_policy: "p",
  });
  const hold = held(
    tenancy.admit(ALICE, NOW, { inputTokens: 500, outputLimit: 8000, rules: [CLOUD] }),
  );
  assert(
    !tenancy.admit(ALICE, NOW, { inputTokens: 500, outputLimit: 8000, rules: [CLOUD] }).ok,
    "tpm full",
  );
  // The stream was aborted: its usage event carries the estimate of what was produced.
  tenancy.settle(hold, { usd: 0.0007, inputTokens: 500, outputTokens: 100 }, NOW + 5000);
  assertEquals(tenancy.rates.state(ALICE, NOW + 5000), { requests: 1, tokens: 600, inflight: 0 });
  const s = tenancy.budgets.status(ALICE, NOW + 5000)!;
  assertEquals([s.spent.usd, s.spent.tokens, s.reserved.usd], [0.0007, 600, 0]);
  assert(
    tenancy.admit(ALICE, NOW + 5000, { inputTokens: 500, outputLimit: 8000, rules: [CLOUD] }).ok,
    "fits again",
  );
});

Deno.test("tenancy: a config reload keeps the counters; the new numbers apply at once", () => {
  const { skeid, tenancy } = setup({
    policies: { p: { limits: { rpm: 2 } } },
    default_policy: "p",
  });
  const req = { inputTokens: 1, rules: [] };
  held(tenancy.admit(ALICE, NOW, req));
  held(tenancy.admit(ALICE, NOW, req));
  assert(!tenancy.admit(ALICE, NOW, req).ok, "rpm 2 reached");
  skeid.replacePolicySet(
    buildPolicySet({ policies: { p: { limits: { rpm: 3 } } }, default_policy: "p" }),
  );
  held(tenancy.admit(ALICE, NOW, req));
  assert(!tenancy.admit(ALICE, NOW, req).ok, "rpm 3 reached: the first two still count");
  assertEquals(tenancy.headers(ALICE, NOW)["x-ratelimit-limit-requests"], "3");
});

/** What a decision says: admitted, the limit that refused, or the budget's code. */
function why(d: ReturnType<Tenancy["admit"]>): string {
  return d.ok ? "admitted" : d.status === 429 ? d.limit : d.code;
}

Deno.test("tenancy: admitGroup leaves max_inflight to the shared table but counts the inflight", () => {
  const { tenancy } = setup({
    policies: { p: { limits: { rpm: 3, max_inflight: 1 } } },
    default_policy: "p",
  });
  const req = { inputTokens: 1, outputLimit: 1, rules: [LOCAL] };
  held(tenancy.admit(ALICE, NOW, req));
  const own = tenancy.admit(ALICE, NOW, req);
  assertEquals(why(own), "max_inflight", "one process checks it here");
  held(tenancy.admitGroup(ALICE, NOW, req));
  assertEquals(tenancy.rates.state(ALICE, NOW).inflight, 2, "both counted in the windows");
  held(tenancy.admitGroup(ALICE, NOW, req));
  const fourth = tenancy.admitGroup(ALICE, NOW, req);
  assertEquals(why(fourth), "rpm", "rpm still refuses for the group");
  const again = tenancy.admit(ALICE, NOW, req);
  assertEquals(why(again), "rpm", "admit after admitGroup: unchanged");
});
