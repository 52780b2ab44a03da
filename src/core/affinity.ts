/**
 * The state behind the `least_loaded` and `affinity` picks of one core: the prefix index, the
 * learned node costs, the node id hashes rendezvous ranks by, and the pick counters. It gathers a
 * selection's admitting nodes into candidates (`pick.ts` decides), and remembers where each
 * affinity request's prefix went.
 *
 * @module
 */
import type { NodeRecord } from "./inventory.ts";
import type { RoutingSettings } from "./types.ts";
import { PrefixIndex } from "./prefix_index.ts";
import { NodeCosts } from "./node_cost.ts";
import { keyHash, rendezvousScore } from "./rendezvous.ts";
import { DEFAULT_BLOCKS, type RouteHint } from "./route_hint.ts";
import {
  type Candidate,
  candidateScores,
  DEFAULT_SLOTS,
  pickAffinity,
  type PickExplanation,
  type PickKind,
  pickLeastLoadedTurn,
} from "./pick.ts";

/** One affinity pick in a hundred goes by load alone, so cost estimates see cold prefills too. */
export const EXPLORE_EVERY = 100;

/** Prompt tokens one index block stands for (its characters / 4). */
const BLOCK_TOKENS = DEFAULT_BLOCKS.blockChars / 4;

/** What a core tells the picks about a node's load. */
export interface NodeLoadView {
  /** Requests at the node now (this gateway's inflight, or the probe's queue if larger). */
  load(record: NodeRecord): number;
  /** Requests it runs before queueing, as far as anyone knows (0: unknown). */
  slots(record: NodeRecord): number;
}

/** Picks by kind, key kind and outcome (`hit`, `miss`, `spilled`), for `/skeid/metrics`. */
export interface PickCount {
  /** The pick. */
  pick: PickKind;
  /** The session key kind. */
  key_kind: string;
  /** `hit` (the affinity node), `spilled` (the bound moved it), `miss` (anything else). */
  outcome: "hit" | "miss" | "spilled";
  /** How many. */
  count: number;
}

/** The affinity state of one core. */
export class AffinityRouter {
  /** What each node was seen to cost. */
  readonly costs: NodeCosts = new NodeCosts();
  readonly #now: () => number;
  readonly #shared: SharedArrayBuffer | undefined;
  readonly #maxAgeMs: number;
  #index: PrefixIndex | undefined;
  #indexShape = "";
  readonly #hashes = new Map<string, number>();
  readonly #picks = new Map<string, PickCount>();
  #explore = 0;
  /** Picks by load so far: equal nodes take turns by it. */
  #turn = 0;
  /** Requests at each node that this gateway did not send, as its last probe reading showed. */
  readonly #external = new Map<string, { n: number; at: number }>();

  /**
   * `shared`: the prefix index words the workers of one process share (ADR 0031); `maxAgeMs`:
   * how long a probe's reading counts (the core's capacity_max_age_ms; 0 = forever).
   */
  constructor(now: () => number, shared?: SharedArrayBuffer, maxAgeMs = 0) {
    this.#now = now;
    this.#shared = shared;
    this.#maxAgeMs = maxAgeMs;
  }

