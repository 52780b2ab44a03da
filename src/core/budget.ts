/**
 * Budgets per customer key (ADR 0023): a USD and/or token cap per calendar period, enforced by
 * reserving at admission and settling from the usage event.
 *
 * A request reserves its worst case (input estimate + its own output limit, or the budget's
 * `default_reserve_tokens`, times its completions `n`, capped by `routing.max_reserve_tokens`,
 * priced at the served model's rule) and is refused when that does not
 * fit what is left; the usage event then replaces the reservation by the real cost and tokens.
 * Concurrent requests therefore never together reserve more than the cap: the only overspend
 * is what an upstream produced beyond the output limit it was given.
 *
 * The spent part comes from the ledger (`load`, `refresh*`): the counters here are the ledger's
 * totals plus this process's own reservations, never a second store that could drift. State is
 * keyed by customer key id and the numbers are read from the key's policy on every call, so a
 * reload keeps the counters and changed caps apply to the next request.
 *
 * @module
 */
import type { BudgetPeriod, BudgetSettings } from "./key_policy.ts";
import type { PricingRule } from "./types.ts";
import { costFor } from "./pricing.ts";

const DAY_MS = 86_400_000;

/** USD and tokens: a reservation, a settled usage, a ledger total. */
export interface BudgetAmount {
  /** USD at the ledger's prices. */
  readonly usd: number;
  /** Input + output tokens. */
  readonly tokens: number;
}

