/**
 * Node ejection (ADR 0021): a capacity backoff of its own for nodes whose transport fails. After
 * `failures` transport failures in a row (connect error, connect or header timeout, a reset
 * before the first byte) a node is out of admission for an ejection time that starts at `baseMs`
 * and doubles with each ejection in a row, up to `maxMs`. When it ends, one trial request is let
 * through (half-open): an answer closes the ejection, a failure ejects again for twice as long.
 * Any HTTP answer is a success here — a 429 or a 5xx says the node is reachable; 429 is a
 * capacity signal of its own (capacity.ts). A request the client or Skeid stopped says nothing.
 *
 * Never more than `maxShare` of a selection's nodes are held out at once: `ejectedAmong` answers,
 * for a selection's candidates, the ones held out now, the longest-failing first. Ejection never
 * touches `healthy`, which stays operator state. Pure and synchronous; time comes from the clock.
 *
 * @module
 */

/** What became of a request, as far as the node's transport goes. */
export type TransportOutcome =
  /** Connect error, connect or header timeout, reset before the first response byte. */
  | "failure"
  /** The node answered (any status). */
  | "answered"
  /** Stopped by the client or by Skeid, or nothing known: says nothing about the node. */
  | "aborted";

/** Options of an ejection table. */
export interface EjectionOptions {
  /** Epoch-ms clock. */
  now: () => number;
  /** Transport failures in a row that eject a node (default 2). */
  failures?: number;
  /** The first ejection time, ms (default 1000). */
  baseMs?: number;
  /** The longest ejection time, ms (default 60000). */
  maxMs?: number;
  /** The largest share of a selection's nodes held out at once, 0–1 (default 0.5). */
  maxShare?: number;
}

/** Where a node stands. */
export type EjectionState =
  /** Admitted as usual. */
  | "closed"
  /** Out of admission until `ejected_until`. */
  | "ejected"
  /** The ejection time is over: the next request is the trial. */
  | "due"
  /** The trial request is in flight; no other request until it ends. */
  | "trial";

/** One node's ejection, for `/skeid/metrics/nodes` and Prometheus. */
export interface EjectionSnapshot {
  /** The node id. */
  node_id: string;
  /** Where it stands. */
  state: EjectionState;
  /** Transport failures in a row. */
  consecutive_failures: number;
  /** Ejections in a row (the current one included); the ejection time doubles with each. */
  ejections: number;
  /** End of the current ejection time (epoch ms), null when not ejected. */
  ejected_until: number | null;
  /** Ejections since the table was made. */
  ejections_total: number;
}

interface NodeState {
  consecutive: number;
  ejections: number;
  /** End of the ejection time; 0 = not ejected. */
  until: number;
  trial: boolean;
  total: number;
  /** When the ejections in a row began. */
  since: number;
}

const NONE: ReadonlySet<string> = new Set();

/** Per-node transport failures and ejections. */
export class EjectionTable {
  readonly #now: () => number;
  readonly #failures: number;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #maxShare: number;
  readonly #nodes = new Map<string, NodeState>();
  /** Nodes ejected (until > 0): admission asks nothing more while there are none. */
  #ejected = 0;

  /** A table with the given thresholds (out-of-range values fall back to the defaults). */
  constructor(opts: EjectionOptions) {
    this.#now = opts.now;
    this.#failures = positive(opts.failures, 2);
    this.#baseMs = positive(opts.baseMs, 1000);
    this.#maxMs = Math.max(this.#baseMs, positive(opts.maxMs, 60_000));
    const share = opts.maxShare;
    this.#maxShare = typeof share === "number" && share >= 0 && share <= 1 ? share : 0.5;
  }

  /** Whether any node is ejected now (admission's fast path). */
  get any(): boolean {
    return this.#ejected > 0;
  }

