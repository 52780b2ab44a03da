import assert from "node:assert/strict";
import { CAPACITY_HEADER_NAMES, readingFromHeaders } from "../../src/core/rate_limit_headers.ts";
import { CapacityTable } from "../../src/core/capacity.ts";

Deno.test("exactly the 15 header names, lowercase, unique, retry-after included", () => {
  assert.equal(CAPACITY_HEADER_NAMES.length, 15);
  assert.equal(new Set(CAPACITY_HEADER_NAMES).size, 15);
  for (const n of CAPACITY_HEADER_NAMES) assert.equal(n, n.toLowerCase());
  assert.ok(CAPACITY_HEADER_NAMES.includes("retry-after"));
  assert.ok(CAPACITY_HEADER_NAMES.includes("anthropic-ratelimit-input-tokens-limit"));
  assert.ok(CAPACITY_HEADER_NAMES.includes("ratelimit-remaining"));
});

Deno.test("limit 100 / remaining 40 → used 60, source ratelimit, no interval", () => {
  const r = readingFromHeaders({
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "40",
  });
  assert.deepEqual(r, { source: "ratelimit", used: 60, limit: 100, quota: "requests" });
});

Deno.test("Anthropic limit 50 / remaining 0 blocks", () => {
  const r = readingFromHeaders(
    new Headers({
      "anthropic-ratelimit-requests-limit": "50",
      "anthropic-ratelimit-requests-remaining": "0",
    }),
  );
  assert.equal(r?.used, 50);
  assert.equal(r?.limit, 50);
  const t = new CapacityTable({ now: () => 0, maxAgeMs: 5000 });
  t.set("n", r!);
  assert.equal(t.allows("n"), false);
});

Deno.test("x-ratelimit-remaining without a limit: 0 blocks, 7 does not (limit = remaining + 1)", () => {
  const zero = readingFromHeaders({ "x-ratelimit-remaining": "0" });
  assert.deepEqual([zero?.used, zero?.limit], [1, 1]);
  const seven = readingFromHeaders({ "x-ratelimit-remaining": "7" });
  assert.deepEqual([seven?.used, seven?.limit], [1, 8]);
  const t = new CapacityTable({ now: () => 0, maxAgeMs: 5000 });
  t.set("a", zero!);
  t.set("b", seven!);
  assert.equal(t.allows("a"), false);
  assert.equal(t.allows("b"), true);
});

Deno.test("no rate-limit headers → nothing", () => {
  assert.equal(readingFromHeaders({ "content-type": "application/json" }, 200), undefined);
  assert.equal(readingFromHeaders(new Headers(), 200), undefined);
  assert.equal(readingFromHeaders({}), undefined);
});

Deno.test("tokens exhausted vs requests 1 % used → quota tokens, blocked", () => {
  const r = readingFromHeaders({
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "99",
    "x-ratelimit-limit-tokens": "10000",
    "x-ratelimit-remaining-tokens": "0",
  });
  assert.deepEqual(r, { source: "ratelimit", used: 10000, limit: 10000, quota: "tokens" });
});

Deno.test("requests exhausted vs tokens roomy → quota requests", () => {
  const r = readingFromHeaders({
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-limit-tokens": "10000",
    "x-ratelimit-remaining-tokens": "9000",
  });
  assert.deepEqual([r?.quota, r?.used, r?.limit], ["requests", 100, 100]);
});

Deno.test("50 % tokens vs 10 % requests → tokens, still available", () => {
  const r = readingFromHeaders({
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "90",
    "x-ratelimit-limit-tokens": "1000",
    "x-ratelimit-remaining-tokens": "500",
  });
  assert.deepEqual([r?.quota, r?.used, r?.limit], ["tokens", 500, 1000]);
  const t = new CapacityTable({ now: () => 0, maxAgeMs: 5000 });
  t.set("n", r!);
  assert.equal(t.allows("n"), true);
});