/** The start of the period containing `now` (epoch ms, UTC calendar; weeks start Monday). */
export function periodStart(period: BudgetPeriod, now: number): number {
  if (period === "total") return 0;
  const d = new Date(now);
  const day = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  if (period === "day") return day;
  if (period === "week") return day - ((d.getUTCDay() + 6) % 7) * DAY_MS;
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** When the period containing `now` ends and the budget resets, epoch ms; null for `total`. */
export function periodReset(period: BudgetPeriod, now: number): number | null {
  if (period === "total") return null;
  const start = periodStart(period, now);
  if (period === "day") return start + DAY_MS;
  if (period === "week") return start + 7 * DAY_MS;
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The words a message uses for a period ("this month", "in total"). */
export function periodWords(period: BudgetPeriod): string {
  return period === "total" ? "in total" : `this ${period}`;
}

/** What a request asks to generate, as every charge before its usage event reads it. */
export interface OutputAsk {
  /**
   * The request's own output limit per completion: the largest of the limits the node honours
   * (`max_completion_tokens`, `max_tokens`, `max_output_tokens`, Ollama's `options.num_predict`);
   * null or absent when it states none.
   */
  readonly outputLimit?: number | null;
  /** Completions the node generates (`n`, or `best_of` when larger); absent: 1. */
  readonly choices?: number;
  /** The most output tokens a request is charged before its usage event (`max_reserve_tokens`). */
  readonly maxOutput?: number;
}

/**
 * The output tokens a request is charged for before its usage event: its own limit (or
 * `defaultTokens` when it states none) times its completions, at most `maxOutput`. The cap keeps
 * a client-chosen number (`max_tokens: 1e18`) from moving a budget, a window or a fair-share
 * counter out of the range where a token still counts.
 */
export function outputCharge(ask: OutputAsk, defaultTokens: number): number {
  const limit = ask.outputLimit;
  const each = limit !== null && limit !== undefined && limit >= 0 ? limit : defaultTokens;
  const choices = ask.choices !== undefined && ask.choices > 1 ? ask.choices : 1;
  return Math.min(each * choices, ask.maxOutput ?? Infinity);
}

/**
 * What a request reserves: its input estimate plus its output charge (`outputLimit`, see
 * `outputCharge`) or else the budget's `default_reserve_tokens`, priced at the served model's
 * rule.
 */
export function reservationAmount(
  inputTokens: number,
  outputLimit: number | null | undefined,
  budget: Pick<BudgetSettings, "default_reserve_tokens">,
  rule: PricingRule,
): BudgetAmount {
  const input = Math.max(0, inputTokens);
  const output = outputLimit !== null && outputLimit !== undefined && outputLimit >= 0
    ? outputLimit
    : budget.default_reserve_tokens;
  const cost = costFor({
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output,
    cached_tokens: null,
    cache_write_tokens: null,
    input_includes_cache: true,
  }, rule);
  return { usd: cost.total_cost_usd, tokens: input + output };
}

/** A request's hold on its key's budget; give it back to `settle` or `release`. */
export interface BudgetReservation {
  /** The customer key id. */
  readonly keyId: string;
  /** What it reserved. */
  readonly amount: BudgetAmount;
  /** Whether it still holds its amount (until settled or released). */
  open: boolean;
}

/** Which cap refused a reservation. */
export type BudgetCap = "usd" | "tokens";

/** The answer of `reserve`. */
export type BudgetDecision =
  | {
    /** Reserved. */
    readonly allowed: true;
    /** null when the key has no budget (nothing to settle). */
    readonly reservation: BudgetReservation | null;
  }
  | {
    /** Refused (403 `budget_exceeded`). */
    readonly allowed: false;
    /** The cap that does not fit. */
    readonly cap: BudgetCap;
    /** The key's budget period. */
    readonly period: BudgetPeriod;
    /** When the budget resets, epoch ms; null for `total` (never). */
    readonly resetsAt: number | null;
    /** A message naming the period and when it resets. */
    readonly message: string;
  };

/** A customer key's budget now (admin view, `skeid usage`, metrics). */
export interface BudgetStatus {
  /** The period. */
  period: BudgetPeriod;
  /** Start of the current period, epoch ms (0 for `total`). */
  periodStart: number;
  /** When it resets, epoch ms; null for `total`. */
  resetsAt: number | null;
  /** The caps (null = not capped). */
  cap: { usd: number | null; tokens: number | null };
  /** Settled this period (ledger totals + this process's settlements). */
  spent: BudgetAmount;
  /** Reserved by this process's requests in flight. */
  reserved: BudgetAmount;
  /** What is left of each cap (never below 0; null = not capped). */
  remaining: { usd: number | null; tokens: number | null };
}

interface KeyBudget {
  period: BudgetPeriod;
  start: number;
  /** When the current period ends (Infinity for `total`): until then `#sync` has nothing to do. */
  end: number;
  spentUsd: number;
  spentTokens: number;
  reservedUsd: number;
  reservedTokens: number;
  /** Open reservations; at 0 the reserved sums are reset exactly (no IEEE residue). */
  open: number;
  /** Settled since the current refresh began (not in the totals being read). */
  freshUsd: number;
  freshTokens: number;
  /** A warn_at warning was given this period. */
  warned: boolean;
}

/** A warn_at crossing (one per key and period). */
export interface BudgetWarning {
  /** The customer key id. */
  keyId: string;
  /** The warning text. */
  message: string;
}

/** Headroom for IEEE sums (ten reservations of $0.003 add up to slightly more than $0.03). */
function over(used: number, cap: number): boolean {
  return used > cap + Math.abs(cap) * 1e-9;
}

function formatAmount(cap: BudgetCap, v: number): string {
  return cap === "usd" ? `$${Number(v.toFixed(6))}` : `${Math.round(v)} tokens`;
}

/** Budget counters per customer key id: ledger totals, own reservations, own settlements. */
export class Budgets {
  readonly #budgetOf: (keyId: string) => BudgetSettings | null;
  readonly #keys = new Map<string, KeyBudget>();
  /** Period → the start whose ledger totals were loaded. */
  readonly #loaded = new Map<BudgetPeriod, number>();
  #warnings = 0;

  /** `budgetOf` gives a key's current budget (e.g. `id => skeid.keyPolicy(id).budget`). */
  constructor(budgetOf: (keyId: string) => BudgetSettings | null) {
    this.#budgetOf = budgetOf;
  }

  /** warn_at warnings given so far (a counter for metrics). */
  get warningCount(): number {
    return this.#warnings;
  }

  /**
   * Reserves `amount` (see `reservationAmount`) for a request of `keyId` at `now`, or refuses
   * it when it does not fit what is left of a cap this period. A key without a budget is
   * admitted without state.
   */
  reserve(keyId: string, now: number, amount: BudgetAmount): BudgetDecision {
    const budget = this.#budgetOf(keyId);
    if (!budget || (budget.usd === null && budget.tokens === null)) {
      return { allowed: true, reservation: null };
    }
    const s = this.#state(keyId, budget, now);
    const usedUsd = s.spentUsd + s.reservedUsd;
    const usedTokens = s.spentTokens + s.reservedTokens;
    let cap: BudgetCap | undefined;
    if (budget.usd !== null && (usedUsd >= budget.usd || over(usedUsd + amount.usd, budget.usd))) {
      cap = "usd";
    } else if (
      budget.tokens !== null &&
      (usedTokens >= budget.tokens || over(usedTokens + amount.tokens, budget.tokens))
    ) cap = "tokens";
    if (cap !== undefined) {
      const resetsAt = periodReset(budget.period, now);
      const limit = cap === "usd" ? budget.usd! : budget.tokens!;
      const spent = cap === "usd" ? s.spentUsd : s.spentTokens;
      const when = resetsAt === null
        ? "it does not reset (period: total)"
        : `it resets at ${new Date(resetsAt).toISOString()}`;
      const used = cap === "usd" ? usedUsd : usedTokens;
      const inFlight = `${formatAmount(cap, used - spent)} reserved by requests in flight`;
      // Spent (or held) in full, no request fits; else it is this request's reservation — its
      // input and its whole output limit — that does not fit, and a smaller limit may.
      const message = used >= limit
        ? `budget exceeded: ${formatAmount(cap, spent)} of ${formatAmount(cap, limit)} spent ` +
          `${periodWords(budget.period)}, ${inFlight}; ${when}`
        : `budget too small for this request: it reserves ${formatAmount(cap, amount[cap])} ` +
          `(its input and its whole output limit), and ${formatAmount(cap, limit - used)} of ` +
          `${formatAmount(cap, limit)} remains ${periodWords(budget.period)} ` +
          `(${formatAmount(cap, spent)} spent, ${inFlight}); a lower max_tokens may fit; ${when}`;
      return { allowed: false, cap, period: budget.period, resetsAt, message };
    }
    s.reservedUsd += amount.usd;
    s.reservedTokens += amount.tokens;
    s.open++;
    return { allowed: true, reservation: { keyId, amount, open: true } };
  }

  /**
   * Replaces a reservation by the real cost and tokens of its usage event (an estimated event
   * of an aborted stream counts as recorded). Returns a warning when the key crosses `warn_at`
   * for the first time this period.
   */
  settle(
    reservation: BudgetReservation | null,
    actual: BudgetAmount,
    now: number,
  ): BudgetWarning | undefined {
    if (!reservation) return undefined;
    this.release(reservation);
    return this.record(reservation.keyId, actual, now);
  }

  /** Gives a reservation back without spend (the request was refused before forwarding). */
  release(reservation: BudgetReservation | null): void {
    if (!reservation || !reservation.open) return;
    reservation.open = false;
    const s = this.#keys.get(reservation.keyId);
    if (!s) return;
    s.open = Math.max(0, s.open - 1);
    s.reservedUsd = s.open === 0 ? 0 : Math.max(0, s.reservedUsd - reservation.amount.usd);
    s.reservedTokens = s.open === 0 ? 0 : Math.max(0, s.reservedTokens - reservation.amount.tokens);
  }

  /**
   * Adds a usage event's cost and tokens to the key's spend this period (`settle` does this for a
   * reserved request; call it directly for an event that had no reservation, e.g. a request
   * admitted before a reload gave its key a budget).
   */
  record(keyId: string, actual: BudgetAmount, now: number): BudgetWarning | undefined {
    const budget = this.#budgetOf(keyId);
    if (!budget) return undefined;
    const s = this.#state(keyId, budget, now);
    s.spentUsd += actual.usd;
    s.spentTokens += actual.tokens;
    s.freshUsd += actual.usd;
    s.freshTokens += actual.tokens;
    if (s.warned || budget.warn_at === null) return undefined;
    const crossed: BudgetCap | undefined =
      budget.usd !== null && s.spentUsd >= budget.warn_at * budget.usd
        ? "usd"
        : budget.tokens !== null && s.spentTokens >= budget.warn_at * budget.tokens
        ? "tokens"
        : undefined;
    if (crossed === undefined) return undefined;
    s.warned = true;
    this.#warnings++;
    const spent = crossed === "usd" ? s.spentUsd : s.spentTokens;
    const limit = crossed === "usd" ? budget.usd! : budget.tokens!;
    return {
      keyId,
      message: `customer key ${keyId} has spent ${formatAmount(crossed, spent)} of its ` +
        `${formatAmount(crossed, limit)} budget ${periodWords(budget.period)} ` +
        `(warn_at ${budget.warn_at})`,
    };
  }

  /**
   * Installs the ledger's totals for `period` (per customer key id, since
   * `periodStart(period, now)`): at start, and whenever the usage store changes. Every key whose
   * budget has that period takes its total (0 when absent); this process's own settlements made
   * since `beginRefresh` are added back, as they may not be in what was read.
   * `seenOnly` limits it to keys this process has state for (the periodic refresh).
   */
  loadTotals(
    period: BudgetPeriod,
    totals: ReadonlyMap<string, BudgetAmount>,
    now: number,
    seenOnly = false,
  ): void {
    const start = periodStart(period, now);
    this.#loaded.set(period, start);
    if (!seenOnly) {
      for (const keyId of totals.keys()) {
        const budget = this.#budgetOf(keyId);
        if (budget?.period === period) this.#state(keyId, budget, now);
      }
    }
    for (const [keyId, s] of this.#keys) {
      const budget = this.#budgetOf(keyId);
      if (!budget || budget.period !== period) continue;
      this.#sync(s, budget, now);
      const t = totals.get(keyId);
      s.spentUsd = (t?.usd ?? 0) + s.freshUsd;
      s.spentTokens = (t?.tokens ?? 0) + s.freshTokens;
    }
  }

  /**
   * Marks the start of a refresh: call it after this process's usage events were written to the
   * ledger and before the totals are read, then `loadTotals(period, totals, now, true)` for each
   * period in `periodsInUse`. Settlements after this mark are kept on top of what is read.
   */
  beginRefresh(): void {
    for (const s of this.#keys.values()) {
      s.freshUsd = 0;
      s.freshTokens = 0;
    }
  }

  /** The periods of the keys with state (the periodic refresh reads these). */
  periodsInUse(): BudgetPeriod[] {
    const periods = new Set<BudgetPeriod>();
    for (const keyId of this.#keys.keys()) {
      const p = this.#budgetOf(keyId)?.period;
      if (p) periods.add(p);
    }
    return [...periods];
  }

  /**
   * Periods of `budgets` whose current period's totals were never loaded (a reload introduced
   * the period, or nothing was loaded yet): the caller reads them from the ledger.
   */
  unloadedPeriods(budgets: Iterable<BudgetSettings>, now: number): BudgetPeriod[] {
    const out = new Set<BudgetPeriod>();
    for (const b of budgets) {
      if (this.#loaded.get(b.period) !== periodStart(b.period, now)) out.add(b.period);
    }
    return [...out];
  }

  /** The customer key ids with state. */
  seenKeys(): string[] {
    return [...this.#keys.keys()];
  }

  /** A key's budget now; null when it has none. */
  status(keyId: string, now: number): BudgetStatus | null {
    const budget = this.#budgetOf(keyId);
    if (!budget) return null;
    const s = this.#keys.get(keyId);
    if (s) this.#sync(s, budget, now);
    const spent = { usd: s?.spentUsd ?? 0, tokens: s?.spentTokens ?? 0 };
    const reserved = { usd: s?.reservedUsd ?? 0, tokens: s?.reservedTokens ?? 0 };
    const left = (cap: number | null, used: number) =>
      cap === null ? null : Math.max(0, cap - used);
    return {
      period: budget.period,
      periodStart: periodStart(budget.period, now),
      resetsAt: periodReset(budget.period, now),
      cap: { usd: budget.usd, tokens: budget.tokens },
      spent,
      reserved,
      remaining: {
        usd: left(budget.usd, spent.usd + reserved.usd),
        tokens: left(budget.tokens, spent.tokens + reserved.tokens),
      },
    };
  }

  #state(keyId: string, budget: BudgetSettings, now: number): KeyBudget {
    let s = this.#keys.get(keyId);
    if (!s) {
      s = {
        period: budget.period,
        start: periodStart(budget.period, now),
        end: periodReset(budget.period, now) ?? Infinity,
        spentUsd: 0,
        spentTokens: 0,
        reservedUsd: 0,
        reservedTokens: 0,
        open: 0,
        freshUsd: 0,
        freshTokens: 0,
        warned: false,
      };
      this.#keys.set(keyId, s);
      return s;
    }
    this.#sync(s, budget, now);
    return s;
  }

  /**
   * A new period (or a reload that changed the period) starts from nothing spent; reservations
   * in flight stay, they settle into the period their usage event lands in, as in the ledger.
   */
  #sync(s: KeyBudget, budget: BudgetSettings, now: number): void {
    // The usual case, without computing a calendar date: same period, still inside it.
    if (s.period === budget.period && now >= s.start && now < s.end) return;
    const start = periodStart(budget.period, now);
    if (s.period === budget.period && s.start === start) return;
    s.period = budget.period;
    s.start = start;
    s.end = periodReset(budget.period, now) ?? Infinity;
    s.spentUsd =
      s.spentTokens =
      s.freshUsd =
      s.freshTokens =
        0;
    s.warned = false;
  }
}
