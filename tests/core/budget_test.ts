import { assert, assertEquals } from "../_assert.ts";
import type { BudgetPeriod, BudgetSettings } from "../../src/core/key_policy.ts";
import {
  type BudgetAmount,
  type BudgetReservation,
  Budgets,
  periodReset,
  periodStart,
  reservationAmount,
} from "../../src/core/budget.ts";

const KEY = "k_" + "a".repeat(40);
const OTHER = "k_" + "b".repeat(40);
const RULE = { input_per_million: 1, output_per_million: 2 };
const utc = (s: string) => Date.parse(s + "Z");

function budget(b: Partial<BudgetSettings>): BudgetSettings {
  return {
    usd: null,
    tokens: null,
    period: "month",
    warn_at: null,
    default_reserve_tokens: 4096,
    ...b,
  };
}

Deno.test("reservationAmount: input estimate + the request's output limit, else the default", () => {
  const b = budget({ default_reserve_tokens: 500 });
  assertEquals(reservationAmount(1000, 1000, b, RULE), { usd: 0.003, tokens: 2000 });
  assertEquals(reservationAmount(1000, null, b, RULE), { usd: 0.002, tokens: 1500 });
  assertEquals(reservationAmount(1000, undefined, b, RULE).tokens, 1500);
});

Deno.test("64 concurrent reservations against a budget that fits 10: exactly 10 admitted", () => {
  const per = reservationAmount(1000, 1000, budget({}), RULE); // $0.003
  const budgets = new Budgets(() => budget({ usd: 10 * per.usd }));
  const now = utc("2026-12-10T12:00:00");
  const admitted: BudgetReservation[] = [];
  let refused = 0;
  for (let i = 0; i < 64; i++) {
    const d = budgets.reserve(KEY, now, per);
    if (d.allowed) admitted.push(d.reservation!);
    else refused++;
  }
  assertEquals(admitted.length, 10, "the ones that fit");
  assertEquals(refused, 54, "the rest refused");
  // Each answer used at most its limits: settle them with their worst case.
  for (const r of admitted) budgets.settle(r, per, now);
  const s = budgets.status(KEY, now)!;
  assert(s.spent.usd <= 10 * per.usd + 1e-12, `spend ${s.spent.usd} never exceeds the cap`);
  assertEquals(s.reserved, { usd: 0, tokens: 0 });
  assert(!budgets.reserve(KEY, now, per).allowed, "a spent budget refuses");
});

Deno.test("settling below the reservation frees the difference; never above the cap", () => {
  const per = reservationAmount(1000, 1000, budget({}), RULE); // $0.003
  const cap = 10 * per.usd;
  const budgets = new Budgets(() => budget({ usd: cap }));
  const now = utc("2026-12-10T12:00:00");
  let served = 0;
  // Rounds of 64 concurrent requests; each answer uses only half its output limit.
  for (let round = 0; round < 10; round++) {
    const open: BudgetReservation[] = [];
    for (let i = 0; i < 64; i++) {
      const d = budgets.reserve(KEY, now, per);
      if (d.allowed) open.push(d.reservation!);
    }
    for (const r of open) {
      budgets.settle(r, { usd: 0.002, tokens: 1500 }, now);
      served++;
      const s = budgets.status(KEY, now)!;
      assert(s.spent.usd <= cap * (1 + 1e-9), `round ${round}: spend ${s.spent.usd} <= ${cap}`);
    }
  }
  // A request fits while $0.002 × settled + $0.003 (its reservation) <= $0.03: 14 of them.
  assertEquals(served, 14, "every request whose reservation fitted, no more");
});

Deno.test("the token cap refuses like the USD cap; release gives a reservation back", () => {
  const budgets = new Budgets(() => budget({ tokens: 5000 }));
  const now = utc("2026-12-10T12:00:00");
  const a = budgets.reserve(KEY, now, { usd: 0, tokens: 4096 });
  assert(a.allowed, "first fits");
  const b = budgets.reserve(KEY, now, { usd: 0, tokens: 4096 });
  assert(!b.allowed, "second does not");
  assertEquals(b.cap, "tokens");
  budgets.release(a.reservation);
  budgets.release(a.reservation); // idempotent
  assert(budgets.reserve(KEY, now, { usd: 0, tokens: 4096 }).allowed, "fits after release");
  assertEquals(budgets.status(KEY, now)!.spent.tokens, 0, "a release spends nothing");
});

