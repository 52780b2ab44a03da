/**
 * Summaries of latency samples for the benchmark.
 *
 * @module
 */

/** Percentiles of a sample set, milliseconds. */
export interface Summary {
  /** Number of samples. */
  n: number;
  /** Median. */
  p50: number;
  /** 90th percentile. */
  p90: number;
  /** 99th percentile. */
  p99: number;
  /** Largest sample. */
  max: number;
  /** Arithmetic mean. */
  mean: number;
}

/** The nearest-rank percentile `p` (0–100) of ascending `sorted`; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Summarizes `samples` (copied, then sorted). */
export function summarize(samples: ArrayLike<number>): Summary {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (const x of sorted) sum += x;
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1] : NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
  };
}

/** A growable list of float samples without per-sample allocation. */
export class Samples {
  #data = new Float64Array(1024);
  #n = 0;

  /** Adds one sample. */
  push(x: number): void {
    if (this.#n === this.#data.length) {
      const next = new Float64Array(this.#data.length * 2);
      next.set(this.#data);
      this.#data = next;
    }
    this.#data[this.#n++] = x;
  }

  /** Number of samples. */
  get length(): number {
    return this.#n;
  }

  /** The samples so far. */
  values(): Float64Array {
    return this.#data.subarray(0, this.#n);
  }
}
