/**
 * The data shapes of the routing and admission core. Field names of records that the admin API
 * and the function table print (nodes, readings, tiers, policies) keep the config's snake_case
 * spelling, so what an operator writes in YAML is what they read back (ADR 0002).
 *
 * Every moment in the core is an epoch time in **milliseconds** from the core's injected clock.
 *
 * @module
 */
import type { PickDecision, PickKind } from "./pick.ts";
import type { BudgetSettings, KeyLimits, ShareSettings } from "./key_policy.ts";

/** The token counts a usage event bills; 0 where the upstream reported nothing. */
export interface TokenCounts {
  /** Prompt tokens as the upstream reported them. */
  input_tokens: number;
  /** Completion tokens. */
  output_tokens: number;
  /** The reported total, else input + output. */
  total_tokens: number;
  /** Prompt tokens read from a cache. */
  cached_tokens: number;
  /** Prompt tokens written to a cache. */
  cache_write_tokens: number;
  /** Tool calls in the answer. */
  tool_calls: number;
}

/** What a usage event costs (USD, the served model's rule); the parts sum to the total. */
export interface CostAmounts {
  /** USD for the input tokens (the uncached ones when the rule has a cache rate). */
  cost_input_usd: number;
  /** USD for the output tokens. */
  cost_output_usd: number;
  /** USD for cache-read tokens. */
  cost_cache_read_usd: number;
  /** USD for cache-write tokens. */
  cost_cache_write_usd: number;
  /** USD, the sum of the four parts. */
  cost_total_usd: number;
}

/** A node's capacity block as written in config (`nodes[].capacity`); probes read the rest. */
export interface CapacitySpec {
  /** `inflight` (default), `none`, `ratelimit`, `prometheus`, `registry` or `custom`. */
  probe: string;
  /** Poll period of a probe on a timer, milliseconds (default 2000). */
  interval_ms: number;
  /** Every other key of the block, kept for the probe that reads it. */
  [key: string]: unknown;
}

/** A node of the inventory, defaults applied (see `normalizeNode`). */
export interface Node {
  /** Unique id. */
  id: string;
  /** Base URL, always ending in `/v1`. */
  url: string;
  /** The served model this node carries; `''` matches any requested model. */
  model: string;
  /** Engine id, normalized (see engines.ts); default `openaibase`. */
  engine: string;
  /** Round-robin weight, integer, at least 1. */
  weight: number;
  /** Admission limit for the whole process group; 0 = unlimited. */
  max_conns: number;
  /** Operator state only; never derived from errors. */
  healthy: boolean;
  /** Normalized tags (lowercase, trimmed, deduplicated, first-seen order). */
  tags: string[];
  /** Free-form, kept, never read by routing. */
  metadata: Record<string, unknown>;
  /** Upstream key reference resolved through the key broker. */
  api_key_ref?: string;
  /** Upstream key from this environment variable when the reference resolves none. */
  api_key_env?: string;
  /**
   * Send Skeid's resolved customer key id as `x-skeid-key-id` (for a downstream Skeid that trusts
   * it); the client's own identity headers are never forwarded. Set only when true.
   */
  forward_key_id?: boolean;
  /** How admission learns real occupancy; absent = inflight only. */
  capacity?: CapacitySpec;
  /**
   * `native`: the node speaks the Responses API itself; Responses requests go to it as they came
   * (ADR 0028). Absent: it gets the chat wire.
   */
  responses?: "native";
}

/** The input shape of a node: a config `nodes` entry or an admin API body. */
export type NodeSpec = Record<string, unknown>;

/** A node as `pickNode` returns it: a copy with inflight and the route key added. */
export interface PickedNode extends Node {
  /** Requests this process has admitted to the node and not yet finished, at pick time. */
  inflight: number;
  /** The route key (`model|engine|tags|-denytags`) whose round-robin cursor picked the node. */
  route_key: string;
  /** What a `least_loaded` or `affinity` pick decided; absent for `round_robin`. */
  route?: PickDecision;
}

