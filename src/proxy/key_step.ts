/**
 * The customer key's rate limits and budget on the request path (ADR 0023), between the policy
 * check (403) and node admission: `admitKey` asks the tenancy core and either refuses the request
 * (429 `key_rate_limited`, 403 `budget_exceeded`) or hands back a `KeyPass` holding the key's
 * place in its windows and its budget reservation.
 *
 * The pass is given back exactly once by construction: `settle` when the usage event is recorded
 * (the real cost and tokens replace the reservation; the inflight place ends with the upstream
 * call, which is when the event is recorded), `finish` at the end of the exchange for a pass
 * never settled (refused before forwarding, client gone while waiting, event lost): everything it
 * held is given back as if the request never came.
 *
 * Where the windows and budgets live is the gateway's `KeyLimiter`, chosen when it is built: this
 * process's `Tenancy` (`LocalKeyLimiter`, synchronous), or with `serve --workers N` (ADR 0025) the
 * supervisor's, asked by message for keys that have limits or a budget (`RemoteKeyGroup`), so
 * `admitKey` answers a promise for those keys only.
 *
 * @module
 */
import type { KeyDecision, KeyHold, KeyRequest, Tenancy } from "../core/tenancy.ts";
import type { RateHeaders } from "../core/rate_window.ts";
import type { PricingRule, Tier } from "../core/types.ts";
import type { KeyPolicy } from "../core/key_policy.ts";
import type { UpstreamRequest } from "../faces/face.ts";
import type { Logger } from "../log.ts";
import type { UsageEvent } from "../usage/types.ts";
import { Refusal } from "./errors.ts";
import { estimateInputTokens, outputAskOf } from "./estimate.ts";

/** What the key step needs of the gateway (a `ProxyContext` satisfies it). */
export interface KeyLimitsContext {
  /** Policies (the key's numbers), pricing (the reservation) and the charge cap. */
  readonly skeid: {
    /** `max_reserve_tokens`: the most output tokens a request is charged. */
    readonly routing: { readonly max_reserve_tokens: number };
    keyPolicy(apiKeyId: string): KeyPolicy;
    pricingForModel(model: string): PricingRule;
  };
  /** Where the customer keys' rate windows and budgets are held (this process or the group). */
  readonly keyLimiter: KeyLimiter;
  /** Counts refusals by limit. */
  readonly metrics: { keyLimited?(limit: string): void };
}

/** The actual cost and tokens of a recorded usage event, as a hold is settled with. */
export interface SettledAmount {
  usd: number;
  inputTokens: number;
  outputTokens: number;
}

/** A request's hold on its key's windows and budget, wherever they are; given back once. */
export interface KeyLimitHold {
  /** The usage event was recorded: its cost and tokens replace the reservation. */
  settle(actual: SettledAmount): void;
  /** Nothing was billed: everything the hold took is given back. */
  cancel(): void;
}

/** A key limiter's answer: a hold, or the refusal `Tenancy.admit` would give. */
export type KeyLimitDecision =
  | { readonly ok: true; readonly hold: KeyLimitHold; readonly headers: RateHeaders }
  | Extract<KeyDecision, { ok: false }>;

/**
 * Where a gateway's customer-key windows and budgets are held: `LocalKeyLimiter` in one process,
 * the supervisor's for a worker of a group (`src/workers/key_group.ts`). Chosen when the gateway
 * is built.
 */
export interface KeyLimiter {
  /** Rate limits, then budget, for a request of a key that has limits or a budget. */
  admit(
    keyId: string,
    policy: KeyPolicy,
    request: KeyRequest,
  ): KeyLimitDecision | Promise<KeyLimitDecision>;
}

/** This process's windows and budgets (`Tenancy`): decided synchronously. */
export class LocalKeyLimiter implements KeyLimiter {
  readonly #tenancy: Tenancy;
  readonly #now: () => number;
  readonly #logger: Logger;

  /** Over the gateway's tenancy and clock; budget warnings (`warn_at`) go to `logger`. */
  constructor(tenancy: Tenancy, now: () => number, logger: Logger) {
    this.#tenancy = tenancy;
    this.#now = now;
    this.#logger = logger;
  }

  admit(keyId: string, _policy: KeyPolicy, request: KeyRequest): KeyLimitDecision {
    const d = this.#tenancy.admit(keyId, this.#now(), request);
    if (!d.ok) return d;
    const hold = new LocalHold(this.#tenancy, this.#now, this.#logger, d.hold);
    return { ok: true, hold, headers: d.headers };
  }
}

/** A `Tenancy` hold of this process, settled or cancelled against it. */
class LocalHold implements KeyLimitHold {
  constructor(
    readonly tenancy: Tenancy,
    readonly now: () => number,
    readonly logger: Logger,
    readonly hold: KeyHold,
  ) {}

