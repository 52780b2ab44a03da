/**
 * The routing and admission core: one object that holds the node inventory, aliases, policies,
 * capacity readings, admission counters and prices, and answers every routing question
 * synchronously. No I/O here (the one async method is SHA-1 through Web Crypto); the server,
 * the CLI, the config loader and the tests all drive these same methods.
 *
 * Eligibility (which nodes a selection matches: healthy, model, engine, tags) and admission
 * (whether one of them takes one more request now: its share of max_conns, its capacity
 * reading) are two decisions: no eligible node is a 503, eligible but none admitting is worth
 * waiting for. Health is operator state only; nothing here ever derives it from errors.
 *
 * @module
 */
import { EMPTY_MINUTE, type LastMinute, MinuteWindow } from "./minute_window.ts";
import type {
  Alias,
  CapacityListener,
  CapacityReading,
  CapacityReadingInput,
  Cost,
  FinishOutcome,
  ListedModel,
  Node,
  NodeMetrics,
  NodeSpec,
  NormalizedMetrics,
  PickedNode,
  Policy,
  PricingRule,
  RoutePlan,
  RouteState,
  RoutingSettings,
  Selection,
  Tier,
  Usage,
} from "./types.ts";
import { createLogger, type Logger } from "../log.ts";
import {
  emptyPolicySet,
  isFullKeyId,
  PolicyError,
  type PolicySet,
  resolvePolicy,
  shortKeyIdOf,
  shortKeyIdWarning,
  underPath,
} from "./policies.ts";
import { type KeyPolicy, keyPolicyOf } from "./key_policy.ts";
import { CapacityTable } from "./capacity.ts";
import { type EjectionOptions, type EjectionSnapshot, EjectionTable } from "./ejection.ts";
import { costFor, PricingTable } from "./pricing.ts";
import { readingFromHeaders } from "./rate_limit_headers.ts";
import { normalizeMetrics as buildMetrics, readUsage } from "./usage_reading.ts";
import { normalizeEngineId } from "./engines.ts";
import { normalizeTags } from "./tags.ts";
import { normalizeAlias } from "./aliases.ts";
import {
  checkNode,
  Inventory,
  type NodeRecord,
  NodeSpecError,
  normalizeNode,
  normalizeNodeList,
} from "./inventory.ts";
import { FailureHistory, workerShare, workerShareWarnings } from "./admission.ts";
import { InflightTable } from "./inflight_table.ts";
import { formatPath } from "./config_path.ts";
import { hasAllTags, hasAnyTag, pickWeighted, RouteTable } from "./router.ts";
import { AffinityRouter, type NodeLoadView, type PickCount } from "./affinity.ts";
import type { PickExplanation } from "./pick.ts";
import type { RouteHint, RouteHintSource } from "./route_hint.ts";
import type { NodeCostView } from "./node_cost.ts";
import {
  capacityMaxAgeFromEnv,
  type EnvReader,
  normalizeRoutingPatch,
  processEnv,
  routingFromEnv,
} from "./env.ts";

/** Construction options; every one has a default from the environment or built in. */
export interface SkeidOptions {
  /** Clock, epoch ms (tests inject one). Default `Date.now`. */
  now?: () => number;
  /** Workers sharing this config (ADR 0025); default 1. */
  workerCount?: number;
  /**
   * Per-node inflight counters admission takes slots from (ADR 0025); default a table of this
   * core alone. A table shared by several workers (`workers > 1`) makes admission exact across
   * them: max_conns is then divided by frontend_count only.
   */
  inflight?: InflightTable;
  /** How long a capacity reading is trusted, ms; default 5000; 0 disables expiry. */
  capacityMaxAgeMs?: number;
  /** Routing settings that override the environment defaults (the "passed to new" values). */
  routing?: Partial<RoutingSettings>;
  /** Environment to read SKEID_* defaults from; default `Deno.env` (tests pass a map). */
  env?: (name: string) => string | undefined;
  /** Warnings (short-id deprecation, cache-rate drops) go here. */
  logger?: Logger;
  /**
   * Extra check of every node at add/replace (e.g. a registry probe's capacity block). What it
   * throws fails the add (NodeSpecError on `capacity`), before the inventory changes.
   */
  validateNode?: (node: Node) => void;
  /** How far back `nodeFailures` counts failed finishes, seconds (registry error_window_s); 60. */
  errorWindowS?: number;
  /** Node ejection thresholds (ADR 0021); defaults: 2 failures, 1 s doubling to 60 s, 50%. */
  ejection?: Omit<EjectionOptions, "now">;
  /**
   * The policy of a customer key id judged at intake (an issued key or a JWT identity, ADR
   * 0029); undefined for any other id, which the policy set decides.
   */
  identityPolicy?: (apiKeyId: string) => Policy | null | undefined;
  /** The prefix index words the workers of one process share (ADR 0031); default its own. */
  prefixIndex?: SharedArrayBuffer;
}

/** A route hint, computed only when a pick reads it (`round_robin` never does). */
export type { RouteHintSource };