/** One tier of a route plan. */
export interface Tier {
  /** Nodes must carry every one of these tags. */
  tags: string[];
  /** The served model asked of the nodes in this tier. */
  model: string;
  /** Engine constraint; `''` matches any engine. */
  engine: string;
  /** How long to wait for capacity in this tier before falling through, ms. */
  wait_ms: number;
  /** How this tier chooses among its admitting nodes; absent: `routing.pick`. */
  pick?: PickKind;
  /** Tags of nodes this request must never reach (from the customer key's policy). */
  deny_tags: string[];
}

/** An alias: a client-facing model name as an ordered plan of tiers. */
export interface Alias {
  /**
   * The tiers in the order they are tried; deny tags come from the customer key's policy, not the
   * alias.
   */
  tiers: Omit<Tier, "deny_tags">[];
}

/** A resolved, immutable policy (see `resolvePolicy`). */
export interface Policy {
  /** Requested model names the customer key may ask for; `null` = all of them. */
  readonly models: ReadonlySet<string> | null;
  /** Nodes carrying any of these tags are never reached. */
  readonly deny_tags: readonly string[];
  /** Models published in this customer key's provider manifest (manifest section), if any. */
  readonly manifest_models?: readonly string[];
  /** Rate limits (`limits:`); absent = none. */
  readonly limits?: KeyLimits;
  /** Budget (`budget:`); absent = none. */
  readonly budget?: BudgetSettings;
  /** Fair share settings (`share:`); absent = the defaults. */
  readonly share?: ShareSettings;
}

/** Why a route plan is not permitted. */
export type PlanRefusal = "" | "model_not_permitted" | "all_tiers_denied";

/** The answer of `routePlan`. */
export interface RoutePlan {
  /** Tiers to try in order (denied ones dropped), each with the deny tags; empty when refused. */
  tiers: Tier[];
  /** False when the request is a refusal (403); `reason` says why. */
  permitted: boolean;
  /** Why the plan is refused; `''` when permitted. */
  reason: PlanRefusal;
}

/** A node selection: what `pickNode` and `routeState` take. */
export interface Selection {
  /** Served model the nodes must carry (a node with model `''` matches any). */
  model: string;
  /** Engine id the nodes must declare; absent or `''` = any engine. */
  engine?: string;
  /** Tags a node must all carry. */
  tags?: readonly string[];
  /** Tags a node must carry none of (the customer key's deny tags). */
  deny_tags?: readonly string[];
  /** How to choose among the admitting nodes; absent: `routing.pick`. */
  pick?: PickKind;
}

/** The answer of `routeState`. */
export interface RouteState {
  /** The selection's served model. */
  model: string;
  /** The selection's engine id, normalized; `''` = any. */
  engine: string;
  /** The selection's required tags, normalized. */
  tags: string[];
  /** The selection's deny tags, normalized. */
  deny_tags: string[];
  /** Nodes that pass eligibility for the selection, admitted or not. */
  eligible_count: number;
  /** Eligible nodes that admission would take one more request on now. */
  available_count: number;
  /** Whether any node is eligible; false means 503, not 429. */
  has_eligible: boolean;
  /**
   * Whether any eligible node would admit now; eligible but none available means wait, then 429.
   */
  has_available: boolean;
}

/** A capacity reading: what a probe or a response's headers said about a node. */
export interface CapacityReading {
  /** Which probe wrote it (`ratelimit`, `prometheus`, `registry`, `custom`, ...). Never read by admission. */
  source: string;
  /** Occupancy; `null` when not measured. */
  used: number | null;
  /** Ceiling; `null` or 0 = does not constrain admission. */
  limit: number | null;
  /** Which provider quota (`requests`, `tokens`) the reading is about; reports only. */
  quota?: string;
  /** When the reading was taken, epoch ms. */
  at: number;
  /** Absolute moment after which the reading is dropped, epoch ms. */
  expires_at?: number;
  /** How often this source reports, ms; absent for passive readings. */
  interval_ms?: number;
  /** Backoff: nothing is sent before this moment, epoch ms. */
  retry_after?: number;
  /** The node's own queue and cache gauges, when a probe reads them (picks read them). */
  queue?: NodeQueue;
}

