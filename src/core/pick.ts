/**
 * Picks: how a selection chooses among its nodes that can admit now. Admission is not a pick's
 * business — eligibility, deny tags, max_conns shares, capacity readings and ejection have
 * already ruled nodes out; a pick only orders what is left.
 *
 * - `round_robin`: smooth weighted round-robin (`router.ts`), the default.
 * - `least_loaded`: the lowest predicted queue wait, then the lowest load per weight.
 * - `affinity`: the node most likely to hold the request's prefix, unless it is over the load
 *   bound; otherwise by score. Score = predicted uncached prefill (uncached tokens × the node's
 *   learned cost) + predicted queue wait, over the nodes within the bound (load + 1 ≤
 *   ⌈bound × mean⌉, the mean counting this request). A request no node holds goes to the
 *   session key's rendezvous first choice among the nodes with the least predicted wait — so
 *   every worker and frontend places a new session alike, and never on a busy node.
 *
 * Pure and synchronous: the caller gathers the candidates (`affinity.ts`).
 *
 * @module
 */
import { rendezvousScore } from "./rendezvous.ts";
import type { KeyKind } from "./route_hint.ts";

/** The pick kinds, in the order the docs list them. */
export const PICK_KINDS = ["round_robin", "least_loaded", "affinity"] as const;

/** How a selection chooses among its admitting nodes. */
export type PickKind = typeof PICK_KINDS[number];

/** Whether `value` names a pick kind. */
export function isPickKind(value: unknown): value is PickKind {
  return typeof value === "string" && (PICK_KINDS as readonly string[]).includes(value);
}

/**
 * Scores this close to the best are ties, broken by load: 2 ms, and a tenth of the best (two
 * nodes' learned prefill costs differ by that much for the same hardware).
 */
export const SCORE_TIE_MS = 2;
/** See {@link SCORE_TIE_MS}. */
export const SCORE_TIE_SHARE = 0.1;

/** Default load bound of `affinity`: a node takes a session while below 1.25 × the mean load. */
export const DEFAULT_LOAD_BOUND = 1.25;

/** Sequences a node is assumed to run at once before anything says otherwise. */
export const DEFAULT_SLOTS = 8;

/** One admitting node as a pick sees it. */
export interface Candidate {
  /** Its index in the selection's node list. */
  index: number;
  /** Node id. */
  id: string;
  /** Hash of the id (rendezvous). */
  hash: number;
  /** Node weight. */
  weight: number;
  /** Requests at the node now: this gateway's inflight, or the probe's running + waiting. */
  load: number;
  /** Requests it runs before it queues (probe's max running seen, else max_conns share). */
  slots: number;
  /** Learned prefill cost, ms per uncached token. */
  prefillMsPerToken: number;
  /** Learned mean service time, ms. */
  serviceMs: number;
  /** Leading prompt tokens the prefix index says it holds. */
  cachedTokens: number;
}

/** A candidate's numbers in a decision (what `GET /skeid/route` shows). */
export interface CandidateScore {
  /** Node id. */
  node_id: string;
  /** Its load. */
  load: number;
  /** Whether it was within the load bound. */
  within_bound: boolean;
  /** Prompt tokens it holds, per the prefix index. */
  cached_tokens: number;
  /** Predicted queue wait, ms. */
  wait_ms: number;
  /** Predicted uncached prefill, ms. */
  prefill_ms: number;
  /** Score: prefill + wait, plus the bound's charge for load over it, ms. */
  score_ms: number;
  /** Rank of the node for the session key (0 = first choice). */
  rendezvous_rank: number;
}

/** What an `affinity` or `least_loaded` pick decided. */
export interface PickDecision {
  /** Index (in the selection's node list) of the chosen node. */
  index: number;
  /** Id of the chosen node. */
  node_id: string;
  /** The pick that decided. */
  pick: PickKind;
  /** Which session key kind decided (`none` without one). */
  key_kind: KeyKind;
  /** Whether the chosen node is the affinity node (the one most likely holding the prefix). */
  hit: boolean;
  /** Whether the load bound moved the request off the affinity node. */
  spilled: boolean;
  /** Predicted TTFT on the chosen node, ms. */
  predicted_ttft_ms: number;
  /** The part of it the request was predicted to wait for a free slot, ms (0: starts at once). */
  predicted_wait_ms: number;
  /** The chosen node's cached prompt tokens, per the prefix index. */
  cached_tokens: number;
}

/** The decision with every candidate's numbers and the bound (for explaining a pick). */
export interface PickExplanation extends PickDecision {
  /** The load bound's ceiling: a node takes the request while load + 1 ≤ this. */
  bound_load: number;
  /** Candidates in rendezvous order. */
  candidates: readonly CandidateScore[];
}

