/**
 * Pricing rules and cost arithmetic. SKELETON — owner: core-capacity.
 * @module
 */
import type { Cost, PricingRule, Usage } from "./types.ts";

/** Validates a raw rule; throws `pricing for '<model>': <key> must be a number >= 0`. */
export function validatePricingRule(_model: string, _raw: unknown): PricingRule {
  throw new Error("TODO");
}

/** Prices a usage with a rule (no rounding; see reference usage-and-cost §3). */
export function costFor(_usage: Usage, _rule: PricingRule): Cost {
  throw new Error("TODO");
}

/** Served model → rule, '*' as fallback. */
export class PricingTable {
  set(_model: string, _raw: unknown): PricingRule {
    throw new Error("TODO");
  }
  replace(_rules: Map<string, PricingRule>): void {
    throw new Error("TODO");
  }
  /** The rule for a model, else '*', else all zero. */
  get(_model: string): PricingRule {
    throw new Error("TODO");
  }
  /** Every rule, for reports and the admin API. */
  entries(): [string, PricingRule][] {
    throw new Error("TODO");
  }
}
