/**
 * What fair share shows operators (ADR 0024): per tier, the backlogged customer keys and their
 * queue lengths (read from the waiter queue at scrape time) and wait-time histograms; per customer
 * key, the tokens served. Keys are labelled by their `keys:` name; every other key id counts under
 * one `_other` label, so a flood of unknown keys cannot grow the series.
 *
 * @module
 */

/** Upper bounds of the latency histograms (request durations, waits), seconds. */
export const LATENCY_BUCKETS_S: readonly number[] = Object.freeze([
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
]);

/** Distinct tiers kept; past it, waits count under tier `_other`. */
const MAX_TIERS = 100;

/** The label of keys not named in the config. */
export const OTHER_KEYS = "_other";

/** The metrics label of a customer key id: its `keys:` name, `anonymous`, else `_other`. */
export function shareKeyLabel(keyId: string, name: string | undefined): string {
  if (name !== undefined) return name;
  return keyId === "anonymous" ? keyId : OTHER_KEYS;
}

/** Waiting requests of one tier by customer key id (from the waiter queue). */
export interface TierBacklog {
  /** The tier's name (`model`, `model|tag+tag`). */
  tier: string;
  /** Waiting requests per customer key id. */
  keys: Map<string, number>;
}

/** One wait histogram: non-cumulative bucket counts (last = +Inf), sum and max in seconds. */
interface WaitHistogram {
  buckets: number[];
  count: number;
  sum: number;
  max: number;
}

/** The wire shape of one tier in `/skeid/metrics/nodes`. */
export interface TierShareWire {
  /** The tier's name. */
  tier: string;
  /** Waiting requests now. */
  queued: number;
  /** Keys with at least one waiter now, with their queue lengths (by key label). */
  backlogged_keys: { key: string; queued: number }[];
  /** Waits that ended in this tier per key label: count, mean, max and histogram (seconds). */
  waits: {
    key: string;
    count: number;
    mean_ms: number;
    max_ms: number;
    buckets: { le: string; count: number }[];
  }[];
}

/** The wire shape of fair share in `/skeid/metrics/nodes`. */
export interface ShareWire {
  /** Per tier. */
  tiers: TierShareWire[];
  /** Tokens served per key label (from usage events). */
  served_tokens: { key: string; input: number; output: number }[];
}

/** Wait times and served tokens, per tier and key label. */
export class ShareStats {
  readonly #keyLabel: (keyId: string) => string;
  readonly #waits = new Map<string, Map<string, WaitHistogram>>();
  readonly #served = new Map<string, { input: number; output: number }>();

  /** `keyLabel`: the metrics label of a customer key id (its name, or `_other`). */
  constructor(keyLabel: (keyId: string) => string) {
    this.#keyLabel = keyLabel;
  }

  /** A wait of `ms` ended (admitted, timed out or aborted) in `tier`. */
  waited(tier: string, keyId: string, ms: number): void {
    if (!this.#waits.has(tier) && this.#waits.size >= MAX_TIERS) tier = OTHER_KEYS;
    let perKey = this.#waits.get(tier);
    if (!perKey) this.#waits.set(tier, perKey = new Map());
    const key = this.#keyLabel(keyId);
    let h = perKey.get(key);
    if (!h) {
      h = { buckets: new Array(LATENCY_BUCKETS_S.length + 1).fill(0), count: 0, sum: 0, max: 0 };
      perKey.set(key, h);
    }
    const s = Math.max(0, ms) / 1000;
    let i = 0;
    while (i < LATENCY_BUCKETS_S.length && s > LATENCY_BUCKETS_S[i]) i++;
    h.buckets[i]++;
    h.count++;
    h.sum += s;
    if (s > h.max) h.max = s;
  }

  /** A usage event of `keyId` was recorded with these token counts. */
  served(keyId: string, input: number, output: number): void {
    const key = this.#keyLabel(keyId);
    let t = this.#served.get(key);
    if (!t) this.#served.set(key, t = { input: 0, output: 0 });
    t.input += Math.max(0, input);
    t.output += Math.max(0, output);
  }

  /** The JSON view, with the backlog read now. */
  snapshot(backlog: readonly TierBacklog[]): ShareWire {
    const now = this.#labelled(backlog);
    const tiers = new Set([...now.keys(), ...this.#waits.keys()]);
    return {
      tiers: [...tiers].sort().map((tier) => {
        const keys = now.get(tier) ?? new Map<string, number>();
        let queued = 0;
        for (const n of keys.values()) queued += n;
        return {
          tier,
          queued,
          backlogged_keys: [...keys].map(([key, n]) => ({ key, queued: n })),
          waits: [...(this.#waits.get(tier) ?? [])].map(([key, h]) => ({
            key,
            count: h.count,
            mean_ms: h.count > 0 ? Math.round((h.sum / h.count) * 1000) : 0,
            max_ms: Math.round(h.max * 1000),
            buckets: cumulative(h).map(([le, count]) => ({ le, count })),
          })),
        };
      }),
      served_tokens: [...this.#served].map(([key, t]) => ({ key, ...t })),
    };
  }

  /** Prometheus families (text format 0.0.4 lines), with the backlog read now. */
  prometheus(backlog: readonly TierBacklog[], label: (v: string) => string): string[] {
    const out: string[] = [];
    const family = (name: string, type: string, help: string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    const now = this.#labelled(backlog);
    family("skeid_share_backlogged_keys", "gauge", "Customer keys with waiters, per tier.");
    for (const [tier, keys] of now) {
      out.push(`skeid_share_backlogged_keys{tier="${label(tier)}"} ${keys.size}`);
    }
    family("skeid_share_queued", "gauge", "Waiting requests per tier and customer key.");
    for (const [tier, keys] of now) {
      for (const [key, n] of keys) {
        out.push(`skeid_share_queued{tier="${label(tier)}",key="${label(key)}"} ${n}`);
      }
    }
    family(
      "skeid_share_wait_seconds",
      "histogram",
      "Time requests waited for a tier's capacity, per tier and customer key.",
    );
    for (const [tier, perKey] of this.#waits) {
      for (const [key, h] of perKey) {
        const l = `tier="${label(tier)}",key="${label(key)}"`;
        for (const [le, n] of cumulative(h)) {
          out.push(`skeid_share_wait_seconds_bucket{${l},le="${le}"} ${n}`);
        }
        out.push(`skeid_share_wait_seconds_sum{${l}} ${h.sum}`);
        out.push(`skeid_share_wait_seconds_count{${l}} ${h.count}`);
      }
    }
    family("skeid_share_served_tokens_total", "counter", "Tokens served per customer key.");
    for (const [key, t] of this.#served) {
      for (const kind of ["input", "output"] as const) {
        out.push(`skeid_share_served_tokens_total{key="${label(key)}",kind="${kind}"} ${t[kind]}`);
      }
    }
    return out;
  }

  /** The backlog with keys by label (several unnamed keys add up under `_other`). */
  #labelled(backlog: readonly TierBacklog[]): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>();
    for (const { tier, keys } of backlog) {
      const labelled = new Map<string, number>();
      for (const [id, n] of keys) {
        const key = this.#keyLabel(id);
        labelled.set(key, (labelled.get(key) ?? 0) + n);
      }
      out.set(tier, labelled);
    }
    return out;
  }
}

/** `[le, cumulative count]` pairs of a histogram, `+Inf` last. */
function cumulative(h: WaitHistogram): [string, number][] {
  let n = 0;
  const out: [string, number][] = LATENCY_BUCKETS_S.map((le, i) => [String(le), n += h.buckets[i]]);
  out.push(["+Inf", h.count]);
  return out;
}
