/**
 * A node's last minute as the Live page shows it: requests and errors in 60 one-second buckets,
 * and the TTFT of the latest {@link TTFT_SAMPLES} finished requests with their second. Fed by
 * `finishRequest` (one bucket write and, with a TTFT, one ring write: no allocation); read by the
 * live snapshot, which is where the percentiles are sorted out.
 *
 * @module
 */

/** Seconds the window spans. */
export const WINDOW_S = 60;
/** TTFT samples kept (the latest; the p90 of a busier minute is the p90 of its last ones). */
export const TTFT_SAMPLES = 512;

/** What the window says of the last minute. */
export interface LastMinute {
  /** Requests that ended at the node. */
  requests: number;
  /** Of them, failed (neither ok nor the client leaving). */
  errors: number;
  /** Requests per second over the minute. */
  rps: number;
  /** errors / requests; 0 without requests. */
  error_rate: number;
  /** TTFT percentiles over the minute's samples, ms; null without one. */
  ttft_p50_ms: number | null;
  ttft_p90_ms: number | null;
}

/** The per-node rolling minute. */
export class MinuteWindow {
  readonly #requests = new Uint32Array(WINDOW_S);
  readonly #errors = new Uint32Array(WINDOW_S);
  /** The second each bucket holds (-1: none). */
  readonly #second = new Float64Array(WINDOW_S).fill(-1);
  readonly #ttft = new Float64Array(TTFT_SAMPLES);
  readonly #ttftSecond = new Float64Array(TTFT_SAMPLES).fill(-1);
  #next = 0;

  /** A request ended at `nowMs`: failed or not, with its TTFT when one was seen. */
  add(nowMs: number, failed: boolean, ttftMs?: number): void {
    const s = Math.floor(nowMs / 1000);
    const i = s % WINDOW_S;
    if (this.#second[i] !== s) {
      this.#second[i] = s;
      this.#requests[i] = 0;
      this.#errors[i] = 0;
    }
    this.#requests[i]++;
    if (failed) this.#errors[i]++;
    if (ttftMs !== undefined && Number.isFinite(ttftMs) && ttftMs >= 0) {
      this.#ttft[this.#next] = ttftMs;
      this.#ttftSecond[this.#next] = s;
      this.#next = (this.#next + 1) % TTFT_SAMPLES;
    }
  }

  /** The minute ending at `nowMs`. */
  read(nowMs: number): LastMinute {
    const s = Math.floor(nowMs / 1000);
    let requests = 0;
    let errors = 0;
    for (let i = 0; i < WINDOW_S; i++) {
      if (this.#second[i] > s - WINDOW_S && this.#second[i] <= s) {
        requests += this.#requests[i];
        errors += this.#errors[i];
      }
    }
    const samples: number[] = [];
    for (let i = 0; i < TTFT_SAMPLES; i++) {
      if (this.#ttftSecond[i] > s - WINDOW_S && this.#ttftSecond[i] <= s) {
        samples.push(this.#ttft[i]);
      }
    }
    samples.sort((a, b) => a - b);
    return {
      requests,
      errors,
      rps: Math.round((requests / WINDOW_S) * 1000) / 1000,
      error_rate: requests === 0 ? 0 : Math.round((errors / requests) * 10_000) / 10_000,
      ttft_p50_ms: percentile(samples, 0.5),
      ttft_p90_ms: percentile(samples, 0.9),
    };
  }
}

/** The nearest-rank percentile of sorted samples, rounded to a ms; null without samples. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return Math.round(sorted[rank]);
}

/** An empty minute. */
export const EMPTY_MINUTE: LastMinute = Object.freeze({
  requests: 0,
  errors: 0,
  rps: 0,
  error_rate: 0,
  ttft_p50_ms: null,
  ttft_p90_ms: null,
});