Deno.test("equal fractions → requests", () => {
  const r = readingFromHeaders({
    "x-ratelimit-limit-requests": "10",
    "x-ratelimit-remaining-requests": "5",
    "x-ratelimit-limit-tokens": "1000",
    "x-ratelimit-remaining-tokens": "500",
  });
  assert.equal(r?.quota, "requests");
});

Deno.test("anthropic input-tokens 0 of 20000 → used 20000", () => {
  const r = readingFromHeaders({
    "anthropic-ratelimit-input-tokens-remaining": "0",
    "anthropic-ratelimit-input-tokens-limit": "20000",
  });
  assert.deepEqual([r?.quota, r?.used, r?.limit], ["tokens", 20000, 20000]);
});

Deno.test("header names are case-insensitive: X-RateLimit-Remaining: 3 → limit 4", () => {
  const r = readingFromHeaders({ "X-RateLimit-Remaining": "3" });
  assert.deepEqual([r?.used, r?.limit], [1, 4]);
  const h = readingFromHeaders(new Headers({ "X-RateLimit-Remaining": "3" }));
  assert.deepEqual([h?.used, h?.limit], [1, 4]);
});

Deno.test("per quota the most specific name present wins", () => {
  const r = readingFromHeaders({
    "x-ratelimit-remaining": "0",
    "x-ratelimit-limit": "5",
    "x-ratelimit-remaining-requests": "90",
    "x-ratelimit-limit-requests": "100",
  });
  assert.deepEqual([r?.used, r?.limit], [10, 100]);
});

Deno.test("leading-integer parsing; unparsable remaining skips the quota", () => {
  const r = readingFromHeaders({
    "x-ratelimit-remaining-tokens": " 40 tokens",
    "x-ratelimit-limit-tokens": "100abc",
  });
  assert.deepEqual([r?.used, r?.limit], [60, 100]);
  assert.equal(readingFromHeaders({ "x-ratelimit-remaining-requests": "many" }), undefined);
  assert.equal(readingFromHeaders({ "x-ratelimit-remaining-requests": "-3" }), undefined);
  // an unparsable limit counts as missing: remaining + 1
  const r2 = readingFromHeaders({
    "x-ratelimit-remaining-requests": "9",
    "x-ratelimit-limit-requests": "n/a",
  });
  assert.deepEqual([r2?.used, r2?.limit], [1, 10]);
});

Deno.test("used is clamped to [0, limit]; a limit of 0 is skipped", () => {
  const over = readingFromHeaders({
    "x-ratelimit-remaining-requests": "150",
    "x-ratelimit-limit-requests": "100",
  });
  assert.deepEqual([over?.used, over?.limit], [0, 100]);
  assert.equal(
    readingFromHeaders({
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-limit-requests": "0",
    }),
    undefined,
  );
});

Deno.test("429 with retry-after 2 → 2000 ms backoff; quota values kept beside it", () => {
  const r = readingFromHeaders({ "retry-after": "2" }, 429);
  assert.deepEqual(r, { source: "ratelimit", used: null, limit: null, retry_after_ms: 2000 });
  const both = readingFromHeaders({ "retry-after": "1.5", "x-ratelimit-remaining": "0" }, 429);
  assert.deepEqual(both, {
    source: "ratelimit",
    used: 1,
    limit: 1,
    quota: "requests",
    retry_after_ms: 1500,
  });
});

