/**
 * The Prometheus probe (`probe: prometheus`): vLLM, SGLang, TGI and llama.cpp publish how many
 * requests they run and how many wait — including traffic this Skeid never sent, which is what
 * inflight cannot see (ADR 0019). `used` is running + waiting: a queued request occupies the
 * node as surely as a running one. The same poll reads the KV cache gauges and prefix-cache
 * counters the picks use (`queue` of the reading).
 *
 * Every name comes from one table, {@link ENGINE_METRICS}: an engine that renames a metric
 * (vLLM's `gpu_cache_usage_perc` → `kv_cache_usage_perc`) gets its new name added beside the
 * old one there, and both keep working.
 *
 * Block keys: `url` (full URL) or `path` (default `/metrics`, beside the node's API); `running`
 * (alias `used`) and `waiting`, each a metric name or a list; `limit` (default the node's
 * max_conns); `interval_ms`.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type { CapacityProbe, ProbeContext } from "./probe.ts";
import { endpointUrl } from "./probe.ts";
import type { NodeQueue } from "../core/types.ts";

/** The metric names of one engine: for each gauge, its names, newest first. */
export interface EngineMetricNames {
  /** The engine. */
  engine: string;
  /** Requests running. */
  running: readonly string[];
  /** Requests waiting in the engine's queue. */
  waiting: readonly string[];
  /** KV cache in use, 0..1 (the first present counts). */
  kv_usage: readonly string[];
  /** Prefix cache lookups, a counter (tokens for vLLM). */
  prefix_queries: readonly string[];
  /** Prefix cache hits, a counter. */
  prefix_hits: readonly string[];
}

/** The metric names per engine; docs/admission.md, "Engine metrics", lists the same table. */
export const ENGINE_METRICS: readonly EngineMetricNames[] = Object.freeze([
  {
    engine: "vllm",
    running: ["vllm:num_requests_running"],
    waiting: ["vllm:num_requests_waiting"],
    // 0.10 renamed gpu_cache_usage_perc; both are read, the new one first.
    kv_usage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    prefix_queries: ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"],
    prefix_hits: ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"],
  },
  {
    engine: "sglang",
    running: ["sglang:num_running_reqs"],
    waiting: ["sglang:num_queue_reqs"],
    kv_usage: ["sglang:token_usage"],
    prefix_queries: [],
    prefix_hits: [],
  },
  {
    engine: "tgi",
    running: ["tgi_batch_current_size"],
    waiting: ["tgi_queue_size"],
    kv_usage: [],
    prefix_queries: [],
    prefix_hits: [],
  },
  {
    engine: "llamacpp",
    running: ["llamacpp:requests_processing"],
    waiting: ["llamacpp:requests_deferred"],
    kv_usage: ["llamacpp:kv_cache_usage_ratio"],
    prefix_queries: [],
    prefix_hits: [],
  },
]);

/** Running-request gauges known by default: every engine's in the table. */
export const DEFAULT_RUNNING_METRICS: readonly string[] = Object.freeze(
  ENGINE_METRICS.flatMap((e) => e.running),
);

/** Waiting-request gauges known by default: every engine's in the table. */
export const DEFAULT_WAITING_METRICS: readonly string[] = Object.freeze(
  ENGINE_METRICS.flatMap((e) => e.waiting),
);

/** The first of `names` present, else undefined (one gauge under an old and a new name). */
function firstOf(
  values: ReadonlyMap<string, number>,
  names: readonly string[],
): number | undefined {
  for (const name of names) {
    const v = values.get(name);
    if (v !== undefined) return v;
  }
  return undefined;
}

/**
 * The queue and cache gauges of a metrics page: running and waiting as the probe's names give
 * them, KV usage and the prefix counters of the first engine in the table that shows any.
 */
export function queueFromMetrics(
  values: ReadonlyMap<string, number>,
  names: MetricNames,
): NodeQueue | undefined {
  const running = sumOf(values, names.running);
  const waiting = sumOf(values, names.waiting);
  if (running === undefined && waiting === undefined) return undefined;
  const queue: NodeQueue = { running: running ?? 0, waiting: waiting ?? 0 };
  for (const engine of ENGINE_METRICS) {
    const kv = firstOf(values, engine.kv_usage);
    const queries = firstOf(values, engine.prefix_queries);
    const hits = firstOf(values, engine.prefix_hits);
    if (kv === undefined && queries === undefined && hits === undefined) continue;
    if (kv !== undefined) queue.kv_usage = kv;
    if (queries !== undefined) queue.prefix_queries = queries;
    if (hits !== undefined) queue.prefix_hits = hits;
    break;
  }
  return queue;
}

