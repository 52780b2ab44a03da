/**
 * A customer key's limits and budget as operators see them (ADR 0023): `GET /skeid/keys/{key id
 * or name}` and the budget gauges of `/skeid/metrics` (keys listed in the config only, so the
 * number of series stays bounded by the config).
 *
 * @module
 */
import type { BudgetStatus } from "../core/budget.ts";
import type { RoutingCore } from "../core/routing_core.ts";
import type { Tenancy } from "../core/tenancy.ts";
import { isFullKeyId } from "../core/policies.ts";
import { formatCreatedAt } from "../usage/event.ts";

/** A budget as JSON: amounts, and the period's start and reset as UTC times. */
export function budgetToWire(b: BudgetStatus, warnAt: number | null): Record<string, unknown> {
  return {
    period: b.period,
    period_start: formatCreatedAt(b.periodStart),
    resets_at: b.resetsAt === null ? null : formatCreatedAt(b.resetsAt),
    cap: b.cap,
    spent: amounts(b.spent),
    reserved: amounts(b.reserved),
    remaining: amounts(b.remaining),
    warn_at: warnAt,
  };
}

/**
 * USD sums of many prices carry binary float noise (0.07800000000000001): shown to 1e-9 USD, far
 * below any price's precision. Tokens are whole.
 */
function amounts<T extends number | null>(a: { usd: T; tokens: T }): { usd: T; tokens: T } {
  const usd = a.usd === null ? a.usd : Math.round(a.usd * 1e9) / 1e9 as T;
  return { usd, tokens: a.tokens };
}

/** The readable name of a key id (`names:`), if it has one. */
function nameOf(skeid: RoutingCore, id: string): string | null {
  for (const [name, keyId] of skeid.policySet.keyNames) if (keyId === id) return name;
  return null;
}

/**
 * The key's view: policy, limits, current windows, budget (cap, spent, reserved, remaining,
 * period start and reset). `ref` is a `names:` name, a key id listed under `keys:`, or any full
 * customer key id (an unlisted one is under the default policy); undefined for anything else.
 */
export function keyStatus(
  skeid: RoutingCore,
  tenancy: Tenancy,
  ref: string,
): Record<string, unknown> | undefined {
  const set = skeid.policySet;
  const id = skeid.keyIdForName(ref) ?? ref;
  if (
    !set.knownKeyIds.has(id) && !isFullKeyId(id) && id !== "anonymous" &&
    !skeid.isJudgedIdentity(id)
  ) return undefined;
  return keyStatusOf(skeid, tenancy, id);
}

/** The view of `keyStatus` for a customer key id (an issued key's public id too, ADR 0029). */
export function keyStatusOf(
  skeid: RoutingCore,
  tenancy: Tenancy,
  id: string,
): Record<string, unknown> {
  const set = skeid.policySet;
  const now = skeid.now();
  const policy = skeid.policyForKey(id);
  let policyName: string | null = null;
  for (const [name, p] of set.policies) if (p === policy) policyName = name;
  const kp = skeid.keyPolicy(id);
  const budget = tenancy.budgets.status(id, now);
  return {
    api_key_id: id,
    name: nameOf(skeid, id),
    listed: set.knownKeyIds.has(id),
    // null: the key has its own overrides (or no policy applies).
    policy: policyName,
    limits: kp.limits,
    windows: tenancy.rates.state(id, now),
    budget: budget === null ? null : budgetToWire(budget, kp.budget?.warn_at ?? null),
  };
}

/** Budgets of the keys listed under `keys:` (by name where one is given), for the gauges. */
export function listedKeyBudgets(
  skeid: RoutingCore,
  tenancy: Tenancy,
): { key: string; status: BudgetStatus }[] {
  const now = skeid.now();
  const out: { key: string; status: BudgetStatus }[] = [];
  for (const id of skeid.policySet.knownKeyIds) {
    const status = tenancy.budgets.status(id, now);
    if (status !== null) out.push({ key: nameOf(skeid, id) ?? id, status });
  }
  return out;
}