Deno.test("the refusal says whether the budget is spent or this request's reservation is too big", () => {
  const budgets = new Budgets(() => budget({ usd: 10 }));
  const now = utc("2026-12-10T12:00:00");
  const big = budgets.reserve(KEY, now, { usd: 120, tokens: 60_000 });
  assert(!big.allowed, "a reservation larger than the cap");
  assert(big.message.startsWith("budget too small for this request"), big.message);
  assert(big.message.includes("it reserves $120"), big.message);
  assert(big.message.includes("$10 of $10 remains this month"), big.message);
  assert(big.message.includes("a lower max_tokens may fit"), big.message);
  const spent = budgets.reserve(KEY, now, { usd: 10, tokens: 1 });
  assert(spent.allowed, "what fits is admitted");
  const after = budgets.reserve(KEY, now, { usd: 0.01, tokens: 1 });
  assert(!after.allowed);
  assert(after.message.startsWith("budget exceeded: $0 of $10 spent this month"), after.message);
  assert(after.message.includes("$10 reserved by requests in flight"), after.message);
});

Deno.test("periods: calendar UTC day, week from Monday, month, total", () => {
  const t = utc("2026-12-02T15:30:00"); // a Wednesday
  assertEquals(periodStart("day", t), utc("2026-12-02T00:00:00"));
  assertEquals(periodReset("day", t), utc("2026-12-03T00:00:00"));
  assertEquals(periodStart("week", t), utc("2026-11-30T00:00:00"), "Monday");
  assertEquals(periodReset("week", t), utc("2026-12-07T00:00:00"));
  assertEquals(periodStart("week", utc("2026-11-29T23:59:59")), utc("2026-11-23T00:00:00"));
  assertEquals(periodStart("week", utc("2026-11-30T00:00:00")), utc("2026-11-30T00:00:00"));
  assertEquals(periodStart("month", t), utc("2026-12-01T00:00:00"));
  assertEquals(periodReset("month", t), utc("2027-01-01T00:00:00"), "across the year");
  assertEquals(periodStart("total", t), 0);
  assertEquals(periodReset("total", t), null);
});

Deno.test("rollover with an injected clock: UTC midnight, Monday, the 1st", () => {
  const cases: [BudgetPeriod, string, string][] = [
    ["day", "2026-12-02T23:59:59.999", "2026-12-03T00:00:00"],
    ["week", "2026-12-06T23:59:59.999", "2026-12-07T00:00:00"],
    ["month", "2026-12-31T23:59:59.999", "2027-01-01T00:00:00"],
  ];
  for (const [period, before, after] of cases) {
    const budgets = new Budgets(() => budget({ usd: 1, period }));
    const r = budgets.reserve(KEY, utc(before), { usd: 1, tokens: 10 });
    assert(r.allowed, `${period}: the whole budget reserved`);
    budgets.settle(r.reservation, { usd: 1, tokens: 10 }, utc(before));
    const refused = budgets.reserve(KEY, utc(before), { usd: 0.01, tokens: 1 });
    assert(!refused.allowed, `${period}: spent before the rollover`);
    assert(refused.message.includes(`this ${period}`), `message names the period`);
    assert(refused.message.includes(new Date(utc(after)).toISOString()), "and the reset");
    assertEquals(refused.resetsAt, utc(after));
    assert(budgets.reserve(KEY, utc(after), { usd: 0.01, tokens: 1 }).allowed, `${period}: new`);
  }
  const total = new Budgets(() => budget({ usd: 1, period: "total" }));
  total.record(KEY, { usd: 1, tokens: 1 }, utc("2026-01-01T00:00:00"));
  const never = total.reserve(KEY, utc("2030-01-01T00:00:00"), { usd: 0.01, tokens: 1 });
  assert(!never.allowed, "a total budget never resets");
  assert(never.message.includes("does not reset"), never.message);
});

Deno.test("a reservation in flight across a rollover settles into the new period", () => {
  const budgets = new Budgets(() => budget({ usd: 1, period: "day" }));
  const r = budgets.reserve(KEY, utc("2026-12-02T23:59:59"), { usd: 0.5, tokens: 1 });
  const after = utc("2026-12-03T00:00:01");
  assertEquals(budgets.status(KEY, after)!.reserved.usd, 0.5, "still reserved after midnight");
  budgets.settle(r.allowed ? r.reservation : null, { usd: 0.25, tokens: 1 }, after);
  const s = budgets.status(KEY, after)!;
  assertEquals(s.spent.usd, 0.25, "counted where its usage event lands, as in the ledger");
  assertEquals(s.reserved.usd, 0);
});