  /** The prefix index for the routing settings in force (made again when its size changes). */
  index(routing: Readonly<RoutingSettings>): PrefixIndex {
    const shape = `${routing.prefix_index_blocks}|${routing.prefix_index_ttl_s}`;
    if (this.#index === undefined || this.#indexShape !== shape) {
      const opts = {
        capacity: routing.prefix_index_blocks,
        ttlMs: routing.prefix_index_ttl_s * 1000,
        now: this.#now,
      };
      let index: PrefixIndex;
      try {
        index = new PrefixIndex({ ...opts, buffer: this.#shared });
      } catch {
        // The shared words were made for another size: this worker keeps an index of its own.
        index = new PrefixIndex(opts);
      }
      this.#index = index;
      this.#indexShape = shape;
    }
    return this.#index;
  }

  /** The stable hash of a node id. */
  nodeHash(id: string): number {
    let h = this.#hashes.get(id);
    if (h === undefined) {
      h = keyHash(id) || 1;
      if (this.#hashes.size > 4096) this.#hashes.clear();
      this.#hashes.set(id, h);
    }
    return h;
  }

  /**
   * Chooses among `nodes` that `admits` takes: answers the decision (its `index` into `nodes`), or
   * undefined when none admits. `hint` is read only by `affinity` (absent: by load). An affinity
   * decision is remembered in the prefix index at once (a sibling request arriving before this
   * one's answer then finds it too).
   */
  decide(
    kind: "least_loaded" | "affinity",
    nodes: readonly NodeRecord[],
    admits: (record: NodeRecord) => boolean,
    view: NodeLoadView,
    routing: Readonly<RoutingSettings>,
    hint: RouteHint | undefined,
    explain = false,
  ): PickExplanation | undefined {
    const useHint = kind === "affinity" && hint !== undefined;
    const index = useHint ? this.index(routing) : undefined;
    const candidates: Candidate[] = [];
    let elsewhere: { cachedTokens: number; rank: number } | undefined;
    for (let i = 0; i < nodes.length; i++) {
      const record = nodes[i];
      if (!admits(record)) {
        // Not a candidate, but perhaps the affinity node: a pick elsewhere is then no hit.
        if (!useHint) continue;
        const hash = this.nodeHash(record.node.id);
        const cached = index!.matched(hash, hint!.blocks) * BLOCK_TOKENS;
        const rank = rendezvousScore(hint!.key, hash, record.node.weight);
        if (
          elsewhere === undefined || cached > elsewhere.cachedTokens ||
          (cached === elsewhere.cachedTokens && rank > elsewhere.rank)
        ) elsewhere = { cachedTokens: cached, rank };
        continue;
      }
      const id = record.node.id;
      const hash = this.nodeHash(id);
      const slots = this.costs.slots(id, view.slots(record) || DEFAULT_SLOTS);
      candidates.push({
        index: i,
        id,
        hash,
        weight: record.node.weight,
        load: view.load(record),
        slots,
        prefillMsPerToken: this.costs.prefillMsPerToken(id),
        serviceMs: this.costs.serviceMs(id),
        cachedTokens: index ? index.matched(hash, hint!.blocks) * BLOCK_TOKENS : 0,
      });
    }
    if (candidates.length === 0) return undefined;
    let decision: PickExplanation;
    if (!useHint) {
      const c = pickLeastLoadedTurn(candidates, explain ? this.#turn : this.#turn++)!;
      decision = {
        index: c.index,
        node_id: c.id,
        pick: kind,
        key_kind: hint?.key_kind ?? "none",
        hit: false,
        spilled: false,
        predicted_ttft_ms: 0,
        cached_tokens: 0,
        bound_load: 0,
        candidates: explain
          ? candidateScores(candidates, (x) => -x.index, () => true, () => 0)
          : [],
      };
    } else {
      const explore = !explain && ++this.#explore % EXPLORE_EVERY === 0;
      decision = pickAffinity(candidates, {
        key: hint!.key,
        keyKind: hint!.key_kind,
        promptTokens: hint!.prompt_tokens,
        bound: routing.affinity_bound,
        explore,
        elsewhere,
      }, explain);
      if (!explain && hint!.blocks.length > 0) {
        const known = decision.cached_tokens / BLOCK_TOKENS;
        index!.record(this.nodeHash(nodes[decision.index].node.id), hint!.blocks, known);
      }
    }
    if (!explain) this.#count(decision);
    return decision;
  }

  /**
   * A probe's queue reading: `total` (running + waiting) requests at the node while this gateway
   * had `own` in flight there. The difference is traffic from elsewhere (other gateways,
   * direct clients), which the picks add to the gateway's own live inflight: the reading is up
   * to a poll old, the inflight is exact now, so only what the gateway cannot see is taken from
   * the probe.
   */
  observeQueue(id: string, total: number, own: number): void {
    this.#external.set(id, { n: Math.max(0, total - own), at: this.#now() });
  }

  /**
   * Requests at the node that this gateway did not send: 0 without a probe, or once its last
   * reading is older than a capacity reading may be.
   */
  external(id: string): number {
    const e = this.#external.get(id);
    if (e === undefined || e.n === 0) return 0;
    return this.#maxAgeMs > 0 && this.#now() - e.at > this.#maxAgeMs ? 0 : e.n;
  }

  /** Forgets what the index and the costs know of a node (it restarted, left, or was reset). */
  forgetNode(id: string): void {
    this.#index?.forgetNode(this.nodeHash(id));
    this.costs.forget(id);
    this.#external.delete(id);
  }

  /** Blocks the prefix index holds now (0 before any affinity pick). */
  indexSize(): number {
    return this.#index?.size() ?? 0;
  }

  /** Bytes of the prefix index (0 before any affinity pick). */
  indexBytes(): number {
    return this.#index?.bytes ?? 0;
  }

  /** The pick counters. */
  picks(): PickCount[] {
    return [...this.#picks.values()].map((c) => ({ ...c }));
  }

  #count(d: PickExplanation): void {
    const outcome = d.hit ? "hit" : d.spilled ? "spilled" : "miss";
    const key = `${d.pick}|${d.key_kind}|${outcome}`;
    const entry = this.#picks.get(key);
    if (entry) entry.count++;
    else this.#picks.set(key, { pick: d.pick, key_kind: d.key_kind, outcome, count: 1 });
  }
}
