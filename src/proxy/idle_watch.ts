/**
 * The idle watch: one deadline timer over every upstream wait in flight (response headers, a
 * whole non-streamed body, a stream's silence) and the keepalives of translated streams; a
 * second one, with the body timeout, over the client bodies being read.
 *
 * @module
 */
import { type Linked, LinkedList } from "../core/linked_list.ts";

/** Something a body inactivity watch can stop. */
export interface Watched extends Linked<Watched> {
  /** Epoch ms of the last byte seen. */
  lastActivity: number;
  /** Called once when the body was silent for too long. */
  idleTimeout(): void;
  /**
   * Called at every sweep while watched, with the watch's clock (a stream's keepalive checks
   * its own silence here: no timer of its own).
   */
  tick?(now: number): void;
}

/** Options of an IdleWatch. */
export interface IdleWatchOptions {
  /**
   * The shortest keepalive interval a watched stream uses, ms: the sweep runs at least twice
   * per interval, so a keepalive goes out between one and one and a half intervals of silence.
   */
  keepaliveMs?: number;
}

/**
 * One timer for every upstream wait in flight (headers, a whole non-streamed body, a stream's
 * silence): one silent for longer than `timeoutMs` is stopped. A timer per attempt (or a reset per
 * stream read) costs timer ops on every request; a sweep at a quarter of the timeout costs one
 * timer for all of them, at the price of stopping up to a quarter of the timeout late. The same
 * sweep drives the streams' keepalives (`Watched.tick`).
 */
export class IdleWatch {
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #period: number;
  /** An intrusive list, not a Set: one add and delete per request (see linked_list.ts). */
  readonly #watched = new LinkedList<Watched>();
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * An empty watch; its sweep timer runs only while something is watched.
   *
   * @param timeoutMs how long a watched wait may stay silent before it is stopped, ms
   * @param now the epoch-ms clock
   * @param opts the shortest keepalive interval, which may shorten the sweep period
   */
  constructor(timeoutMs: number, now: () => number = Date.now, opts: IdleWatchOptions = {}) {
    this.#timeoutMs = timeoutMs;
    this.#now = now;
    let period = Math.max(50, Math.min(5000, Math.floor(timeoutMs / 4)));
    const keepalive = opts.keepaliveMs;
    if (keepalive !== undefined && keepalive > 0) {
      period = Math.min(period, Math.max(1, Math.floor(keepalive / 2)));
    }
    this.#period = period;
  }

  /** How long a watched wait may stay silent, ms. */
  get timeoutMs(): number {
    return this.#timeoutMs;
  }

  /** The watch's clock, epoch ms. */
  now(): number {
    return this.#now();
  }

  /** How many bodies are watched. */
  get size(): number {
    return this.#watched.size;
  }

  /** Starts watching a body. */
  add(w: Watched): void {
    this.#watched.add(w);
    if (this.#timer === undefined) this.#timer = setInterval(() => this.sweep(), this.#period);
  }

  /** Stops watching a body (it ended). */
  delete(w: Watched): void {
    // The timer is not stopped here but at the next sweep that finds nothing to watch, so a
    // trickle of requests does not start and stop an interval for each one.
    this.#watched.delete(w);
  }

  /** Stops every body that was silent too long (the timer's work; tests call it directly). */
  sweep(): void {
    const now = this.#now();
    const cutoff = now - this.#timeoutMs;
    for (const w of this.#watched) {
      if (w.lastActivity <= cutoff) {
        this.#watched.delete(w);
        try {
          w.idleTimeout();
        } catch {
          // A body that cannot be stopped is already gone.
        }
      } else if (w.tick !== undefined) {
        try {
          w.tick(now);
        } catch {
          // A stream that cannot take a keepalive ends on its own.
        }
      }
    }
    if (this.#watched.size === 0) this.#stop();
  }

  /** Stops the timer and forgets every body. */
  close(): void {
    this.#watched.clear();
    this.#stop();
  }

  #stop(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
