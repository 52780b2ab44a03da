import { assert, assertEquals, assertThrows } from "../../tests/_assert.ts";
import { type CheckRound, compareFigures, parseFigures, ratiosOf, renderCheck } from "./check.ts";

/** A round where Skeid adds `added` ms at c=1 and answers `rps` at c=32 with `cpu` µs each. */
function round(added: number, rps: number, cpu: number, slower = 1): CheckRound {
  return {
    direct: { c1P50Ms: 0.05 * slower, c32Rps: 30_000 / slower },
    bare: { c1P50Ms: (0.05 + 0.2) * slower, c32Rps: 20_000 / slower, c32CpuUs: 40 * slower },
    skeid: { c1P50Ms: (0.05 + added) * slower, c32Rps: rps / slower, c32CpuUs: cpu * slower },
  };
}

const NAMES = [
  "c=1 added p50, Skeid / bare proxy",
  "c=1 p50, Skeid / direct",
  "c=32 req/s, Skeid / bare proxy",
  "c=32 req/s, Skeid / direct",
  "c=32 CPU per request, Skeid / bare proxy",
];

Deno.test("check: ratios are taken within each round, so a slower machine cancels out", () => {
  const fast = ratiosOf([round(0.3, 10_000, 80)]);
  const slow = ratiosOf([round(0.3, 10_000, 80, 2)]);
  assertEquals(Object.keys(fast), NAMES);
  for (const name of NAMES) assert(Math.abs(fast[name].median - slow[name].median) < 1e-9, name);
  assert(Math.abs(fast["c=1 added p50, Skeid / bare proxy"].median - 1.5) < 1e-9);
  assertEquals(fast["c=32 CPU per request, Skeid / bare proxy"].median, 2);
});

Deno.test("check: a ratio worse by more than the spread fails, within it passes", () => {
  const committed = ratiosOf([round(0.3, 10_000, 80), round(0.32, 10_500, 78)]);
  const same = compareFigures(committed, ratiosOf([round(0.31, 10_200, 79)]));
  assertEquals(same.map((r) => r.pass), [true, true, true, true, true]);
  // Twice the CPU and half the throughput: both throughput and CPU rows fail, latency holds.
  const worse = compareFigures(committed, ratiosOf([round(0.31, 5_000, 160)]));
  assertEquals(worse.map((r) => [r.name, r.pass]), [
    [NAMES[0], true],
    [NAMES[1], true],
    [NAMES[2], false],
    [NAMES[3], false],
    [NAMES[4], false],
  ]);
  const text = renderCheck(worse);
  assert(text.endsWith("check: FAIL (3 of 5 ratios worse by more than the spread)"), text);
  // Better than committed always passes.
  assert(compareFigures(committed, ratiosOf([round(0.1, 15_000, 50)])).every((r) => r.pass));
});

Deno.test("check: the spread is this run's range, or the committed run's when wider", () => {
  const committed = ratiosOf([round(0.3, 10_000, 80)]);
  // One round now at 88 µs (ratio 2.2 against 2.0), three rounds spanning 80–96 µs: 2.0–2.4.
  const row = (rounds: CheckRound[]) =>
    compareFigures(committed, ratiosOf(rounds)).find((r) => r.name === NAMES[4])!;
  assertEquals(row([round(0.3, 10_000, 88)]).pass, false);
  const wide = row([round(0.3, 10_000, 80), round(0.3, 10_000, 88), round(0.3, 10_000, 96)]);
  assert(Math.abs(wide.spread - 0.4) < 1e-9 && wide.pass, JSON.stringify(wide));
});

Deno.test("check: committed figures that are not figures are refused, naming the field", () => {
  assertThrows(() => parseFigures("{", "docs/bench/check.json"), Error, "docs/bench/check.json");
  assertThrows(() => parseFigures("{}", "f.json"), Error, "no 'ratios' object");
  assertThrows(
    () => parseFigures('{"ratios":{"x":{"better":"lower","median":1}}}', "f.json"),
    Error,
    "ratios.x needs better, median, min and max",
  );
  const ok = parseFigures(JSON.stringify({ ratios: ratiosOf([round(0.3, 1, 1)]) }), "f.json");
  assertEquals(Object.keys(ok.ratios).length, 5);
});

Deno.test("check: the paired ratios come from the phase with both gateways loaded at once", () => {
  const paired = (
    r: CheckRound,
    bareRps: number,
    skeidRps: number,
    bareCpu: number,
    cpu: number,
  ) => ({ ...r, paired: { aRps: bareRps, bRps: skeidRps, aCpuUs: bareCpu, bCpuUs: cpu } });
  const now = ratiosOf([
    paired(round(0.3, 10_000, 80), 8_000, 4_000, 50, 110),
    paired(round(0.3, 10_000, 80), 8_000, 3_000, 50, 120),
  ]);
  assertEquals(now["c=32 at the same time: req/s, Skeid / bare proxy"], {
    better: "higher",
    median: 0.4375,
    min: 0.375,
    max: 0.5,
  });
  assertEquals(now["c=32 at the same time: CPU per request, Skeid / bare proxy"].median, 2.3);
  // Committed figures from before the paired phase have no such ratio: it is not compared.
  const old = ratiosOf([round(0.3, 10_000, 80)]);
  assertEquals(Object.keys(old), NAMES);
  assertEquals(compareFigures(old, now).map((r) => r.name), NAMES);
});
