/**
 * `skeid usage --api-key-id ID`: the key's budget lines as `GET /skeid/keys/{id}` shows them,
 * read from the config (the key's budget) and the usage store (what was spent this period). No
 * gateway is asked: the reservations of requests in flight are not included.
 *
 * @module
 */
import { Budgets, type BudgetStatus, periodStart } from "../core/budget.ts";
import { keyPolicyOf } from "../core/key_policy.ts";
import { buildPolicySet, type PolicySections } from "../core/policies.ts";
import { formatCreatedAt } from "../usage/event.ts";
import type { UsageStore } from "../usage/types.ts";

/** The budget of a customer key (id or `names:` name) under the config `top`, now. */
export async function keyBudget(
  top: Record<string, unknown>,
  ref: string,
  store: UsageStore,
  now = Date.now(),
): Promise<{ apiKeyId: string; status: BudgetStatus } | undefined> {
  const set = buildPolicySet(top as PolicySections);
  const id = set.keyNames.get(ref) ?? ref;
  const policy = set.keyPolicies.get(id) ?? set.shortKeyPolicies.get(id) ?? set.defaultPolicy;
  const budget = keyPolicyOf(policy).budget;
  if (!budget || !store.periodTotals) return undefined;
  const budgets = new Budgets(() => budget);
  const totals = await store.periodTotals(formatCreatedAt(periodStart(budget.period, now)));
  budgets.loadTotals(budget.period, totals, now);
  const status = budgets.status(id, now);
  return status ? { apiKeyId: id, status } : undefined;
}

/** The budget as text lines, under a `budget` heading. */
export function formatBudget(apiKeyId: string, s: BudgetStatus): string {
  const resets = s.resetsAt === null ? "never (period: total)" : formatCreatedAt(s.resetsAt);
  const rows: [string, string][] = [
    ["customer key id", apiKeyId],
    ["period", `${s.period} from ${formatCreatedAt(s.periodStart)}, resets ${resets}`],
  ];
  for (const cap of ["usd", "tokens"] as const) {
    const limit = s.cap[cap];
    if (limit === null) continue;
    const unit = cap === "usd" ? "USD" : "tokens";
    rows.push([`cap ${unit}`, String(limit)]);
    rows.push([`spent ${unit}`, String(Number(s.spent[cap].toFixed(6)))]);
    rows.push([`remaining ${unit}`, String(Number((s.remaining[cap] ?? 0).toFixed(6)))]);
  }
  const width = Math.max(...rows.map(([k]) => k.length));
  return ["budget", ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)].join("\n");
}
