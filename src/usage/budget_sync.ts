/**
 * Budgets read their spent part from the ledger (ADR 0023): this keeps the tenancy core's totals
 * in step with the usage store, off the request path.
 *
 * - `load()`: at start, after a usage store change or a reload — every period of the configured
 *   budgets whose current totals were not read yet (all of them after a store change) is read
 *   for every customer key (`periodTotals(since)`).
 * - The timer, every `routing.budget_refresh_ms`: periods that rolled over are read the same way;
 *   on a store several frontends can share (sqlite, postgresql) the periods of the keys this
 *   process has seen are re-read too, so frontends hold one cap together.
 *
 * Runs never overlap: each waits for the one before it, and the timer is armed again only when
 * its run ended. A failed read keeps the counters and is tried again at the next tick.
 *
 * @module
 */
import type { Tenancy } from "../core/tenancy.ts";
import { periodStart } from "../core/budget.ts";
import type { BudgetPeriod, BudgetSettings } from "../core/key_policy.ts";
import type { PolicySet } from "../core/policies.ts";
import type { Policy } from "../core/types.ts";
import type { Logger } from "../log.ts";
import { errorMessage } from "../error_message.ts";
import { formatCreatedAt } from "./event.ts";
import type { KeyPeriodTotals } from "./types.ts";

/** What the sync needs of the gateway. */
export interface BudgetSyncDeps {
  /** The counters. */
  tenancy: Tenancy;
  /** The policy set in force (its budgets) and the refresh interval. */
  skeid: {
    readonly policySet: Readonly<PolicySet>;
    readonly routing: { readonly budget_refresh_ms: number };
    now(): number;
  };
  /** The ledger: totals per key since a moment (after writing what it holds). */
  ledger: {
    readonly backend: string | undefined;
    readonly config: unknown;
    flush(): Promise<unknown>;
    periodTotals(since: string): Promise<Map<string, KeyPeriodTotals> | undefined>;
  };
  /** Where failed reads are said. */
  logger: Logger;
}

/** Stores several frontends can share: their totals are re-read at every refresh. */
const SHARED_BACKENDS: ReadonlySet<string> = new Set(["sqlite", "postgresql"]);

/** The budgets of every policy in force (named, default, per key). */
export function configuredBudgets(set: Readonly<PolicySet>): BudgetSettings[] {
  const out = new Set<BudgetSettings>();
  const add = (p: Policy | null) => {
    if (p?.budget) out.add(p.budget);
  };
  for (const p of set.policies.values()) add(p);
  add(set.defaultPolicy);
  for (const p of set.keyPolicies.values()) add(p);
  for (const p of set.shortKeyPolicies.values()) add(p);
  return [...out];
}

/** Keeps budget totals in step with the ledger; see the module comment. */
export class BudgetSync {
  readonly #deps: BudgetSyncDeps;
  #run: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The ledger config whose totals are loaded (another one: everything is read again). */
  #store: unknown;
  #closed = false;

  /** A sync over `deps`; nothing runs until `load()`. */
  constructor(deps: BudgetSyncDeps) {
    this.#deps = deps;
  }

  /**
   * Reads what is not loaded yet (at start, after a store change or a reload) and arms the
   * refresh timer; resolves when the read is done.
   */
  load(): Promise<void> {
    return this.#queue(false);
  }

  /** Stops the timer and waits for a read in progress. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#run;
  }

  #queue(refresh: boolean): Promise<void> {
    const run = this.#run.then(() => this.#closed ? undefined : this.#sync(refresh));
    this.#run = run.catch(() => {});
    return run.finally(() => this.#arm());
  }

  #arm(): void {
    if (this.#closed || this.#timer !== undefined) return;
    if (configuredBudgets(this.#deps.skeid.policySet).length === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#queue(true).catch(() => {}); // a failed read is logged in #sync
    }, Math.max(1, this.#deps.skeid.routing.budget_refresh_ms));
    // Never what keeps a process alive.
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  async #sync(refresh: boolean): Promise<void> {
    const { tenancy, skeid, ledger, logger } = this.#deps;
    const budgets = tenancy.budgets;
    const now = skeid.now();
    const all = configuredBudgets(skeid.policySet);
    const storeChanged = ledger.config !== this.#store;
    const full = storeChanged
      ? [...new Set(all.map((b) => b.period))]
      : budgets.unloadedPeriods(all, now);
    const seen = refresh && SHARED_BACKENDS.has(ledger.backend ?? "")
      ? budgets.periodsInUse().filter((p) => !full.includes(p))
      : [];
    if (full.length + seen.length === 0 || ledger.backend === undefined) return;
    try {
      // This process's events first, then the mark: settlements after it stay on top of what
      // is read (one counted twice only errs towards refusing).
      await ledger.flush();
      budgets.beginRefresh();
      const reads: [BudgetPeriod, boolean][] = [
        ...full.map((p): [BudgetPeriod, boolean] => [p, false]),
        ...seen.map((p): [BudgetPeriod, boolean] => [p, true]),
      ];
      for (const [period, seenOnly] of reads) {
        const totals = await ledger.periodTotals(formatCreatedAt(periodStart(period, now)));
        if (totals === undefined) return; // a sink that cannot sum: nothing to read
        budgets.loadTotals(period, totals, now, seenOnly);
      }
      this.#store = ledger.config;
    } catch (err) {
      logger.warn("budget_load_failed", { error: errorMessage(err) });
    }
  }
}
