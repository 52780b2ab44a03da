/**
 * The jsonlog store's roll-ups: kept in memory since the process started (the files are not
 * read back for charts), bounded. Each event is counted once because the store hands each one
 * over once: a batch whose write the ledger gave up on is not counted when that write completes
 * late, only when the spill file brings it again (`JsonlogStore.abandoned`).
 *
 * @module
 */
import {
  foldEvent,
  type RollupRow,
  type SeriesAnswer,
  seriesAnswer,
  type SeriesQuery,
  seriesRows,
} from "./rollup.ts";
import type { UsageEvent } from "./types.ts";

/**
 * Most rows kept (an hour, a key, a model and a node each); past it the oldest hours go. A busy
 * gateway's hour is a few rows per key and model, so this is months of a large tenancy.
 */
export const MEMORY_ROLLUP_ROWS = 100_000;

/** Hourly roll-ups of the events written since start, oldest hours dropped past the bound. */
export class MemoryRollups {
  readonly #rows = new Map<string, RollupRow>();
  readonly #maxRows: number;

  constructor(maxRows = MEMORY_ROLLUP_ROWS) {
    this.#maxRows = maxRows;
  }

  /** Counts the events of a written batch. */
  add(events: readonly UsageEvent[]): void {
    for (const e of events) foldEvent(this.#rows, e);
    while (this.#rows.size > this.#maxRows && this.#dropOldestHour());
  }

  /** Drops the oldest hour's rows; false (nothing dropped) when only one hour is kept. */
  #dropOldestHour(): boolean {
    let oldest: string | undefined;
    let newest: string | undefined;
    for (const { hour } of this.#rows.values()) {
      if (oldest === undefined || hour < oldest) oldest = hour;
      if (newest === undefined || hour > newest) newest = hour;
    }
    if (oldest === newest) return false;
    for (const [k, row] of this.#rows) if (row.hour === oldest) this.#rows.delete(k);
    return true;
  }

  /** The series of `q` over what is kept; `since_start` says it covers this process's life. */
  series(q: SeriesQuery, backend: string): SeriesAnswer {
    return seriesAnswer(q, seriesRows(q, this.#rows.values()), backend, true);
  }
}