Deno.test("a reload keeps the counters; the new cap applies to the next request", () => {
  let current = budget({ usd: 1 });
  const budgets = new Budgets(() => current);
  const now = utc("2026-12-10T12:00:00");
  budgets.record(KEY, { usd: 0.9, tokens: 100 }, now);
  assert(!budgets.reserve(KEY, now, { usd: 0.2, tokens: 1 }).allowed, "$0.2 does not fit $0.1");
  current = budget({ usd: 2 });
  assert(budgets.reserve(KEY, now, { usd: 0.2, tokens: 1 }).allowed, "fits the raised cap");
  assertEquals(budgets.status(KEY, now)!.spent.usd, 0.9, "spend kept");
  current = budget({ usd: 2, period: "day" });
  assertEquals(budgets.status(KEY, now)!.spent.usd, 0, "a new period kind starts afresh");
  assertEquals(budgets.unloadedPeriods([current], now), ["day"], "and asks for its ledger read");
});

Deno.test("state comes from the ledger: loaded totals continue where a restart stopped", () => {
  const budgets = new Budgets((id) =>
    id === KEY ? budget({ usd: 10 }) : budget({ usd: 1, period: "day" })
  );
  const now = utc("2026-12-10T12:00:00");
  const totals = new Map<string, BudgetAmount>([[KEY, { usd: 9.5, tokens: 1000 }]]);
  assertEquals(budgets.unloadedPeriods([budget({})], now), ["month"]);
  budgets.loadTotals("month", totals, now);
  assertEquals(budgets.unloadedPeriods([budget({})], now), []);
  assertEquals(budgets.status(KEY, now)!.spent, { usd: 9.5, tokens: 1000 });
  assert(!budgets.reserve(KEY, now, { usd: 1, tokens: 1 }).allowed, "$1 does not fit $0.5");
  assert(budgets.reserve(KEY, now, { usd: 0.5, tokens: 1 }).allowed, "$0.5 does");
  assertEquals(budgets.status(OTHER, now)!.spent.usd, 0, "a day budget ignores month totals");
});

Deno.test("warn_at: one warning per period", () => {
  const budgets = new Budgets(() => budget({ usd: 10, warn_at: 0.8, period: "day" }));
  const day1 = utc("2026-12-10T12:00:00");
  assertEquals(budgets.record(KEY, { usd: 7, tokens: 1 }, day1), undefined, "below 80%");
  const w = budgets.record(KEY, { usd: 1, tokens: 1 }, day1);
  assert(w !== undefined, "warned at 80%");
  assert(w.message.includes("$8 of its $10 budget this day"), w.message);
  assertEquals(budgets.record(KEY, { usd: 1, tokens: 1 }, day1), undefined, "only once");
  assert(budgets.record(KEY, { usd: 9, tokens: 1 }, day1 + 86_400_000) !== undefined, "next day");
  assertEquals(budgets.warningCount, 2);
});

Deno.test("two frontends on one ledger: overshoot stays within one refresh of reservations", () => {
  // Each frontend writes settled usage to the shared ledger and refreshes from it.
  const ledger = new Map<string, BudgetAmount>();
  const write = (a: BudgetAmount) => {
    const t = ledger.get(KEY) ?? { usd: 0, tokens: 0 };
    ledger.set(KEY, { usd: t.usd + a.usd, tokens: t.tokens + a.tokens });
  };
  const cap = 1;
  const fronts = [new Budgets(() => budget({ usd: cap })), new Budgets(() => budget({ usd: cap }))];
  const now = utc("2026-12-10T12:00:00");
  const per = { usd: 0.05, tokens: 100 };
  const inflightPerRefresh = 4; // each frontend admits at most this many between refreshes
  for (let refresh = 0; refresh < 20; refresh++) {
    for (const f of fronts) {
      f.beginRefresh();
      f.loadTotals("month", new Map(ledger), now, true);
    }
    for (const f of fronts) {
      for (let i = 0; i < inflightPerRefresh; i++) {
        const d = f.reserve(KEY, now, per);
        if (!d.allowed) break;
        f.settle(d.reservation, per, now);
        write(per);
      }
    }
  }
  const spent = ledger.get(KEY)!.usd;
  const bound = cap + (fronts.length - 1) * inflightPerRefresh * per.usd;
  assert(spent >= cap - per.usd, `the cap is reached: ${spent}`);
  assert(spent <= bound + 1e-9, `overshoot ${spent - cap} within frontends × in-flight`);
  for (const f of fronts) {
    f.beginRefresh();
    f.loadTotals("month", new Map(ledger), now, true);
    assert(!f.reserve(KEY, now, per).allowed, "after a refresh both frontends refuse");
  }
});
