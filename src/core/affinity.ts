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
  type AffinityArgs,
  type Candidate,
  candidateScores,
  DEFAULT_SLOTS,
  NO_SCORES,
  pickAffinity,
  type PickExplanation,
  type PickKind,
  pickLeastLoadedTurn,
  predictedWaitMs,
} from "./pick.ts";

/** One affinity pick in a hundred goes by load alone, so cost estimates see cold prefills too. */
export const EXPLORE_EVERY = 100;

/**
 * Index blocks one pick writes at most for its own prompt, and as many again of what earlier
 * picks left unwritten: a 32k-token prompt sent to a node that holds none of it is 512 blocks,
 * each write a likely cache miss (~0.2 µs), which made that pick (one in a hundred: the
 * exploration ones) the pick's p99. The rest follows over the next picks, in order, so the
 * index holds a prefix of the chain meanwhile (a little less than the node has, never more).
 */
export const RECORD_BUDGET = 32;

/** Session keys whose last pick is remembered, at most (beyond: all are forgotten at once). */
const MAX_SESSIONS = 65_536;

/** Earlier picks' prompts still being written, at most (beyond: the oldest is given up). */
const RECORD_BACKLOG = 64;

/** The rest of a pick's prompt still to be written to the index. */
interface PendingRecord {
  node: number;
  blocks: Uint32Array;
  from: number;
}

/** A candidate's shape before it is filled (the pool's objects are made from it). */
const EMPTY_CANDIDATE: Readonly<Candidate> = Object.freeze({
  index: 0,
  id: "",
  hash: 0,
  weight: 0,
  load: 0,
  slots: 0,
  prefillMsPerToken: 0,
  serviceMs: 0,
  cachedTokens: 0,
});

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

