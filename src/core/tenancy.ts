/**
 * The two per-key steps of the request path between the policy check and node admission (ADR
 * 0023): rate limits, then budget, as one call that either holds both or neither. The request
 * path then gives the hold back at three moments: `release` at the end of the upstream call,
 * `settle` when the usage event is recorded, `cancel` when the request is refused before
 * anything was forwarded.
 *
 * @module
 */
import {
  type BudgetAmount,
  type BudgetReservation,
  Budgets,
  type BudgetWarning,
  type OutputAsk,
  outputCharge,
  reservationAmount,
} from "./budget.ts";
import {
  type BudgetPeriod,
  DEFAULT_RESERVE_TOKENS,
  type KeyLimits,
  type KeyPolicy,
} from "./key_policy.ts";
import { type RateHeaders, type RateRefusal, type RateTicket, RateWindows } from "./rate_window.ts";
import type { PricingRule } from "./types.ts";

/** What the per-key steps need to know about a request. */
export interface KeyRequest extends OutputAsk {
  /** Input tokens estimated from the body (the `count_tokens` estimator). */
  inputTokens: number;
  /**
   * The pricing rule(s) of the served model(s) the route plan may reach; the reservation is priced
   * at the most expensive, so falling through to a paid tier never spends unreserved money.
   */
  rules: readonly PricingRule[];
}

/** What a request admitted by its key's limits and budget holds. */
export interface KeyHold {
  /** The customer key id. */
  readonly keyId: string;
  /** Tokens counted in the tpm window and charged to fair share at dispatch. */
  readonly estimateTokens: number;
  /** The place in the rate windows (null: the key has no limits). */
  readonly ticket: RateTicket | null;
  /** The budget reservation (null: the key has no budget). */
  readonly reservation: BudgetReservation | null;
}

/** The answer of `admit`. */
export type KeyDecision =
  | {
    /** Admitted by limits and budget; node admission comes next. */
    readonly ok: true;
    /** Give it back with `release`, `settle`, `cancel`. */
    readonly hold: KeyHold;
    /** `x-ratelimit-*` headers for the answer (empty for a key without rpm/tpm). */
    readonly headers: RateHeaders;
  }
  | {
    /** 429 `rate_limit_error` / `key_rate_limited`, with `Retry-After` and the headers. */
    readonly ok: false;
    /** HTTP status. */
    readonly status: 429;
    /** Error code. */
    readonly code: "key_rate_limited";
    /** Which limit refused it. */
    readonly limit: RateRefusal;
    /** The `Retry-After` value, seconds; null when no wait lets this request through. */
    readonly retryAfterS: number | null;
    /** `x-ratelimit-*` headers. */
    readonly headers: RateHeaders;
    /** Message for the error body. */
    readonly message: string;
  }
  | {
    /** 403 `budget_exceeded` (Anthropic face: `permission_error`, same message). */
    readonly ok: false;
    /** HTTP status. */
    readonly status: 403;
    /** Error type. */
    readonly code: "budget_exceeded";
    /** The budget's period. */
    readonly period: BudgetPeriod;
    /** When it resets, epoch ms; null for `total`. */
    readonly resetsAt: number | null;
    /** Message naming the period and its reset. */
    readonly message: string;
  };

const LIMIT_WORDS: Record<RateRefusal, string> = {
  rpm: "requests per minute",
  tpm: "tokens per minute",
  max_inflight: "concurrent requests",
};

/**
 * The refusal of a request whose key has `max_inflight` requests in flight (a group of workers
 * checks that in a shared table, ADR 0025); `headers` are the key's windows as they stand.
 */
export function inflightRefusal(headers: RateHeaders): Extract<KeyDecision, { ok: false }> {
  return {
    ok: false,
    status: 429,
    code: "key_rate_limited",
    limit: "max_inflight",
    // A place frees when a request ends: unknowable, as `RateWindows.check` says.
    retryAfterS: 1,
    headers,
    message: `rate limit of ${LIMIT_WORDS.max_inflight} reached for this key; retry after 1 s`,
  };
}

/** Rate windows and budgets of every customer key, read against each key's current policy. */
export class Tenancy {
  /** Rate windows (admin view: `rates.state(id, now)`). */
  readonly rates: RateWindows;
  /** Budgets (admin view: `budgets.status(id, now)`; ledger loads and refreshes). */
  readonly budgets: Budgets;
  readonly #keyPolicy: (keyId: string) => KeyPolicy;
  /** Set while `admitGroup` runs: `max_inflight` is held elsewhere (a shared table). */
  #inflightElsewhere = false;

