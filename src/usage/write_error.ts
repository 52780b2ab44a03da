/**
 * The error a store throws when only part of a batch was written (a callback sink takes events
 * one by one), so the ledger retries only the rest and a non-idempotent sink sees no duplicates.
 *
 * @module
 */

/** A batch write that failed after `written` events (the first ones) had been taken. */
export class UsageWriteError extends Error {
  /** How many events at the start of the batch were written before the failure. */
  readonly written: number;

  /** `message` must already be free of secrets. */
  constructor(message: string, written: number) {
    super(message);
    this.name = "UsageWriteError";
    this.written = written;
  }
}
