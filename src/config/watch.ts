/**
 * Watching the config file: file events for a quick reaction, and a stat poll every reload
 * interval as the fallback that never misses a change.
 *
 * The watch is on the file itself, never on its folder. Deno's watcher opens each file an event
 * names; in a folder holding a SQLite store that means its `-wal` and `-shm` files, and closing
 * any descriptor of a file drops the process's POSIX locks on it: another opener then
 * checkpoints and deletes the WAL under the running store, and rows are lost on a crash.
 *
 * A file replaced by rename (an editor's or a deploy tool's atomic write) is a new inode the old
 * watch no longer sees, so the watch is opened again after a `remove`/`rename` event and on any
 * poll that finds the file back while unwatched.
 *
 * @module
 */
import { resolve } from "node:path";
import type { Logger } from "../log.ts";
import { errorMessage } from "../error_message.ts";

/** The shortest poll interval, ms (a smaller setting is raised to it). */
export const MIN_POLL_MS = 50;
/** An in-place write arrives as several events: they are gathered this long, ms. */
export const WATCH_DEBOUNCE_MS = 50;

/** What a ConfigWatcher needs. */
export interface ConfigWatchOptions {
  /** The config file. */
  path: string;
  /** Stat poll interval, ms. */
  intervalMs: number;
  /** Whether file events are listened to besides the poll. */
  events: boolean;
  /** Called (debounced) when a file event named the config. */
  onEvent(): void;
  /** Called every poll interval. */
  onPoll(): void;
  /** Where a failed watch is warned about (the poll keeps working). */
  logger: Logger;
}

/** Watches one config file until closed; see the module comment. */
export class ConfigWatcher {
  readonly #opts: ConfigWatchOptions;
  readonly #file: string;
  #closed = false;
  #watcher?: Deno.FsWatcher;
  #loops = new Set<Promise<void>>();
  #timer?: ReturnType<typeof setInterval>;
  #debounce?: ReturnType<typeof setTimeout>;
  #warned = false;

  /** Starts the poll and, when asked, the file watch. */
  constructor(opts: ConfigWatchOptions) {
    this.#opts = opts;
    this.#file = resolve(opts.path);
    if (opts.events) this.#watch();
    this.#timer = setInterval(() => {
      if (opts.events && this.#watcher === undefined) this.#watch();
      opts.onPoll();
    }, Math.max(MIN_POLL_MS, opts.intervalMs));
  }

  /** Whether a file watch is open now (false while the file is missing or replaced). */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  /** Stops the poll and the watch; resolves when the event loop ended. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    this.#timer = this.#debounce = undefined;
    this.#unwatch();
    await Promise.all(this.#loops);
  }

  #watch(): void {
    if (this.#closed) return;
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs(this.#file, { recursive: false });
    } catch (e) {
      // Missing (being replaced) is retried by the next poll; anything else is said once.
      if (!(e instanceof Deno.errors.NotFound)) this.#warn(e);
      return;
    }
    this.#watcher = watcher;
    const loop = (async () => {
      try {
        for await (const event of watcher) {
          if (event.kind === "access") continue; // our own reads
          this.#schedule();
          if (event.kind === "remove" || event.kind === "rename") {
            // The inode watched is gone: watch the file at the path again.
            if (this.#watcher === watcher) this.#unwatch();
            this.#watch();
            break;
          }
        }
      } catch (e) {
        if (!this.#closed) this.#warn(e);
      }
    })();
    this.#loops.add(loop);
    void loop.finally(() => this.#loops.delete(loop));
  }

  #unwatch(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    try {
      watcher?.close();
    } catch {
      // already closed
    }
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      if (!this.#closed) this.#opts.onEvent();
    }, WATCH_DEBOUNCE_MS);
  }

  #warn(e: unknown): void {
    if (this.#warned) return;
    this.#warned = true;
    this.#opts.logger.warn("config_watch_failed", {
      path: this.#opts.path,
      error: errorMessage(e),
    });
  }
}