  /** `keyPolicy` gives a key's current numbers, e.g. `(id) => skeid.keyPolicy(id)`. */
  constructor(keyPolicy: (keyId: string) => KeyPolicy) {
    this.rates = new RateWindows((id) => {
      const limits = keyPolicy(id).limits;
      return this.#inflightElsewhere && limits !== null ? withoutInflight(limits) : limits;
    });
    this.budgets = new Budgets((id) => keyPolicy(id).budget);
    this.#keyPolicy = keyPolicy;
  }

  /** Rate limits, then budget, for a request of `keyId` at `now`. Holds both or neither. */
  admit(keyId: string, now: number, req: KeyRequest): KeyDecision {
    const defaults = this.#keyPolicy(keyId).budget ?? NO_BUDGET;
    const rules = req.rules;
    const output = outputCharge(req, defaults.default_reserve_tokens);
    // The first rule's amount, then any dearer one (no array or amount object per request).
    let amount: BudgetAmount = reservationAmount(
      req.inputTokens,
      output,
      defaults,
      rules.length > 0 ? rules[0] : ZERO_RULE,
    );
    for (let i = 1; i < rules.length; i++) {
      const a = reservationAmount(req.inputTokens, output, defaults, rules[i]);
      if (a.usd >= amount.usd) amount = a;
    }
    const rate = this.rates.check(keyId, now, amount.tokens);
    if (!rate.allowed) {
      return {
        ok: false,
        status: 429,
        code: "key_rate_limited",
        limit: rate.reason,
        retryAfterS: rate.canFit ? rate.retryAfterS : null,
        headers: rate.headers,
        message: rate.canFit
          ? `rate limit of ${LIMIT_WORDS[rate.reason]} reached for this key; retry after ` +
            `${rate.retryAfterS} s`
          : `this request alone (${amount.tokens} tokens: its input and its whole output limit) ` +
            "exceeds the key's tokens per minute, so no wait lets it through; lower max_tokens",
      };
    }
    const b = this.budgets.reserve(keyId, now, amount);
    if (!b.allowed) {
      this.rates.cancel(rate.ticket, now);
      return {
        ok: false,
        status: 403,
        code: "budget_exceeded",
        period: b.period,
        resetsAt: b.resetsAt,
        message: b.message,
      };
    }
    return {
      ok: true,
      hold: {
        keyId,
        estimateTokens: amount.tokens,
        ticket: rate.ticket,
        reservation: b.reservation,
      },
      headers: rate.headers,
    };
  }

  /**
   * `admit` for a group of workers (ADR 0025): the same rate windows and budget, but the key's
   * `max_inflight` is not checked here, the workers hold it in a shared table. The windows still
   * count the group's requests in flight (admin view).
   */
  admitGroup(keyId: string, now: number, req: KeyRequest): KeyDecision {
    this.#inflightElsewhere = true;
    try {
      return this.admit(keyId, now, req);
    } finally {
      this.#inflightElsewhere = false;
    }
  }

  /** The end of the upstream call: the key's inflight place is given back. */
  release(hold: KeyHold | null | undefined): void {
    if (hold) this.rates.release(hold.ticket);
  }

  /**
   * The usage event was recorded: tokens and cost replace the estimate and the reservation.
   * Returns the budget's warn_at warning when this crossed it (log it and count it).
   */
  settle(
    hold: KeyHold | null | undefined,
    actual: { usd: number; inputTokens: number; outputTokens: number },
    now: number,
  ): BudgetWarning | undefined {
    if (!hold) return undefined;
    const tokens = actual.inputTokens + actual.outputTokens;
    this.rates.release(hold.ticket);
    this.rates.settle(hold.ticket, tokens, now);
    return this.budgets.settle(hold.reservation, { usd: actual.usd, tokens }, now);
  }

  /** Refused before anything was forwarded (node 429/503, 413 ...): nothing counts. */
  cancel(hold: KeyHold | null | undefined, now: number): void {
    if (!hold) return;
    this.rates.cancel(hold.ticket, now);
    this.budgets.release(hold.reservation);
  }

  /** The `x-ratelimit-*` headers of a successful answer of `keyId`. */
  headers(keyId: string, now: number): RateHeaders {
    return this.rates.headers(keyId, now);
  }
}

/** Limits whose `max_inflight` never refuses, one object per (interned) limits object. */
const NO_INFLIGHT = new WeakMap<KeyLimits, KeyLimits>();

function withoutInflight(limits: KeyLimits): KeyLimits {
  if (limits.max_inflight === null) return limits;
  let out = NO_INFLIGHT.get(limits);
  // Infinity, not null: the windows still count the key's requests and its inflight.
  if (out === undefined) NO_INFLIGHT.set(limits, out = { ...limits, max_inflight: Infinity });
  return out;
}

const ZERO_RULE: PricingRule = Object.freeze({ input_per_million: 0, output_per_million: 0 });

/** What a key without a budget reserves for a request that states no output limit. */
const NO_BUDGET = Object.freeze({ default_reserve_tokens: DEFAULT_RESERVE_TOKENS });