/** A node's queue and KV cache as its engine's metrics tell them (`capacity/prometheus.ts`). */
export interface NodeQueue {
  /** Requests running. */
  running: number;
  /** Requests waiting in the engine's queue. */
  waiting: number;
  /** KV cache in use, 0..1; absent when the engine does not say. */
  kv_usage?: number;
  /** Prefix cache lookups so far (a counter: going down means the engine restarted). */
  prefix_queries?: number;
  /** Prefix cache hits so far. */
  prefix_hits?: number;
}

/** What `setCapacityReading` takes. */
export interface CapacityReadingInput {
  /** Occupancy; absent or non-finite = not measured (`null`). */
  used?: number | null;
  /** Ceiling; absent, `null` or 0 = does not constrain admission. */
  limit?: number | null;
  /** Relative backoff, ms from now. */
  retry_after_ms?: number;
  /** Absolute backoff, epoch ms (used when retry_after_ms is absent). */
  retry_after?: number;
  /** Which probe wrote it; default `custom`. Tighter-reading-wins compares across sources. */
  source?: string;
  /** Which provider quota (`requests`, `tokens`) the reading is about; reports only. */
  quota?: string;
  /** Epoch ms; default now. */
  at?: number;
  /** Epoch ms. */
  expires_at?: number;
  /** How often this source reports, ms; ignored unless above 0. */
  interval_ms?: number;
  /** The node's queue and cache gauges (a probe that reads them). */
  queue?: NodeQueue;
}

/** How a request ended, for `finishRequest`. `aborted` wins over `ok`. */
export interface FinishOutcome {
  /** The upstream answered successfully; false or absent (and not aborted) counts as an error. */
  ok?: boolean;
  /** The client went away before the end; counted as aborted, never as a failure. */
  aborted?: boolean;
  /** Wall time of the request, ms; added to the node's duration total when finite and above 0. */
  duration_ms?: number;
  /**
   * What the node's transport did (ejection, ADR 0021): `failure` (connect error, timeout, reset
   * before the first byte) or `answered` (any status, 429 included). Absent (or aborted): ejection
   * learns nothing, and a half-open trial is freed for the next request.
   */
  transport?: "failure" | "answered";
  /**
   * Time to the first token, ms (a stream's first content; a whole answer's arrival): fed to the
   * node's last minute (the Live page). Absent: none seen.
   */
  ttft_ms?: number;
}

/** Volatile per-process counters of one node (`nodeMetrics`). */
export interface NodeMetrics {
  /** The node's id. */
  node_id: string;
  /** Requests this process has admitted to the node and not yet finished. */
  inflight: number;
  /** Admissions (`startRequest` calls that returned true) since the node was added. */
  started: number;
  /** Finishes with `ok` and not aborted. */
  ok: number;
  /** Finishes neither ok nor aborted (failures). */
  error: number;
  /** Finishes where the client went away; `aborted` wins over `ok`. */
  aborted: number;
  /** Sum of reported request durations, ms. */
  duration_ms_total: number;
  /** The capacity reading in force for the node, if one is current. */
  capacity?: CapacityReading;
}

/** A pricing rule, USD per million tokens. */
export interface PricingRule {
  /** USD per million input tokens (uncached input when a cache rate is set). */
  input_per_million: number;
  /** USD per million output tokens. */
  output_per_million: number;
  /**
   * USD per million cache-read tokens; absent = input rate when `cache_write_per_million` is set.
   */
  cached_input_per_million?: number;
  /**
   * USD per million cache-write tokens; absent = input rate when `cached_input_per_million` is set.
   */
  cache_write_per_million?: number;
}

/** Token counts read off an upstream answer; `null` = not reported. */
export interface Usage {
  /** Prompt tokens, as the upstream counts them (see `input_includes_cache`). */
  input_tokens: number | null;
  /** Completion tokens. */
  output_tokens: number | null;
  /** Total as reported; pricing does not read it. */
  total_tokens: number | null;
  /** Input tokens read from a prompt cache. */
  cached_tokens: number | null;
  /** Input tokens written to a prompt cache. */
  cache_write_tokens: number | null;
  /** Whether input_tokens already includes the cache tokens (OpenAI) or not (Anthropic). */
  input_includes_cache: boolean;
}

