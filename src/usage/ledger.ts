/**
 * The usage ledger: the only part of the usage layer the gateway talks to.
 *
 * `record()` is synchronous and never throws: it puts the event on a bounded in-memory queue.
 * One background writer (the "pump", strictly one at a time) drains it in batches — at once when
 * `flush_interval_ms` is 0 (coalescing whatever arrived meanwhile), else once per interval or as
 * soon as a full batch waits (write-behind). A failed batch goes to the spill file and is retried
 * with back-off; while the store is unhealthy every new event is appended (fsynced) to the spill
 * file. When a write succeeds again the spill is replayed in order, duplicates being impossible
 * because every store is idempotent on `event_id`. An event is lost — and logged `usage_lost`,
 * naming its request id and the backend — only when it cannot even be spilled.
 *
 * Order of events: replay file (oldest) → in-memory queue → spill file (newest).
 *
 * @module
 */
import type { EventsPage, EventsQuery } from "./events_page.ts";
import { LastSeen } from "./last_seen.ts";
import { join } from "node:path";
import type { Logger } from "../log.ts";
import { CallbackStore, type UsageCallbacks } from "./callback.ts";
import {
  describeStoreConfig,
  type NormalizedUsageStoreConfig,
  sameStoreConfig,
  SPILL_FILE_NAME,
} from "./config.ts";
import { createUsageStore } from "./open.ts";
import type { SeriesAnswer, SeriesQuery } from "./rollup.ts";
import { normalizeReportFilters, NOT_CONFIGURED, notConfiguredReport } from "./report.ts";
import { SinceError } from "./report_since.ts";
import { errorMessage } from "./secret.ts";
import { SpillFiles } from "./spill.ts";
import type {
  KeyPeriodTotals,
  ReportFilters,
  UsageEvent,
  UsageRecorder,
  UsageReport,
  UsageStore,
} from "./types.ts";
import { UsageWriteError } from "./write_error.ts";

/** Options of a ledger. */
export interface UsageLedgerOptions {
  /** Where the ledger logs (`usage_lost`, store failures); never given a secret. */
  logger: Logger;
  /**
   * The spill file. Default: the store config's `spill_path` (next to a sqlite/jsonlog store,
   * else `$SKEID_DATA_DIR`/`$STATE_DIRECTORY`/cwd) at the first store installed; fixed for the
   * ledger's life. Processes sharing a store (`--workers`) must each have their own.
   */
  spillPath?: string;
  /** Epoch-ms clock. */
  now?: () => number;
  /** Back-off of a failing store: first wait and cap, ms (default 100 → 30,000, doubling). */
  retry?: { baseMs: number; maxMs: number };
  /** Events held in memory at most; beyond, they go straight to the spill file (100,000). */
  maxQueue?: number;
  /** Events per write (one transaction) at most (500). */
  maxBatch?: number;
  /** A write taking longer counts as failed; its events are spilled (30,000 ms). */
  writeTimeoutMs?: number;
  /** Told of every event that could not be stored nor spilled (after the `usage_lost` line). */
  onLost?: (event: UsageEvent, error: string) => void;
}

/** The answer of `flush()`. */
export interface FlushResult {
  /** True when nothing is held back: queue empty, spill empty, store healthy. */
  ok: boolean;
  /** Events written by this flush. */
  written: number;
}

/** The usage ledger (see the module doc). */
export class UsageLedger implements UsageRecorder {
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #retry: { baseMs: number; maxMs: number };
  readonly #maxQueue: number;
  readonly #maxBatch: number;
  readonly #writeTimeoutMs: number;
  readonly #spillPathOption: string | undefined;
  readonly #onLost: UsageLedgerOptions["onLost"];

  /** Each customer key's last usage event since start (the Keys page's `last_seen`). */
  readonly lastSeen = new LastSeen();
  #store: UsageStore | undefined;
  #cfg: NormalizedUsageStoreConfig | undefined;
  #callbacks: UsageCallbacks = {};
  #callbackStore: CallbackStore | undefined;
  #spill: SpillFiles | undefined;