  /**
   * Whether a request may go to `id` as far as its own ejection goes: not while ejected, nor
   * while its trial is in flight. The selection's cap is `ejectedAmong`'s.
   */
  admits(id: string): boolean {
    if (this.#ejected === 0) return true;
    const s = this.#nodes.get(id);
    return s === undefined || s.until === 0 || (!s.trial && this.#now() >= s.until);
  }

  /**
   * A request to `id` was admitted. When its ejection time is over, this request is the trial
   * (true): the node takes no other until it ends.
   */
  start(id: string): boolean {
    if (this.#ejected === 0) return false;
    const s = this.#nodes.get(id);
    if (s === undefined || s.until === 0 || s.trial || this.#now() < s.until) return false;
    s.trial = true;
    return true;
  }

  /**
   * A request to `id` ended. A failure counts toward ejection (and ejects again, for twice as
   * long, while half-open); an answer closes it; an aborted request lets another trial go.
   */
  record(id: string, outcome: TransportOutcome): void {
    let s = this.#nodes.get(id);
    if (outcome === "answered") {
      if (s === undefined) return;
      if (s.until > 0) this.#ejected--;
      s.consecutive = 0;
      s.ejections = 0;
      s.until = 0;
      s.trial = false;
      return;
    }
    if (outcome === "aborted") {
      if (s !== undefined) s.trial = false;
      return;
    }
    if (s === undefined) {
      s = { consecutive: 0, ejections: 0, until: 0, trial: false, total: 0, since: 0 };
      this.#nodes.set(id, s);
    }
    s.consecutive++;
    const now = this.#now();
    const halfOpen = s.until > 0 && now >= s.until;
    if (halfOpen || (s.until === 0 && s.consecutive >= this.#failures)) {
      if (s.until === 0) this.#ejected++;
      if (s.ejections === 0) s.since = now;
      s.ejections++;
      s.total++;
      s.trial = false;
      s.until = now + Math.min(this.#maxMs, this.#baseMs * 2 ** Math.min(30, s.ejections - 1));
    }
  }

  /**
   * Of a selection's candidate nodes, the ones held out now (ejected, or their trial in
   * flight) — at most `maxShare` of them (rounded down); past that the longest-failing stay out
   * and the others are let through.
   */
  ejectedAmong(ids: readonly string[]): ReadonlySet<string> {
    if (this.#ejected === 0) return NONE;
    const now = this.#now();
    const out: [string, NodeState][] = [];
    for (const id of ids) {
      const s = this.#nodes.get(id);
      if (s !== undefined && s.until > 0 && (s.trial || now < s.until)) out.push([id, s]);
    }
    if (out.length === 0) return NONE;
    const cap = Math.floor(ids.length * this.#maxShare);
    if (out.length > cap) {
      out.sort(([ia, a], [ib, b]) =>
        b.ejections - a.ejections || b.consecutive - a.consecutive || a.since - b.since ||
        (ia < ib ? -1 : 1)
      );
      out.length = cap;
    }
    return new Set(out.map(([id]) => id));
  }

  /** When the next ejection time ends (a waiting request may then go), or undefined. */
  nextChangeAt(): number | undefined {
    if (this.#ejected === 0) return undefined;
    const now = this.#now();
    let next: number | undefined;
    for (const s of this.#nodes.values()) {
      if (s.until > now && (next === undefined || s.until < next)) next = s.until;
    }
    return next;
  }

  /** Forgets one node (removed, or its id now names another machine), or all. */
  forget(id?: string): void {
    if (id === undefined) {
      this.#nodes.clear();
      this.#ejected = 0;
      return;
    }
    const s = this.#nodes.get(id);
    if (s === undefined) return;
    if (s.until > 0) this.#ejected--;
    this.#nodes.delete(id);
  }

  /** Where each node that ever failed stands (or one node: closed when it never failed). */
  snapshot(): EjectionSnapshot[];
  /** Where one node stands. */
  snapshot(id: string): EjectionSnapshot;
  snapshot(id?: string): EjectionSnapshot[] | EjectionSnapshot {
    const now = this.#now();
    if (id !== undefined) return snapshotOf(id, this.#nodes.get(id), now);
    const out: EjectionSnapshot[] = [];
    for (const [nodeId, s] of this.#nodes) out.push(snapshotOf(nodeId, s, now));
    return out;
  }
}

function snapshotOf(id: string, s: NodeState | undefined, now: number): EjectionSnapshot {
  if (s === undefined) {
    return {
      node_id: id,
      state: "closed",
      consecutive_failures: 0,
      ejections: 0,
      ejected_until: null,
      ejections_total: 0,
    };
  }
  const state: EjectionState = s.until === 0
    ? "closed"
    : s.trial
    ? "trial"
    : now < s.until
    ? "ejected"
    : "due";
  return {
    node_id: id,
    state,
    consecutive_failures: s.consecutive,
    ejections: s.ejections,
    ejected_until: s.until === 0 ? null : s.until,
    ejections_total: s.total,
  };
}

function positive(value: number | undefined, dflt: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : dflt;
}
