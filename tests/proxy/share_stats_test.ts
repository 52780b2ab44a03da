import { assert, assertEquals } from "../_assert.ts";
import { shareKeyLabel, ShareStats } from "../../src/proxy/share_stats.ts";
import { requestTokensEstimate } from "../../src/proxy/estimate.ts";

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

Deno.test("estimate: message text about 4 characters a token, plus the output limit", () => {
  const chat = { messages: [{ role: "user", content: "x".repeat(40) }], max_tokens: 100 };
  assertEquals(requestTokensEstimate(chat, 4096), 10 + 100);
  const parts = { messages: [{ role: "user", content: [{ type: "text", text: "y".repeat(8) }] }] };
  assertEquals(requestTokensEstimate(parts, 50), 2 + 50, "no limit: the default");
  assertEquals(requestTokensEstimate({ prompt: "abcd", max_completion_tokens: 3 }, 9), 1 + 3);
  assertEquals(requestTokensEstimate({ input: ["abcdefgh"] }, 4096), 2, "embeddings: input only");
});
