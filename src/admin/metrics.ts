/**
 * Volatile process counters the proxy feeds (refusals, failed attempts, request durations) and
 * the Prometheus text exposition (format 0.0.4) of them together with the core's node state.
 * Updates are O(1) on the request path; all the formatting happens in `render`, off it.
 *
 * @module
 */
import type { RoutingCore, RoutingMetrics } from "../core/routing_core.ts";
import type { BudgetStatus } from "../core/budget.ts";
import type { Node } from "../core/types.ts";

import type { RefusalStatus } from "../proxy/errors.ts";
import type { TelemetryCounts } from "../telemetry/otlp_export.ts";
import {
  LATENCY_BUCKETS_S,
  ShareStats,
  type ShareWire,
  type TierBacklog,
} from "../proxy/share_stats.ts";

export type { RefusalStatus } from "../proxy/errors.ts";

/** Upper bounds of the request duration histogram, seconds. */
export const DURATION_BUCKETS_S: readonly number[] = LATENCY_BUCKETS_S;

/**
 * Distinct label sets kept per labelled counter. Model names come from clients, so without a
 * cap a client naming random models would grow this map without bound; past it, new label
 * sets are counted under `model="_other"` (or `node="_other"`).
 */
const MAX_SERIES = 1000;

/**
 * Longest label value kept, in characters: a longer one is cut to this many and marked with `…`
 * (names the config knows are short; a client's name may be megabytes).
 */
export const MAX_LABEL_CHARS = 128;

/** The one label every requested model the config does not know is counted under. */
export const UNKNOWN_MODEL = "_unknown";

/** A label value, cut to `MAX_LABEL_CHARS`. */
export function cappedLabel(value: string): string {
  return value.length <= MAX_LABEL_CHARS ? value : `${value.slice(0, MAX_LABEL_CHARS - 1)}…`;
}

/**
 * Whether the core's config knows a model name (a node's model or an alias), from a set rebuilt
 * only when the inventory or the aliases changed.
 */
export function knownModels(skeid: RoutingCore): (model: string) => boolean {
  let names = new Set<string>();
  let seen: [number, ReadonlyMap<string, unknown>, number] | undefined;
  return (model) => {
    const aliases = skeid.aliases;
    if (
      seen === undefined || seen[0] !== skeid.generation || seen[1] !== aliases ||
      seen[2] !== aliases.size
    ) {
      names = new Set(aliases.keys());
      for (const node of skeid.listNodes()) if (node.model !== "") names.add(node.model);
      seen = [skeid.generation, aliases, aliases.size];
    }
    return names.has(model);
  };
}

/** One node's duration histogram: non-cumulative bucket counts (last = +Inf), sum, count. */
interface Histogram {
  buckets: number[];
  sum: number;
  count: number;
}

