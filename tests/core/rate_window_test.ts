import { assert, assertEquals } from "../_assert.ts";
import type { KeyLimits } from "../../src/core/key_policy.ts";
import { formatResetDuration, RateWindows } from "../../src/core/rate_window.ts";

const KEY = "k_" + "a".repeat(40);
const OTHER = "k_" + "b".repeat(40);
const T0 = Date.UTC(2026, 11, 1, 12, 0, 0) + 300; // mid-second, like a real clock

function limits(l: Partial<KeyLimits>): KeyLimits {
  return { rpm: null, tpm: null, max_inflight: null, ...l };
}

Deno.test("rpm 60: the 61st request is refused with a Retry-After that admits it when reached", () => {
  const windows = new RateWindows(() => limits({ rpm: 60 }));
  for (let i = 0; i < 60; i++) {
    const d = windows.check(KEY, T0 + i * 100, 10);
    assert(d.allowed, `request ${i + 1} admitted`);
    windows.release(d.ticket);
  }
  const now = T0 + 30_000;
  const refused = windows.check(KEY, now, 10);
  assert(!refused.allowed, "the 61st is refused");
  assertEquals(refused.reason, "rpm");
  assertEquals(refused.canFit, true);
  assertEquals(refused.headers["x-ratelimit-remaining-requests"], "0");
  assertEquals(refused.headers["x-ratelimit-limit-requests"], "60");
  const at = now + refused.retryAfterS * 1000;
  assert(!windows.check(KEY, at - 1000, 10).allowed, "one second before Retry-After: still full");
  const later = windows.check(KEY, at, 10);
  assert(later.allowed, `admitted after waiting Retry-After (${refused.retryAfterS} s)`);
  assertEquals(refused.retryAfterS, 30, "the first requests leave the window 60 s after them");
});

Deno.test("rpm counts per customer key; a key without limits holds no state", () => {
  const windows = new RateWindows((id) => id === KEY ? limits({ rpm: 1 }) : null);
  assert(windows.check(KEY, T0, 0).allowed, "first of KEY");
  assert(!windows.check(KEY, T0, 0).allowed, "second of KEY refused");
  for (let i = 0; i < 100; i++) {
    const d = windows.check(OTHER, T0, 0);
    assert(d.allowed && d.ticket === null, "unlimited key admitted without a ticket");
  }
  assertEquals(windows.size, 1, "only the limited key has state");
});

Deno.test("tpm with large max_tokens: reserved until settled, then the real count", () => {
  const windows = new RateWindows(() => limits({ tpm: 10_000 }));
  const first = windows.check(KEY, T0, 8_100); // 100 input + max_tokens 8000
  assert(first.allowed, "first fits");
  assertEquals(first.headers["x-ratelimit-remaining-tokens"], "1900");
  const second = windows.check(KEY, T0 + 10, 8_100);
  assert(!second.allowed, "second does not fit beside the first's reservation");
  assertEquals(second.reason, "tpm");
  assertEquals(second.retryAfterS, 60, "only the first leaving the window frees enough");
  windows.settle(first.ticket, 600, T0 + 2_000); // the answer was short
  const third = windows.check(KEY, T0 + 2_000, 8_100);
  assert(third.allowed, "fits once the first is settled at its real count");
  assertEquals(windows.state(KEY, T0 + 2_000).tokens, 8_700);
  const huge = windows.check(OTHER, T0, 20_000);
  assert(!huge.allowed, "more than the tpm alone is refused");
  assertEquals(huge.canFit, false, "and no wait helps");
});

Deno.test("max_inflight: counts from admission to release; cancel gives everything back", () => {
  const windows = new RateWindows(() => limits({ max_inflight: 2, rpm: 10 }));
  const a = windows.check(KEY, T0, 0);
  const b = windows.check(KEY, T0, 0);
  assert(a.allowed && b.allowed, "two admitted");
  const c = windows.check(KEY, T0, 0);
  assert(!c.allowed, "a third concurrent request is refused");
  assertEquals(c.reason, "max_inflight");
  windows.release(a.ticket);
  windows.release(a.ticket); // idempotent
  const d = windows.check(KEY, T0, 0);
  assert(d.allowed, "admitted once one ended");
  assertEquals(windows.state(KEY, T0), { requests: 3, tokens: 0, inflight: 2 });
  windows.cancel(d.ticket, T0);
  assertEquals(windows.state(KEY, T0), { requests: 2, tokens: 0, inflight: 1 });
});

Deno.test("a reload keeps the counters and applies the new numbers to the next request", () => {
  let current = limits({ rpm: 5 });
  const windows = new RateWindows(() => current);
  for (let i = 0; i < 5; i++) assert(windows.check(KEY, T0, 0).allowed, `request ${i + 1}`);
  assert(!windows.check(KEY, T0, 0).allowed, "6th refused at rpm 5");
  current = limits({ rpm: 7 });
  assert(windows.check(KEY, T0, 0).allowed, "6th admitted at rpm 7: the 5 still count");
  assert(windows.check(KEY, T0, 0).allowed, "7th admitted");
  assert(!windows.check(KEY, T0, 0).allowed, "8th refused");
});

Deno.test("headers: limit, remaining and reset for requests and tokens", () => {
  const windows = new RateWindows(() => limits({ rpm: 10, tpm: 1000 }));
  windows.check(KEY, T0, 100);
  const h = windows.headers(KEY, T0 + 20_000);
  assertEquals(h, {
    "x-ratelimit-limit-requests": "10",
    "x-ratelimit-remaining-requests": "9",
    "x-ratelimit-reset-requests": "39.7s",
    "x-ratelimit-limit-tokens": "1000",
    "x-ratelimit-remaining-tokens": "900",
    "x-ratelimit-reset-tokens": "39.7s",
  });
  const empty = windows.headers(KEY, T0 + 61_000);
  assertEquals(empty["x-ratelimit-remaining-requests"], "10");
  assertEquals(empty["x-ratelimit-reset-requests"], "0ms");
  assertEquals(formatResetDuration(60_000), "1m0s");
  assertEquals(formatResetDuration(20), "20ms");
});

Deno.test("windows cost O(1) per request: 100k requests over 10 minutes stay exact", () => {
  const windows = new RateWindows(() => limits({ rpm: 1_000_000, tpm: 1_000_000_000 }));
  let admitted = 0;
  for (let i = 0; i < 100_000; i++) {
    const d = windows.check(KEY, T0 + i * 6, 1); // 10 000 per minute
    if (d.allowed) admitted++;
    windows.release(d.allowed ? d.ticket : null);
  }
  assertEquals(admitted, 100_000);
  const s = windows.state(KEY, T0 + 100_000 * 6);
  assert(
    s.requests >= 9_800 && s.requests <= 10_000,
    `about one minute of requests: ${s.requests}`,
  );
  assertEquals(windows.sweep(T0 + 100_000 * 6 + 61_000), 1, "an idle key is forgotten");
});
