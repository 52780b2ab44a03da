/**
 * The memory part of the benchmark (`deno task bench --memory`): how much resident memory a
 * gateway holds for idle keep-alive client connections and for concurrent streams, measured on a
 * fresh process each time, beside the bare Deno proxy measured the same way in the same run.
 *
 * @module
 */
import { type Child, readRss, sampleRss, spawnChild } from "./procs.ts";
import type { IdleReport } from "./idle_conns.ts";

const IDLE_CONNS = new URL("./idle_conns.ts", import.meta.url).pathname;
/**
 * How long the connections sit idle before the held RSS is read, ms: measured, V8's memory
 * reducer gave back ~70 MB of heap pages 15–25 s after 10,000 connections went idle.
 */
const IDLE_SETTLE_MS = 30_000;

/** What holding idle connections cost one process. */
export interface IdleFigures {
  /** RSS before the first connection, MB. */
  beforeMb: number;
  /** Peak RSS while they were opened, MB. */
  peakMb: number;
  /** RSS once they had been idle for the settle time, MB (V8 gives back heap pages by then). */
  heldMb: number;
  /** Connections that were open and idle at the peak. */
  open: number;
  /** Connections that failed to open or to get their answer. */
  failed: number;
  errorSample?: string;
}

/** What the concurrent streams cost one process. */
export interface StreamFigures {
  /** RSS before the streams, MB. */
  beforeMb: number;
  /** Peak RSS sampled every 250 ms while they ran, MB. */
  peakMb: number;
  completed: number;
  errors: number;
  errorSample?: string;
}

/** One side (bare proxy or Skeid) of the memory run. */
export interface MemorySide {
  idle?: IdleFigures;
  streams?: StreamFigures;
  error?: string;
}

/**
 * Opens `connections` keep-alive connections to `url` (one answered request each, then silent)
 * from a child pinned to `cpu`, and reads the RSS of `pid`: its peak until every connection is
 * open, and once they have all been idle for `settleMs` (V8's memory reducer gives back heap
 * pages some seconds after the allocations stop). Bounded by `timeoutMs`; the child is stopped by
 * PID at the end.
 */
export async function holdIdle(opts: {
  deno: string;
  url: string;
  pid: number;
  connections: number;
  cpu?: number;
  settleMs?: number;
  timeoutMs?: number;
  children: Child[];
}): Promise<IdleFigures> {
  const before = await readRss(opts.pid);
  const holdMs = (opts.timeoutMs ?? 120_000) + 10_000;
  const child = spawnChild("idle connections", opts.deno, [
    "run",
    "--quiet",
    "--no-prompt",
    "--allow-net",
    IDLE_CONNS,
    "--url",
    `${opts.url}/chat/completions`,
    "--connections",
    String(opts.connections),
    "--hold-ms",
    String(holdMs),
  ], { cpu: opts.cpu });
  opts.children.push(child);
  const sampler = sampleRss(opts.pid);
  try {
    const report = JSON.parse(await child.firstLine(opts.timeoutMs ?? 120_000)) as IdleReport;
    const peak = await sampler.stop();
    await new Promise((r) => setTimeout(r, opts.settleMs ?? IDLE_SETTLE_MS));
    const held = (await readRss(opts.pid))?.rssMb ?? 0;
    return {
      beforeMb: before?.rssMb ?? 0,
      peakMb: Math.max(peak, held),
      heldMb: held,
      open: report.open,
      failed: report.failed,
      errorSample: report.errorSample,
    };
  } finally {
    await sampler.stop();
    await child.stop();
  }
}

/** One line of a figure: `123 MB`. */
function mb(n: number | undefined): string {
  return n === undefined ? "—" : `${n.toFixed(0)} MB`;
}

/** The memory report: the goal table, then each side's details. */
export function renderMemory(
  sides: { bare: MemorySide; skeid: MemorySide },
  setup: { date: string; command: string; machine: string; connections: number; streams: number },
): string {
  const { bare, skeid } = sides;
  const conns = setup.connections.toLocaleString("en-US");
  const streams = setup.streams.toLocaleString("en-US");
  // The goals are for 10,000 connections and 2,000 streams; other counts have none.
  const idleGoal = setup.connections === 10_000 ? 150 : undefined;
  const streamGoal = setup.streams === 2_000 ? 300 : undefined;
  const pass = (v: number | undefined, goal: number | undefined) =>
    v === undefined || goal === undefined ? "—" : v <= goal ? "pass" : "FAIL";
  const goal = (g: number | undefined) => g === undefined ? "—" : `≤ ${g} MB`;
  const rows = [
    "| metric | bare proxy | skeid | goal | pass? |",
    "| --- | --- | --- | --- | --- |",
    `| ${conns} idle keep-alive connections, RSS after ${IDLE_SETTLE_MS / 1000} s idle | ${
      mb(bare.idle?.heldMb)
    } | ${mb(skeid.idle?.heldMb)} | ${goal(idleGoal)} | ${pass(skeid.idle?.heldMb, idleGoal)} |`,
    `| ${conns} idle keep-alive connections, peak RSS while opened | ${mb(bare.idle?.peakMb)} | ${
      mb(skeid.idle?.peakMb)
    } | — | — |`,
    `| ${streams} concurrent streams, peak RSS | ${mb(bare.streams?.peakMb)} | ${
      mb(skeid.streams?.peakMb)
    } | ${goal(streamGoal)} | ${pass(skeid.streams?.peakMb, streamGoal)} |`,
  ];
  const detail = (name: string, s: MemorySide): string[] => {
    const out = [`- **${name}**`];
    if (s.error) out.push(`  - not measured: ${s.error}`);
    if (s.idle) {
      const per = s.idle.open > 0 ? ((s.idle.heldMb - s.idle.beforeMb) * 1024) / s.idle.open : 0;
      out.push(
        `  - idle connections: ${mb(s.idle.beforeMb)} before, peak ${mb(s.idle.peakMb)}, ` +
          `${mb(s.idle.heldMb)} held after ${IDLE_SETTLE_MS / 1000} s idle; ` +
          `${s.idle.open.toLocaleString("en-US")} open, ${s.idle.failed} failed` +
          (s.idle.errorSample ? ` (${s.idle.errorSample})` : "") +
          `; ${per.toFixed(1)} KB per connection`,
      );
    }
    if (s.streams) {
      out.push(
        `  - streams: ${mb(s.streams.beforeMb)} before, peak ${mb(s.streams.peakMb)}; ` +
          `${s.streams.completed.toLocaleString("en-US")} completed, ${s.streams.errors} errors` +
          (s.streams.errorSample ? ` (${s.streams.errorSample})` : ""),
      );
    }
    return out;
  };
  return [
    "# Memory benchmark",
    "",
    `- date: ${setup.date}`,
    `- machine: ${setup.machine}`,
    `- command: \`${setup.command}\``,
    "- each measurement on a fresh process (gateway pinned to CPU 0, clients and the fake model " +
    "to CPU 1); RSS from `/proc/<pid>/status`, sampled every 250 ms",
    `- idle: ${conns} connections, each sends one non-streamed chat completion, reads the ` +
    `answer and stays open and silent; held = RSS after all were idle ${IDLE_SETTLE_MS / 1000} s`,
    `- streams: ${streams} SSE streams, one per connection, started over 1 s, 32 tokens ` +
    "200 ms apart; Skeid's upstream connect timeout raised to 30 s (a busy machine's fake model " +
    "accepts some of the 2,000 connections late)",
    "",
    ...rows,
    "",
    ...detail("bare proxy", bare),
    ...detail("skeid", skeid),
    "",
  ].join("\n");
}