/** Escapes a label value for the text format (backslash, double quote, newline). */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** `{a="x",b="y"}` from ordered pairs. */
function labels(pairs: [string, string][]): string {
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

/** A sample value: integers as is, floats in shortest round-trip form, infinities spelled out. */
function value(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "+Inf";
  if (n === -Infinity) return "-Inf";
  return String(n);
}

/** A labelled counter with a bounded number of series. */
class LabelledCounter {
  readonly #series = new Map<string, { labels: [string, string][]; n: number }>();
  constructor(readonly overflowLabel: string) {}

  add(pairs: [string, string][]): void {
    pairs = pairs.map(([k, v]) => [k, cappedLabel(v)]);
    let key = JSON.stringify(pairs);
    let entry = this.#series.get(key);
    if (!entry && this.#series.size >= MAX_SERIES) {
      pairs = pairs.map(([k, v]) => [k, k === this.overflowLabel ? "_other" : v]);
      key = JSON.stringify(pairs);
      entry = this.#series.get(key);
    }
    if (entry) entry.n++;
    else this.#series.set(key, { labels: pairs, n: 1 });
  }

  samples(): { labels: [string, string][]; n: number }[] {
    return [...this.#series.values()];
  }
}

/** Volatile gateway counters for `/skeid/metrics`; one per gateway, never billed. */
export class GatewayMetrics {
  readonly #refusals = new LabelledCounter("model");
  readonly #attemptFailures = new LabelledCounter("node");
  readonly #responses = new LabelledCounter("node");
  readonly #durations = new Map<string, Histogram>();
  /** Fair share: wait times and served tokens (the waiter queue and the usage hook feed it). */
  readonly share: ShareStats;
  /** Reads the waiter queue's backlog per tier (set by the gateway). */
  shareBacklog: (() => TierBacklog[]) | undefined;
  readonly #known: ((model: string) => boolean) | undefined;

  /**
   * `known`: whether the config knows a requested model (see `knownModels`); any other model is
   * counted as `_unknown`. Without it every model is kept (cut to `MAX_LABEL_CHARS`).
   * `keyLabel`: a customer key id's label in the fair share metrics (default: the id).
   */
  constructor(
    known?: (model: string) => boolean,
    keyLabel: (keyId: string) => string = (id) => id,
  ) {
    this.#known = known;
    this.share = new ShareStats(keyLabel);
  }

  /** Fair share per tier and served tokens per key, for `/skeid/metrics/nodes`. */
  shareSnapshot(): ShareWire {
    return this.share.snapshot(this.shareBacklog?.() ?? []);
  }

  readonly #keyLimited = new LabelledCounter("limit");
  /** Budgets of the keys listed in the config (set by the gateway; ADR 0023). */
  keyBudgets?: () => { key: string; status: BudgetStatus }[];
  /** `warn_at` warnings given so far. */
  budgetWarnings?: () => number;
  /** What the OTLP exporter counted (set by the gateway; ADR 0050). */
  telemetry?: () => Readonly<TelemetryCounts>;

  /** A request refused by its customer key's `limit` (`rpm`, `tpm`, `max_inflight`, `budget`). */
  keyLimited(limit: string): void {
    this.#keyLimited.add([["limit", limit]]);
  }

  /** A request refused before forwarding (no usage event is written for it). */
  refusal(model: string, status: RefusalStatus, reason: string): void {
    const label = model === "" || this.#known === undefined || this.#known(model)
      ? model
      : UNKNOWN_MODEL;
    this.#refusals.add([["model", label], ["status", String(status)], ["reason", reason]]);
  }

  /** 503: no eligible (healthy, matching) node at all (`no_eligible_node`). */
  noNode(model: string): void {
    this.refusal(model, 503, "no_eligible_node");
  }

  /** 429: every eligible node stayed full through the wait (`no_capacity`). */
  saturation(model: string): void {
    this.refusal(model, 429, "no_capacity");
  }

  /** One upstream attempt failed (and was failed over, or ended the request). */
  attemptFailed(nodeId: string, reason: string): void {
    this.#attemptFailures.add([["node", nodeId], ["reason", reason]]);
  }

  /** A forwarded request ended on a node with `status` after `durationMs` (capacity wait included). */
  requestDone(nodeId: string, status: number, durationMs: number): void {
    this.#responses.add([["node", nodeId], ["status", String(status)]]);
    nodeId = cappedLabel(nodeId);
    let h = this.#durations.get(nodeId);
    if (!h) {
      if (this.#durations.size >= MAX_SERIES) return;
      h = { buckets: new Array(DURATION_BUCKETS_S.length + 1).fill(0), sum: 0, count: 0 };
      this.#durations.set(nodeId, h);
    }
    const seconds = Math.max(0, durationMs) / 1000;
    let i = 0;
    while (i < DURATION_BUCKETS_S.length && seconds > DURATION_BUCKETS_S[i]) i++;
    h.buckets[i]++;
    h.sum += seconds;
    h.count++;
  }

  /** The picks' series: picks by kind and outcome, the prefix index, per-node TTFT numbers. */
  #renderPicks(
    routing: RoutingMetrics,
    family: (name: string, type: string, help: string) => void,
    sample: (name: string, pairs: [string, string][], n: number) => void,
  ): void {
    family(
      "skeid_route_picks_total",
      "counter",
      "least_loaded and affinity picks by session key kind and outcome (hit, miss, spilled).",
    );
    for (const p of routing.picks) {
      sample(
        "skeid_route_picks_total",
        [["pick", p.pick], ["key_kind", p.key_kind], ["outcome", p.outcome]],
        p.count,
      );
    }
    family("skeid_prefix_index_blocks", "gauge", "Prompt blocks the prefix index remembers.");
    sample("skeid_prefix_index_blocks", [], routing.index_blocks);
    family("skeid_prefix_index_bytes", "gauge", "Memory of the prefix index, bytes.");
    sample("skeid_prefix_index_bytes", [], routing.index_bytes);
    const perNode: [string, string, string, (n: RoutingMetrics["nodes"][number]) => number][] = [
      [
        "skeid_node_prefill_ms_per_token",
        "gauge",
        "Prefill cost per uncached prompt token, learned from the node's TTFT.",
        (n) => n.prefill_ms_per_token,
      ],
      [
        "skeid_node_ttft_predicted_ms_total",
        "counter",
        "Sum of the TTFT the pick predicted, over requests whose TTFT was measured.",
        (n) => n.predicted_ttft_ms_total,
      ],
      [
        "skeid_node_ttft_measured_ms_total",
        "counter",
        "Sum of the TTFT measured, over the same requests.",
        (n) => n.measured_ttft_ms_total,
      ],
      [
        "skeid_node_ttft_compared_total",
        "counter",
        "Requests whose TTFT was both predicted and measured.",
        (n) => n.compared,
      ],
    ];
    for (const [name, type, help, read] of perNode) {
      family(name, type, help);
      for (const n of routing.nodes) sample(name, [["node", n.node_id]], read(n));
    }
  }

  /** Prometheus text format 0.0.4: node state from the core, then these counters. */
  render(skeid: RoutingCore): string {
    const out: string[] = [];
    const family = (name: string, type: string, help: string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    const sample = (name: string, pairs: [string, string][], n: number) => {
      out.push(`${name}${pairs.length ? labels(pairs) : ""} ${value(n)}`);
    };

    const now = skeid.now();
    const nodes = skeid.listNodes();
    const metrics = new Map(skeid.nodeMetrics().map((m) => [m.node_id, m]));

    const perNode = (
      name: string,
      type: string,
      help: string,
      pick: (node: Node) => number | undefined,
    ) => {
      family(name, type, help);
      for (const node of nodes) {
        const n = pick(node);
        if (n !== undefined) sample(name, [["node", node.id]], n);
      }
    };
    perNode(
      "skeid_node_inflight",
      "gauge",
      "Requests this process has in flight on the node.",
      (node) => metrics.get(node.id)?.inflight ?? 0,
    );
    perNode(
      "skeid_node_healthy",
      "gauge",
      "Operator health of the node (1 healthy, 0 drained).",
      (node) => node.healthy ? 1 : 0,
    );
    perNode(
      "skeid_node_max_conns",
      "gauge",
      "This process's share of the node's max_conns (0 = unlimited).",
      (node) => skeid.workerMaxConns(node),
    );
    const counters: [string, string, "started" | "ok" | "error" | "aborted"][] = [
      ["skeid_node_requests_started_total", "Requests admitted to the node.", "started"],
      ["skeid_node_requests_ok_total", "Requests that ended well.", "ok"],
      ["skeid_node_requests_error_total", "Requests that failed (not aborted).", "error"],
      ["skeid_node_requests_aborted_total", "Requests the client abandoned.", "aborted"],
    ];
    for (const [name, help, field] of counters) {
      perNode(name, "counter", help, (node) => metrics.get(node.id)?.[field] ?? 0);
    }

    const readings: [string, string, "used" | "limit"][] = [
      ["skeid_node_capacity_used", "Occupancy from the node's current capacity reading.", "used"],
      ["skeid_node_capacity_limit", "Ceiling from the node's current capacity reading.", "limit"],
    ];
    for (const [name, help, field] of readings) {
      family(name, "gauge", help);
      for (const m of metrics.values()) {
        const c = m.capacity;
        const n = c?.[field];
        if (c && typeof n === "number") {
          sample(name, [["node", m.node_id], ["source", c.source]], n);
        }
      }
    }
    perNode(
      "skeid_node_backoff_seconds",
      "gauge",
      "Seconds left of the node's backoff (0 when none is pending).",
      (node) => {
        const until = metrics.get(node.id)?.capacity?.retry_after;
        return until !== undefined && until > now ? (until - now) / 1000 : 0;
      },
    );

    // Node ejection (ADR 0021): one series per configured node, so the labels stay bounded.
    const ejections = new Map(skeid.nodeEjections().map((e) => [e.node_id, e]));
    perNode(
      "skeid_node_ejected",
      "gauge",
      "1 while the node is out of admission after transport failures (ejected, due or on trial).",
      (node) => (ejections.get(node.id)?.state ?? "closed") === "closed" ? 0 : 1,
    );
    perNode(
      "skeid_node_transport_failures",
      "gauge",
      "Transport failures in a row (connect error or timeout, reset before the first byte).",
      (node) => ejections.get(node.id)?.consecutive_failures ?? 0,
    );
    perNode(
      "skeid_node_ejections_total",
      "counter",
      "Times the node was ejected after transport failures.",
      (node) => ejections.get(node.id)?.ejections_total ?? 0,
    );

    this.#renderPicks(skeid.routingMetrics(), family, sample);

    family(
      "skeid_request_duration_seconds",
      "histogram",
      "Time from routing start to the end of a forwarded request, per node.",
    );
    for (const [node, h] of this.#durations) {
      let cumulative = 0;
      DURATION_BUCKETS_S.forEach((le, i) => {
        cumulative += h.buckets[i];
        sample(
          "skeid_request_duration_seconds_bucket",
          [["node", node], ["le", String(le)]],
          cumulative,
        );
      });
      sample("skeid_request_duration_seconds_bucket", [["node", node], ["le", "+Inf"]], h.count);
      sample("skeid_request_duration_seconds_sum", [["node", node]], h.sum);
      sample("skeid_request_duration_seconds_count", [["node", node]], h.count);
    }

    const labelled = (name: string, help: string, counter: LabelledCounter) => {
      family(name, "counter", help);
      for (const s of counter.samples()) sample(name, s.labels, s.n);
    };
    labelled(
      "skeid_responses_total",
      "Forwarded requests by node and final status.",
      this.#responses,
    );
    labelled(
      "skeid_upstream_attempt_failures_total",
      "Upstream attempts that failed, by node and reason.",
      this.#attemptFailures,
    );
    labelled(
      "skeid_refusals_total",
      "Requests refused before forwarding, by requested model, status and reason.",
      this.#refusals,
    );
    out.push(...this.share.prometheus(this.shareBacklog?.() ?? [], escapeLabel));

    labelled(
      "skeid_key_limit_refusals_total",
      "Requests refused by their customer key's rate limits or budget, by limit.",
      this.#keyLimited,
    );
    this.#renderBudgets(family, sample);
    this.#renderTelemetry(family, sample);
    return out.join("\n") + "\n";
  }

  /** The OTLP exporter's counts: spans exported and dropped (all 0 with OpenTelemetry off). */
  #renderTelemetry(
    family: (name: string, type: string, help: string) => void,
    sample: (name: string, pairs: [string, string][], n: number) => void,
  ): void {
    const c = this.telemetry?.();
    family("skeid_telemetry_spans_exported_total", "counter", "Spans a collector accepted.");
    sample("skeid_telemetry_spans_exported_total", [], c?.spansExported ?? 0);
    family(
      "skeid_telemetry_spans_dropped_total",
      "counter",
      "Spans not exported: the queue was full (OTEL_BSP_MAX_QUEUE_SIZE) or their export failed.",
    );
    sample(
      "skeid_telemetry_spans_dropped_total",
      [["reason", "queue_full"]],
      c?.spansDroppedQueueFull ?? 0,
    );
    sample(
      "skeid_telemetry_spans_dropped_total",
      [["reason", "export_failed"]],
      c?.spansDroppedExportFailed ?? 0,
    );
    family(
      "skeid_telemetry_metric_exports_failed_total",
      "counter",
      "GenAI metric exports that failed (refused, timed out, not 2xx).",
    );
    sample("skeid_telemetry_metric_exports_failed_total", [], c?.metricExportsFailed ?? 0);
  }

  /** Spend and what is left of the budgets of keys listed in the config; warn_at warnings. */
  #renderBudgets(
    family: (name: string, type: string, help: string) => void,
    sample: (name: string, pairs: [string, string][], n: number) => void,
  ): void {
    const budgets = this.keyBudgets?.() ?? [];
    const gauges: [string, string, (s: BudgetStatus) => number | null][] = [
      ["skeid_key_budget_spent_usd", "USD spent this period.", (s) => s.spent.usd],
      ["skeid_key_budget_remaining_usd", "USD left of the cap.", (s) => s.remaining.usd],
      ["skeid_key_budget_spent_tokens", "Tokens spent this period.", (s) => s.spent.tokens],
      ["skeid_key_budget_remaining_tokens", "Tokens left of the cap.", (s) => s.remaining.tokens],
    ];
    for (const [name, help, pick] of gauges) {
      family(name, "gauge", `${help} Customer keys listed in the config with a budget.`);
      for (const { key, status } of budgets) {
        const n = pick(status);
        if (n !== null) sample(name, [["key", key], ["period", status.period]], n);
      }
    }
    family("skeid_budget_warnings_total", "counter", "Budget warn_at warnings given.");
    sample("skeid_budget_warnings_total", [], this.budgetWarnings?.() ?? 0);
  }
}