  #queue: UsageEvent[] = [];
  /** `spilling`: new events go to the spill file (store unhealthy, or the queue was full). */
  #mode: "direct" | "spilling" = "direct";
  #healthy = true;
  #backoffMs: number;
  #flushIntervalMs = 0;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** Serializes the pump, store swaps, flush and close: one writer at a time. */
  #lock: Promise<unknown> = Promise.resolve();
  #pumpQueued = false;
  #recovered = false;
  #replayPending = false;
  /** Events at the head of the replay file already handed to the store (non-idempotent sinks). */
  #replaySkip = 0;
  #closed = false;
  #warnedUnconfigured = false;
  #loggedSpill = false;
  #warnedQueueFull = false;

  /** A ledger without a store; `configure` or `installStore` gives it one. */
  constructor(opts: UsageLedgerOptions) {
    this.#log = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#retry = opts.retry ?? { baseMs: 100, maxMs: 30_000 };
    this.#backoffMs = this.#retry.baseMs;
    this.#maxQueue = opts.maxQueue ?? 100_000;
    this.#maxBatch = Math.max(1, opts.maxBatch ?? 500);
    this.#writeTimeoutMs = opts.writeTimeoutMs ?? 30_000;
    this.#spillPathOption = opts.spillPath;
    this.#onLost = opts.onLost;
  }

  /** Whether events are being stored (a store or a store callback is set). */
  get enabled(): boolean {
    return this.#sink !== undefined;
  }

  /** The backend events go to (`callback` for a custom sink), or undefined. */
  get backend(): string | undefined {
    return this.#sink?.backend;
  }

  /** The normalized config of the installed store. */
  get config(): NormalizedUsageStoreConfig | undefined {
    return this.#cfg;
  }

  /** Whether the last write succeeded (false while retrying with back-off). */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Events held in memory, not yet written. */
  get queued(): number {
    return this.#queue.length;
  }

  /** The spill file in use, once there is one. */
  get spillPath(): string | undefined {
    return this.#spill?.path ?? this.#spillPathOption;
  }

