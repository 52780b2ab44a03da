/**
 * Customer-key limits of a group of workers (ADR 0025, ADR 0023): one place holds them for all.
 *
 * - `max_inflight`: a second shared `InflightTable`, keyed by customer key id, taken and given
 *   back in the worker with no round trip (as node admission is).
 * - rpm, tpm and the budget: the supervisor's `Tenancy` (its budgets loaded from the one ledger),
 *   asked by message for every key that has limits or a budget (its windows count the group's
 *   requests, `GET /skeid/keys` shows them); the worker awaits the answer before node
 *   admission. A hold is the supervisor's number; settle and cancel go back by message. A key
 *   without limits or budget costs nothing: `admitKey` never gets here for it.
 *
 * @module
 */
import type { InflightTable } from "../core/inflight_table.ts";
import { inflightRefusal, type KeyHold, type KeyRequest, type Tenancy } from "../core/tenancy.ts";
import type { KeyPolicy } from "../core/key_policy.ts";
import type {
  KeyLimitDecision,
  KeyLimiter,
  KeyLimitHold,
  SettledAmount,
} from "../proxy/key_step.ts";
import type { Logger } from "../log.ts";
import type { QueueGate } from "../proxy/wait.ts";
import type { FromWorker, KeyInflight, WireKeyDecision } from "./protocol.ts";

/** Distinct customer keys with `max_inflight` the shared key table holds. */
export const KEY_TABLE_CAPACITY = 16384;

/** The worker's side: the shared key table here, the windows and budgets in the supervisor. */
export class RemoteKeyGroup implements KeyLimiter {
  readonly #post: (msg: FromWorker) => void;
  readonly #table: InflightTable;
  readonly #nextId: () => number;
  readonly #asked = new Map<number, (d: WireKeyDecision) => void>();

  /** `post` reaches the supervisor; `nextId` numbers the questions (shared with other asks). */
  constructor(post: (msg: FromWorker) => void, table: InflightTable, nextId: () => number) {
    this.#post = post;
    this.#table = table;
    this.#nextId = nextId;
  }

  /** The supervisor answered question `id`. */
  answered(id: number, decision: WireKeyDecision): void {
    this.#asked.get(id)?.(decision);
    this.#asked.delete(id);
  }

  async admit(keyId: string, policy: KeyPolicy, request: KeyRequest): Promise<KeyLimitDecision> {
    const limits = policy.limits;
    const max = limits?.max_inflight ?? null;
    let row = -1;
    let full = false;
    if (max !== null) {
      // A table full of other keys (more than KEY_TABLE_CAPACITY with max_inflight) cannot hold
      // this one: the supervisor's windows count its inflight instead (a message later).
      row = this.#table.slot(keyId);
      full = row >= 0 && !this.#table.tryTake(row, max);
    }
    const windows = limits !== null && (limits.rpm !== null || limits.tpm !== null);
    // rpm and tpm refuse before max_inflight, max_inflight before the budget (ADR 0023): with no
    // window to ask, a full key is refused here.
    if (full && !windows) return inflightRefusal({});
    const id = this.#nextId();
    const answer = new Promise<WireKeyDecision>((resolve) => this.#asked.set(id, resolve));
    const inflight = full ? "full" : max !== null && row < 0 ? "supervisor" : "held";
    this.#post({ type: "key_admit", id, keyId, request, inflight });
    const d = await answer;
    if (!d.ok) {
      if (row >= 0 && !full) this.#table.release(row);
      return d;
    }
    return { ok: true, hold: this.#hold(full ? -1 : row, d.hold), headers: d.headers };
  }

  /** A hold on the key table's `row` (-1: none) and the supervisor's hold `id`. */
  #hold(row: number, id: number): KeyLimitHold {
    let open = true;
    const end = (msg: FromWorker) => {
      if (!open) return;
      open = false;
      if (row >= 0) this.#table.release(row);
      this.#post(msg);
    };
    return {
      settle: (actual: SettledAmount) => end({ type: "key_settle", hold: id, actual }),
      cancel: () => end({ type: "key_cancel", hold: id }),
    };
  }
}

/** The supervisor's side: the group's rate windows and budgets, holds by number and worker. */
export class KeyGroupOwner {
  readonly #tenancy: Tenancy;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #holds = new Map<number, { hold: KeyHold; worker: number }>();
  #next = 1;

  /** Over the supervisor's gateway's tenancy and clock. */
  constructor(tenancy: Tenancy, now: () => number, logger: Logger) {
    this.#tenancy = tenancy;
    this.#now = now;
    this.#logger = logger;
  }

  /** Holds still open (tests). */
  get open(): number {
    return this.#holds.size;
  }

  /**
   * Rate windows and budget for a request of worker `worker`. `inflight` says where the key's
   * `max_inflight` is: `held` in the shared table (or the key has none), `full` there — the
   * answer is then the refusal a single process gives: rpm or tpm when they refuse, else
   * `max_inflight` (the windows are left as they were) — or `supervisor`: the table had no row
   * for the key, the windows here check it.
   */
  admit(
    worker: number,
    keyId: string,
    request: KeyRequest,
    inflight: KeyInflight,
  ): WireKeyDecision {
    const tenancy = this.#tenancy;
    const now = this.#now();
    const d = inflight === "supervisor"
      ? tenancy.admit(keyId, now, request)
      : tenancy.admitGroup(keyId, now, request);
    if (inflight === "full") {
      if (!d.ok && d.status === 429) return d;
      if (d.ok) tenancy.cancel(d.hold, now);
      return inflightRefusal(tenancy.headers(keyId, now));
    }
    if (!d.ok) return d;
    const id = this.#next++;
    this.#holds.set(id, { hold: d.hold, worker });
    return { ok: true, hold: id, headers: d.headers };
  }

  /** A hold's usage event was recorded; a budget's `warn_at` crossing is said here. */
  settle(id: number, actual: SettledAmount): void {
    const held = this.#holds.get(id);
    if (!held) return;
    this.#holds.delete(id);
    const warning = this.#tenancy.settle(held.hold, actual, this.#now());
    if (warning) {
      this.#logger.warn("budget_warning", { api_key_id: warning.keyId, message: warning.message });
    }
  }

  /** A hold given back unbilled. */
  cancel(id: number): void {
    const held = this.#holds.get(id);
    if (!held) return;
    this.#holds.delete(id);
    this.#tenancy.cancel(held.hold, this.#now());
  }

  /**
   * A worker died: its open holds are given back unbilled (its requests' events, if any were
   * posted, are in the ledger and reach the budget at the next refresh). Answers how many.
   */
  workerDied(worker: number): number {
    let n = 0;
    for (const [id, held] of this.#holds) {
      if (held.worker !== worker) continue;
      this.cancel(id);
      n++;
    }
    return n;
  }
}

/**
 * A key's waiters counted for the group in the shared key table (rows `queued <key id>`), so
 * `share.max_queued` holds across workers (ADR 0025). A key the table cannot hold is not bounded
 * by the group, only by each worker's own queue.
 */
export function queueGate(table: InflightTable): QueueGate {
  return {
    take(keyId: string, max: number): boolean {
      if (max <= 0) return false;
      const row = table.slot(QUEUED + keyId);
      return row < 0 || table.tryTake(row, max);
    },
    release(keyId: string): void {
      const row = table.slot(QUEUED + keyId);
      if (row >= 0) table.release(row);
    },
  };
}

const QUEUED = "queued ";