/** `name[{labels}] value [timestamp]`; the timestamp (ms) is allowed and ignored. */
const LINE = /^\s*([A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)(?:\s+-?\d+)?\s*$/;

/**
 * Prometheus text reduced to what a probe needs: metric name → summed value. Blank and `#` lines
 * are skipped, labels and timestamps ignored, NaN and malformed lines skipped, several series of one name summed
 * (a per-model breakdown still adds up to what the node is doing).
 */
export function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = LINE.exec(line);
    if (!m || m[2] === "NaN") continue;
    const value = Number(m[2]);
    if (!Number.isFinite(value)) continue;
    values.set(m[1], (values.get(m[1]) ?? 0) + value);
  }
  return values;
}

/** Metric names from a block value (a name or a list of names); undefined when not given. */
function namesOf(value: unknown, key: string): readonly string[] | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value === "string") return [value];
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value;
  throw new Error(`capacity.${key} must be a metric name or a list of metric names`);
}

/** Sum of the names present; undefined when none is. */
function sumOf(values: ReadonlyMap<string, number>, names: readonly string[]): number | undefined {
  let total: number | undefined;
  for (const name of names) {
    const v = values.get(name);
    if (v !== undefined) total = (total ?? 0) + v;
  }
  return total;
}

/** Which metric names count as running and waiting. */
export interface MetricNames {
  /** Gauges of requests running; summed, they count toward `used`. */
  running: readonly string[];
  /** Gauges of requests waiting in the node's queue; summed, they count toward `used` too. */
  waiting: readonly string[];
}

/**
 * The names a capacity block asks for: `running` (or `used`) and `waiting`, each falling back to
 * the defaults on its own — an engine that spells "running" differently usually still spells
 * "waiting" the normal way. Throws on a value that is not a name or a list of names.
 */
export function metricNames(block: Readonly<Record<string, unknown>>): MetricNames {
  return {
    running: namesOf(block.running, "running") ?? namesOf(block.used, "used") ??
      DEFAULT_RUNNING_METRICS,
    waiting: namesOf(block.waiting, "waiting") ?? DEFAULT_WAITING_METRICS,
  };
}

/** running + waiting over the parsed values; undefined when neither side is present. */
export function usedFromMetrics(
  values: ReadonlyMap<string, number>,
  names: MetricNames,
): number | undefined {
  const queue = queueFromMetrics(values, names);
  return queue === undefined ? undefined : queue.running + queue.waiting;
}

/** A positive number from a block value, else undefined. */
function positive(value: unknown): number | undefined {
  const n = typeof value === "number" ? value : typeof value === "string" ? Number(value) : NaN;
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

const decoder = new TextDecoder();

/** Builds the Prometheus probe of one node. */
export function prometheusProbe(ctx: ProbeContext): CapacityProbe {
  const url = endpointUrl(ctx.node.url, ctx.config, "/metrics");
  const names = metricNames(ctx.config);
  const configuredLimit = positive(ctx.config.limit);

  /** The block's limit, else the node's max_conns as it is now, else none (unbounded). */
  const limit = (): number | null => {
    if (configuredLimit !== undefined) return configuredLimit;
    const max = ctx.skeid.getNode(ctx.node.id)?.max_conns ?? 0;
    return max > 0 ? max : null;
  };

  return {
    url,
    async poll() {
      let answer;
      try {
        answer = await ctx.get(url);
      } catch (err) {
        // Unreachable means unknown, and unknown means inflight decides.
        ctx.forget();
        ctx.enter("unreachable", errorMessage(err));
        return;
      }
      if (answer.status < 200 || answer.status > 299) {
        ctx.forget();
        ctx.enter("unreachable", `HTTP ${answer.status}`);
        return;
      }
      const queue = queueFromMetrics(parseMetrics(decoder.decode(answer.body)), names);
      if (queue === undefined) {
        // It answered but said nothing understood: most likely the wrong names for this engine.
        ctx.forget();
        ctx.enter("unknown_metrics", `none of ${[...names.running, ...names.waiting].join(", ")}`);
        return;
      }
      ctx.report({ used: queue.running + queue.waiting, limit: limit(), queue });
      ctx.enter("ok");
    },
  };
}
