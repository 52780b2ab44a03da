/**
 * Capacity readings: storage, expiry, tighter-reading-wins across sources, and what admission
 * may conclude from them. SKELETON — owner: core-capacity.
 * @module
 */
import type { CapacityReading, CapacityReadingInput } from "./types.ts";

/** Per-node capacity readings. */
export class CapacityTable {
  constructor(_opts: { now: () => number; maxAgeMs: number }) {}
  /** Records a reading (tighter wins across sources, ADR 0017); returns the reading in force. */
  set(_id: string, _input: CapacityReadingInput): CapacityReading | undefined {
    throw new Error("TODO");
  }
  /** The current reading, or undefined (none, aged out, expired; a pending backoff outlives both). */
  get(_id: string): CapacityReading | undefined {
    throw new Error("TODO");
  }
  /** Drops all readings, one node's, or one node's only when `source` wrote it. */
  forget(_id?: string, _source?: string): void {
    throw new Error("TODO");
  }
  /** Whether the reading (if any) lets admission send one more request now. */
  allows(_id: string): boolean {
    throw new Error("TODO");
  }
  /** Earliest moment (epoch ms) a pending backoff or expiry may change `allows`, for waiters. */
  nextChangeAt(): number | undefined {
    throw new Error("TODO");
  }
}
