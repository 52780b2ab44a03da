/**
 * Pricing rules and cost arithmetic (reference usage-and-cost §3). Rates are USD per million
 * tokens; a usage is priced with the **served** model's rule. No rounding anywhere: IEEE double
 * arithmetic, emitted as plain JSON numbers, so a ledger sums to what each event says.
 *
 * @module
 */
import type { Cost, PricingRule, Usage } from "./types.ts";
import { ConfigPathError, type PathSegment } from "./config_path.ts";

/** A pricing rule that cannot be used; `segments` name the rate key (relative to the rule). */
export class PricingError extends ConfigPathError {
  /** See ConfigPathError. */
  constructor(message: string, segments: readonly PathSegment[], detail?: string) {
    super(message, segments, detail);
    this.name = "PricingError";
  }
}

/** The rate keys of a rule, in the order they are checked. */
const RATE_KEYS = [
  "input_per_million",
  "output_per_million",
  "cached_input_per_million",
  "cache_write_per_million",
] as const;

/** A rule that prices everything at 0 (a model without any rule). */
const ZERO_RULE: PricingRule = Object.freeze({ input_per_million: 0, output_per_million: 0 });

/** A rate as a number: a finite number, or a string that is one (configs quote numbers). */
function rate(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  if (typeof value === "string" && /^\s*\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\s*$/.test(value)) {
    // "1e400" matches the pattern but is Infinity: a cost of Infinity is stored as 0.
    const n = Number(value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

/**
 * Validates a raw rule. Input and output rates default to 0; a cache rate is kept only when
 * given. Throws `pricing for '<model>': <key> must be a number >= 0` on a bad rate.
 */
export function validatePricingRule(model: string, raw: unknown): PricingRule {
  if (typeof model !== "string" || model === "") {
    throw new PricingError("pricing: a model name is required", [], "a model name is required");
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new PricingError(
      `pricing for '${model}': must be a map of rates`,
      [],
      "must be a map of rates",
    );
  }
  const spec = raw as Record<string, unknown>;
  const rule: PricingRule = { input_per_million: 0, output_per_million: 0 };
  for (const key of RATE_KEYS) {
    const value = spec[key];
    if (value === undefined || value === null) continue;
    const n = rate(value);
    if (n === undefined || n < 0) {
      const detail = `${key} must be a number >= 0`;
      throw new PricingError(`pricing for '${model}': ${detail}`, [key], detail);
    }
    rule[key] = n;
  }
  return rule;
}

/** `tokens / 1e6 × rate`, the one formula every amount uses. */
function price(tokens: number, perMillion: number): number {
  return tokens / 1e6 * perMillion;
}

/**
 * Prices a usage with a rule. Without cache rates, input is billed as reported (OpenAI cache
 * tokens sit inside it, Anthropic's beside it go unbilled). With a cache rate, only the
 * uncached input bills at the input rate, cache reads and writes at their own rate (or the
 * input rate where only the other cache rate is set).
 */
export function costFor(usage: Usage, rule: PricingRule): Cost {
  const input = usage.input_tokens ?? 0;
  const output = usage.output_tokens ?? 0;
  const cacheRead = usage.cached_tokens ?? 0;
  const cacheWrite = usage.cache_write_tokens ?? 0;
  const hasCacheRate = rule.cached_input_per_million !== undefined ||
    rule.cache_write_per_million !== undefined;

  let inputUsd: number;
  let cacheReadUsd = 0;
  let cacheWriteUsd = 0;
  if (!hasCacheRate) {
    inputUsd = price(input, rule.input_per_million);
  } else {
    inputUsd = price(uncachedInputTokens(usage), rule.input_per_million);
    cacheReadUsd = price(cacheRead, rule.cached_input_per_million ?? rule.input_per_million);
    cacheWriteUsd = price(cacheWrite, rule.cache_write_per_million ?? rule.input_per_million);
  }
  const outputUsd = price(output, rule.output_per_million);
  return {
    input_cost_usd: inputUsd,
    output_cost_usd: outputUsd,
    cache_read_cost_usd: cacheReadUsd,
    cache_write_cost_usd: cacheWriteUsd,
    total_cost_usd: inputUsd + outputUsd + cacheReadUsd + cacheWriteUsd,
    currency: "USD",
  };
}

/**
 * Input tokens not served from or written to a cache: the input itself when it excludes the
 * cache (Anthropic), else input minus both cache counts, never below 0.
 */
export function uncachedInputTokens(usage: Usage): number {
  const input = usage.input_tokens ?? 0;
  if (!usage.input_includes_cache) return input;
  return Math.max(0, input - (usage.cached_tokens ?? 0) - (usage.cache_write_tokens ?? 0));
}

/** Served model → rule, '*' as fallback. */
export class PricingTable {
  readonly #rules = new Map<string, PricingRule>();

  /** Validates and stores one model's rule; returns it as stored. Throws on bad rates. */
  set(model: string, raw: unknown): PricingRule {
    const rule = validatePricingRule(model, raw);
    this.#rules.set(model, rule);
    return { ...rule };
  }

  /** Replaces the whole table (a config `pricing` section replaces it on reload). */
  replace(rules: Map<string, PricingRule>): void {
    this.#rules.clear();
    for (const [model, rule] of rules) this.#rules.set(model, { ...rule });
  }

  /** The rule for a model, else '*', else all zero. */
  get(model: string): PricingRule {
    const rule = this.#rules.get(model) ?? this.#rules.get("*") ?? ZERO_RULE;
    return { ...rule };
  }

  /** Every rule, for reports and the admin API. */
  entries(): [string, PricingRule][] {
    return [...this.#rules].map(([model, rule]) => [model, { ...rule }]);
  }
}