/** What a measured request tells the picks about its node (`observeRoute`). */
export interface RouteObservation {
  /** Time to first token as the gateway measured it, ms. */
  ttft_ms: number;
  /** Prompt tokens the node reported. */
  prompt_tokens: number;
  /** Prompt tokens the node reported cached (absent: not reported). */
  cached_tokens?: number;
  /** What the pick predicted, ms (compared in `/skeid/metrics`). */
  predicted_ttft_ms?: number;
  /**
   * The wait for a free slot the pick predicted, ms: a request expected to queue says little of
   * the node's prefill cost (its TTFT is mostly the wait), so the prefill fit leaves it out.
   */
  predicted_wait_ms?: number;
}

/** The picks' state for `/skeid/metrics`. */
export interface RoutingMetrics {
  /** Picks by kind, key kind and outcome. */
  picks: PickCount[];
  /** Blocks the prefix index holds. */
  index_blocks: number;
  /** Bytes of the prefix index. */
  index_bytes: number;
  /** Learned numbers per node. */
  nodes: (NodeCostView & { node_id: string })[];
}

/** Arguments of `routePlan`. */
export interface RoutePlanArgs {
  /** The requested model (an alias or a served model name). */
  model: string;
  /** Engine constraint of an implicit tier; normalized. */
  engine?: string;
  /** Customer key id; absent = the default policy. */
  api_key_id?: string;
}

/** Arguments of `normalizeMetrics`. */
export interface NormalizeMetricsArgs {
  /** Served model (priced by it). */
  model: string;
  /** An upstream body, or a usage hash, to read token counts from. */
  response?: unknown;
  /** A usage hash; read instead of `response` when given. */
  usage?: unknown;
  /** Tool calls of the answer: OpenAI-shaped `{function:{name}}` entries or names. */
  tool_calls?: unknown[];
  /** Request duration, ms. */
  duration_ms?: number;
  /** Engine id of the node that served it. */
  engine?: string;
  /** The client route (`/v1/chat/completions`). */
  route?: string;
  /** Provider name for the record. */
  provider?: string;
  /** An explicit rule instead of the served model's. */
  pricing?: PricingRule;
}

/** Failure history of one node, for the registry snapshot. */
export interface NodeFailures {
  /** Failed (not aborted) finishes within the error window. */
  errors_in_window: number;
  /** Epoch ms of the last failure, or null. */
  last_failure_at: number | null;
}

const NO_TAGS: string[] = Object.freeze([]) as unknown as string[];
const NOT_PERMITTED: RoutePlan = Object.freeze({
  tiers: NO_TAGS as unknown as Tier[],
  permitted: false,
  reason: "model_not_permitted",
});
const ALL_TIERS_DENIED: RoutePlan = Object.freeze({
  tiers: NO_TAGS as unknown as Tier[],
  permitted: false,
  reason: "all_tiers_denied",
});

/** Whether a spec field is absent or empty. */
function isBlank(value: unknown): boolean {
  return value === undefined || value === null || String(value).trim() === "";
}

/** A copy of a stored node; its nested fields are frozen, so sharing them is safe. */
function copyNode(node: Node): Node {
  return { ...node };
}

/** The routing and admission core. */
export class RoutingCore {
  /** Epoch-ms clock. */
  readonly now: () => number;
  /** Workers sharing this config (spreads probe polls; divides max_conns without a shared table). */
  readonly workerCount: number;
  /** The inflight counters admission takes slots from (shared by the workers, or this core's). */
  readonly inflight: InflightTable;
  /** How long a capacity reading is trusted, ms (0 = forever). */
  readonly capacityMaxAgeMs: number;
  /** Where the core's warnings go. */
  readonly logger: Logger;

  /**
   * Whether the inflight table is shared with other workers. A core alone counts on its own
   * counters (the same numbers, without the table's lookups on the request path).
   */
  readonly #shared: boolean;
  readonly #capacity: CapacityTable;
  readonly #ejection: EjectionTable;
  readonly #pricing = new PricingTable();
  readonly #inventory = new Inventory();
  readonly #routes: RouteTable;
  readonly #affinity: AffinityRouter;
  readonly #validateNode: ((node: Node) => void) | undefined;
  readonly #identityPolicy: ((apiKeyId: string) => Policy | null | undefined) | undefined;
  readonly #listeners = new Set<CapacityListener>();
  /** Warnings already logged, so each is said once per core. */
  readonly #warned = new Set<string>();
  #aliases = new Map<string, Alias>();
  #policySet: PolicySet = emptyPolicySet();
  /** `keyNames` reversed, for the policy set it was made from. */
  #keyNamesById: { set: PolicySet; byId: Map<string, string> } | undefined;
  /** Alias plans per policy: resolved once, shared (frozen) by every request. */
  #plans = new WeakMap<Policy, Map<string, RoutePlan>>();
  #openPlans = new Map<string, RoutePlan>();
  #routing: Readonly<RoutingSettings>;
  readonly #baseRouting: Readonly<RoutingSettings>;
  #errorWindowS: number;