Deno.test("429 without a usable Retry-After → 1 s backoff (missing, HTTP-date, 0)", () => {
  assert.equal(readingFromHeaders({}, 429)?.retry_after_ms, 1000);
  assert.equal(
    readingFromHeaders({ "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }, 429)?.retry_after_ms,
    1000,
  );
  assert.equal(readingFromHeaders({ "retry-after": "0" }, 429)?.retry_after_ms, 1000);
});

Deno.test("a 503's Retry-After backs off too; an HTTP-date without a clock says nothing", () => {
  assert.equal(readingFromHeaders({ "retry-after": "3" }, 503)?.retry_after_ms, 3000);
  assert.equal(
    readingFromHeaders({ "Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT" }, 503),
    undefined,
  );
  assert.equal(readingFromHeaders({ "retry-after": "0" }, 200), undefined);
});

Deno.test("Retry-After backs off on a 429 or 503 only, never on a 200 or another status", () => {
  for (const status of [200, 201, 301, 400, 404, 500, 502, 504]) {
    assert.equal(readingFromHeaders({ "retry-after": "30" }, status), undefined, `${status}`);
  }
  assert.equal(readingFromHeaders({ "retry-after": "30" }), undefined, "no status");
  // The quota headers of a 200 still count; only the backoff is not taken.
  const quota = readingFromHeaders({ "retry-after": "30", "x-ratelimit-remaining": "4" }, 200);
  assert.equal(quota?.retry_after_ms, undefined);
  assert.equal(quota?.used, 1);
});

Deno.test("Retry-After is capped by bounds.maxMs (default 60 s); 0 turns backoff off", () => {
  const now = Date.UTC(2026, 0, 1);
  assert.equal(readingFromHeaders({ "retry-after": "86400" }, 429)?.retry_after_ms, 60_000);
  assert.equal(
    readingFromHeaders({ "retry-after": "99999999999999999999" }, 503)?.retry_after_ms,
    60_000,
  );
  const bounds = { now, maxMs: 5000 };
  assert.equal(readingFromHeaders({ "retry-after": "30" }, 429, bounds)?.retry_after_ms, 5000);
  assert.equal(readingFromHeaders({ "retry-after": "2" }, 503, bounds)?.retry_after_ms, 2000);
  assert.equal(readingFromHeaders({}, 429, bounds)?.retry_after_ms, 1000);
  assert.equal(readingFromHeaders({ "retry-after": "30" }, 429, { now, maxMs: 0 }), undefined);
});

Deno.test("Retry-After as an HTTP-date: each of its three forms, read against the clock", () => {
  const now = Date.UTC(1994, 10, 6, 8, 49, 27); // 10 s before 08:49:37 GMT
  const bounds = { now, maxMs: 60_000 };
  for (
    const date of [
      "Sun, 06 Nov 1994 08:49:37 GMT",
      "Sunday, 06-Nov-94 08:49:37 GMT",
      "Sun Nov  6 08:49:37 1994",
    ]
  ) {
    assert.equal(readingFromHeaders({ "retry-after": date }, 429, bounds)?.retry_after_ms, 10_000);
    assert.equal(readingFromHeaders({ "retry-after": date }, 503, bounds)?.retry_after_ms, 10_000);
  }
  // Past: a 429 takes its default; far ahead: the cap.
  const past = { "retry-after": "Sun, 06 Nov 1994 08:00:00 GMT" };
  assert.equal(readingFromHeaders(past, 429, bounds)?.retry_after_ms, 1000);
  assert.equal(readingFromHeaders(past, 503, bounds), undefined);
  const far = { "retry-after": "Sun, 06 Nov 2094 08:00:00 GMT" };
  assert.equal(readingFromHeaders(far, 503, bounds)?.retry_after_ms, 60_000);
  // Not a date Skeid reads (no GMT, a bare number-like text): a 429's default.
  for (const odd of ["Sun, 06 Nov 1994 09:49:37 +0100", "1.2.3", "soon"]) {
    assert.equal(readingFromHeaders({ "retry-after": odd }, 429, bounds)?.retry_after_ms, 1000);
  }
});

Deno.test("a 429 backoff refuses until it ends, then allows (table with a clock)", () => {
  const clock = { t: 10_000 };
  const t = new CapacityTable({ now: () => clock.t, maxAgeMs: 5000 });
  const reading = readingFromHeaders({ "retry-after": "2" }, 429);
  assert.ok(reading);
  t.set("groq-1", reading);
  assert.equal(t.allows("groq-1"), false);
  assert.equal(t.nextChangeAt(), 12_000);
  clock.t = 12_000;
  assert.equal(t.allows("groq-1"), true);
});
