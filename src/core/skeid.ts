/**
 * The routing and admission core: one object that holds the node inventory, aliases, policies,
 * capacity readings, admission counters and prices, and answers every routing question
 * synchronously. No I/O here (the one async method is SHA-1 through Web Crypto); the server,
 * the CLI, the config loader and the tests all drive these same methods.
 *
 * SKELETON: method bodies marked TODO are being filled in; signatures are the contract.
 *
 * @module
 */
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
  Usage,
} from "./types.ts";
import type { Logger } from "../log.ts";
import type { PolicySet } from "./policies.ts";

/** Construction options; every one has a default from the environment or built in. */
export interface SkeidOptions {
  /** Clock, epoch ms (tests inject one). Default `Date.now`. */
  now?: () => number;
  /** Prefork workers sharing this config (ADR 0010); default 1. */
  workerCount?: number;
  /** How long a capacity reading is trusted, ms; default 5000; 0 disables expiry. */
  capacityMaxAgeMs?: number;
  /** Routing settings that override the environment defaults (the "passed to new" values). */
  routing?: Partial<RoutingSettings>;
  /** Environment to read SKEID_* defaults from; default `Deno.env` (tests pass a map). */
  env?: (name: string) => string | undefined;
  /** Warnings (short-id deprecation, cache-rate drops) go here. */
  logger?: Logger;
}

/** Arguments of `routePlan`. */
export interface RoutePlanArgs {
  model: string;
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
  usage?: unknown;
  /** Tool calls of the answer: OpenAI-shaped `{function:{name}}` entries or names. */
  tool_calls?: unknown[];
  duration_ms?: number;
  engine?: string;
  route?: string;
  provider?: string;
  pricing?: PricingRule;
}

/** The routing and admission core. */
export class Skeid {
  /** Epoch-ms clock. */
  readonly now: () => number;

  constructor(options: SkeidOptions = {}) {
    this.now = options.now ?? Date.now;
    // TODO(core): wire sub-tables.
  }

  // ---- inventory ---------------------------------------------------------------------------

  /** Adds a node (defaults filled in), replacing one with the same id. Throws on a bad spec. */
  addNode(_spec: NodeSpec): Node {
    throw new Error("TODO");
  }
  /** Removes a node with its reading and failure history; true when one was removed. */
  removeNode(_id: string): boolean {
    throw new Error("TODO");
  }
  /** Replaces the whole inventory (config load); throws before changing anything on a bad spec. */
  replaceNodes(_specs: NodeSpec[]): Node[] {
    throw new Error("TODO");
  }
  /** Sets operator health; false for an unknown node; same value changes nothing. */
  setNodeHealth(_id: string, _healthy: boolean): boolean {
    throw new Error("TODO");
  }
  /** Copies of every node. */
  listNodes(): Node[] {
    throw new Error("TODO");
  }
  /** One node (a copy), or undefined. */
  getNode(_id: string): Node | undefined {
    throw new Error("TODO");
  }
  /** Inventory generation: bumped by every change of the node list. */
  get generation(): number {
    throw new Error("TODO");
  }
  /** Nodes carrying every tag and none of deny_tags (health ignored), as copies. */
  selectNodes(_args?: { tags?: readonly string[]; deny_tags?: readonly string[] }): Node[] {
    throw new Error("TODO");
  }

  // ---- settings ----------------------------------------------------------------------------

  /** The routing settings in force (read by the proxy on every request). */
  get routing(): Readonly<RoutingSettings> {
    throw new Error("TODO");
  }
  /** Sets some routing settings; an absent key keeps its value. frontend_count is floored at 1. */
  setRouting(_patch: Partial<RoutingSettings>): void {
    throw new Error("TODO");
  }
  /** The routing settings before any config was applied (options, else environment, else built in). */
  get baseRouting(): Readonly<RoutingSettings> {
    throw new Error("TODO");
  }

  // ---- aliases, policies, keys -------------------------------------------------------------