  get #sink(): UsageStore | undefined {
    return this.#callbackStore ?? this.#store;
  }

  /**
   * Warns, once per ledger, that no store is configured and usage events are dropped. `serve`
   * calls it at start; a dropped event calls it too, so the warning is said exactly once.
   * Answers whether a store is configured.
   */
  warnIfUnconfigured(): boolean {
    if (this.#sink) return true;
    if (!this.#warnedUnconfigured) {
      this.#warnedUnconfigured = true;
      this.#log.warn("usage_store_not_configured", {
        error: `${NOT_CONFIGURED}: usage events are dropped`,
      });
    }
    return false;
  }

  /** Hands one event to the ledger. Synchronous; never throws, never waits for a write. */
  record(event: UsageEvent): void {
    this.lastSeen.seen(event.api_key_id, event.created_at);
    try {
      let e = event.event_id ? event : { ...event, event_id: crypto.randomUUID() };
      if (e.usage_source === "estimated" && this.#cfg?.bill_estimated === false) e = unpriced(e);
      if (this.#closed) {
        this.#toSpill([e]);
        return;
      }
      if (!this.#sink) {
        this.warnIfUnconfigured();
        return;
      }
      if (this.#mode === "direct" && this.#queue.length < this.#maxQueue) {
        this.#queue.push(e);
        this.#kick();
        return;
      }
      if (this.#mode === "direct") {
        // Queue full: from here on events go to the spill file until it has been replayed.
        this.#mode = "spilling";
        if (!this.#warnedQueueFull) {
          this.#warnedQueueFull = true;
          this.#log.warn("usage_queue_full", { max: this.#maxQueue, backend: this.backend });
        }
      }
      this.#toSpill([e]);
      this.#kick();
    } catch (err) {
      this.#lost([event], err);
    }
  }

  /** Sets (or clears) the custom sink; a `store` callback bypasses the configured store. */
  setCallbacks(callbacks: UsageCallbacks): void {
    this.#callbacks = { ...callbacks };
    this.#callbackStore = callbacks.store
      ? new CallbackStore({ store: callbacks.store, report: callbacks.report })
      : undefined;
    this.#resetHealth();
    this.#schedulePump();
  }

  /** Builds and prepares the store `cfg` names; throws (redacted) when it cannot. */
  async prepareStore(cfg: NormalizedUsageStoreConfig): Promise<UsageStore> {
    const store = createUsageStore(cfg);
    try {
      await store.prepare();
    } catch (err) {
      await store.close().catch(() => {});
      throw err;
    }
    return store;
  }

  /**
   * Swaps in a prepared store: writes what is held to the old one, closes it, then lets the new
   * one take over (and replay any spill).
   */
  async installStore(store: UsageStore, cfg: NormalizedUsageStoreConfig): Promise<void> {
    await this.#withLock(async () => {
      await this.#pump(true);
      const old = this.#store;
      this.#store = store;
      this.#cfg = cfg;
      this.#flushIntervalMs = cfg.flush_interval_ms;
      this.#resetHealth();
      this.#log.info("usage_store_configured", {
        backend: store.backend,
        store: store.description,
        flush_interval_ms: cfg.flush_interval_ms,
      });
      if (old && old !== store) {
        await old.close().catch((err) =>
          this.#log.warn("usage_store_close_failed", {
            backend: old.backend,
            error: errorMessage(err),
          })
        );
      }
    });
    this.#schedulePump();
  }

  /**
   * Applies a `usage_store` config (usage.configure, a reload): the same store is kept (only the
   * flush interval follows); a different one is prepared before the old one is let go. Throws
   * when the new store cannot be prepared — the old one stays in place.
   */
  async configure(cfg: NormalizedUsageStoreConfig): Promise<void> {
    if (this.#store && sameStoreConfig(this.#cfg, cfg)) {
      this.#cfg = cfg;
      this.#flushIntervalMs = cfg.flush_interval_ms;
      return;
    }
    const store = await this.prepareStore(cfg);
    await this.installStore(store, cfg);
  }

  /** Writes everything held now (flush_usage), replaying the spill when the store takes it. */
  async flush(): Promise<FlushResult> {
    if (!this.#sink) return { ok: true, written: 0 };
    const written = await this.#withLock(() => this.#pump(true));
    await this.#spill?.idle();
    return {
      ok: this.#healthy && this.#queue.length === 0 && !this.#replayPending &&
        this.#mode === "direct",
      written,
    };
  }

  /**
   * The usage report: the report callback, else the store (after a flush, so it includes
   * everything recorded). Limit default 20, capped at 500.
   */
  async report(filters: ReportFilters = {}): Promise<UsageReport> {
    let f: ReportFilters;
    try {
      f = normalizeReportFilters(filters);
    } catch (err) {
      // A `since` that names no time: the asker's mistake, answered as such (a 400 over HTTP).
      if (!(err instanceof SinceError)) throw err;
      return { ok: false, enabled: this.enabled, error: `since: ${err.message}` };
    }
    const cb = this.#callbacks.report;
    if (cb) {
      try {
        return await cb(f);
      } catch (err) {
        return { ok: false, enabled: true, backend: "callback", error: errorMessage(err) };
      }
    }
    if (!this.#store) return notConfiguredReport();
    await this.flush();
    const store = this.#store;
    if (!store) return notConfiguredReport();
    try {
      return await store.report(f);
    } catch (err) {
      return { ok: false, enabled: true, backend: store.backend, error: errorMessage(err) };
    }
  }

  /**
   * The Usage page's series from the store's roll-ups, after writing what this process holds.
   * Undefined when no store is configured or the store keeps no roll-ups (a callback sink).
   */
  async series(q: SeriesQuery): Promise<SeriesAnswer | undefined> {
    if (!this.#store?.series) return undefined;
    await this.flush();
    const store = this.#store;
    return store?.series ? await store.series(q) : undefined;
  }

  /**
   * A page of the Requests page from the store, after writing what this process holds.
   * Undefined when no store is configured or it keeps no events to read (a callback sink).
   */
  async events(q: EventsQuery): Promise<EventsPage | undefined> {
    if (!this.#store?.events) return undefined;
    await this.flush();
    const store = this.#store;
    return store?.events ? await store.events(q) : undefined;
  }

  /** One event by its event id (null: none; undefined: no store that can say). */
  async event(eventId: string): Promise<Record<string, unknown> | null | undefined> {
    if (!this.#store?.event) return undefined;
    await this.flush();
    const store = this.#store;
    return store?.event ? (await store.event(eventId)) ?? null : undefined;
  }

  /**
   * Cost and tokens per customer key id since `since` (`YYYY-MM-DDTHH:MM:SSZ`), after writing
   * what this process holds, so its own settled events are in the answer (budgets, ADR 0023).
   * Undefined when no store is configured or the store cannot sum; throws when the read fails.
   */
  async periodTotals(since: string): Promise<Map<string, KeyPeriodTotals> | undefined> {
    if (!this.#store?.periodTotals) return undefined;
    await this.flush();
    const store = this.#store;
    return store?.periodTotals ? await store.periodTotals(since) : undefined;
  }

  /** Shutdown: stops the timers, writes (or spills) everything held, closes the store. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clearTimers();
    await this.#withLock(async () => {
      await this.#pump(true);
      this.#clearTimers();
      const store = this.#store;
      this.#store = undefined;
      this.#callbackStore = undefined;
      await store?.close().catch((err) =>
        this.#log.warn("usage_store_close_failed", {
          backend: store.backend,
          error: errorMessage(err),
        })
      );
    });
    await this.#spill?.idle();
  }

  // ---- the writer ---------------------------------------------------------------------------

  #withLock<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  /**
   * Wakes the writer: at the end of the flush interval (write-behind), or — without one — on a
   * timer task of its own after this one. `record` is called while a request's answer is made;
   * a run started in this task's microtasks would put the store's file operations ahead of that
   * answer's write, and the answer would wait for them (ADR 0032). Deno fires a 0 ms timer on
   * its next millisecond tick, ~2 ms later, and that wait is what gathers a busy gateway's events
   * into one append (~30 a write at c=32). `setImmediate` (the same loop turn) measured worse:
   * an append per event or two, 73 → 118 µs of CPU a request at c=32 (docs/bench/costs.md).
   */
  #kick(): void {
    if (!this.#healthy || this.#closed) return; // the retry timer wakes it
    if (this.#mode === "direct" && this.#queue.length < this.#maxBatch) {
      this.#flushTimer ??= setTimeout(() => {
        this.#flushTimer = undefined;
        this.#schedulePump();
      }, this.#flushIntervalMs);
      return;
    }
    this.#schedulePump();
  }

  #schedulePump(): void {
    if (this.#pumpQueued || this.#closed) return;
    this.#pumpQueued = true;
    this.#withLock(async () => {
      this.#pumpQueued = false;
      await this.#pump(false);
    });
  }

  /**
   * One run of the writer: replay file, then the queue, then (while spilling) the spill file —
   * until there is nothing left or a write fails. `force` writes even while backing off.
   * Never throws. Answers how many events it wrote.
   */
  async #pump(force: boolean): Promise<number> {
    let written = 0;
    let sink = this.#sink;
    if (!sink || (!this.#healthy && !force)) return 0;
    if (this.#flushTimer !== undefined) {
      clearTimeout(this.#flushTimer);
      this.#flushTimer = undefined;
    }
    try {
      if (!this.#recovered) {
        this.#recovered = true;
        await this.#recover();
      }
      // Write-behind writes what was queued when the run began; what arrives while it writes
      // waits for its own trigger (a full batch, or the interval: `record` arms it). Draining
      // newcomers too would, under steady load, turn write-behind into one small write after
      // another: a file open, lock and write per handful of events.
      let owed = force || this.#flushIntervalMs === 0 ? Infinity : this.#queue.length;
      // Bounded: every step writes, or moves the spill file, or ends the run.
      for (let step = 0; step < 10_000_000; step++) {
        // Read again each step: setCallbacks may have changed the sink while this run waited.
        sink = this.#sink;
        if (!sink) break;
        if (this.#replayPending) {
          const r = await this.#replay(sink);
          written += r.written;
          if (r.error !== undefined) {
            await this.#failed(sink, r.error, []);
            return written;
          }
          continue;
        }
        if (this.#queue.length > 0 && owed > 0) {
          // The whole queue as the batch when it fits: a fresh array takes new events, instead
          // of splice copying the rest and the queue's old store pointing at written events.
          const size = Math.min(this.#maxBatch, owed);
          let batch: UsageEvent[];
          if (this.#queue.length <= size) {
            batch = this.#queue;
            this.#queue = [];
          } else batch = this.#queue.splice(0, size);
          owed -= batch.length;
          try {
            await this.#write(sink, batch);
            written += batch.length;
            this.#markHealthy(sink, 0);
          } catch (err) {
            const done = err instanceof UsageWriteError ? Math.min(err.written, batch.length) : 0;
            written += done;
            await this.#failed(sink, err, batch.slice(done));
            return written;
          }
          continue;
        }
        // (Only with the queue empty: what it still holds is older than the spill.)
        if (this.#mode === "spilling" && this.#queue.length === 0) {
          const spill = this.#spillFiles();
          if (!spill) {
            this.#mode = "direct";
            continue;
          }
          // The queue is empty and the store is taking writes: the spill file becomes the
          // replay file and new events go to the queue again.
          this.#replayPending = await spill.rotate((buffered) => {
            this.#queue.push(...buffered);
            owed += buffered.length;
            this.#mode = "direct";
          });
          continue;
        }
        break;
      }
    } catch (err) {
      // Only the spill files themselves can end up here (a disk error).
      this.#log.error("usage_writer_failed", { backend: this.backend, error: errorMessage(err) });
      this.#healthy = false;
      this.#mode = "spilling";
      this.#armRetry();
    }
    return written;
  }

  async #write(sink: UsageStore, batch: UsageEvent[]): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // Told here, in the timer's own turn: a write completing after this cannot have been
        // counted by the store before it hears the batch is given up.
        sink.abandoned?.(batch);
        reject(new Error(`write timed out after ${this.#writeTimeoutMs} ms`));
      }, this.#writeTimeoutMs);
    });
    try {
      await Promise.race([sink.write(batch), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Streams the replay file into the store. */
  async #replay(sink: UsageStore): Promise<{ written: number; error?: unknown }> {
    const spill = this.#spillFiles();
    if (!spill) {
      this.#replayPending = false;
      return { written: 0 };
    }
    let written = 0;
    let seen = 0;
    const corrupt: number[] = [];
    for await (const events of spill.readReplay(this.#maxBatch, (n) => corrupt.push(n))) {
      // Skip what an earlier, interrupted replay already handed over.
      const skip = Math.max(0, Math.min(events.length, this.#replaySkip - seen));
      seen += events.length;
      const batch = events.slice(skip);
      if (batch.length === 0) continue;
      try {
        await this.#write(sink, batch);
      } catch (err) {
        const done = err instanceof UsageWriteError ? Math.min(err.written, batch.length) : 0;
        this.#replaySkip = seen - batch.length + done;
        return { written: written + done, error: err };
      }
      written += batch.length;
      this.#replaySkip = seen;
    }
    if (corrupt.length) {
      this.#log.warn("usage_spill_corrupt", { path: spill.replayPath, lines: corrupt.length });
    }
    await spill.removeReplay();
    this.#replayPending = false;
    this.#replaySkip = 0;
    this.#markHealthy(sink, written);
    return { written };
  }

  /** At the first run: a spill left by an earlier process is replayed before anything new. */
  async #recover(): Promise<void> {
    const spill = this.#spillFiles();
    if (!spill) return;
    if (await spill.rotate()) {
      this.#replayPending = true;
      this.#log.info("usage_spill_found", { path: spill.replayPath });
    }
  }

  /** A write failed: keep its events (and the queue behind them) in the replay file, back off. */
  async #failed(sink: UsageStore, err: unknown, pending: UsageEvent[]): Promise<void> {
    const error = errorMessage(err);
    const wasHealthy = this.#healthy;
    this.#healthy = false;
    this.#mode = "spilling"; // from now on new events go to the spill file
    if (wasHealthy) {
      this.#log.warn("usage_store_failed", {
        backend: sink.backend,
        store: sink.description,
        error,
      });
    } else {
      this.#log.debug("usage_store_retry_failed", { backend: sink.backend, error });
    }
    const held = [...pending, ...this.#queue.splice(0)];
    if (held.length) {
      const spill = this.#spillFiles();
      if (!spill) {
        this.#lost(held, err);
      } else {
        this.#logSpill(spill, error);
        try {
          await spill.appendReplay(held);
          this.#replayPending = true;
        } catch (spillErr) {
          this.#lost(held, spillErr);
        }
      }
    }
    this.#armRetry();
  }

  #markHealthy(sink: UsageStore, replayed: number): void {
    if (this.#healthy) return;
    this.#healthy = true;
    this.#backoffMs = this.#retry.baseMs;
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#log.info("usage_store_recovered", { backend: sink.backend, replayed });
  }

  #resetHealth(): void {
    this.#healthy = true;
    this.#backoffMs = this.#retry.baseMs;
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  #armRetry(): void {
    if (this.#closed) return;
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#retry.maxMs);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#withLock(() => this.#pump(true));
    }, delay);
  }

  #clearTimers(): void {
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
    this.#retryTimer = undefined;
    this.#flushTimer = undefined;
  }

  // ---- spill and loss -----------------------------------------------------------------------

  #spillFiles(): SpillFiles | undefined {
    if (this.#spill) return this.#spill;
    const path = this.#spillPathOption ?? this.#cfg?.spill_path ??
      (this.#callbackStore ? join(".", SPILL_FILE_NAME) : undefined);
    if (!path) return undefined;
    this.#spill = new SpillFiles(path, (events, err) => this.#lost(events, err));
    return this.#spill;
  }

  #toSpill(events: UsageEvent[]): void {
    const spill = this.#spillFiles();
    if (!spill) {
      this.#lost(events, new Error("no spill file"));
      return;
    }
    this.#logSpill(spill, this.#healthy ? "queue full" : "store unavailable");
    spill.append(events);
  }

  #logSpill(spill: SpillFiles, reason: string): void {
    if (this.#loggedSpill) return;
    this.#loggedSpill = true;
    this.#log.warn("usage_spill", {
      path: spill.path,
      backend: this.backend ?? (this.#cfg ? describeStoreConfig(this.#cfg) : "none"),
      reason,
    });
  }

  #lost(events: UsageEvent[], err: unknown): void {
    const error = errorMessage(err);
    const backend = this.backend ?? this.#cfg?.backend ?? "none";
    for (const e of events) {
      this.#log.error("usage_lost", {
        request_id: e.request_id,
        event_id: e.event_id,
        backend,
        error,
      });
      try {
        this.#onLost?.(e, error);
      } catch { /* a failing observer must not stop the others */ }
    }
  }

  /** The clock, for callers that build events with the ledger's time. */
  now(): number {
    return this.#now();
  }
}

/**
 * An estimated event under `bill_estimated: false` (ADR 0027): recorded with its estimated
 * tokens, priced 0.
 */
function unpriced(e: UsageEvent): UsageEvent {
  return {
    ...e,
    cost_input_usd: 0,
    cost_output_usd: 0,
    cost_cache_read_usd: 0,
    cost_cache_write_usd: 0,
    cost_total_usd: 0,
  };
}
