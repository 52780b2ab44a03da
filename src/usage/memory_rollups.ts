/**
 * The jsonlog store's roll-ups: kept in memory since the process started (the files are not
 * read back for charts), bounded, idempotent on `event_id` like the files themselves.
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

/** Most event ids remembered (a replayed one is not counted again); the oldest hours go first. */
export const MEMORY_ROLLUP_EVENTS = 200_000;

/** Hourly roll-ups of the events written since start, oldest hours dropped past the bound. */
export class MemoryRollups {
  readonly #rows = new Map<string, RollupRow>();
  /** Event ids per hour, for the replay check and for dropping an hour whole. */
  readonly #ids = new Map<string, Set<string>>();
  #idCount = 0;
  readonly #maxEvents: number;

  constructor(maxEvents = MEMORY_ROLLUP_EVENTS) {
    this.#maxEvents = maxEvents;
  }

  /** Counts the events of a written batch not counted before. */
  add(events: readonly UsageEvent[]): void {
    for (const e of events) {
      const hour = String(e.created_at ?? "").slice(0, 13);
      let ids = this.#ids.get(hour);
      if (ids?.has(e.event_id)) continue;
      if (!ids) {
        ids = new Set();
        this.#ids.set(hour, ids);
      }
      ids.add(e.event_id);
      this.#idCount += 1;
      foldEvent(this.#rows, e);
    }
    while (this.#idCount > this.#maxEvents && this.#ids.size > 1) this.#dropOldestHour();
  }

  #dropOldestHour(): void {
    const oldest = [...this.#ids.keys()].sort()[0];
    this.#idCount -= this.#ids.get(oldest)?.size ?? 0;
    this.#ids.delete(oldest);
    for (const [k, row] of this.#rows) if (row.hour === oldest) this.#rows.delete(k);
  }

  /** The series of `q` over what is kept; `since_start` says it covers this process's life. */
  series(q: SeriesQuery, backend: string): SeriesAnswer {
    return seriesAnswer(q, seriesRows(q, this.#rows.values()), backend, true);
  }
}