/** The candidates of a decision not explained: none (one array for all of them). */
export const NO_SCORES: readonly CandidateScore[] = Object.freeze([]);

/** The requests a node runs at once, as far as anyone knows. */
function slotsOf(c: Candidate): number {
  return c.slots > 0 ? c.slots : DEFAULT_SLOTS;
}

/** Predicted queue wait: the requests ahead of a free slot, each a share of a service time. */
export function predictedWaitMs(c: Candidate): number {
  const slots = slotsOf(c);
  const ahead = c.load + 1 - slots;
  return ahead > 0 ? (ahead * c.serviceMs) / slots : 0;
}

/** `least_loaded` over `candidates`: lowest wait, then load per weight, then `tie` order. */
export function pickLeastLoaded(
  candidates: readonly Candidate[],
  tie: (c: Candidate) => number,
): Candidate | undefined {
  let best: Candidate | undefined;
  let bestWait = 0;
  let bestLoad = 0;
  let bestTie = 0;
  for (const c of candidates) {
    const wait = predictedWaitMs(c);
    const load = c.load / Math.max(c.weight, 1e-9);
    const t = tie(c);
    if (
      best === undefined || wait < bestWait ||
      (wait === bestWait && (load < bestLoad || (load === bestLoad && t > bestTie)))
    ) {
      best = c;
      bestWait = wait;
      bestLoad = load;
      bestTie = t;
    }
  }
  return best;
}

/**
 * `least_loaded` without a session key: lowest wait, then load per weight; nodes tied on both
 * take turns (`turn` counts picks), so equal nodes share the traffic evenly.
 */
export function pickLeastLoadedTurn(
  candidates: readonly Candidate[],
  turn: number,
): Candidate | undefined {
  let ties: Candidate[] = [];
  let bestWait = Infinity;
  let bestLoad = Infinity;
  for (const c of candidates) {
    const wait = predictedWaitMs(c);
    const load = c.load / Math.max(c.weight, 1e-9);
    if (wait < bestWait || (wait === bestWait && load < bestLoad)) {
      ties = [c];
      bestWait = wait;
      bestLoad = load;
    } else if (wait === bestWait && load === bestLoad) ties.push(c);
  }
  return ties.length === 0 ? undefined : ties[turn % ties.length];
}

/** Predicted uncached prefill of a `prompt`-token request on `c`, ms. */
function prefillMsOf(c: Candidate, prompt: number): number {
  return Math.max(0, prompt - c.cachedTokens) * c.prefillMsPerToken;
}

/**
 * The bound's charge on `c` for load over `exact` (the bound × the mean, unrounded), ms: each
 * request beyond it counts as if it queued there. A warm node a little over the bound keeps a
 * request whose prefill elsewhere would cost more than that, and loses one whose prefill is
 * cheap. A hard cut would trade every such hit for a full prefill on a node that already holds
 * its share (why hashing with bounded load alone falls short).
 *
 * A node with a free slot pays nothing while within the bound's ceiling (`ceiling`, the bound
 * rounded up) — and, if it alone holds the request's prefix (`own`: a conversation's history),
 * at any load: it starts the request at once, and charging it moved a session's later turns
 * off the node holding its history onto a cold one, a full prefill of the conversation for a
 * wait that would not have happened (a fifth of a multi-turn workload's turns moved so). A
 * prefix several nodes hold (one key sent on every request, once it has spread) pays past the
 * ceiling with a slot free, so it spreads evenly before it fills a node.
 */
function overMsOf(c: Candidate, exact: number, ceiling: number, own: boolean): number {
  if (c.load + 1 <= slotsOf(c) && (own || c.load + 1 <= ceiling)) return 0;
  const over = c.load + 1 - exact;
  return over > 0 ? (over * c.serviceMs) / slotsOf(c) : 0;
}

/** The load ceiling of the bound: a node takes the request while `load + 1` ≤ it. */
export function boundLoad(candidates: readonly Candidate[], bound: number): number {
  let total = 1;
  for (const c of candidates) total += c.load;
  return Math.ceil((bound * total) / Math.max(1, candidates.length));
}

