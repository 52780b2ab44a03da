import { assertEquals, assertThrows } from "../_assert.ts";
import { reportSince, SinceError } from "../../src/usage/report_since.ts";

const NOW = Date.parse("2026-12-02T15:57:30.250Z");

Deno.test("report since: every spelling of one time becomes the stored created_at form", () => {
  for (
    const text of [
      "2026-12-02T15:57:00Z",
      "2026-12-02 15:57",
      "2026-12-02t15:57:00z",
      "2026-12-02T16:57:00+01:00",
      "2026-12-02 10:57:00.999-05:00",
      "  2026-12-02T15:57  ",
    ]
  ) assertEquals(reportSince(text, NOW), "2026-12-02T15:57:00Z", text);
  assertEquals(reportSince("2026-09", NOW), "2026-09-01T00:00:00Z");
  assertEquals(reportSince("2026-09-01", NOW), "2026-09-01T00:00:00Z");
});

Deno.test("report since: a span back from now", () => {
  assertEquals(reportSince("30m", NOW), "2026-12-02T15:27:30Z");
  assertEquals(reportSince("90min", NOW), "2026-12-02T14:27:30Z");
  assertEquals(reportSince("24h", NOW), "2026-12-01T15:57:30Z");
  assertEquals(reportSince("1d", NOW), "2026-12-01T15:57:30Z");
  assertEquals(reportSince("2w", NOW), "2026-11-18T15:57:30Z");
  // Further back than the epoch: everything.
  assertEquals(reportSince("999999999w", NOW), "1970-01-01T00:00:00Z");
});

Deno.test("report since: text that names no time is refused, saying what is taken", () => {
  for (const text of ["yesterday", "zzz", "1y", "2026-02-30", "2026-13-01", "12:00", "-1d"]) {
    const err = assertThrows(() => reportSince(text, NOW), SinceError);
    assertEquals(err.message.startsWith(`'${text}' is not a time: give an ISO date`), true, text);
  }
  const long = assertThrows(() => reportSince("x".repeat(5000), NOW), SinceError);
  assertEquals(long.message.length < 250, true, "a long value is cut, not echoed whole");
});