  settle(actual: SettledAmount): void {
    const warning = this.tenancy.settle(this.hold, actual, this.now());
    if (warning) {
      this.logger.warn("budget_warning", { api_key_id: warning.keyId, message: warning.message });
    }
  }

  cancel(): void {
    this.tenancy.cancel(this.hold, this.now());
  }
}

/**
 * Rate limits, then budget, for a request of `keyId` whose route plan has `tiers`: undefined
 * for a key without limits or budget (nothing held, nothing allocated), a pass to give back, or
 * a thrown `Refusal` (429 with `Retry-After` and `x-ratelimit-*`, or 403 `budget_exceeded`).
 * In a worker of a group, a promise of the same for a key with limits or a budget.
 */
export function admitKey(
  ctx: KeyLimitsContext,
  keyId: string,
  upstream: UpstreamRequest,
  tiers: readonly Tier[],
): KeyPass | undefined | Promise<KeyPass | undefined> {
  const skeid = ctx.skeid;
  const policy = skeid.keyPolicy(keyId);
  if (policy.limits === null && policy.budget === null) return undefined;
  const rules: PricingRule[] = [];
  for (const tier of tiers) {
    rules.push(skeid.pricingForModel(tier.model || upstream.requestedModel));
  }
  const ask = outputAskOf(upstream, skeid.routing.max_reserve_tokens);
  const request: KeyRequest = {
    inputTokens: estimateInputTokens(upstream.body),
    outputLimit: ask.outputLimit,
    choices: ask.choices,
    maxOutput: ask.maxOutput,
    rules,
  };
  const d = ctx.keyLimiter.admit(keyId, policy, request);
  if (d instanceof Promise) return d.then((answer) => passOrRefuse(ctx, answer));
  return passOrRefuse(ctx, d);
}

/** The pass of an admitted decision, or its refusal thrown. */
function passOrRefuse(ctx: KeyLimitsContext, d: KeyLimitDecision): KeyPass {
  if (d.ok) return new KeyPass(d.hold, d.headers);
  return refuse(ctx, d);
}

/** Throws the refusal of a key decision, counted by the limit that refused it. */
function refuse(ctx: KeyLimitsContext, d: Extract<KeyDecision, { ok: false }>): never {
  if (d.status === 429) {
    ctx.metrics.keyLimited?.(d.limit);
    // No Retry-After for a request too large for the window: waiting would not help.
    const headers = d.retryAfterS === null
      ? d.headers
      : { "retry-after": String(d.retryAfterS), ...d.headers };
    throw new Refusal(429, "rate_limit_error", d.message, d.code, d.code, headers);
  }
  ctx.metrics.keyLimited?.("budget");
  throw new Refusal(403, d.code, d.message, d.code, d.code);
}

/** A request's hold on its customer key's windows and budget; see the module comment. */
export class KeyPass {
  #hold: KeyLimitHold | undefined;
  /** `x-ratelimit-*` as of admission, this request counted (empty without rpm and tpm). */
  readonly #headers: RateHeaders;

  /** A pass over an admitted hold (this gateway's or the group's) and its rate headers. */
  constructor(hold: KeyLimitHold, headers: RateHeaders) {
    this.#hold = hold;
    this.#headers = headers;
  }

  /**
   * Puts the key's `x-ratelimit-*` headers on a successful answer: the windows as the admission
   * left them (computed once; the answer follows within the same call).
   */
  stamp(res: Response): void {
    const headers = this.#headers;
    for (const name in headers) res.headers.set(name, headers[name]);
  }

  /**
   * The usage event was recorded (an estimated one included): its cost and tokens replace the
   * reservation and the estimate, and the inflight place is given back. Once; later calls and a
   * missing event change nothing.
   */
  settle(event: UsageEvent | undefined): void {
    const hold = this.#hold;
    if (hold === undefined || event === undefined) return;
    this.#hold = undefined;
    hold.settle({
      usd: event.cost_total_usd,
      inputTokens: event.input_tokens,
      outputTokens: event.output_tokens,
    });
  }

  /** The exchange ended: a hold never settled is given back whole (nothing was billed). */
  finish(): void {
    const hold = this.#hold;
    if (hold === undefined) return;
    this.#hold = undefined;
    hold.cancel();
  }
}
