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

/** A bad tenancy field (see `checkTenancy`); `path` is relative to the policy (`budget.period`). */
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

/**
 * Where the resolvers below put every bad field they find: each field is checked on its own, so
 * one config load lists them all rather than the first.
 */
type Problems = KeyLimitsError[];

/**
 * A field's value checked against its rule; null stays null (explicitly unlimited). A bad value
 * is a problem and answers undefined.
 */
function checkNumber(
  block: string,
  field: string,
  v: unknown,
  rule: NumberRule,
  problems: Problems,
): number | null | undefined {
  if (v === null) return null;
  const n = numeric(v);
  const ok = n !== undefined && (!rule.int || Number.isInteger(n)) &&
    (rule.exclusive ? n > rule.min : n >= rule.min) && (rule.max === undefined || n <= rule.max);
  if (!ok) {
    const got = typeof v === "number" || typeof v === "boolean" ? ` (got ${v})` : "";
    problems.push(new KeyLimitsError(`must be ${describe(rule)}${got}`, `${block}.${field}`));
    return undefined;
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
 * typo that would silently leave a key unlimited). Undefined when the block is not a map.
 */
function readBlock(
  block: string,
  raw: unknown,
  known: readonly string[],
  problems: Problems,
): Record<string, unknown> | undefined {
  if (!isJsonObject(raw)) {
    problems.push(new KeyLimitsError("must be a map", block));
    return undefined;
  }
  for (const field of Object.keys(raw)) {
    if (!known.includes(field)) {
      problems.push(
        new KeyLimitsError(`unknown field (known: ${known.join(", ")})`, `${block}.${field}`),
      );
    }
  }
  return raw;
}

/** The block's numbers over `base`; a bad field keeps the base's value (the load fails anyway). */
function numbers<K extends string>(
  block: string,
  raw: Record<string, unknown>,
  rules: Record<K, NumberRule>,
  base: Partial<Record<K, number | null>>,
  problems: Problems,
): Record<K, number | null> {
  const out = {} as Record<K, number | null>;
  for (const field of Object.keys(rules) as K[]) {
    const checked = field in raw
      ? checkNumber(block, field, raw[field], rules[field], problems)
      : undefined;
    out[field] = checked === undefined ? base[field] ?? null : checked;
  }
  return out;
}

/** `limits:` over `base` (sparse: absent fields keep the base's value; null lifts a limit). */
function limitsOf(raw: unknown, base: KeyLimits | undefined, problems: Problems): KeyLimits {
  const block = readBlock("limits", raw, Object.keys(LIMIT_RULES), problems) ?? {};
  return Object.freeze(numbers("limits", block, LIMIT_RULES, base ?? {}, problems));
}

/** `budget:` over `base` (sparse). Period defaults to `month`, reserve to 4096 tokens. */
function budgetOf(
  raw: unknown,
  base: BudgetSettings | undefined,
  problems: Problems,
): BudgetSettings {
  const known = [...Object.keys(BUDGET_RULES), "period"];
  const block = readBlock("budget", raw, known, problems) ?? {};
  const n = numbers("budget", block, BUDGET_RULES, base ?? {}, problems);
  let period: BudgetPeriod = base?.period ?? "month";
  if ("period" in block) {
    const p = block.period;
    if (typeof p === "string" && (BUDGET_PERIODS as readonly string[]).includes(p)) {
      period = p as BudgetPeriod;
    } else {
      problems.push(
        new KeyLimitsError(`must be one of: ${BUDGET_PERIODS.join(", ")}`, "budget.period"),
      );
    }
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
function shareOf(raw: unknown, base: ShareSettings | undefined, problems: Problems): ShareSettings {
  const block = readBlock("share", raw, Object.keys(SHARE_RULES), problems) ?? {};
  const n = numbers("share", block, SHARE_RULES, base ?? DEFAULT_SHARE, problems);
  return Object.freeze({
    weight: n.weight ?? DEFAULT_SHARE.weight,
    priority: n.priority ?? DEFAULT_SHARE.priority,
    max_queued: n.max_queued,
  });
}

/**
 * The tenancy fields of a policy spec or a key entry's overrides, over `base` (the policy the
 * entry names; absent for a policy itself), with every bad field as a problem (`fields` is then
 * only good for checking the rest). A block that is absent keeps the base's block; a block
 * written `null` removes it (`budget: null`: this key has no budget).
 */
export function checkTenancy(
  spec: Record<string, unknown>,
  base?: TenancyFields,
): { fields: TenancyFields; problems: KeyLimitsError[] } {
  const problems: Problems = [];
  const out: { limits?: KeyLimits; budget?: BudgetSettings; share?: ShareSettings } = {};
  const limits = "limits" in spec
    ? spec.limits === null ? undefined : limitsOf(spec.limits, base?.limits, problems)
    : base?.limits;
  const budget = "budget" in spec
    ? spec.budget === null ? undefined : budgetOf(spec.budget, base?.budget, problems)
    : base?.budget;
  const share = "share" in spec
    ? spec.share === null ? undefined : shareOf(spec.share, base?.share, problems)
    : base?.share;
  if (limits) out.limits = limits;
  if (budget) out.budget = budget;
  if (share) out.share = share;
  return { fields: out, problems };
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
