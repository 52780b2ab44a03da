import { assert, assertEquals } from "../_assert.ts";
import { buildPolicySet } from "../../src/core/policies.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { Tenancy } from "../../src/core/tenancy.ts";
import { InflightTable } from "../../src/core/inflight_table.ts";
import { KeyGroupOwner, RemoteKeyGroup } from "../../src/workers/key_group.ts";
import type { FromWorker } from "../../src/workers/protocol.ts";
import type { KeyLimitDecision } from "../../src/proxy/key_step.ts";
import { memoryLogger } from "../../src/log.ts";

const ALICE = "k_" + "a".repeat(40);
const NOW = Date.UTC(2026, 11, 10, 12, 0, 0);
const REQ = { inputTokens: 1, outputLimit: 1, rules: [] };

/** An owner and two workers' groups wired by direct calls in place of messages. */
function group(policy: Record<string, unknown>) {
  const skeid = new RoutingCore();
  skeid.replacePolicySet(buildPolicySet({ policies: { p: policy }, default_policy: "p" }));
  const owner = new KeyGroupOwner(
    new Tenancy((id) => skeid.keyPolicy(id)),
    () => NOW,
    memoryLogger("warn"),
  );
  const shared = InflightTable.shared(64, 2);
  let id = 1;
  const workers = [0, 1].map((index) => {
    const table = new InflightTable(shared.words.buffer, { capacity: 64, workers: 2 }, index);
    const remote: RemoteKeyGroup = new RemoteKeyGroup(
      (msg: FromWorker) => {
        if (msg.type === "key_admit") {
          const d = owner.admit(index, msg.keyId, msg.request, msg.inflight);
          queueMicrotask(() => remote.answered(msg.id, d));
        } else if (msg.type === "key_settle") owner.settle(msg.hold, msg.actual);
        else if (msg.type === "key_cancel") owner.cancel(msg.hold);
      },
      table,
      () => id++,
    );
    return remote;
  });
  return { owner, workers, policy: skeid.keyPolicy(ALICE), shared };
}

/** What a decision says: admitted, the limit that refused, or the budget's code. */
function why(d: KeyLimitDecision): string {
  return d.ok ? "admitted" : d.status === 429 ? d.limit : d.code;
}

Deno.test("key group: max_inflight is the group's; rpm refuses first, as in one process", async () => {
  const g = group({ limits: { rpm: 3, max_inflight: 2 } });
  const [a, b] = g.workers;
  const first = await a.admit(ALICE, g.policy, REQ);
  const second = await b.admit(ALICE, g.policy, REQ);
  assert(first.ok && second.ok, "two places, one in each worker");
  const third = await a.admit(ALICE, g.policy, REQ);
  assertEquals(why(third), "max_inflight", "the group holds 2");
  assertEquals(g.owner.open, 2, "the refused one holds nothing");
  first.hold.settle({ usd: 0, inputTokens: 1, outputTokens: 1 });
  const fourth = await b.admit(ALICE, g.policy, REQ);
  assert(fourth.ok, "a place freed in worker 0 serves worker 1");
  const fifth = await a.admit(ALICE, g.policy, REQ);
  assertEquals(why(fifth), "rpm", "rpm 3 reached: rpm is said");
  second.hold.cancel();
  fourth.hold.cancel();
  assertEquals(g.owner.open, 0, "every hold given back");
});

Deno.test("key group: a worker that died gives its holds and places back", async () => {
  const g = group({ limits: { max_inflight: 1 }, budget: { tokens: 100, period: "day" } });
  const [a, b] = g.workers;
  const held = await a.admit(ALICE, g.policy, REQ);
  assert(held.ok, "admitted in worker 0");
  const refused = await b.admit(ALICE, g.policy, REQ);
  assertEquals(why(refused), "max_inflight");
  assertEquals(g.owner.workerDied(0), 1, "its hold cancelled");
  assertEquals(g.shared.releaseWorker(0) > 0, true, "its place freed");
  const after = await b.admit(ALICE, g.policy, REQ);
  assert(after.ok, "worker 1 is admitted now");
  after.hold.settle({ usd: 0, inputTokens: 1, outputTokens: 1 });
  assertEquals(g.owner.open, 0);
});
