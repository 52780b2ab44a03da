/**
 * The benchmark's report: the goal table (direct vs through Skeid), the per-run details and
 * the setup, as markdown.
 *
 * @module
 */
import type { LoadResult } from "./client.ts";

/** One side (direct or through Skeid) of one scenario. */
export interface SideRun {
  /** What the load client measured, when it ran. */
  result?: LoadResult;
  /** Why it did not run or failed. */
  error?: string;
  /** Peak gateway RSS sampled during the run, MB (Skeid side of the stream scenario). */
  rssPeakMb?: number;
}

/** A scenario's two sides. */
export interface ScenarioRun {
  /** Short label (`c=32 JSON`). */
  label: string;
  /** What the requests were. */
  describe: string;
  direct: SideRun;
  skeid: SideRun;
}

/** All the benchmark measured. */
export interface BenchResults {
  c1: ScenarioRun;
  c32: ScenarioRun;
  c256: ScenarioRun;
  stream32: ScenarioRun;
  streams: ScenarioRun;
  /** Number of concurrent streams of the `streams` scenario. */
  streamCount: number;
  /** Gateway RSS after start, before any load, MB. */
  idleRssMb?: number;
  /** Gateway peak RSS over the whole run (VmHWM), MB. */
  hwmMb?: number;
}

/** Setup facts printed above the table. */
export interface BenchSetup {
  date: string;
  command: string;
  machine: string;
  quick: boolean;
  /** `gateway not available: …`, or how the gateway ran. */
  gateway: string;
  gatewayAvailable: boolean;
  pinning: string;
  notes: string[];
}

/** One row of the goal table. */
export interface GoalRow {
  metric: string;
  direct: string;
  skeid: string;
  delta: string;
  goal: string;
  /** true pass, false fail, undefined: not measured. */
  pass: boolean | undefined;
}

const ms = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "—" : x.toFixed(3));
const int = (x: number | undefined) =>
  x === undefined || Number.isNaN(x) ? "—" : Math.round(x).toLocaleString("en-US");
const mb = (x: number | undefined) => (x === undefined ? "—" : x.toFixed(1));
const signed = (x: number | undefined, unit = " ms") =>
  x === undefined || Number.isNaN(x) ? "—" : `${x >= 0 ? "+" : ""}${x.toFixed(3)}${unit}`;
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? undefined : a / b;
const times = (x: number | undefined) => (x === undefined ? "—" : `${x.toFixed(3)}×`);
const clean = (s: SideRun) => s.result !== undefined && s.result.errors === 0;

