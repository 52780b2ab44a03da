import { assert, assertEquals } from "../_assert.ts";
import { shareKeyLabel, ShareStats } from "../../src/proxy/share_stats.ts";

const names: Record<string, string> = { k_a: "alice" };
const label = (id: string) => shareKeyLabel(id, names[id]);

Deno.test("share stats: named keys by name, others under one _other label", () => {
  const s = new ShareStats(label);
  s.waited("m", "k_a", 120);
  s.waited("m", "k_x", 40);
  s.waited("m", "k_y", 900);
  s.waited("m", "anonymous", 5);
  s.served("k_a", 10, 8);
  s.served("k_x", 1, 2);
  s.served("k_y", 1, 2);
  const backlog = [{ tier: "m", keys: new Map([["k_a", 3], ["k_x", 1], ["k_y", 2]]) }];
  const snap = s.snapshot(backlog);
  assertEquals(snap.tiers.length, 1);
  const tier = snap.tiers[0];
  assertEquals(tier.queued, 6);
  assertEquals(tier.backlogged_keys, [{ key: "alice", queued: 3 }, { key: "_other", queued: 3 }]);
  const other = tier.waits.find((w) => w.key === "_other");
  assert(other !== undefined, "unnamed keys share one histogram");
  assertEquals(other.count, 2);
  assertEquals(other.max_ms, 900);
  assertEquals(tier.waits.map((w) => w.key).sort(), ["_other", "alice", "anonymous"]);
  assertEquals(snap.served_tokens, [
    { key: "alice", input: 10, output: 8 },
    { key: "_other", input: 2, output: 4 },
  ]);
  const prom = s.prometheus(backlog, (v) => v).join("\n");
  assert(prom.includes('skeid_share_backlogged_keys{tier="m"} 2'), prom);
  assert(prom.includes('skeid_share_queued{tier="m",key="_other"} 3'), prom);
  assert(prom.includes('skeid_share_wait_seconds_bucket{tier="m",key="alice",le="0.25"} 1'), prom);
  assert(prom.includes('skeid_share_wait_seconds_count{tier="m",key="_other"} 2'), prom);
  assert(prom.includes('skeid_share_served_tokens_total{key="alice",kind="output"} 8'), prom);
});
