/**
 * Reading token usage off upstream answers and turning it into priced metrics.
 * SKELETON — owner: core-capacity.
 * @module
 */
import type { NormalizedMetrics, PricingRule, Usage } from "./types.ts";

/** Token counts of a whole body or a usage hash (precedence: reference usage-and-cost §1). */
export function readUsage(_bodyOrUsage: unknown): Usage {
  throw new Error("TODO");
}

/** Counts tool calls by name (`{function:{name}}`, `{name}` or a string). */
export function countToolCalls(_calls: unknown[] | undefined): { count: number; names: string[] } {
  throw new Error("TODO");
}

/** What a usage event is built from: usage read, priced with `rule`, tool calls counted. */
export function normalizeMetrics(_args: {
  model: string;
  usage: Usage;
  rule: PricingRule;
  tool_calls?: unknown[];
  duration_ms?: number;
  engine?: string;
  route?: string;
  provider?: string;
}): NormalizedMetrics {
  throw new Error("TODO");
}