  /** Defines an alias (tiers or `{tiers}`); throws on empty tiers or a scalar spec. */
  setModelAlias(_name: string, _spec: unknown): Alias {
    throw new Error("TODO");
  }
  /** Replaces every alias at once. */
  replaceAliases(_aliases: Map<string, Alias>): void {
    throw new Error("TODO");
  }
  /** Defines a named policy profile. */
  setPolicy(_name: string, _spec: unknown): Policy {
    throw new Error("TODO");
  }
  /** Installs a resolved policy set (config load); logs its warnings once. */
  replacePolicySet(_set: PolicySet): void {
    throw new Error("TODO");
  }
  /** Whether a customer key id is listed under `keys:` (full id, or a short id it starts with). */
  isKnownKey(_apiKeyId: string): boolean {
    throw new Error("TODO");
  }
  /** The policy a customer key id routes under; null when no policies are configured. */
  policyForKey(_apiKeyId: string | undefined): Policy | null {
    throw new Error("TODO");
  }
  /** The customer key id a `names:` name maps to. */
  keyIdForName(_name: string): string | undefined {
    throw new Error("TODO");
  }

  // ---- routing -----------------------------------------------------------------------------

  /** Ordered tiers for a requested model under the key's policy. */
  routePlan(_args: RoutePlanArgs): RoutePlan {
    throw new Error("TODO");
  }
  /** Eligible vs available counts for a selection. */
  routeState(_sel: Selection): RouteState {
    throw new Error("TODO");
  }
  /** Next node by weighted round-robin over eligible nodes admission would take now. */
  pickNode(_sel: Selection): PickedNode | undefined {
    throw new Error("TODO");
  }
  /** Names a client can request, narrowed by the key's policy, sorted. */
  listModels(_args?: { api_key_id?: string }): ListedModel[] {
    throw new Error("TODO");
  }

  // ---- admission ---------------------------------------------------------------------------

  /** Admits one request; false when the node is unknown, unhealthy, full or backing off. */
  startRequest(_id: string): boolean {
    throw new Error("TODO");
  }
  /** Releases the slot and counts the outcome; always true. */
  finishRequest(_id: string, _outcome?: FinishOutcome): boolean {
    throw new Error("TODO");
  }
  /** This process's share of a node's max_conns. */
  workerMaxConns(_node: Pick<Node, "max_conns">): number {
    throw new Error("TODO");
  }
  /** Nodes whose max_conns cannot be split among the processes sharing them. */
  workerShareWarnings(): string[] {
    throw new Error("TODO");
  }
  /** Counters of one node, or of all. */
  nodeMetrics(): NodeMetrics[];
  nodeMetrics(id: string): NodeMetrics | undefined;
  nodeMetrics(_id?: string): NodeMetrics[] | NodeMetrics | undefined {
    throw new Error("TODO");
  }
  /** Subscribes to "admission may now admit more"; returns the unsubscribe function. */
  onCapacityChange(_listener: CapacityListener): () => void {
    throw new Error("TODO");
  }

  // ---- capacity readings -------------------------------------------------------------------

  /** Records a probe's reading (tighter reading wins across sources); returns the one in force. */
  setCapacityReading(_id: string, _input: CapacityReadingInput): CapacityReading | undefined {
    throw new Error("TODO");
  }
  /** The current reading, or undefined when none or aged out (a pending backoff outlives age). */
  capacityReading(_id: string): CapacityReading | undefined {
    throw new Error("TODO");
  }
  /** Drops readings: all, one node's, or one node's only when `source` wrote it. */
  forgetCapacity(_id?: string, _source?: string): void {
    throw new Error("TODO");
  }
  /** Reads rate-limit headers and Retry-After off a response; returns the reading recorded. */
  observeResponseHeaders(
    _id: string,
    _headers: Headers | Record<string, string>,
    _status?: number,
  ): CapacityReading | undefined {
    throw new Error("TODO");
  }

  // ---- pricing -----------------------------------------------------------------------------

  /** Sets one served model's rule ('*' = fallback); returns it as stored. Throws on bad rates. */
  setModelPricing(_model: string, _rule: unknown): PricingRule {
    throw new Error("TODO");
  }
  /** Replaces the whole price list. */
  replacePricing(_rules: Map<string, PricingRule>): void {
    throw new Error("TODO");
  }
  /** The rule for a model, else '*', else all zero. */
  pricingForModel(_model: string): PricingRule {
    throw new Error("TODO");
  }
  /** Prices a usage with the model's rule or an explicit one. */
  estimateCost(_args: { model: string; usage: unknown; pricing?: PricingRule }): Cost {
    throw new Error("TODO");
  }
  /** Reads usage off an answer, prices it, counts tool calls. */
  normalizeMetrics(_args: NormalizeMetricsArgs): NormalizedMetrics {
    throw new Error("TODO");
  }
  /** Token counts of a body or usage hash (see usage-and-cost reference). */
  readUsage(_bodyOrUsage: unknown): Usage {
    throw new Error("TODO");
  }
}
