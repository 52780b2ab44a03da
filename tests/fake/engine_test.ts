import { assertEquals } from "../_assert.ts";
import { type SequenceStart, SimEngine } from "../../src/fake/engine.ts";
import { VirtualClock } from "../../src/fake/sim_clock.ts";

const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

function run(engine: SimEngine, clock: VirtualClock, prompt: string[], outputs = 4) {
  const seen: { start?: SequenceStart; endedAt?: number } = {};
  engine.submit(prompt, words("o", outputs), {
    onFirstToken: (start) => (seen.start = start),
    onEnd: () => (seen.endedAt = clock.now()),
  });
  return seen;
}

Deno.test("engine: TTFT = base + uncached tokens × prefill cost; a repeated prefix is cached", () => {
  const clock = new VirtualClock();
  const engine = new SimEngine(clock, {
    blockSize: 10,
    numBlocks: 100,
    ttftBaseMs: 20,
    prefillMsPerToken: 0.5,
    itlMs: 10,
    decodeSlowdown: 0,
  });
  const system = words("s", 200);
  const a = run(engine, clock, [...system, ...words("a", 5)]);
  clock.run();
  assertEquals(a.start?.ttftMs, 20 + 205 * 0.5);
  assertEquals(a.start?.cachedTokens, 0);
  assertEquals(a.endedAt, 20 + 205 * 0.5 + 3 * 10);
  const t0 = clock.now();
  const b = run(engine, clock, [...system, ...words("b", 5)]);
  clock.run();
  assertEquals(b.start?.cachedTokens, 200);
  assertEquals(b.start?.ttftMs, 20 + 5 * 0.5);
  assertEquals(b.endedAt! - t0, 20 + 2.5 + 30);
  const c = engine.counters();
  assertEquals([c.prefixQueries, c.prefixHits, c.finished, c.running], [410, 200, 2, 0]);
});

Deno.test("engine: beyond max_running sequences wait in FIFO order; waiting adds to TTFT", () => {
  const clock = new VirtualClock();
  const engine = new SimEngine(clock, {
    maxRunning: 2,
    ttftBaseMs: 10,
    prefillMsPerToken: 0,
    itlMs: 10,
    decodeSlowdown: 0,
  });
  const seen = [1, 2, 3].map((i) => run(engine, clock, words(`u${i}`, 3), 5));
  assertEquals([engine.counters().running, engine.counters().waiting], [2, 1]);
  clock.run();
  // Each runs 10 + 4 × 10 = 50 ms; the third starts when the first ends.
  assertEquals(seen.map((s) => s.start?.queuedMs), [0, 0, 50]);
  assertEquals(seen.map((s) => s.start?.ttftMs), [10, 10, 60]);
});

Deno.test("engine: a fuller batch decodes slower", () => {
  const clock = new VirtualClock();
  const engine = new SimEngine(clock, {
    maxRunning: 3,
    ttftBaseMs: 0,
    prefillMsPerToken: 0,
    itlMs: 10,
    decodeSlowdown: 1,
  });
  const seen = [1, 2, 3].map((i) => run(engine, clock, words(`u${i}`, 3)));
  clock.run();
  // running 1, 2, 3 at their first token: itl × (1 + (r − 1)/(max − 1)).
  assertEquals(seen.map((s) => s.start?.itlMs), [10, 15, 20]);
});

Deno.test("engine: a cancelled waiting sequence leaves the queue; a cancelled one frees its slot", () => {
  const clock = new VirtualClock();
  const engine = new SimEngine(clock, { maxRunning: 1, ttftBaseMs: 10, itlMs: 10 });
  const first = engine.submit(words("a", 3), words("o", 100));
  const second = engine.submit(words("b", 3), words("o", 2));
  let thirdStart: SequenceStart | undefined;
  engine.submit(words("c", 3), words("o", 2), { onFirstToken: (s) => (thirdStart = s) });
  second.cancel();
  assertEquals(engine.counters().waiting, 1);
  clock.run(5);
  first.cancel();
  assertEquals(engine.counters().running, 1);
  clock.run();
  assertEquals(thirdStart?.queuedMs, 5);
  assertEquals(engine.cache.usedBlocks, 0);
});

Deno.test("engine: predictTtft plays the running and queued sequences forward", () => {
  const clock = new VirtualClock();
  const engine = new SimEngine(clock, {
    blockSize: 10,
    numBlocks: 100,
    maxRunning: 1,
    ttftBaseMs: 20,
    prefillMsPerToken: 1,
    itlMs: 10,
    decodeSlowdown: 0,
  });
  const idle = words("p", 20);
  // Nothing running: base + every prompt token.
  assertEquals(engine.predictTtft([], idle.length), 20 + 20);
  const a = run(engine, clock, words("a", 10), 4); // ends at 20 + 10 + 3 × 10 = 60
  const b = run(engine, clock, words("b", 10), 2); // queued: starts at 60, ends at 60 + 30 + 10
  // A third waits for both: 100 ms, then its own base and prefill.
  assertEquals(engine.predictTtft([], 5), 100 + 20 + 5);
  clock.run();
  assertEquals([a.endedAt, b.endedAt], [60, 100]);
});