/** Options of one affinity decision. */
export interface AffinityArgs {
  /** The session key's hash. */
  key: number;
  /** Its kind. */
  keyKind: KeyKind;
  /** The prompt's estimated tokens. */
  promptTokens: number;
  /** The load bound (> 1). */
  bound: number;
  /** Pick by load this time, ignoring the cache (exploration keeps cost estimates fresh). */
  explore: boolean;
  /**
   * The best of the eligible nodes that cannot take the request now (full, backing off,
   * ejected, or excluded by a failover): its cached prompt tokens and its rendezvous rank. When
   * it would be the affinity node, no candidate is, so the pick is no hit (and nothing the bound
   * did: no spill).
   */
  elsewhere?: { cachedTokens: number; rank: number };
  /**
   * The session's last request was picked longer ago than a request takes (or not seen): it
   * has likely ended, so this one is the session's next turn, not one of many at once.
   */
  settled?: boolean;
}

/**
 * Each candidate's rendezvous rank in a decision, computed once (a logarithm each): reused by
 * every decision of this isolate, which runs start to end synchronously, so none share it.
 */
let rankScratch = new Float64Array(64);
/** Each candidate's score in the cached branch of a decision, shared the same way. */
let scoreScratch = new Float64Array(64);

/** A decision's shape before it is filled. */
const EMPTY_DECISION: Readonly<PickExplanation> = Object.freeze({
  index: 0,
  node_id: "",
  pick: "affinity",
  key_kind: "none",
  hit: false,
  spilled: false,
  predicted_ttft_ms: 0,
  predicted_wait_ms: 0,
  cached_tokens: 0,
  bound_load: 0,
  candidates: NO_SCORES,
});

/**
 * The `affinity` decision over the admitting `candidates` (at least one). With `explain`, every
 * candidate's numbers come back too. One pass gathers the ranks and the bound, one finds the
 * affinity node, one chooses: no array, closure or score is made per candidate. `out`: an
 * object to fill with the decision (a caller that copies what it keeps reuses one) instead of
 * a new one.
 */