  /** Builds a core; the environment is read here, once. */
  constructor(options: SkeidOptions = {}) {
    this.now = options.now ?? Date.now;
    this.logger = options.logger ?? createLogger();
    const env: EnvReader = options.env ?? processEnv;
    this.workerCount = Math.max(1, Math.floor(options.workerCount ?? 1) || 1);
    this.inflight = options.inflight ?? InflightTable.local();
    this.#shared = this.inflight.workers > 1;
    this.capacityMaxAgeMs = Math.max(0, options.capacityMaxAgeMs ?? capacityMaxAgeFromEnv(env));
    this.#baseRouting = Object.freeze({
      ...routingFromEnv(env),
      ...normalizeRoutingPatch(options.routing ?? {}),
    });
    this.#routing = this.#baseRouting;
    this.#validateNode = options.validateNode;
    this.#identityPolicy = options.identityPolicy;
    this.#errorWindowS = options.errorWindowS && options.errorWindowS > 0
      ? options.errorWindowS
      : 60;
    this.#capacity = new CapacityTable({ now: this.now, maxAgeMs: this.capacityMaxAgeMs });
    this.#ejection = new EjectionTable({ ...options.ejection, now: this.now });
    this.#routes = new RouteTable(() => this.#inventory.sorted);
    this.#affinity = new AffinityRouter(this.now, options.prefixIndex, this.capacityMaxAgeMs);
  }

  // ---- inventory ---------------------------------------------------------------------------

  /**
   * Adds a node (defaults filled in), replacing one with the same id. Throws on a bad spec.
   * A replaced node keeps its inflight count and counters (requests in flight are real) but
   * loses its capacity reading and failure history: the id may now name another machine.
   */
  addNode(spec: NodeSpec): Node {
    const node = normalizeNode(spec);
    if (!node) {
      const missing = isBlank(spec?.id) ? "id" : "url";
      throw new NodeSpecError(`node ${missing} required`, missing);
    }
    if (this.#validateNode) checkNode(node, this.#validateNode);
    this.#claimRows([node], (message) => new NodeSpecError(message, "id"));
    const existing = this.#inventory.get(node.id);
    if (existing) {
      this.#capacity.forget(node.id);
      this.#ejection.forget(node.id);
      this.#affinity.forgetNode(node.id);
      existing.counters.failures = undefined;
    }
    const record = this.#inventory.upsert(node);
    record.share = workerShare(node.max_conns, this.#divisor());
    this.#inventoryChanged();
    return copyNode(node);
  }

  /**
   * Workers sharing the inflight table (ADR 0025): every node gets its row before the inventory
   * changes, so admission never meets a node without one (it would count this worker's requests
   * alone and the group could pass `max_conns`). Rows are never given back (an id keeps its row
   * for the process's life): past the table's capacity a new id is refused with `error`.
   */
  #claimRows(nodes: readonly Node[], error: (message: string, index: number) => Error): void {
    if (!this.#shared) return;
    nodes.forEach((node, i) => {
      if (this.inflight.slot(node.id) >= 0) return;
      throw error(
        `node '${node.id}' does not fit the shared inflight table: it holds ` +
          `${this.inflight.capacity} distinct node ids for the life of the process ` +
          "(--workers); restart to start a new table",
        i,
      );
    });
  }

  /** Removes a node with its reading, counters and failure history; true when one was removed. */
  removeNode(id: string): boolean {
    if (!this.#inventory.remove(id)) return false;
    this.#capacity.forget(id);
    this.#ejection.forget(id);
    this.#affinity.forgetNode(id);
    this.#inventoryChanged();
    return true;
  }

  /**
   * Replaces the whole inventory (config load); throws before changing anything on a bad spec
   * (NodeSpecError at `nodes[i].field`). Entries without id or url are skipped with a warning
   * to the logger (`node_warning`); `normalizeNodeList` answers the same warnings without
   * changing anything. Nodes that stay keep their counters, readings and failure history.
   */
  replaceNodes(specs: NodeSpec[]): Node[] {
    const { nodes, warnings } = normalizeNodeList(specs, this.#validateNode);
    this.#claimRows(nodes, (message, i) => {
      const segments = ["nodes", i, "id"];
      const path = formatPath(segments);
      return new NodeSpecError(`${path}: ${message}`, path, segments);
    });
    for (const warning of warnings) this.logger.warn("node_warning", { message: warning });
    for (const id of this.#inventory.replaceAll(nodes)) {
      this.#capacity.forget(id);
      this.#ejection.forget(id);
      this.#affinity.forgetNode(id);
    }
    this.#recomputeShares();
    this.#inventoryChanged();
    return nodes.map(copyNode);
  }

  /** Sets operator health; false for an unknown node; same value changes nothing. */
  setNodeHealth(id: string, healthy: boolean): boolean {
    const changed = this.#inventory.setHealth(id, !!healthy);
    if (changed === undefined) return false;
    if (changed) {
      this.#routes.invalidate();
      if (healthy) this.#notify();
    }
    return true;
  }

  /**
   * Sets a node draining (no new admission; its in-flight requests finish) or not; false for an
   * unknown node. Ending a drain wakes the waiters.
   */
  setNodeDraining(id: string, draining: boolean): boolean {
    const record = this.#inventory.get(id);
    if (!record) return false;
    const was = record.draining === true;
    record.draining = draining || undefined;
    if (was && !draining) this.#notify();
    return true;
  }

  /** Whether a node is draining; undefined for an unknown node. */
  nodeDraining(id: string): boolean | undefined {
    const record = this.#inventory.get(id);
    return record ? record.draining === true : undefined;
  }

  /** A node's last minute (requests, errors, TTFT); undefined for an unknown node. */
  lastMinute(id: string): LastMinute | undefined {
    const record = this.#inventory.get(id);
    if (!record) return undefined;
    return record.counters.minute?.read(this.now()) ?? EMPTY_MINUTE;
  }

  /** Copies of every node, in the order they were added. */
  listNodes(): Node[] {
    const out: Node[] = [];
    for (const record of this.#inventory.records()) out.push(copyNode(record.node));
    return out;
  }

  /** One node (a copy), or undefined. */
  getNode(id: string): Node | undefined {
    const record = this.#inventory.get(id);
    return record ? copyNode(record.node) : undefined;
  }

  /** Inventory generation: bumped by every change of the node list (health flips included). */
  get generation(): number {
    return this.#inventory.generation;
  }

  /** Nodes carrying every tag and none of deny_tags (health ignored), as copies. */
  selectNodes(args: { tags?: readonly string[]; deny_tags?: readonly string[] } = {}): Node[] {
    const tags = normalizeTags(args.tags);
    const deny = normalizeTags(args.deny_tags);
    const out: Node[] = [];
    for (const { node } of this.#inventory.records()) {
      if (hasAllTags(node, tags) && !hasAnyTag(node, deny)) out.push(copyNode(node));
    }
    return out;
  }

  // ---- settings ----------------------------------------------------------------------------

  /** The routing settings in force (read by the proxy on every request). */
  get routing(): Readonly<RoutingSettings> {
    return this.#routing;
  }

  /** Sets some routing settings; an absent key keeps its value. frontend_count is floored at 1. */
  setRouting(patch: Partial<RoutingSettings>): void {
    const before = this.#routing;
    this.#routing = Object.freeze({ ...before, ...normalizeRoutingPatch(patch) });
    if (this.#routing.frontend_count !== before.frontend_count) {
      this.#recomputeShares();
      this.#notify();
    }
  }

  /** The routing settings before any config was applied (options, else environment, else built in). */
  get baseRouting(): Readonly<RoutingSettings> {
    return this.#baseRouting;
  }

  /** Sets how far back `nodeFailures` counts, seconds (registry `error_window_s`). */
  setErrorWindow(seconds: number): void {
    if (Number.isFinite(seconds) && seconds > 0) this.#errorWindowS = seconds;
  }

  // ---- aliases, policies, keys -------------------------------------------------------------

  /** Defines an alias (tiers or `{tiers}`); throws on empty tiers or a scalar spec. */
  setModelAlias(name: string, spec: unknown): Alias {
    const alias = normalizeAlias(name, spec);
    this.#aliases.set(name, alias);
    this.#plansChanged();
    return alias;
  }

  /** Replaces every alias at once (each already normalized, see `normalizeAlias`). */
  replaceAliases(aliases: Map<string, Alias>): void {
    this.#aliases = new Map(aliases);
    this.#plansChanged();
  }

  /** The aliases in force, by name. */
  get aliases(): ReadonlyMap<string, Alias> {
    return this.#aliases;
  }

  /** Defines a named policy profile; throws PolicyError (`policies.<name>...`) on a bad spec. */
  setPolicy(name: string, spec: unknown): Policy {
    if (typeof name !== "string" || name === "") {
      throw new PolicyError("policy name required", ["policies"]);
    }
    let policy: Policy;
    try {
      policy = resolvePolicy(spec);
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err;
      throw underPath(["policies", name], err);
    }
    this.#policySet.policies.set(name, policy);
    return policy;
  }

  /** Installs a resolved policy set (config load); logs its warnings once. */
  replacePolicySet(set: PolicySet): void {
    this.#policySet = set;
    this.#plansChanged();
    for (const warning of set.warnings) this.#warnOnce(warning);
  }

  /** The policy set in force (policies, default, key policies, names), read-only. */
  get policySet(): Readonly<PolicySet> {
    return this.#policySet;
  }

  /** Whether a customer key id is listed under `keys:` (full id, or a short id it starts with). */
  isKnownKey(apiKeyId: string): boolean {
    const known = this.#policySet.knownKeyIds;
    if (known.has(apiKeyId)) return true;
    if (!isFullKeyId(apiKeyId)) return false;
    const short = shortKeyIdOf(apiKeyId);
    if (!known.has(short)) return false;
    this.#warnOnce(shortKeyIdWarning(short));
    return true;
  }

  /**
   * Whether a customer key id is an identity judged at intake (a JWT identity, ADR 0029) that this
   * core has seen lately: such an id is known, though no `keys:` entry names it.
   */
  isJudgedIdentity(apiKeyId: string): boolean {
    return this.#identityPolicy?.(apiKeyId) !== undefined;
  }

  /** The policy a customer key id routes under; null when no policies are configured. */
  policyForKey(apiKeyId: string | undefined): Policy | null {
    const set = this.#policySet;
    if (apiKeyId === undefined || apiKeyId === "") return set.defaultPolicy;
    const judged = this.#identityPolicy?.(apiKeyId);
    if (judged !== undefined) return judged;
    const exact = set.keyPolicies.get(apiKeyId);
    if (exact) return exact;
    if (set.shortKeyPolicies.size > 0 && isFullKeyId(apiKeyId)) {
      const short = shortKeyIdOf(apiKeyId);
      const legacy = set.shortKeyPolicies.get(short);
      if (legacy) {
        this.#warnOnce(shortKeyIdWarning(short));
        return legacy;
      }
    }
    return set.defaultPolicy;
  }

  /**
   * What a customer key is held to: its policy's rate limits, budget and fair share settings
   * (key overrides applied). Read on every request, so a reload's new numbers apply to the next
   * one while the counters (kept elsewhere by customer key id) carry on.
   */
  keyPolicy(apiKeyId: string | undefined): KeyPolicy {
    return keyPolicyOf(this.policyForKey(apiKeyId));
  }

  /** The customer key id a `names:` name maps to. */
  keyIdForName(name: string): string | undefined {
    return this.#policySet.keyNames.get(name);
  }

  /** The `keys:` name of a customer key id (metrics labels), undefined for a key not named. */
  keyNameForId(id: string): string | undefined {
    const set = this.#policySet;
    if (this.#keyNamesById?.set !== set) {
      const byId = new Map([...set.keyNames].map(([name, keyId]) => [keyId, name]));
      this.#keyNamesById = { set, byId };
    }
    return this.#keyNamesById.byId.get(id);
  }

  // ---- routing -----------------------------------------------------------------------------

  /**
   * Ordered tiers for a requested model under the customer key's policy. A model without an
   * alias is one implicit tier (the name itself, no tags, the requested engine,
   * routing.wait_timeout_ms). Tiers carrying a denied tag are dropped; the rest carry the
   * policy's deny_tags into node selection. The answer may be shared between requests: treat it
   * as read-only.
   */
  routePlan(args: RoutePlanArgs): RoutePlan {
    const model = args.model ?? "";
    const policy = this.policyForKey(args.api_key_id);
    if (policy?.models && !policy.models.has(model)) return NOT_PERMITTED;
    const alias = this.#aliases.get(model);
    if (!alias) {
      return {
        tiers: [{
          tags: NO_TAGS,
          model,
          engine: normalizeEngineId(args.engine ?? ""),
          wait_ms: this.#routing.wait_timeout_ms,
          deny_tags: (policy?.deny_tags ?? NO_TAGS) as string[],
        }],
        permitted: true,
        reason: "",
      };
    }
    let plans = policy ? this.#plans.get(policy) : this.#openPlans;
    if (!plans) {
      plans = new Map();
      this.#plans.set(policy!, plans);
    }
    let plan = plans.get(model);
    if (!plan) {
      plan = aliasPlan(alias, policy?.deny_tags ?? NO_TAGS);
      plans.set(model, plan);
    }
    return plan;
  }

  /** Eligible vs available counts for a selection. */
  routeState(sel: Selection): RouteState {
    const entry = this.#routes.entry(sel);
    const admits = this.#admitsIn(entry.nodes);
    let available = 0;
    for (const record of entry.nodes) if (admits(record)) available++;
    return {
      model: entry.model,
      engine: entry.engine,
      tags: [...entry.tags],
      deny_tags: [...entry.denyTags],
      eligible_count: entry.nodes.length,
      available_count: available,
      has_eligible: entry.nodes.length > 0,
      has_available: available > 0,
    };
  }

  /**
   * Next node among the eligible nodes admission would take now, by the selection's pick
   * (`sel.pick`, else `routing.pick`): weighted round-robin, least loaded, or affinity (which
   * reads `hint`, once, only then); `exclude`d nodes are left out by the scoring picks (the
   * round-robin cursor moves on by itself, and its caller skips them). Picking does not admit: the caller still calls
   * `startRequest`, which can refuse when another request took the slot in between.
   */
  pickNode(
    sel: Selection,
    hint?: RouteHintSource,
    exclude?: ReadonlySet<string>,
  ): PickedNode | undefined {
    const entry = this.#routes.entry(sel);
    if (entry.nodes.length === 0) return undefined;
    const kind = sel.pick ?? this.#routing.pick;
    if (kind === "round_robin") {
      const index = pickWeighted(entry, this.#admitsIn(entry.nodes));
      if (index < 0) return undefined;
      const record = entry.nodes[index];
      return { ...record.node, inflight: this.#inflightOf(record), route_key: entry.key };
    }
    const inSelection = this.#admitsIn(entry.nodes);
    // A score picks the same node again and again: failover must rule the failed ones out here.
    const admits = exclude === undefined || exclude.size === 0
      ? inSelection
      : (record: NodeRecord) => !exclude.has(record.node.id) && inSelection(record);
    const routeHint = kind === "affinity" ? hint?.routeHint() : undefined;
    const decision = this.#affinity.decide(
      kind,
      entry.nodes,
      admits,
      this.#loadView,
      this.#routing,
      routeHint,
    );
    if (decision === undefined) return undefined;
    const record = entry.nodes[decision.index];
    const { candidates: _, bound_load: __, ...route } = decision;
    return { ...record.node, inflight: this.#inflightOf(record), route_key: entry.key, route };
  }

  /**
   * What the selection's pick would decide for a request now, with every candidate's numbers
   * (`GET /skeid/route`); changes nothing. Undefined when no node admits; a `round_robin`
   * selection is explained as `least_loaded` would see it, since its cursor is not a score.
   */
  explainPick(sel: Selection, hint?: RouteHint): PickExplanation | undefined {
    const entry = this.#routes.entry(sel);
    const kind = (sel.pick ?? this.#routing.pick) === "affinity" ? "affinity" : "least_loaded";
    return this.#affinity.decide(
      kind,
      entry.nodes,
      this.#admitsIn(entry.nodes),
      this.#loadView,
      this.#routing,
      kind === "affinity" ? hint : undefined,
      true,
    );
  }

  /**
   * What a finished request showed of its node: its TTFT against its uncached prompt tokens (the
   * node's prefill cost is learned from these) and what the pick had predicted.
   */
  observeRoute(id: string, seen: RouteObservation): void {
    const cached = seen.cached_tokens ?? 0;
    const uncached = Math.max(0, seen.prompt_tokens - cached);
    this.#affinity.costs.observeTtft(
      id,
      seen.ttft_ms,
      uncached,
      seen.predicted_ttft_ms,
      (seen.predicted_wait_ms ?? 0) > 0,
    );
  }

  /** The picks' counters, the prefix index's size and each node's learned numbers. */
  routingMetrics(): RoutingMetrics {
    const nodes: RoutingMetrics["nodes"] = [];
    for (const record of this.#inventory.records()) {
      const id = record.node.id;
      nodes.push({ node_id: id, ...this.#affinity.costs.view(id) });
    }
    return {
      picks: this.#affinity.picks(),
      index_blocks: this.#affinity.indexSize(),
      index_bytes: this.#affinity.indexBytes(),
      nodes,
    };
  }

  /**
   * Names a client can request, narrowed by the customer key's policy, sorted: the distinct
   * models of the nodes (a node without a model lists nothing) and the alias names, each once.
   * A name the policy does not grant, an alias with every tier denied, and a node model served
   * only by nodes carrying a denied tag are left out.
   */
  listModels(args: { api_key_id?: string } = {}): ListedModel[] {
    const policy = this.policyForKey(args.api_key_id);
    const deny = policy?.deny_tags ?? NO_TAGS;
    const entries = new Map<string, ListedModel>();
    for (const { node } of this.#inventory.records()) {
      if (node.model === "" || entries.has(node.model) || hasAnyTag(node, deny)) continue;
      entries.set(node.model, { model: node.model, engine: node.engine });
    }
    for (const name of this.#aliases.keys()) {
      if (!entries.has(name)) entries.set(name, { model: name, engine: "" });
    }
    return [...entries.keys()]
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .filter((name) => this.routePlan({ model: name, api_key_id: args.api_key_id }).permitted)
      .map((name) => entries.get(name)!);
  }

  // ---- admission ---------------------------------------------------------------------------

  /** Admits one request; false when the node is unknown, unhealthy, full or backing off. */
  startRequest(id: string): boolean {
    const record = this.#inventory.get(id);
    if (!record || !this.#admits(record)) return false;
    if (this.#shared) {
      // The slot itself is one compare-and-swap on the node's row: another worker may have taken
      // the last one since `#admits` read the total.
      const row = record.row ??= this.inflight.slot(id);
      // A node without a row (none: #claimRows gave every node one) is never admitted.
      if (row < 0 || !this.inflight.tryTake(row, record.share)) return false;
    }
    record.counters.inflight++;
    record.counters.started++;
    this.#ejection.start(id);
    return true;
  }

  /**
   * Releases the slot and counts the outcome; always true. `aborted` (the client left) wins
   * over `ok`; neither is a failure, which the registry's errors_in_window counts. Never
   * touches health; inflight never goes below 0.
   */
  finishRequest(id: string, outcome: FinishOutcome = {}): boolean {
    const shared = this.#shared;
    if (shared) {
      // The slot goes back to the node's row even when the node was removed while the request
      // ran (the id may be added again); `release` never takes a row below what this one holds.
      const row = this.inflight.slot(id);
      if (row >= 0) this.inflight.release(row);
    }
    const record = this.#inventory.get(id);
    if (!record) {
      if (shared) this.#notify();
      return true;
    }
    const counters = record.counters;
    if (counters.inflight > 0) counters.inflight--;
    // Without a transport outcome the request says nothing about the node; a trial it was is
    // freed all the same (the next request is the trial), so no finish path can leave one stuck.
    this.#ejection.record(id, outcome.aborted ? "aborted" : outcome.transport ?? "aborted");
    if (outcome.aborted) counters.aborted++;
    else if (outcome.ok) counters.ok++;
    else {
      counters.error++;
      let failures = counters.failures;
      if (!failures || failures.windowS < this.#errorWindowS) {
        failures = counters.failures = new FailureHistory(this.#errorWindowS);
      }
      failures.record(this.now());
    }
    // Only an attempt that reached the node counts in its last minute (not_counted did not).
    if (outcome.transport !== undefined) {
      (counters.minute ??= new MinuteWindow()).add(
        this.now(),
        !outcome.ok && !outcome.aborted,
        outcome.ttft_ms,
      );
    }
    const duration = outcome.duration_ms;
    if (typeof duration === "number" && Number.isFinite(duration) && duration > 0) {
      counters.duration_ms_total += duration;
      if (outcome.ok && !outcome.aborted) this.#affinity.costs.observeService(id, duration);
    }
    // An ejected node's cache is as good as gone: what the index remembers of it would mislead.
    if (outcome.transport === "failure" && !this.#ejection.admits(id)) {
      this.#affinity.forgetNode(id);
    }
    this.#notify();
    return true;
  }

  /** This process's share of a node's max_conns. */
  workerMaxConns(node: Pick<Node, "max_conns">): number {
    return workerShare(node.max_conns, this.#divisor());
  }

  /** Nodes whose max_conns cannot be split among the processes sharing them. */
  workerShareWarnings(): string[] {
    const nodes = [...this.#inventory.records()].map((r) => r.node);
    return workerShareWarnings(nodes, this.#dividingWorkers(), this.#routing.frontend_count);
  }

  /** Counters of one node, or of all. */
  nodeMetrics(): NodeMetrics[];
  /** Counters of one node; undefined for an unknown id. */
  nodeMetrics(id: string): NodeMetrics | undefined;
  nodeMetrics(id?: string): NodeMetrics[] | NodeMetrics | undefined {
    if (id !== undefined) {
      const record = this.#inventory.get(id);
      return record ? this.#metricsOf(record) : undefined;
    }
    const out: NodeMetrics[] = [];
    for (const record of this.#inventory.records()) out.push(this.#metricsOf(record));
    return out;
  }

  /**
   * Where nodes stand in ejection (ADR 0021), for `/skeid/metrics/nodes` and Prometheus: every
   * node that had a transport failure since it last answered or was added, or one node.
   */
  nodeEjections(): EjectionSnapshot[];
  /** Where one node stands in ejection (`closed` when it never failed). */
  nodeEjections(id: string): EjectionSnapshot;
  nodeEjections(id?: string): EjectionSnapshot[] | EjectionSnapshot {
    return id === undefined ? this.#ejection.snapshot() : this.#ejection.snapshot(id);
  }

  /** Failed finishes of a node within the error window and the last one's time. */
  nodeFailures(id: string): NodeFailures {
    const failures = this.#inventory.get(id)?.counters.failures;
    if (!failures) return { errors_in_window: 0, last_failure_at: null };
    return {
      errors_in_window: failures.count(this.now(), this.#errorWindowS),
      last_failure_at: failures.lastAt,
    };
  }

  /**
   * Subscribes to "admission may now admit more" (a slot freed, a reading changed, a node
   * added or back in rotation); returns the unsubscribe function. Listeners run synchronously
   * after the change; one that throws is ignored.
   */
  onCapacityChange(listener: CapacityListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Tells the capacity listeners that admission may take more now for a reason outside this
   * core: a slot freed in another worker of a shared inflight table (ADR 0025).
   */
  capacityChanged(): void {
    this.#notify();
  }

  // ---- capacity readings -------------------------------------------------------------------

  /**
   * Records a probe's reading (tighter reading wins across sources); returns the one in force.
   * A reading about a node not in the inventory is not kept (undefined): a late probe of a
   * removed node must not leave a reading for a later node of that id.
   */
  setCapacityReading(id: string, input: CapacityReadingInput): CapacityReading | undefined {
    if (!this.#inventory.get(id)) return undefined;
    const queue = input.queue;
    if (queue !== undefined) {
      // A prefix-cache counter going down: the engine restarted (or its cache was reset).
      const before = this.#capacity.get(id)?.queue?.prefix_queries;
      const after = queue.prefix_queries;
      if (before !== undefined && after !== undefined && after < before) {
        this.#affinity.forgetNode(id);
      }
      this.#affinity.costs.observeRunning(id, queue.running, queue.waiting);
      const record = this.#inventory.get(id)!;
      this.#affinity.observeQueue(id, queue.running + queue.waiting, this.#inflightOf(record));
    }
    const reading = this.#capacity.set(id, input);
    this.#notify();
    return reading;
  }

  /** The current reading, or undefined when none or aged out (a pending backoff outlives age). */
  capacityReading(id: string): CapacityReading | undefined {
    return this.#capacity.get(id);
  }

  /** Drops readings: all, one node's, or one node's only when `source` wrote it. */
  forgetCapacity(id?: string, source?: string): void {
    this.#capacity.forget(id, source);
    this.#notify();
  }

  /** Reads rate-limit headers and Retry-After off a response; returns the reading recorded. */
  observeResponseHeaders(
    id: string,
    headers: Headers | Record<string, string>,
    status?: number,
  ): CapacityReading | undefined {
    const input = readingFromHeaders(headers, status, {
      now: this.now(),
      maxMs: this.#routing.max_retry_after_ms,
    });
    return input ? this.setCapacityReading(id, input) : undefined;
  }

  /** Earliest moment (epoch ms) a backoff or expiry may let admission take more, for waiters. */
  nextCapacityChangeAt(): number | undefined {
    const capacity = this.#capacity.nextChangeAt();
    const ejection = this.#ejection.nextChangeAt();
    if (ejection === undefined) return capacity;
    return capacity === undefined ? ejection : Math.min(capacity, ejection);
  }

  // ---- pricing -----------------------------------------------------------------------------

  /** Sets one served model's rule ('*' = fallback); returns it as stored. Throws on bad rates. */
  setModelPricing(model: string, rule: unknown): PricingRule {
    return this.#pricing.set(model, rule);
  }
  /** Replaces the whole price list. */
  replacePricing(rules: Map<string, PricingRule>): void {
    this.#pricing.replace(rules);
  }
  /** The rule for a model, else '*', else all zero. */
  pricingForModel(model: string): PricingRule {
    return this.#pricing.get(model);
  }
  /** Every price rule, for reports and the admin API. */
  pricingEntries(): [string, PricingRule][] {
    return this.#pricing.entries();
  }
  /** Prices a usage with the model's rule or an explicit one. */
  estimateCost(args: { model: string; usage: unknown; pricing?: PricingRule }): Cost {
    return costFor(readUsage(args.usage), args.pricing ?? this.#pricing.get(args.model));
  }
  /** Reads usage off an answer, prices it, counts tool calls. */
  normalizeMetrics(args: NormalizeMetricsArgs): NormalizedMetrics {
    return buildMetrics({
      model: args.model,
      usage: readUsage(args.usage ?? args.response),
      rule: args.pricing ?? this.#pricing.get(args.model),
      tool_calls: args.tool_calls,
      duration_ms: args.duration_ms,
      engine: args.engine,
      route: args.route,
      provider: args.provider,
    });
  }
  /** Token counts of a body or usage hash (see usage-and-cost reference). */
  readUsage(bodyOrUsage: unknown): Usage {
    return readUsage(bodyOrUsage);
  }

  // ---- internals ---------------------------------------------------------------------------

  /**
   * Admission for one node now: healthy, not draining, under this process's share of max_conns, and its
   * capacity reading (if any) allows one more. A reading only ever narrows the share.
   */
  readonly #admits = (record: NodeRecord): boolean =>
    record.node.healthy && record.draining !== true &&
    (record.share === 0 || this.#inflightOf(record) < record.share) &&
    this.#capacity.allows(record.node.id);

  /**
   * Admission within one selection: `#admits`, minus the nodes ejection holds out of it (at most
   * its share of them, ADR 0021). The plain `#admits` while no node is ejected.
   */
  #admitsIn(nodes: readonly NodeRecord[]): (record: NodeRecord) => boolean {
    if (!this.#ejection.any) return this.#admits;
    const out = this.#ejection.ejectedAmong(nodes.map((r) => r.node.id));
    if (out.size === 0) return this.#admits;
    return (record) => !out.has(record.node.id) && this.#admits(record);
  }

  /**
   * What the picks read of a node's load: this gateway's inflight now, plus the traffic from
   * elsewhere its last probe reading showed; and the slots its share gives.
   */
  readonly #loadView: NodeLoadView = {
    load: (record) => this.#inflightOf(record) + this.#affinity.external(record.node.id),
    slots: (record) => record.share,
  };

  /** Workers that divide max_conns: none beyond one when they share the inflight table. */
  #dividingWorkers(): number {
    return this.#shared ? 1 : this.workerCount;
  }

  /** Requests in flight at a node: every worker's when the table is shared, else this core's. */
  #inflightOf(record: NodeRecord): number {
    if (!this.#shared) return record.counters.inflight;
    const row = record.row ??= this.inflight.slot(record.node.id);
    return row >= 0 ? this.inflight.total(row) : record.counters.inflight;
  }

  /**
   * What max_conns is divided by: the processes that each admit on their own. Workers sharing
   * one inflight table admit as one (ADR 0025), so only frontends divide then.
   */
  #divisor(): number {
    return this.#dividingWorkers() * this.#routing.frontend_count;
  }

  #recomputeShares(): void {
    const divisor = this.#divisor();
    for (const record of this.#inventory.records()) {
      record.share = workerShare(record.node.max_conns, divisor);
    }
  }

  #inventoryChanged(): void {
    this.#routes.invalidate();
    this.#notify();
  }

  #plansChanged(): void {
    this.#plans = new WeakMap();
    this.#openPlans = new Map();
  }

  #notify(): void {
    for (const listener of this.#listeners) {
      try {
        listener();
      } catch {
        // A waiter's bug must not break admission for everyone else.
      }
    }
  }

  #warnOnce(message: string): void {
    if (this.#warned.has(message)) return;
    this.#warned.add(message);
    this.logger.warn("policy_warning", { message });
  }

  #metricsOf(record: NodeRecord): NodeMetrics {
    const c = record.counters;
    const metrics: NodeMetrics = {
      node_id: record.node.id,
      inflight: this.#inflightOf(record),
      started: c.started,
      ok: c.ok,
      error: c.error,
      aborted: c.aborted,
      duration_ms_total: c.duration_ms_total,
    };
    const reading = this.#capacity.get(record.node.id);
    if (reading) metrics.capacity = { ...reading };
    return metrics;
  }
}

/** An alias's plan under one policy's deny_tags: denied tiers dropped, the rest carry the deny. */
function aliasPlan(alias: Alias, denyTags: readonly string[]): RoutePlan {
  const deny = Object.freeze([...denyTags]) as string[];
  const tiers = alias.tiers
    .filter((tier) => !hasAnyTag(tier, deny))
    .map((tier) => Object.freeze({ ...tier, deny_tags: deny }) as Tier);
  if (tiers.length === 0) return ALL_TIERS_DENIED;
  return Object.freeze({ tiers: Object.freeze(tiers) as Tier[], permitted: true, reason: "" });
}
