/**
 * What the affinity pick predicts a node costs, learned online from what the node shows: its
 * prefill cost per uncached prompt token (the slope of measured TTFT over uncached tokens, an
 * exponentially weighted least-squares fit, so queue waits — uncorrelated with prompt size —
 * land in the intercept, not the slope), its mean service time (arrival to last byte), and the
 * most sequences it was seen running at once while requests waited (where its queue starts).
 *
 * @module
 */

/** Prefill cost assumed before a node has shown enough, ms per token. */
export const DEFAULT_PREFILL_MS_PER_TOKEN = 0.1;

/** Service time assumed before a node has shown one, ms. */
export const DEFAULT_SERVICE_MS = 1000;

/** Weight of the newest observation in the running means. */
const ALPHA = 0.05;

/** Observations before the fitted slope replaces the default. */
const MIN_SAMPLES = 8;

/**
 * The spread (weighted standard deviation) of recent uncached sizes, tokens, below which the
 * slope is not refitted: sizes within a quarter of an index block differ by a couple of ms of
 * prefill, less than a TTFT's own noise.
 */
export const MIN_SPREAD_TOKENS = 16;

/** A TTFT above the fit's line × this + {@link REJECT_MS} is taken for a wait (`observe`). */
const REJECT_RATIO = 1.5;
/** See {@link REJECT_RATIO}, ms. */
const REJECT_MS = 10;
/** Observations left out as waits in a row, at most: the next one is taken whatever it says. */
const MAX_REJECTED = 8;

/** The most prompt tokens an observation may say (far above any model's context). */
const MAX_TOKENS = 1e8;
/** The longest TTFT an observation may say, ms (a day). */
const MAX_TTFT_MS = 86_400_000;

/** The learned numbers of one node. */
class NodeFit {
  n = 0;
  sx = 0;
  sy = 0;
  sxx = 0;
  sxy = 0;
  samples = 0;
  service = DEFAULT_SERVICE_MS;
  services = 0;
  maxRunning = 0;
  /** Most sequences seen running while others waited: the node's limit, once known. */
  fullRunning = 0;
  predicted = 0;
  measured = 0;
  compared = 0;

  /** Observations left out in a row as waits (see `observe`). */
  rejected = 0;

  /**
   * One TTFT `y` for `x` uncached tokens. Once the fit has its samples, a TTFT far above its
   * line (over 1.5 × the line + 10 ms) is taken for a wait the pick did not foresee — a slot
   * freed later than predicted, traffic from elsewhere — and left out: a wait only ever adds
   * to a TTFT, and left in, such samples are where long prompts queued most (they are the
   * ones a pick moves to a busier node), which tilted the slope up to 10 × the engine's and
   * priced a node out of the sessions it held. So that a node that really became slower is
   * still learned, at most {@link MAX_REJECTED} in a row are left out.
   */
  observe(x: number, y: number): void {
    if (this.samples >= MIN_SAMPLES && this.n > 0 && this.rejected < MAX_REJECTED) {
      const line = this.sy / this.n + this.slope * (x - this.sx / this.n);
      if (y > line * REJECT_RATIO + REJECT_MS) {
        this.rejected++;
        return;
      }
    }
    this.rejected = 0;
    const keep = 1 - ALPHA;
    this.n = this.n * keep + 1;
    this.sx = this.sx * keep + x;
    this.sy = this.sy * keep + y;
    this.sxx = this.sxx * keep + x * x;
    this.sxy = this.sxy * keep + x * y;
    this.samples++;
    this.#refit();
  }

  /**
   * The fitted slope, refitted on each observation while the recent uncached sizes spread. With
   * all of them alike (a node serving only warm requests of one hot prefix) the data say nothing
   * about the slope, and the last fitted one is kept: a ratio through the origin there took the
   * fixed part of TTFT for prefill (0.63 ms a token where the engine spends 0.1), priced the
   * node out of the prefix it held, and — getting no traffic — it never learned otherwise.
   */
  slope = DEFAULT_PREFILL_MS_PER_TOKEN;

  #refit(): void {
    if (this.samples < MIN_SAMPLES) return;
    const varX = this.sxx - (this.sx * this.sx) / this.n;
    if (!(varX >= MIN_SPREAD_TOKENS * MIN_SPREAD_TOKENS * this.n)) return;
    const slope = (this.sxy - (this.sx * this.sy) / this.n) / varX;
    this.slope = Math.min(100, Math.max(0, slope));
  }
}