/** A priced cost (estimate_cost's answer). */
export interface Cost {
  /** USD for the input tokens (uncached ones when the rule has a cache rate). */
  input_cost_usd: number;
  /** USD for the output tokens. */
  output_cost_usd: number;
  /** USD for cache-read tokens; 0 when the rule has no cache rate. */
  cache_read_cost_usd: number;
  /** USD for cache-write tokens; 0 when the rule has no cache rate. */
  cache_write_cost_usd: number;
  /** Sum of the four costs, USD. */
  total_cost_usd: number;
  /** Always `USD`. */
  currency: "USD";
}

/** What a usage event is built from (normalize_metrics' answer): its counts and costs. */
export interface NormalizedMetrics extends TokenCounts, CostAmounts {
  /** Who produced the event (the proxy writes `skeid`); `''` when not given. */
  provider: string;
  /** Engine id of the node that served the request; `''` when not given. */
  engine: string;
  /** The served model the counts were priced with. */
  model: string;
  /** The endpoint the request went to; `''` when not given. */
  route: string;
  /** Wall time of the request, ms; 0 when not given. */
  duration_ms: number;
  /** Names of the tool calls in the answer, in order. */
  tool_names: string[];
  /** Always `USD`. */
  currency: "USD";
}

/** A model a client can name (`listModels`). */
export interface ListedModel {
  /** The name a client puts in `model`: a node model or an alias. */
  model: string;
  /** First node's engine for a node model, `''` for an alias. */
  engine: string;
}

/** The state of config reloads (`reloadStatus`). */
export interface ReloadStatus {
  /** False while the last reload failed; the previous config stays in force. */
  ok: boolean;
  /** The last failure's message, else null. */
  error: string | null;
  /** ISO-8601 UTC of the last failure in the current run of failures, else null. */
  failed_at: string | null;
  /** Failed reloads in a row; back to 0 after a successful one. */
  failures: number;
}

/** A listener told when admission might now admit more (slot freed, reading changed, node added). */
export type CapacityListener = () => void;

/** The `routing:` settings. Defaults come from the environment (SKEID_*) or are built in. */
export interface RoutingSettings {
  /** Wait of a model without an alias, ms (default 2000). */
  wait_timeout_ms: number;
  /** Safety-net retry period of a waiting request, ms (default 25, at least 1). */
  wait_poll_ms: number;
  /** Whether `x-skeid-key-id`/`x-api-key-id` names the customer key id (default false). */
  trust_key_id_header: boolean;
  /** Separate Skeid frontends sharing the same nodes (default 1, at least 1). */
  frontend_count: number;
  /** When true, a customer key not listed under `keys:` gets 401 (default false). */
  require_known_keys: boolean;
  /** Request body limit, bytes (default 64 MiB); larger → 413 before routing. */
  max_body_bytes: number;
  /** Upstream attempts per request across failover (default 3). */
  max_attempts: number;
  /** How often budgets re-read the period's totals from a shared ledger, ms (default 2000). */
  budget_refresh_ms: number;
  /**
   * The longest a node's `Retry-After` (on a 429 or 503) backs it off, ms (default 60000; 0: no
   * answer backs a node off).
   */
  max_retry_after_ms: number;
  /**
   * The most output tokens one request is charged before its usage event — budget reservation,
   * tpm window, fair share (default 1,000,000, at least 1): a larger `max_tokens × n` is charged
   * this much.
   */
  max_reserve_tokens: number;
  /** The pick of every selection whose tier names none (default `round_robin`). */
  pick: PickKind;
  /** `affinity`'s load bound: a node takes a session while below bound × mean (default 1.25). */
  affinity_bound: number;
  /** Prompt blocks the prefix index remembers, all nodes together (default 1,000,000). */
  prefix_index_blocks: number;
  /** How long the prefix index remembers a routed block, s (default 600). */
  prefix_index_ttl_s: number;
}