/** Pick outcomes by their place in a counter triple. */
const OUTCOMES: readonly PickCount["outcome"][] = ["hit", "spilled", "miss"];

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
  /** When each session key was last picked (bounded: cleared past {@link MAX_SESSIONS}). */
  readonly #lastPick = new Map<number, number>();
  /** The counters in the order they first counted (`/skeid/metrics`). */
  readonly #picks: PickCount[] = [];
  /**
   * The same counters by pick, key kind and outcome: found without building a string, so
   * counting a pick allocates nothing once its counter exists.
   */
  readonly #pickIndex = new Map<PickKind, Map<string, (PickCount | undefined)[]>>();
  #explore = 0;
  readonly #args: AffinityArgs = {
    key: 0,
    keyKind: "none",
    promptTokens: 0,
    bound: 0,
    explore: false,
    elsewhere: undefined,
    settled: false,
  };
  readonly #decision: PickExplanation = pickAffinity([{ ...EMPTY_CANDIDATE }], {
    key: 0,
    keyKind: "none",
    promptTokens: 0,
    bound: 2,
    explore: false,
  });
  /** The candidates of the decision under way (see `decide`), and the objects they are. */
  readonly #candidates: Candidate[] = [];
  readonly #pool: Candidate[] = [];
  /** Prompts of earlier picks not yet fully written to the index, oldest first. */
  readonly #backlog: PendingRecord[] = [];
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
      this.#backlog.length = 0;
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
    // The candidates are this core's own objects, refilled by every decision (a decision runs
    // start to end synchronously): a pick among 32 nodes allocated 32 of them, and the
    // scavenges that garbage brought were the pick's p99.
    const candidates = this.#candidates;
    let count = 0;
    let minServiceMs = Infinity;
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
      let c = this.#pool[count];
      if (c === undefined) this.#pool.push(c = { ...EMPTY_CANDIDATE });
      c.index = i;
      c.id = id;
      c.hash = hash;
      c.weight = record.node.weight;
      c.load = view.load(record);
      c.slots = slots;
      c.prefillMsPerToken = this.costs.prefillMsPerToken(id);
      c.serviceMs = this.costs.serviceMs(id);
      c.cachedTokens = index ? index.matched(hash, hint!.blocks) * BLOCK_TOKENS : 0;
      minServiceMs = Math.min(minServiceMs, c.serviceMs);
      candidates[count++] = c;
    }
    candidates.length = count;
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
        predicted_wait_ms: predictedWaitMs(c),
        cached_tokens: 0,
        bound_load: 0,
        candidates: explain
          ? candidateScores(candidates, (x) => -x.index, () => true, () => 0)
          : NO_SCORES,
      };
    } else {
      const explore = !explain && ++this.#explore % EXPLORE_EVERY === 0;
      // One arguments object and one decision object of this core serve every pick (the caller
      // copies what it keeps); an explanation gets its own.
      const args = explain ? { ...this.#args } : this.#args;
      args.key = hint!.key;
      args.keyKind = hint!.key_kind;
      args.promptTokens = hint!.prompt_tokens;
      args.bound = routing.affinity_bound;
      args.explore = explore;
      args.elsewhere = elsewhere;
      // A keyless pick goes by load and never reads it; its key (0) names no session.
      args.settled = hint!.key_kind !== "none" && this.#settled(hint!.key, minServiceMs, !explain);
      decision = pickAffinity(candidates, args, explain, explain ? undefined : this.#decision);
      if (!explain) this.#record(index!, nodes[decision.index].node.id, hint!, decision);
    }
    if (!explain) this.#count(decision);
    return decision;
  }

  /**
   * Whether the session `key`'s last pick was longer ago than the quickest candidate serves a
   * request, `serviceMs` (or is not remembered); `note` remembers this pick.
   */
  #settled(key: number, serviceMs: number, note: boolean): boolean {
    const now = this.#now();
    const last = this.#lastPick.get(key);
    if (note) {
      if (this.#lastPick.size >= MAX_SESSIONS) this.#lastPick.clear();
      this.#lastPick.set(key, now);
    }
    if (last === undefined) return true;
    return now - last >= serviceMs;
  }

  /**
   * Remembers the chosen node's prompt in the index: up to {@link RECORD_BUDGET} blocks of it
   * now (the rest waits its turn), then as many of what earlier picks left.
   */
  #record(index: PrefixIndex, id: string, hint: RouteHint, decision: PickExplanation): void {
    const blocks = hint.blocks;
    const backlog = this.#backlog;
    let rest: PendingRecord | undefined;
    if (blocks.length > 0) {
      const node = this.nodeHash(id);
      const from = index.recordStart(node, blocks, decision.cached_tokens / BLOCK_TOKENS);
      const next = index.recordFrom(node, blocks, from, RECORD_BUDGET);
      if (next < blocks.length) rest = { node, blocks, from: next };
    }
    let budget = RECORD_BUDGET;
    while (budget > 0 && backlog.length > 0) {
      const p = backlog[0];
      const next = index.recordFrom(p.node, p.blocks, p.from, budget);
      budget -= next - p.from;
      if (next < p.blocks.length) p.from = next;
      else backlog.shift();
    }
    if (rest !== undefined) {
      if (backlog.length >= RECORD_BACKLOG) backlog.shift();
      backlog.push(rest);
    }
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
    const node = this.nodeHash(id);
    // What is still to be written of it would bring back what the node no longer holds.
    const backlog = this.#backlog;
    for (let i = backlog.length - 1; i >= 0; i--) {
      if (backlog[i].node === node) backlog.splice(i, 1);
    }
    this.#index?.forgetNode(node);
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
    return this.#picks.map((c) => ({ ...c }));
  }

  #count(d: PickExplanation): void {
    const at = d.hit ? 0 : d.spilled ? 1 : 2;
    let byKind = this.#pickIndex.get(d.pick);
    if (byKind === undefined) this.#pickIndex.set(d.pick, byKind = new Map());
    let counts = byKind.get(d.key_kind);
    if (counts === undefined) byKind.set(d.key_kind, counts = [undefined, undefined, undefined]);
    const entry = counts[at];
    if (entry !== undefined) entry.count++;
    else {
      const outcome = OUTCOMES[at];
      const made: PickCount = { pick: d.pick, key_kind: d.key_kind, outcome, count: 1 };
      counts[at] = made;
      this.#picks.push(made);
    }
  }
}
