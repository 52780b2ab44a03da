import { assert, assertEquals } from "../../tests/_assert.ts";
import { renderMemory } from "./memory.ts";

const setup = (connections: number, streams: number) => ({
  date: "2026-12-01T00:00:00.000Z",
  command: "deno task bench --memory",
  machine: "test",
  connections,
  streams,
});

Deno.test("memory report: the goals judge held idle RSS and the streams' peak", () => {
  const text = renderMemory({
    bare: {
      idle: { beforeMb: 40, peakMb: 220, heldMb: 208, open: 10_000, failed: 0 },
      streams: { beforeMb: 40, peakMb: 240, completed: 2000, errors: 0 },
    },
    skeid: {
      idle: { beforeMb: 80, peakMb: 417, heldMb: 140, open: 10_000, failed: 0 },
      streams: { beforeMb: 80, peakMb: 305, completed: 2000, errors: 0 },
    },
  }, setup(10_000, 2_000));
  const row = (start: string) => text.split("\n").find((l) => l.startsWith(start)) ?? "";
  assertEquals(
    row("| 10,000 idle keep-alive connections, RSS after 30 s idle"),
    "| 10,000 idle keep-alive connections, RSS after 30 s idle | 208 MB | 140 MB | ≤ 150 MB | pass |",
  );
  assert(row("| 10,000 idle keep-alive connections, peak").includes("| 220 MB | 417 MB | — | — |"));
  assertEquals(
    row("| 2,000 concurrent streams"),
    "| 2,000 concurrent streams, peak RSS | 240 MB | 305 MB | ≤ 300 MB | FAIL |",
  );
  // (140 − 80) MB over 10,000 connections
  assert(text.includes("6.1 KB per connection"), text);
});

Deno.test("memory report: other counts have no goal; a side that failed says why", () => {
  const text = renderMemory({
    bare: { error: "a test request failed: refused" },
    skeid: { streams: { beforeMb: 80, peakMb: 120, completed: 190, errors: 10, errorSample: "x" } },
  }, setup(1_000, 200));
  assert(text.includes("| 200 concurrent streams, peak RSS | — | 120 MB | — | — |"), text);
  assert(text.includes("not measured: a test request failed: refused"));
  assert(text.includes("190 completed, 10 errors (x)"));
});
