import { assert, assertEquals } from "../_assert.ts";
import { DEFAULT_PREFILL_MS_PER_TOKEN, NodeCosts } from "../../src/core/node_cost.ts";

/** Fails unless `actual` is within `tolerance` of `expected`. */
function assertNear(actual: number, expected: number, tolerance: number): void {
  assert(Math.abs(actual - expected) <= tolerance, `${actual} is not ${expected} ± ${tolerance}`);
}

/** A node whose TTFT is 20 ms + 0.1 ms per uncached token, as the simulated engine's. */
const ttft = (uncached: number) => 20 + 0.1 * uncached;

Deno.test("the prefill cost is the slope of TTFT over uncached tokens, not the fixed part", () => {
  const costs = new NodeCosts();
  for (let i = 0; i < 60; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", ttft(uncached), uncached);
  }
  assertNear(costs.prefillMsPerToken("a"), 0.1, 1e-6);
});

Deno.test("a node seeing only one prompt size keeps the cost it had learned", () => {
  const costs = new NodeCosts();
  for (let i = 0; i < 60; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", ttft(uncached), uncached);
  }
  // Then only warm requests of one hot prefix: 38 uncached tokens each, hundreds of them. A
  // ratio through the origin would say (20 + 3.8) / 38 = 0.63 ms a token.
  for (let i = 0; i < 800; i++) costs.observeTtft("a", ttft(38), 38);
  assertNear(costs.prefillMsPerToken("a"), 0.1, 1e-6);
  // Sizes a few tokens apart say nothing either.
  for (let i = 0; i < 800; i++) costs.observeTtft("a", ttft(34 + (i % 9)), 34 + (i % 9));
  assertNear(costs.prefillMsPerToken("a"), 0.1, 1e-6);
  // Spread again, and a node now twice as dear is learned.
  for (let i = 0; i < 200; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", 20 + 0.2 * uncached, uncached);
  }
  assertNear(costs.prefillMsPerToken("a"), 0.2, 1e-3);
});

Deno.test("a node never seen with spread keeps the default cost", () => {
  const costs = new NodeCosts();
  for (let i = 0; i < 500; i++) costs.observeTtft("b", ttft(38), 38);
  assertEquals(costs.prefillMsPerToken("b"), DEFAULT_PREFILL_MS_PER_TOKEN);
  assert(costs.view("b").samples === 500);
});

Deno.test("an absurd usage report is left out: the node's cost is still learned after it", () => {
  const costs = new NodeCosts();
  for (let i = 0; i < 60; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", ttft(uncached), uncached);
  }
  // A node's usage report is its own word: a prompt of 1e160 tokens, an infinite TTFT. In the
  // fit's sums either would stay infinite for good, and the cost with them.
  costs.observeTtft("a", ttft(1e160), 1e160);
  costs.observeTtft("a", Infinity, 500);
  costs.observeTtft("a", 50, Infinity);
  // The node then becomes twice as dear, and that is learned.
  for (let i = 0; i < 200; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", 20 + 0.2 * uncached, uncached);
  }
  assertNear(costs.prefillMsPerToken("a"), 0.2, 1e-3);
});

Deno.test("waits do not tilt the prefill cost: queued and far-above-the-line TTFTs are left out", () => {
  const costs = new NodeCosts();
  for (let i = 0; i < 60; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", ttft(uncached), uncached);
  }
  // Long prompts that waited for a slot: a pick that foresaw the wait says so (queued), and one
  // that did not shows a TTFT far above the line. Left in, they made the slope several times
  // the engine's.
  for (let i = 0; i < 40; i++) {
    const uncached = 1000 + (i % 4) * 200;
    costs.observeTtft("a", ttft(uncached) + 400, uncached, undefined, true);
  }
  assertNear(costs.prefillMsPerToken("a"), 0.1, 1e-6);
  for (let i = 0; i < 7; i++) costs.observeTtft("a", ttft(1200) + 300, 1200);
  assertNear(costs.prefillMsPerToken("a"), 0.1, 1e-6);
  // Still a cost that is learned: a node that really became three times slower is followed.
  for (let i = 0; i < 400; i++) {
    const uncached = 100 + (i % 10) * 150;
    costs.observeTtft("a", 20 + 0.3 * uncached, uncached);
  }
  assertNear(costs.prefillMsPerToken("a"), 0.3, 0.02);
});
