/**
 * The tenancy fields of a policy: `limits` (rate limits), `budget` and `share` (fair share),
 * validated and resolved once at config load like `models` and `deny_tags`. A customer key entry
 * overrides them sparsely, field by field (`budget: { usd: 200 }` keeps the policy's period).
 * The numbers live here; the counters live in `rate_window.ts`, `budget.ts` and `fair_share.ts`,
 * keyed by customer key id, so a reload changes the numbers and keeps the counters.
 *
 * @module
 */
import { isJsonObject } from "./json.ts";

/** A budget's period: calendar UTC day, week (from Monday), month, or the whole ledger. */
export type BudgetPeriod = "day" | "week" | "month" | "total";

/** The budget periods, in the order messages list them. */
export const BUDGET_PERIODS: readonly BudgetPeriod[] = ["day", "week", "month", "total"];

/** `limits:` resolved; null = no limit. */
export interface KeyLimits {
  /** Requests per rolling minute. */
  readonly rpm: number | null;
  /** Input + output tokens per rolling minute. */
  readonly tpm: number | null;
  /** Concurrent requests of the customer key, from admission to the end of the upstream call. */
  readonly max_inflight: number | null;
}

/** `budget:` resolved; a null cap does not limit. */
export interface BudgetSettings {
  /** Spend cap in USD at the ledger's prices. */
  readonly usd: number | null;
  /** Token cap (input + output). */
  readonly tokens: number | null;
  /** The period the caps apply to. Default `month`. */
  readonly period: BudgetPeriod;
  /** Fraction of a cap at which one warning per period is given; null = none. */
  readonly warn_at: number | null;
  /** Output tokens reserved for a request that states no limit of its own. Default 4096. */
  readonly default_reserve_tokens: number;
}

/** `share:` resolved (fair share between backlogged customer keys of one tier). */
export interface ShareSettings {
  /** The customer key's share relative to other backlogged keys (> 0). Default 1. */
  readonly weight: number;
  /** Priority band: a higher band is always dispatched first. Default 0. */
  readonly priority: number;
  /** Most waiting requests of the key; more get 429 at once. null = unlimited. */
  readonly max_queued: number | null;
}

/** The tenancy fields of one policy, as held on a Policy (absent when not configured). */
export interface TenancyFields {
  /** Rate limits; absent = none. */
  readonly limits?: KeyLimits;
  /** Budget; absent = none. */
  readonly budget?: BudgetSettings;
  /** Fair share settings; absent = the defaults. */
  readonly share?: ShareSettings;
}

/** What one customer key is held to (see `keyPolicyOf`). */
export interface KeyPolicy {
  /** Rate limits, or null when the key has none. */
  readonly limits: KeyLimits | null;
  /** Budget, or null when the key has none. */
  readonly budget: BudgetSettings | null;
  /** Fair share settings (defaults when not configured). */
  readonly share: ShareSettings;
}

/** Output tokens reserved when neither the request nor the budget says more. */
export const DEFAULT_RESERVE_TOKENS = 4096;

/** Weight 1, priority 0, no queue limit. */
export const DEFAULT_SHARE: ShareSettings = Object.freeze({
  weight: 1,
  priority: 0,
  max_queued: null,
});

const UNLIMITED: KeyPolicy = Object.freeze({ limits: null, budget: null, share: DEFAULT_SHARE });

/** Thrown on a bad tenancy field; `path` is relative to the policy (`budget.period`). */
export class KeyLimitsError extends Error {
  /** `path` is the field's path relative to the policy spec. */
  constructor(message: string, readonly path: string) {
    super(message);
    this.name = "KeyLimitsError";
  }
}

/** A number, or a string that is one (configs quote numbers); else undefined. */
function numeric(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (typeof v === "string" && /^\s*-?\d+(?:\.\d+)?\s*$/.test(v)) return Number(v);
  return undefined;
}

interface NumberRule {
  /** Must be an integer. */
  int?: boolean;
  /** Lower bound; `exclusive` makes it strict. */
  min: number;
  exclusive?: boolean;
  /** Upper bound (inclusive). */
  max?: number;
}

function describe(rule: NumberRule): string {
  const kind = rule.int ? "an integer" : "a number";
  const low = `${rule.exclusive ? ">" : ">="} ${rule.min}`;
  return rule.max === undefined ? `${kind} ${low}` : `${kind} ${low} and <= ${rule.max}`;
}

/** A field's value checked against its rule; null stays null (explicitly unlimited). */
function checkNumber(block: string, field: string, v: unknown, rule: NumberRule): number | null {
  if (v === null) return null;
  const n = numeric(v);
  const ok = n !== undefined && (!rule.int || Number.isInteger(n)) &&
    (rule.exclusive ? n > rule.min : n >= rule.min) && (rule.max === undefined || n <= rule.max);
  if (!ok) {
    const got = typeof v === "number" || typeof v === "boolean" ? ` (got ${v})` : "";
    throw new KeyLimitsError(`must be ${describe(rule)}${got}`, `${block}.${field}`);
  }
  return n!;
}

const LIMIT_RULES: Record<keyof KeyLimits, NumberRule> = {
  rpm: { int: true, min: 0, exclusive: true },
  tpm: { int: true, min: 0, exclusive: true },
  max_inflight: { int: true, min: 0, exclusive: true },
};

