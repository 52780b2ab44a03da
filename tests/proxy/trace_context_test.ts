/**
 * W3C Trace Context: which `traceparent` and `tracestate` headers are continued, which are
 * ignored, and what an upstream attempt is sent.
 */
import { assertEquals, assertNotEquals } from "../_assert.ts";
import {
  attemptTraceparent,
  MAX_TRACESTATE,
  parseTraceparent,
  traceContextOf,
  validTracestate,
} from "../../src/proxy/trace_context.ts";
import { upstreamHeaders } from "../../src/proxy/upstream.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const VALID = `00-${TRACE}-${PARENT}-01`;
/** What every traceparent Skeid sends looks like. */
const SENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/;

Deno.test("traceparent: a valid header is read; its sampled flag kept", () => {
  assertEquals(parseTraceparent(VALID), { traceId: TRACE, parentId: PARENT, sampled: true });
  assertEquals(parseTraceparent(`00-${TRACE}-${PARENT}-00`)?.sampled, false);
  // Other flag bits are unknown here: only the sampled bit is read.
  assertEquals(parseTraceparent(`00-${TRACE}-${PARENT}-03`)?.sampled, true);
  // A later version is read as version 00, with whatever follows a `-`.
  assertEquals(parseTraceparent(`01-${TRACE}-${PARENT}-01-more`)?.traceId, TRACE);
});

Deno.test("traceparent: invalid headers are ignored", () => {
  const invalid: [string, string][] = [
    ["too short", VALID.slice(0, -1)],
    ["too long for version 00", VALID + "0"],
    ["version 00 with a suffix", `${VALID}-x`],
    ["all-zero trace id", `00-${"0".repeat(32)}-${PARENT}-01`],
    ["all-zero parent id", `00-${TRACE}-${"0".repeat(16)}-01`],
    ["version ff", `ff-${TRACE}-${PARENT}-01`],
    ["non-hex version", `0g-${TRACE}-${PARENT}-01`],
    ["uppercase trace id", `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ["uppercase parent id", `00-${TRACE}-${PARENT.toUpperCase()}-01`],
    ["uppercase version", `0A-${TRACE}-${PARENT}-01`],
    ["non-hex flags", `00-${TRACE}-${PARENT}-0x`],
    ["wrong separator", `00_${TRACE}-${PARENT}-01`],
    ["trace id one short", `00-${TRACE.slice(1)}-${PARENT}0-01`],
    ["later version without a dash after", `01-${TRACE}-${PARENT}-01x`],
    ["two headers combined", `${VALID}, ${VALID}`],
    ["empty", ""],
  ];
  for (const [what, value] of invalid) {
    assertEquals(parseTraceparent(value), undefined, what);
    const ctx = traceContextOf(new Headers({ traceparent: value, tracestate: "a=1" }));
    assertNotEquals(ctx.traceId, TRACE, `${what}: a new trace`);
    assertEquals(ctx.tracestate, undefined, `${what}: its tracestate is not passed on`);
  }
});

Deno.test("tracestate: well-formed and bounded, else dropped", () => {
  for (const ok of ["a=1", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", " a=1 , ,b=x y", "t@sys=v"]) {
    assertEquals(validTracestate(ok), true, ok);
  }
  const members = Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",");
  const bad = [
    "",
    "novalue",
    "=v",
    "A=1",
    "1a=1",
    "a=1,a=2",
    "a=b,c",
    "a=x=y",
    "a=tab\tinside",
    "a=\u00e9",
    "@sys=v",
    "t@=v",
    "t@systemnametoolong=v",
    members,
    `a=${"v".repeat(MAX_TRACESTATE)}`,
  ];
  for (const value of bad) assertEquals(validTracestate(value), false, value);
  const kept = traceContextOf(new Headers({ traceparent: VALID, tracestate: "rojo=1,congo=2" }));
  assertEquals(kept.tracestate, "rojo=1,congo=2");
  const dropped = traceContextOf(new Headers({ traceparent: VALID, tracestate: "Bad=1" }));
  assertEquals([dropped.traceId, dropped.tracestate], [TRACE, undefined]);
});

Deno.test("trace context: continued, or new; the request span and each attempt get new ids", () => {
  const continued = traceContextOf(new Headers({ traceparent: VALID }));
  assertEquals([continued.traceId, continued.sampled], [TRACE, true]);
  assertNotEquals(continued.spanId, PARENT, "the request span is Skeid's own");
  const unsampled = traceContextOf(new Headers({ traceparent: `00-${TRACE}-${PARENT}-00` }));
  assertEquals(attemptTraceparent(unsampled).endsWith("-00"), true, "the flag is carried");

  const fresh = traceContextOf(new Headers());
  assertEquals(/^[0-9a-f]{32}$/.test(fresh.traceId), true);
  assertEquals(/^[0-9a-f]{16}$/.test(fresh.spanId), true);
  assertEquals(fresh.sampled, true);
  const ids = new Set<string>();
  // Enough to cross a refill of the random pool.
  for (let i = 0; i < 600; i++) {
    const sent = attemptTraceparent(fresh);
    assertEquals(SENT.test(sent), true, sent);
    assertEquals(sent.slice(3, 35), fresh.traceId);
    ids.add(sent.slice(36, 52));
  }
  assertEquals(ids.size, 600, "a new span id per attempt");
  assertEquals(ids.has(fresh.spanId), false);
});

Deno.test("upstream headers: the client's traceparent is replaced, its tracestate kept if valid", () => {
  const client = new Headers({ traceparent: VALID, tracestate: "rojo=1" });
  const trace = traceContextOf(client);
  const out = new Headers(upstreamHeaders(client, undefined, 1, undefined, undefined, trace));
  const sent = out.get("traceparent")!;
  assertEquals(SENT.test(sent), true, sent);
  assertEquals(sent.slice(3, 35), TRACE, "same trace");
  assertNotEquals(sent.slice(36, 52), PARENT, "a parent id of Skeid's");
  assertEquals(out.get("tracestate"), "rojo=1");
  const bad = new Headers({ traceparent: VALID, tracestate: "Bad=1" });
  const noState = new Headers(
    upstreamHeaders(bad, undefined, 1, undefined, undefined, traceContextOf(bad)),
  );
  assertEquals(noState.has("tracestate"), false, "a malformed tracestate is not passed on");
});