export function pickAffinity(
  candidates: readonly Candidate[],
  args: Readonly<AffinityArgs>,
  explain = false,
  out?: PickExplanation,
): PickExplanation {
  const n = candidates.length;
  if (rankScratch.length < n) {
    rankScratch = new Float64Array(n * 2);
    scoreScratch = new Float64Array(n * 2);
  }
  const ranks = rankScratch;
  let total = 1;
  for (let i = 0; i < n; i++) {
    const c = candidates[i];
    ranks[i] = rendezvousScore(args.key, c.hash, c.weight);
    total += c.load;
  }
  // The bound unrounded charges load over it; rounded up, it is the ceiling a node is within
  // (so at a light load a node may always take one more).
  const exact = (args.bound * total) / Math.max(1, n);
  const ceiling = Math.ceil(exact);
  const prompt = args.promptTokens;

  // The affinity node: the one holding the longest prefix; with none, the session's first choice.
  let home = -1;
  for (let i = 0; i < n; i++) {
    const cached = candidates[i].cachedTokens;
    if (cached <= 0) continue;
    if (
      home < 0 || cached > candidates[home].cachedTokens ||
      (cached === candidates[home].cachedTokens && ranks[i] > ranks[home])
    ) home = i;
  }
  const anyCached = home >= 0;
  if (home < 0 && args.keyKind !== "none") {
    for (let i = 0; i < n; i++) if (home < 0 || ranks[i] > ranks[home]) home = i;
  }
  // The pool: the nodes within the bound (all of them when none is).
  let anyWithin = false;
  for (let i = 0; i < n && !anyWithin; i++) anyWithin = candidates[i].load + 1 <= ceiling;
  const maxLoad = anyWithin ? ceiling - 1 : Infinity;

  let chosen = -1;
  if (args.keyKind === "none" || args.explore) {
    // By load: lowest wait, then load per weight, then the rendezvous order.
    let bestWait = 0;
    let bestLoad = 0;
    for (let i = 0; i < n; i++) {
      const c = candidates[i];
      if (c.load > maxLoad) continue;
      const wait = predictedWaitMs(c);
      const load = c.load / Math.max(c.weight, 1e-9);
      if (
        chosen < 0 || wait < bestWait ||
        (wait === bestWait && (load < bestLoad || (load === bestLoad && ranks[i] > ranks[chosen])))
      ) {
        chosen = i;
        bestWait = wait;
        bestLoad = load;
      }
    }
  } else if (anyCached) {
    // Lowest predicted TTFT (over-bound load counted as waiting); among nodes scoring alike
    // (within the predictions' own error), the one holding the most of the prompt, then the
    // least loaded, then the rendezvous order. Taking the lowest score exactly let a learned
    // prefill cost a tenth lower decide between two warm nodes with free slots: a hot prefix
    // stayed on the one with the lower estimate until it queued — and two warm nodes still
    // split by load. Breaking a tie by load first sent a conversation's next turn to an
    // emptier node holding only the shared system prompt, for a prediction the node holding
    // its history barely lost, and that node then computed the whole history again.
    //
    // A prefix one node alone holds, of a session whose last request has likely ended, is that
    // session's own (a conversation's history): the node keeps it while a slot is free. One
    // several nodes hold, or a key with requests still running (one key sent on every request),
    // is a hot one, spread by the bound.
    let holders = 0;
    for (let i = 0; i < n; i++) {
      if (candidates[i].cachedTokens === candidates[home].cachedTokens) holders++;
    }
    const own = holders === 1 && args.settled === true ? home : -1;
    const scores = scoreScratch;
    let best = Infinity;
    for (let i = 0; i < n; i++) {
      const c = candidates[i];
      scores[i] = prefillMsOf(c, prompt) + predictedWaitMs(c) +
        overMsOf(c, exact, ceiling, i === own);
      best = Math.min(best, scores[i]);
    }
    const tie = best + SCORE_TIE_MS + best * SCORE_TIE_SHARE;
    for (let i = 0; i < n; i++) {
      const c = candidates[i];
      if (scores[i] > tie) continue;
      const at = chosen < 0 ? undefined : candidates[chosen];
      if (
        at === undefined || c.cachedTokens > at.cachedTokens ||
        (c.cachedTokens === at.cachedTokens &&
          (c.load < at.load || (c.load === at.load && ranks[i] > ranks[chosen])))
      ) chosen = i;
    }
  } else {
    // Nothing cached anywhere: the first rendezvous choice among the least-waiting nodes.
    let minWait = Infinity;
    for (let i = 0; i < n; i++) {
      if (candidates[i].load <= maxLoad) {
        minWait = Math.min(minWait, predictedWaitMs(candidates[i]));
      }
    }
    for (let i = 0; i < n; i++) {
      const c = candidates[i];
      if (c.load > maxLoad || predictedWaitMs(c) !== minWait) continue;
      if (chosen < 0 || ranks[i] > ranks[chosen]) chosen = i;
    }
  }
  const c = candidates[chosen];
  // The affinity node is of every eligible node, not only of those admitting now; where several
  // hold the longest prefix, landing on any of them is a hit (ties go by load).
  const away = args.elsewhere;
  const awayWins = away !== undefined && (
    home < 0
      ? away.cachedTokens > 0 || args.keyKind !== "none"
      : anyCached
      ? away.cachedTokens > candidates[home].cachedTokens
      : away.cachedTokens > 0 || away.rank > ranks[home]
  );
  if (awayWins) home = -1;
  const hit = home >= 0 &&
    (chosen === home || (anyCached && c.cachedTokens === candidates[home].cachedTokens));
  const decision: PickExplanation = out ?? { ...EMPTY_DECISION };
  decision.index = c.index;
  decision.node_id = c.id;
  decision.pick = "affinity";
  decision.key_kind = args.keyKind;
  decision.hit = hit;
  decision.spilled = home >= 0 && !hit && candidates[home].load + 1 > ceiling;
  decision.predicted_wait_ms = predictedWaitMs(c);
  decision.predicted_ttft_ms = prefillMsOf(c, prompt) + decision.predicted_wait_ms;
  decision.cached_tokens = c.cachedTokens;
  decision.bound_load = ceiling;
  decision.candidates = NO_SCORES;
  if (explain) {
    const byRank = new Map<Candidate, number>();
    for (let i = 0; i < n; i++) byRank.set(candidates[i], ranks[i]);
    decision.candidates = candidateScores(
      candidates,
      (x) => byRank.get(x) ?? 0,
      (x) => x.load + 1 <= ceiling,
      (x) => prefillMsOf(x, prompt),
      (x) => overMsOf(x, exact, ceiling, false),
    );
  }
  return decision;
}

/**
 * Every candidate's numbers, highest `rank` first (`GET /skeid/route`). `within` says whether
 * it is within the load bound, `prefillMs` its predicted uncached prefill.
 */
export function candidateScores(
  candidates: readonly Candidate[],
  rank: (c: Candidate) => number,
  within: (c: Candidate) => boolean,
  prefillMs: (c: Candidate) => number,
  overMs: (c: Candidate) => number = () => 0,
): CandidateScore[] {
  const ordered = candidates.slice().sort((a, b) => rank(b) - rank(a));
  return ordered.map((c, i) => ({
    node_id: c.id,
    load: c.load,
    within_bound: within(c),
    cached_tokens: c.cachedTokens,
    wait_ms: predictedWaitMs(c),
    prefill_ms: prefillMs(c),
    score_ms: prefillMs(c) + predictedWaitMs(c) + overMs(c),
    rendezvous_rank: i,
  }));
}
