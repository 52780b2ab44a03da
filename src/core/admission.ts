/**
 * Admission bookkeeping: per-node counters, this process's share of `max_conns`, the share
 * warnings, and the failure history a registry snapshot reports. Eligibility (which nodes a
 * selection matches) lives in router.ts; this file only answers "would it take one more now".
 *
 * @module
 */
import type { MinuteWindow } from "./minute_window.ts";

/** Volatile per-process counters of one node; never billed, never touch health. */
export class NodeCounters {
  /** Requests admitted and not yet finished. */
  inflight = 0;
  /** Requests admitted in total. */
  started = 0;
  /** Finished ok. */
  ok = 0;
  /** Failed: finished neither ok nor aborted. */
  error = 0;
  /** The client went away; says nothing about the node. */
  aborted = 0;
  /** Sum of the durations reported at finish, ms. */
  duration_ms_total = 0;
  /** Failed finishes in 1-s buckets; created on the first failure. */
  failures: FailureHistory | undefined;
  /** The last minute's requests, errors and TTFTs (the Live page); created on the first finish. */
  minute: MinuteWindow | undefined;
}

/**
 * This process's share of a node's `max_conns` (capacity.md §5): floor(max_conns / divisor),
 * at least 1 when a limit is set; 0 (unlimited) when max_conns ≤ 0. `divisor` is
 * workers × frontends.
 */
export function workerShare(maxConns: number, divisor: number): number {
  if (!(maxConns > 0)) return 0;
  if (divisor <= 1) return Math.floor(maxConns);
  return Math.max(1, Math.floor(maxConns / divisor));
}

/**
 * Warnings for nodes whose max_conns cannot be split across the processes sharing them
 * (0 < max_conns < workers × frontends): each process will still admit 1. Names the node,
 * max_conns, the split, the number of processes and the only fixes the operator has.
 */
export function workerShareWarnings(
  nodes: Iterable<{ id: string; max_conns: number }>,
  workers: number,
  frontends: number,
): string[] {
  const w = Math.max(1, Math.floor(workers));
  const f = Math.max(1, Math.floor(frontends));
  const divisor = w * f;
  if (divisor <= 1) return [];
  let split: string;
  let fix: string;
  if (f > 1 && w > 1) {
    split = `${f} frontends x ${w} workers = ${divisor} processes`;
    fix = "fewer frontends or workers, or raise max_conns";
  } else if (f > 1) {
    split = `${f} frontends`;
    fix = "fewer frontends or raise max_conns";
  } else {
    split = `${w} workers`;
    fix = "fewer workers or raise max_conns";
  }
  const warnings: string[] = [];
  for (const node of nodes) {
    const max = node.max_conns;
    if (!(max > 0) || max >= divisor) continue;
    warnings.push(
      `node '${node.id}': max_conns ${max} cannot be split across ${split}; each process will ` +
        `admit 1, so the node may see up to ${divisor} concurrent requests. Use ${fix}.`,
    );
  }
  return warnings;
}

/**
 * Failed finishes of one node in a ring of 1-second buckets, enough to count the failures of
 * the last `windowS` seconds (the registry's errors_in_window) at a fixed memory cost.
 */
export class FailureHistory {
  /** Epoch ms of the last failure. */
  lastAt = 0;
  readonly #seconds: Float64Array;
  readonly #counts: Uint32Array;

  /** A ring long enough to count the last `windowS` seconds. */
  constructor(readonly windowS: number) {
    const size = Math.max(1, Math.ceil(windowS)) + 1;
    this.#seconds = new Float64Array(size).fill(-1);
    this.#counts = new Uint32Array(size);
  }

  /** Counts one failure at `nowMs`. */
  record(nowMs: number): void {
    this.lastAt = nowMs;
    const second = Math.floor(nowMs / 1000);
    const slot = second % this.#seconds.length;
    if (this.#seconds[slot] !== second) {
      this.#seconds[slot] = second;
      this.#counts[slot] = 0;
    }
    this.#counts[slot]++;
  }

  /**
   * Failures in the `windowS` seconds ending at `nowMs` (buckets from floor(now − window) on);
   * a window longer than this ring's is counted over the ring's.
   */
  count(nowMs: number, windowS: number = this.windowS): number {
    const newest = Math.floor(nowMs / 1000);
    const oldest = Math.floor(nowMs / 1000 - Math.min(windowS, this.windowS));
    let total = 0;
    for (let i = 0; i < this.#seconds.length; i++) {
      const s = this.#seconds[i];
      if (s >= oldest && s <= newest) total += this.#counts[i];
    }
    return total;
  }
}
