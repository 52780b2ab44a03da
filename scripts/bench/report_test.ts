import { assert, assertEquals } from "../../tests/_assert.ts";
import { percentile, summarize } from "./stats.ts";
import { parseWrk, wrkMs } from "./wrk.ts";
import {
  type BenchResults,
  GENERATED_BEGIN,
  GENERATED_END,
  goalRows,
  renderReport,
  spliceGenerated,
} from "./report.ts";
import type { LoadResult } from "./client.ts";

Deno.test("percentiles are nearest-rank", () => {
  const xs = Array.from({ length: 100 }, (_, i) => i + 1);
  assertEquals(percentile(xs, 50), 50);
  assertEquals(percentile(xs, 99), 99);
  assertEquals(percentile([7], 99), 7);
  const s = summarize([3, 1, 2]);
  assertEquals([s.n, s.p50, s.max, s.mean], [3, 2, 3, 2]);
  assert(Number.isNaN(summarize([]).p50));
});

const WRK = `Running 3s test @ http://127.0.0.1:37461/v1/chat/completions
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   458.74us  273.04us   5.87ms   95.11%
    Req/Sec    73.43k     4.62k   78.63k    83.33%
  Latency Distribution
     50%  400.00us
     75%  445.00us
     90%  505.00us
     99%    1.55ms
  218779 requests in 3.00s, 87.63MB read
  Non-2xx or 3xx responses: 779
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  72892.71
Transfer/sec:     29.20MB
`;

Deno.test("wrk reports are read into a load result", () => {
  assertEquals([wrkMs("400.00us"), wrkMs("1.55ms"), wrkMs("2.00s")], [0.4, 1.55, 2000]);
  const r = parseWrk(WRK, 32);
  assertEquals(r.completed, 218_000);
  assertEquals(r.errors, 782);
  assertEquals(r.latency.p50, 0.4);
  assertEquals(r.latency.p99, 1.55);
  assertEquals(r.latency.max, 5.87);
  assertEquals(r.elapsedMs, 3000);
  assert(Math.abs(r.rps - 72892.71 * (218_000 / 218_779)) < 0.01);
  assertEquals(r.errorSamples.length, 2);
});

function result(over: Partial<LoadResult>): LoadResult {
  const s = { n: 1, p50: 1, p90: 1, p99: 1, max: 1, mean: 1 };
  return {
    transport: "raw",
    stream: false,
    concurrency: 1,
    completed: 100,
    errors: 0,
    errorSamples: [],
    elapsedMs: 1000,
    rps: 100,
    latency: s,
    ...over,
  };
}

function results(skeidAvailable: boolean): BenchResults {
  const lat = (p50: number, p99: number) => ({ n: 9, p50, p90: p99, p99, max: p99, mean: p50 });
  const side = (
    r: LoadResult,
  ) => (skeidAvailable ? { result: r } : { error: "gateway not available" });
  return {
    c1: {
      label: "c=1",
      describe: "",
      direct: { result: result({ latency: lat(0.05, 0.2) }) },
      skeid: side(result({ latency: lat(0.15, 0.7) })),
    },
    c32: {
      label: "c=32",
      describe: "",
      direct: { result: result({ rps: 40_000 }) },
      skeid: side(result({ rps: 16_000 })),
    },
    c256: {
      label: "c=256",
      describe: "",
      direct: { result: result({ rps: 30_000 }) },
      skeid: side(result({ rps: 10_000, errors: 3, errorSamples: ["status 502"] })),
    },
    stream32: {
      label: "s",
      describe: "",
      direct: { result: result({ rps: 300, ttft: lat(20, 22) }) },
      skeid: side(result({ rps: 295, ttft: lat(20.2, 24) })),
    },
    streams: {
      label: "n",
      describe: "",
      direct: { result: result({ completed: 2000, gap: lat(200, 210) }) },
      skeid: { ...side(result({ completed: 1999, gap: lat(200, 212) })), rssPeakMb: 250 },
    },
    streamCount: 2000,
    idleRssMb: 90,
  };
}

Deno.test("goal rows: added and ratios against the goals; errors fail a row", () => {
  const rows = goalRows(results(true));
  const by = Object.fromEntries(rows.map((r) => [r.metric, r]));
  assertEquals(by["c=1 JSON latency p50 (ms)"].delta, "+0.100 ms");
  assertEquals(by["c=1 JSON latency p50 (ms)"].pass, true);
  assertEquals(by["c=1 JSON latency p99 (ms)"].pass, false);
  assertEquals(by["c=32 JSON throughput (req/s)"].skeid, "16,000");
  assertEquals(by["c=32 JSON throughput (req/s)"].delta, "0.400×");
  assertEquals(by["c=32 JSON throughput (req/s)"].pass, true);
  assertEquals(by["c=256 JSON burst (req/s)"].pass, false, "errors fail the row");
  assertEquals(by["stream c=32 TTFT p50 (ms)"].pass, true);
  assertEquals(by["stream c=32 TTFT p99 (ms)"].pass, false);
  assertEquals(by["stream c=32 throughput (streams/s)"].pass, true);
  assertEquals(by["2,000 concurrent streams: errors"].skeid, "1", "a missing stream is an error");
  assertEquals(by["2,000 concurrent streams: errors"].pass, false);
  assertEquals(by["2,000 streams: inter-token gap p99 (ms)"].pass, true);
  assertEquals(by["2,000 streams: gateway peak RSS (MB)"].pass, true);
  assertEquals(by["gateway idle RSS before load (MB)"].pass, false);
});

Deno.test("without a gateway the Skeid columns are not measured, and the report says why", () => {
  const r = results(false);
  delete r.idleRssMb;
  delete r.streams.skeid.rssPeakMb;
  const rows = goalRows(r);
  assertEquals(rows.every((x) => x.pass === undefined), true);
  const md = renderReport(r, {
    date: "2026-01-01",
    command: "deno task bench --quick",
    machine: "nproc 2",
    quick: true,
    gateway: "**gateway not available** — not built yet",
    gatewayAvailable: false,
    pinning: "none",
    notes: [],
  });
  assert(md.includes("**gateway not available**"));
  assert(md.includes("| c=1 JSON latency p50 (ms) | 0.050 | — | — | added ≤ 0.15 ms | n/a |"));
  assert(md.includes("`deno task bench --quick`"));
});

Deno.test("a figures file keeps what is written by hand around its generated part", () => {
  const first = spliceGenerated(undefined, "# Figures\n\n| a |\n");
  assertEquals(first, `${GENERATED_BEGIN}\n\n# Figures\n\n| a |\n\n${GENERATED_END}\n`);
  const edited = `${first}\n## A note by hand\n\nIt stays.\n`;
  const second = spliceGenerated(edited, "# Figures\n\n| b |");
  assertEquals(
    second,
    `${GENERATED_BEGIN}\n\n# Figures\n\n| b |\n\n${GENERATED_END}\n\n## A note by hand\n\nIt stays.\n`,
  );
  assertEquals(spliceGenerated(second, "# Figures\n\n| b |"), second, "the same run twice");
  // Written before the markers existed: the generated part alone, as before.
  assertEquals(
    spliceGenerated("# Old\n", "# New"),
    `${GENERATED_BEGIN}\n\n# New\n\n${GENERATED_END}\n`,
  );
});