const BUDGET_RULES: Record<Exclude<keyof BudgetSettings, "period">, NumberRule> = {
  usd: { min: 0 },
  tokens: { int: true, min: 0 },
  warn_at: { min: 0, exclusive: true, max: 1 },
  default_reserve_tokens: { int: true, min: 0 },
};

const SHARE_RULES: Record<keyof ShareSettings, NumberRule> = {
  weight: { min: 0, exclusive: true },
  priority: { int: true, min: -1e9 },
  max_queued: { int: true, min: 0 },
};

/**
 * The fields a block sets, checked: a map of known fields only (an unknown one is most likely a
 * typo that would silently leave a key unlimited).
 */
function readBlock(
  block: string,
  raw: unknown,
  known: readonly string[],
): Record<string, unknown> {
  if (!isJsonObject(raw)) throw new KeyLimitsError("must be a map", block);
  for (const field of Object.keys(raw)) {
    if (!known.includes(field)) {
      throw new KeyLimitsError(`unknown field (known: ${known.join(", ")})`, `${block}.${field}`);
    }
  }
  return raw;
}

function numbers<K extends string>(
  block: string,
  raw: Record<string, unknown>,
  rules: Record<K, NumberRule>,
  base: Partial<Record<K, number | null>>,
): Record<K, number | null> {
  const out = {} as Record<K, number | null>;
  for (const field of Object.keys(rules) as K[]) {
    out[field] = field in raw
      ? checkNumber(block, field, raw[field], rules[field])
      : base[field] ?? null;
  }
  return out;
}

/** `limits:` over `base` (sparse: absent fields keep the base's value; null lifts a limit). */
export function resolveLimits(raw: unknown, base?: KeyLimits): KeyLimits {
  const block = readBlock("limits", raw, Object.keys(LIMIT_RULES));
  return Object.freeze(numbers("limits", block, LIMIT_RULES, base ?? {}));
}

/** `budget:` over `base` (sparse). Period defaults to `month`, reserve to 4096 tokens. */
export function resolveBudget(raw: unknown, base?: BudgetSettings): BudgetSettings {
  const block = readBlock("budget", raw, [...Object.keys(BUDGET_RULES), "period"]);
  const n = numbers("budget", block, BUDGET_RULES, base ?? {});
  let period: BudgetPeriod = base?.period ?? "month";
  if ("period" in block) {
    const p = block.period;
    if (typeof p !== "string" || !(BUDGET_PERIODS as readonly string[]).includes(p)) {
      throw new KeyLimitsError(`must be one of: ${BUDGET_PERIODS.join(", ")}`, "budget.period");
    }
    period = p as BudgetPeriod;
  }
  return Object.freeze({
    usd: n.usd,
    tokens: n.tokens,
    period,
    warn_at: n.warn_at,
    default_reserve_tokens: n.default_reserve_tokens ?? DEFAULT_RESERVE_TOKENS,
  });
}

/** `share:` over `base` (sparse). Weight defaults to 1, priority to 0. */
export function resolveShare(raw: unknown, base?: ShareSettings): ShareSettings {
  const block = readBlock("share", raw, Object.keys(SHARE_RULES));
  const n = numbers("share", block, SHARE_RULES, base ?? DEFAULT_SHARE);
  return Object.freeze({
    weight: n.weight ?? DEFAULT_SHARE.weight,
    priority: n.priority ?? DEFAULT_SHARE.priority,
    max_queued: n.max_queued,
  });
}

/**
 * The tenancy fields of a policy spec or a key entry's overrides, over `base` (the policy the
 * entry names; absent for a policy itself). A block that is absent keeps the base's block; a
 * block written `null` removes it (`budget: null`: this key has no budget).
 */
export function resolveTenancy(
  spec: Record<string, unknown>,
  base?: TenancyFields,
): TenancyFields {
  const out: { limits?: KeyLimits; budget?: BudgetSettings; share?: ShareSettings } = {};
  const limits = "limits" in spec
    ? spec.limits === null ? undefined : resolveLimits(spec.limits, base?.limits)
    : base?.limits;
  const budget = "budget" in spec
    ? spec.budget === null ? undefined : resolveBudget(spec.budget, base?.budget)
    : base?.budget;
  const share = "share" in spec
    ? spec.share === null ? undefined : resolveShare(spec.share, base?.share)
    : base?.share;
  if (limits) out.limits = limits;
  if (budget) out.budget = budget;
  if (share) out.share = share;
  return out;
}

const keyPolicies = new WeakMap<TenancyFields, KeyPolicy>();

/**
 * What a customer key on this policy is held to. Policies are immutable and interned, so the
 * answer is built once per policy and shared: the request path allocates nothing here.
 */
export function keyPolicyOf(policy: TenancyFields | null | undefined): KeyPolicy {
  if (!policy || (!policy.limits && !policy.budget && !policy.share)) return UNLIMITED;
  let kp = keyPolicies.get(policy);
  if (!kp) {
    kp = Object.freeze({
      limits: policy.limits ?? null,
      budget: policy.budget ?? null,
      share: policy.share ?? DEFAULT_SHARE,
    });
    keyPolicies.set(policy, kp);
  }
  return kp;
}

/** The tenancy fields as canonical JSON parts, so equal policies intern to one object. */
export function tenancyCanonical(policy: TenancyFields): unknown[] {
  return [policy.limits ?? null, policy.budget ?? null, policy.share ?? null];
}
