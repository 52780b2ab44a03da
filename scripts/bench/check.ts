/**
 * `deno task bench --check`: holds the request path's cost where the committed figures put it.
 * A check run measures, in rounds, the fake model directly, the bare Deno proxy and Skeid back
 * to back, and reduces each round to ratios (Skeid against the bare proxy and against direct,
 * all three measured in that round), so a slower or busier machine moves every side together
 * and cancels out. The run fails when a ratio's median is worse than the committed one by more
 * than the run-to-run spread: the range of that ratio over the rounds of this run, or of the
 * committed run when that was wider.
 *
 * @module
 */

/** What one round measured on one side. */
export interface SideFigures {
  /** c=1 JSON latency p50, ms. */
  c1P50Ms: number;
  /** c=32 JSON requests per second. */
  c32Rps: number;
  /** Gateway CPU per request over the c=32 run, µs (not measured for direct). */
  c32CpuUs?: number;
}

/**
 * Two gateways loaded at the same time, each by its own c=32 client, both on the gateway's CPU:
 * whatever the machine does to that CPU in the window, it does to both, so their ratio holds
 * where back-to-back runs drift by more than the difference measured (a busy neighbour, a
 * slower phase of the host).
 */
export interface PairedFigures {
  /** c=32 requests per second of each gateway while both were loaded. */
  aRps: number;
  bRps: number;
  /** Gateway CPU per request of each over the same window, µs. */
  aCpuUs?: number;
  bCpuUs?: number;
}

/** One round: the three sides measured back to back, then the bare proxy and Skeid together. */
export interface CheckRound {
  direct: SideFigures;
  bare: SideFigures;
  skeid: SideFigures;
  /** a = the bare proxy, b = Skeid (runs from before the paired phase have none). */
  paired?: PairedFigures;
}

/** Which way a ratio gets better. */
export type Better = "lower" | "higher";

/** A ratio over the rounds of one run. */
export interface RatioFigures {
  better: Better;
  median: number;
  min: number;
  max: number;
}

/** The committed figures (`docs/bench/check.json`), or what a check run measured. */
export interface CheckFigures {
  date: string;
  machine: string;
  command: string;
  rounds: CheckRound[];
  ratios: Record<string, RatioFigures>;
}

/** One compared ratio. */
export interface CheckRow {
  name: string;
  better: Better;
  committed: number;
  now: number;
  /** How much worse now is (negative: better), in the ratio's units. */
  worseBy: number;
  /** The spread the comparison allows. */
  spread: number;
  pass: boolean;
}

const RATIOS: { name: string; better: Better; of: (r: CheckRound) => number }[] = [
  {
    name: "c=1 added p50, Skeid / bare proxy",
    better: "lower",
    of: (r) => (r.skeid.c1P50Ms - r.direct.c1P50Ms) / (r.bare.c1P50Ms - r.direct.c1P50Ms),
  },
  {
    name: "c=1 p50, Skeid / direct",
    better: "lower",
    of: (r) => r.skeid.c1P50Ms / r.direct.c1P50Ms,
  },
  {
    name: "c=32 req/s, Skeid / bare proxy",
    better: "higher",
    of: (r) => r.skeid.c32Rps / r.bare.c32Rps,
  },
  {
    name: "c=32 req/s, Skeid / direct",
    better: "higher",
    of: (r) => r.skeid.c32Rps / r.direct.c32Rps,
  },
  {
    name: "c=32 CPU per request, Skeid / bare proxy",
    better: "lower",
    of: (r) => (r.skeid.c32CpuUs ?? NaN) / (r.bare.c32CpuUs ?? NaN),
  },
  {
    name: "c=32 at the same time: req/s, Skeid / bare proxy",
    better: "higher",
    of: (r) => r.paired === undefined ? NaN : r.paired.bRps / r.paired.aRps,
  },
  {
    name: "c=32 at the same time: CPU per request, Skeid / bare proxy",
    better: "lower",
    of: (r) => (r.paired?.bCpuUs ?? NaN) / (r.paired?.aCpuUs ?? NaN),
  },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** The ratios of a run's rounds (a ratio no round could compute is left out). */
export function ratiosOf(rounds: CheckRound[]): Record<string, RatioFigures> {
  const out: Record<string, RatioFigures> = {};
  for (const r of RATIOS) {
    const xs = rounds.map(r.of).filter(Number.isFinite);
    if (xs.length === 0) continue;
    out[r.name] = {
      better: r.better,
      median: median(xs),
      min: Math.min(...xs),
      max: Math.max(...xs),
    };
  }
  return out;
}

/** Each ratio of `now` against `committed`; a ratio missing on either side is not compared. */
export function compareFigures(
  committed: Record<string, RatioFigures>,
  now: Record<string, RatioFigures>,
): CheckRow[] {
  const rows: CheckRow[] = [];
  for (const [name, c] of Object.entries(committed)) {
    const n = now[name];
    if (n === undefined) continue;
    const worseBy = c.better === "lower" ? n.median - c.median : c.median - n.median;
    const spread = Math.max(n.max - n.min, c.max - c.min);
    rows.push({
      name,
      better: c.better,
      committed: c.median,
      now: n.median,
      worseBy,
      spread,
      pass: worseBy <= spread,
    });
  }
  return rows;
}

/** Reads committed figures, naming what is wrong with them. */
export function parseFigures(text: string, where: string): CheckFigures {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`${where}: not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  const f = v as Partial<CheckFigures>;
  if (typeof f !== "object" || f === null || typeof f.ratios !== "object" || f.ratios === null) {
    throw new Error(`${where}: no 'ratios' object`);
  }
  for (const [name, r] of Object.entries(f.ratios)) {
    const ok = (r.better === "lower" || r.better === "higher") &&
      [r.median, r.min, r.max].every((x) => typeof x === "number" && Number.isFinite(x));
    if (!ok) throw new Error(`${where}: ratios.${name} needs better, median, min and max`);
  }
  return f as CheckFigures;
}

/** The comparison as a markdown table, with a last line saying pass or fail. */
export function renderCheck(rows: CheckRow[]): string {
  const fmt = (x: number) => x.toFixed(3);
  const lines = [
    "| ratio | better | committed | now | worse by | spread | pass? |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows.map((r) =>
      `| ${r.name} | ${r.better} | ${fmt(r.committed)} | ${fmt(r.now)} | ${fmt(r.worseBy)} | ` +
      `${fmt(r.spread)} | ${r.pass ? "✅ pass" : "❌ fail"} |`
    ),
  ];
  const failed = rows.filter((r) => !r.pass).length;
  lines.push(
    "",
    rows.length === 0
      ? "check: nothing to compare (no ratio in both the committed figures and this run)"
      : failed === 0
      ? `check: pass (${rows.length} ratios within the run-to-run spread)`
      : `check: FAIL (${failed} of ${rows.length} ratios worse by more than the spread)`,
  );
  return lines.join("\n");
}
