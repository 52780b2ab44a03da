/**
 * The custom sink (store_usage_event / query_usage_report): callbacks set on the ledger bypass
 * the configured store. Events go to the callback one by one, so a failure names how many of a
 * batch were taken and a retry never hands the sink an event twice.
 *
 * @module
 */
import { errorMessage } from "./secret.ts";
import type { ReportFilters, StoreResult, UsageEvent, UsageReport, UsageStore } from "./types.ts";
import { UsageWriteError } from "./write_error.ts";

/** The custom sink: `store` takes each event; `report` answers usage reports. */
export interface UsageCallbacks {
  /**
   * Takes one event; `{ok:false}` or a throw is a failed write, retried or spilled by the ledger.
   */
  store?: (event: UsageEvent) => Promise<StoreResult> | StoreResult;
  /** Answers a usage report for already-normalized filters; bypasses the store. */
  report?: (filters: ReportFilters) => Promise<UsageReport> | UsageReport;
}

/** A store backed by a `store` callback. */
export class CallbackStore implements UsageStore {
  /** Always `callback`. */
  readonly backend = "callback" as const;
  /** `callback`. */
  readonly description = "callback";
  readonly #store: NonNullable<UsageCallbacks["store"]>;
  readonly #report: UsageCallbacks["report"];

  /** Wraps the callbacks; `store` is required. */
  constructor(callbacks: UsageCallbacks & { store: NonNullable<UsageCallbacks["store"]> }) {
    this.#store = callbacks.store;
    this.#report = callbacks.report;
  }

  /** Nothing to prepare. */
  prepare(): Promise<void> {
    return Promise.resolve();
  }

  /** Hands the events over in order; the first refusal (or throw) stops the batch. */
  async write(events: UsageEvent[]): Promise<void> {
    for (let i = 0; i < events.length; i++) {
      let res: StoreResult;
      try {
        res = await this.#store(events[i]);
      } catch (err) {
        throw new UsageWriteError(`callback: ${errorMessage(err)}`, i);
      }
      if (!res || res.ok !== true) {
        throw new UsageWriteError(`callback: ${res?.error ?? "store refused the event"}`, i);
      }
    }
  }

  /** The report callback's answer, else "not configured". */
  async report(filters: ReportFilters): Promise<UsageReport> {
    if (!this.#report) {
      return { ok: false, enabled: true, backend: "callback", error: "no report callback" };
    }
    return await this.#report(filters);
  }

  /** Nothing to release. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