/** One node's learned numbers, as `/skeid/metrics` and `/skeid/route` show them. */
export interface NodeCostView {
  /** Prefill ms per uncached token. */
  prefill_ms_per_token: number;
  /** Mean service time, ms. */
  service_ms: number;
  /** Most sequences seen running at once (0: never seen). */
  max_running_seen: number;
  /** Most sequences seen running while requests waited: the node's limit (0: never seen). */
  slots_seen: number;
  /** TTFT observations the fit has seen. */
  samples: number;
  /** Requests whose TTFT was both predicted by a pick and measured. */
  compared: number;
  /** Sum of their predicted TTFT, ms. */
  predicted_ttft_ms_total: number;
  /** Sum of their measured TTFT, ms. */
  measured_ttft_ms_total: number;
}

/** The learned numbers of every node, by id. */
export class NodeCosts {
  readonly #fits = new Map<string, NodeFit>();

  #fit(id: string): NodeFit {
    let fit = this.#fits.get(id);
    if (!fit) this.#fits.set(id, fit = new NodeFit());
    return fit;
  }

  /**
   * A TTFT the node showed for `uncached` prompt tokens; `predicted` what the pick expected. A
   * figure no real request has (infinite, or more prompt tokens than any context holds: a node's
   * usage report is its own word) is left out: one such square in the sums would hold the fit at
   * infinity, and the slope with it, for good.
   */
  observeTtft(
    id: string,
    ttftMs: number,
    uncached: number,
    predicted?: number,
    queued = false,
  ): void {
    if (!(ttftMs >= 0 && ttftMs <= MAX_TTFT_MS) || !(uncached >= 0 && uncached <= MAX_TOKENS)) {
      return;
    }
    const fit = this.#fit(id);
    if (!queued) fit.observe(uncached, ttftMs);
    if (predicted !== undefined && predicted >= 0) {
      fit.predicted += predicted;
      fit.measured += ttftMs;
      fit.compared++;
    }
  }

  /** A finished request's service time, ms. */
  observeService(id: string, ms: number): void {
    if (!(ms > 0)) return;
    const fit = this.#fit(id);
    fit.service = fit.services === 0 ? ms : fit.service * (1 - ALPHA) + ms * ALPHA;
    fit.services++;
  }

  /**
   * Sequences a probe saw running on the node, and waiting behind them. Only a reading with a
   * queue shows the node's limit: without one, the running count is whatever traffic was there,
   * and taking it for the limit would make a lightly used node look full, keep traffic off it,
   * and never let it show more.
   */
  observeRunning(id: string, running: number, waiting = 0): void {
    if (!(running > 0)) return;
    const fit = this.#fit(id);
    if (running > fit.maxRunning) fit.maxRunning = running;
    if (waiting > 0 && running > fit.fullRunning) fit.fullRunning = running;
  }

  /** Prefill ms per uncached token. */
  prefillMsPerToken(id: string): number {
    return this.#fits.get(id)?.slope ?? DEFAULT_PREFILL_MS_PER_TOKEN;
  }

  /** Mean service time, ms. */
  serviceMs(id: string): number {
    return this.#fits.get(id)?.service ?? DEFAULT_SERVICE_MS;
  }

  /** Most sequences seen running at once; 0 when never seen. */
  maxRunning(id: string): number {
    return this.#fits.get(id)?.maxRunning ?? 0;
  }

  /**
   * The sequences the node runs before it queues: the most seen running while others waited;
   * before any queue was seen, `fallback` (what the configuration says), raised to the most
   * seen running.
   */
  slots(id: string, fallback: number): number {
    const fit = this.#fits.get(id);
    if (fit === undefined) return fallback;
    return fit.fullRunning > 0 ? fit.fullRunning : Math.max(fit.maxRunning, fallback);
  }

  /** Forgets a node (removed, or its id now names another machine). */
  forget(id: string): void {
    this.#fits.delete(id);
  }

  /** The learned numbers of a node. */
  view(id: string): NodeCostView {
    const fit = this.#fits.get(id);
    return {
      prefill_ms_per_token: this.prefillMsPerToken(id),
      service_ms: this.serviceMs(id),
      max_running_seen: fit?.maxRunning ?? 0,
      slots_seen: fit?.fullRunning ?? 0,
      samples: fit?.samples ?? 0,
      compared: fit?.compared ?? 0,
      predicted_ttft_ms_total: fit?.predicted ?? 0,
      measured_ttft_ms_total: fit?.measured ?? 0,
    };
  }
}