/** The goal rows, in the order of the task's goals. */
export function goalRows(r: BenchResults): GoalRow[] {
  const rows: GoalRow[] = [];
  const both = (run: ScenarioRun) => clean(run.direct) && clean(run.skeid);
  const added = (
    metric: string,
    run: ScenarioRun,
    pick: (x: LoadResult) => number | undefined,
    limit: number,
  ) => {
    const d = run.direct.result && pick(run.direct.result);
    const s = run.skeid.result && pick(run.skeid.result);
    const diff = d !== undefined && s !== undefined ? s - d : undefined;
    rows.push({
      metric,
      direct: ms(d),
      skeid: ms(s),
      delta: signed(diff),
      goal: `added ≤ ${limit} ms`,
      pass: diff === undefined ? undefined : both(run) && diff <= limit,
    });
  };
  const rate = (
    metric: string,
    run: ScenarioRun,
    goal: string,
    ok: (s: number, q: number) => boolean,
  ) => {
    const d = run.direct.result?.rps;
    const s = run.skeid.result?.rps;
    const q = ratio(s, d);
    rows.push({
      metric,
      direct: int(d),
      skeid: int(s),
      delta: times(q),
      goal,
      pass: s === undefined || q === undefined ? undefined : both(run) && ok(s, q),
    });
  };

  added("c=1 JSON latency p50 (ms)", r.c1, (x) => x.latency.p50, 0.15);
  added("c=1 JSON latency p99 (ms)", r.c1, (x) => x.latency.p99, 0.4);
  rate("c=32 JSON throughput (req/s)", r.c32, "Skeid ≥ 15,000 req/s", (s) => s >= 15_000);
  rate("c=256 JSON burst (req/s)", r.c256, "no errors", () => true);
  added("stream c=32 TTFT p50 (ms)", r.stream32, (x) => x.ttft?.p50, 0.3);
  added("stream c=32 TTFT p99 (ms)", r.stream32, (x) => x.ttft?.p99, 1);
  rate("stream c=32 throughput (streams/s)", r.stream32, "≥ 0.97× direct", (_, q) => q >= 0.97);

  const n = r.streamCount.toLocaleString("en-US");
  const st = r.streams;
  const errs = (s: SideRun) =>
    s.result
      ? s.result.errors + Math.max(0, r.streamCount - s.result.completed - s.result.errors)
      : undefined;
  const se = errs(st.skeid);
  rows.push({
    metric: `${n} concurrent streams: errors`,
    direct: errs(st.direct)?.toString() ?? "—",
    skeid: se?.toString() ?? "—",
    delta: "",
    goal: "0",
    pass: se === undefined ? undefined : se === 0,
  });
  added(`${n} streams: inter-token gap p99 (ms)`, st, (x) => x.gap?.p99, 5);
  const peak = st.skeid.rssPeakMb;
  rows.push({
    metric: `${n} streams: gateway peak RSS (MB)`,
    direct: "",
    skeid: mb(peak),
    delta: "",
    goal: "≤ 300 MB",
    pass: peak === undefined ? undefined : peak <= 300,
  });
  rows.push({
    metric: "gateway idle RSS before load (MB)",
    direct: "",
    skeid: mb(r.idleRssMb),
    delta: "",
    goal: "≤ 80 MB",
    pass: r.idleRssMb === undefined ? undefined : r.idleRssMb <= 80,
  });
  return rows;
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** The goal table alone (also printed on stdout). */
export function goalTable(r: BenchResults): string {
  const mark = (p: boolean | undefined) => (p === undefined ? "n/a" : p ? "✅ pass" : "❌ fail");
  return table(
    ["metric", "direct", "skeid", "ratio / added", "goal", "pass?"],
    goalRows(r).map((x) => [x.metric, x.direct, x.skeid, x.delta, x.goal, mark(x.pass)]),
  );
}

function detailRows(r: BenchResults): string[][] {
  const rows: string[][] = [];
  for (const run of [r.c1, r.c32, r.c256, r.stream32, r.streams]) {
    for (const [side, s] of [["direct", run.direct], ["skeid", run.skeid]] as const) {
      const x = s.result;
      if (!x) {
        rows.push([run.label, side, "—", "—", "—", "—", "—", "—", "—", "—", s.error ?? "not run"]);
        continue;
      }
      rows.push([
        run.label,
        side,
        x.transport === "wrk" ? "wrk" : `deno ${x.transport}`,
        int(x.completed),
        int(x.errors),
        int(x.rps),
        ms(x.latency.p50),
        ms(x.latency.p99),
        x.ttft ? `${ms(x.ttft.p50)} / ${ms(x.ttft.p99)}` : "",
        x.gap ? `${ms(x.gap.p50)} / ${ms(x.gap.p99)}` : "",
        x.errorSamples.join("; "),
      ]);
    }
  }
  return rows;
}

/** The whole `results.md`. */
export function renderReport(r: BenchResults, setup: BenchSetup): string {
  const parts = [
    `# Skeid benchmark${setup.quick ? " (quick run: small counts, not for comparison)" : ""}`,
    "",
    `- date: ${setup.date}`,
    `- machine: ${setup.machine}`,
    `- command: \`${setup.command}\``,
    `- gateway: ${setup.gateway}`,
    `- pinning: ${setup.pinning}`,
    ...setup.notes.map((n) => `- ${n}`),
    "",
    "## Goals",
    "",
    goalTable(r),
    "",
    "Added = Skeid minus direct (same fake model, same client). Ratio = Skeid / direct.",
    "A row passes only when both sides ran without errors.",
    "",
    "## Runs",
    "",
    table(
      [
        "scenario",
        "side",
        "client",
        "completed",
        "errors",
        "req/s",
        "latency p50 ms",
        "latency p99 ms",
        "TTFT p50 / p99 ms",
        "gap p50 / p99 ms",
        "error samples",
      ],
      detailRows(r),
    ),
    "",
    "Scenarios:",
    "",
    ...[r.c1, r.c32, r.c256, r.stream32, r.streams].map((s) => `- ${s.label}: ${s.describe}`),
  ];
  if (r.hwmMb !== undefined) {
    parts.push("", `Gateway peak RSS over the whole run (VmHWM): ${mb(r.hwmMb)} MB.`);
  }
  return parts.join("\n") + "\n";
}

/** Where a figures file's generated part begins; what follows its end is written by hand. */
export const GENERATED_BEGIN = "<!-- generated by the benchmark: begin -->";
/** Where it ends. */
export const GENERATED_END = "<!-- generated by the benchmark: end -->";

/**
 * A figures file with its generated part replaced by `generated`: what `existing` holds before
 * and after the markers (notes and earlier runs written by hand) stays. A file without both
 * markers (new, or written before they existed) becomes the marked generated part alone.
 */
export function spliceGenerated(existing: string | undefined, generated: string): string {
  const block = `${GENERATED_BEGIN}\n\n${generated.trim()}\n\n${GENERATED_END}\n`;
  const begin = existing?.indexOf(GENERATED_BEGIN) ?? -1;
  const end = existing?.indexOf(GENERATED_END) ?? -1;
  if (existing === undefined || begin < 0 || end < begin) return block;
  const after = existing.slice(end + GENERATED_END.length).replace(/^\n/, "");
  return existing.slice(0, begin) + block + after;
}
