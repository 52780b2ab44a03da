/**
 * `deno task bench:routing [--quick] [--out FILE] [--requests N]`
 *
 * The picks measured on a simulated fleet (issue 21): the same simulated engines `skeid
 * fake-model --sim` runs (`src/fake/engine.ts`: KV block cache with prefix caching, max_running
 * with a FIFO queue, TTFT from uncached tokens), in **virtual time** — the engines and the
 * arrivals run on one event clock, so every number is a function of the seed alone, the same on
 * a busy machine as on an idle one, and a run of minutes of traffic takes a second.
 *
 * The routers are the real core (`Skeid.pickNode` with `round_robin`, `least_loaded`,
 * `affinity`; route hints from `routeHint` on the request body, TTFT observations and finishes
 * fed back as the gateway does, and a Prometheus-like reading of every engine's queue each
 * virtual second) and an **oracle** that sees every engine's true cache and queue. Workloads,
 * seeded: shared prefix, multi-turn, hot prefix, unique; Poisson arrivals at 0.5, 0.8 and 0.95
 * of the fleet's capacity. Also: `--workers 2` (two cores sharing the inflight table and the
 * prefix index) and two frontends with no shared state, on multi-turn at 0.8; and the cost of
 * the pick itself (32 nodes, a 32k-token prompt). Writes `docs/bench/routing.md` (`--quick`:
 * `docs/bench/routing-quick.tmp`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { InflightTable } from "../../src/core/inflight_table.ts";
import { PrefixIndex, prefixIndexBytes } from "../../src/core/prefix_index.ts";
import { hintSource, routeHint } from "../../src/core/route_hint.ts";
import type { PickKind } from "../../src/core/pick.ts";
import type { JsonObject } from "../../src/core/json.ts";
import { type EngineSettings, SimEngine } from "../../src/fake/engine.ts";
import { blockHashes } from "../../src/fake/kv_cache.ts";
import { VirtualClock } from "../../src/fake/sim_clock.ts";
import { silentLogger } from "../../src/log.ts";
import { summarize } from "./stats.ts";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const T0 = 1_800_000_000_000;
const SEED = 21;

/** The engine every node simulates (vLLM-like, an 8B model on one GPU, roughly). */
const ENGINE: EngineSettings = {
  blockSize: 16,
  numBlocks: 1024,
  maxRunning: 8,
  ttftBaseMs: 20,
  prefillMsPerToken: 0.1,
  itlMs: 10,
  decodeSlowdown: 0.5,
};

// ---- seeded randomness ---------------------------------------------------------------------

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const exp = (r: () => number, mean: number) => -Math.log(1 - r()) * mean;
const int = (r: () => number, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
/**
 * `n` random tokens of about 3 characters (4 with the space: the characters-per-token of English
 * text, which the route hint's estimate assumes), each led by `tag`'s first letter.
 */
const words = (r: () => number, n: number, tag: string) =>
  Array.from({ length: n }, () => `${tag[0]}${int(r, 36, 1295).toString(36)}`);

// ---- workloads -----------------------------------------------------------------------------

/** One request: its body (as a client sends it), the engine's tokens, its session. */
interface SimRequest {
  session: string;
  body: JsonObject;
  tokens: string[];
  output: string[];
  /** Called when its last token is out (multi-turn schedules the next turn). */
  onDone?: () => void;
}

/** Where requests come from. */
interface Source {
  /** Starts arrivals at `rate` requests/s; `submit` routes each; stops after `count`. */
  start(clock: VirtualClock, submit: (req: SimRequest) => void, rate: number, count: number): void;
}

interface Workload {
  name: string;
  describe: string;
  /** Mean prompt tokens, for the capacity (every token uncached: round-robin's worst case). */
  meanPrompt: number;
  output: number;
  source(seed: number): Source;
}

const outputWords = (n: number) => Array.from({ length: n }, (_, i) => `tök${i}`);

function chatBody(
  system: string[],
  turns: string[][],
  extra: Record<string, unknown>,
  output: number,
): { body: JsonObject; tokens: string[] } {
  const messages: JsonObject[] = [{ role: "system", content: system.join(" ") }];
  const tokens = [...system];
  turns.forEach((t, i) => {
    const role = i % 2 === 0 ? "user" : "assistant";
    messages.push({ role, content: t.join(" ") });
    for (const w of t) tokens.push(w);
  });
  return { body: { model: "m", messages, max_tokens: output, ...extra }, tokens };
}

/** Independent Poisson arrivals of requests made by `make`. */
function poisson(seed: number, make: (r: () => number, i: number) => SimRequest): Source {
  return {
    start(clock, submit, rate, count) {
      const r = rng(seed);
      let i = 0;
      const next = () => {
        if (i >= count) return;
        submit(make(r, i++));
        clock.at(clock.now() + exp(r, 1000 / rate), next);
      };
      clock.at(exp(r, 1000 / rate), next);
    },
  };
}

const SP_APPS = 8;
const spSystem = (app: number) => words(rng(1000 + app), 2000 + 250 * app, `a${app}w`);

const sharedPrefix: Workload = {
  name: "shared prefix",
  describe: `${SP_APPS} applications, each with its own system prompt of 2,000–3,750 tokens ` +
    "(one app per request, uniformly), each request a new user's 20–80-token question; 32 " +
    "output tokens. Prompts of all apps: ~23k tokens; one node's KV cache: 16k tokens.",
  meanPrompt: 2000 + 250 * (SP_APPS - 1) / 2 + 50,
  output: 32,
  source(seed) {
    const systems = Array.from({ length: SP_APPS }, (_, a) => spSystem(a));
    return poisson(seed, (r, i) => {
      const app = int(r, 0, SP_APPS - 1);
      const q = words(r, int(r, 20, 80), "q");
      const { body, tokens } = chatBody(systems[app], [q], {}, this.output);
      return { session: `u${i}`, body, tokens, output: outputWords(this.output) };
    });
  },
};

const HOT_SYSTEM = words(rng(77), 3000, "hot");
const hotPrefix: Workload = {
  name: "hot prefix",
  describe: "90% of requests share one 3,000-token system prompt (at 0.8 load that prefix " +
    "alone carries ~2.9 nodes' capacity), 10% one of 4 other apps' prompts; each a new " +
    "user's 30-token question; 32 output tokens.",
  meanPrompt: 0.9 * 3000 + 0.1 * 2375 + 30,
  output: 32,
  source(seed) {
    const others = Array.from({ length: 4 }, (_, a) => spSystem(a + 2));
    return poisson(seed, (r, i) => {
      const system = r() < 0.9 ? HOT_SYSTEM : others[int(r, 0, 3)];
      const { body, tokens } = chatBody(system, [words(r, 30, "q")], {}, this.output);
      return { session: `u${i}`, body, tokens, output: outputWords(this.output) };
    });
  },
};

const unique: Workload = {
  name: "unique",
  describe: "every prompt its own: 300–1,500 random tokens, no shared prefix; 32 output tokens.",
  meanPrompt: 900,
  output: 32,
  source(seed) {
    return poisson(seed, (r, i) => {
      const { body, tokens } = chatBody([], [words(r, int(r, 300, 1500), "u")], {}, this.output);
      return { session: `u${i}`, body, tokens, output: outputWords(this.output) };
    });
  },
};

const MT_TURNS = [4, 8];
const MT_USER = [60, 160];
const MT_OUT = 48;
const MT_SYSTEM = words(rng(5), 60, "sys");
const multiTurn: Workload = {
  name: "multi-turn",
  describe: `conversations of ${MT_TURNS[0]}–${MT_TURNS[1]} turns (Poisson starts; each next ` +
    `turn 0–2 s after the answer), a 60-token shared system prompt, user messages of ` +
    `${MT_USER[0]}–${MT_USER[1]} tokens, ${MT_OUT}-token answers sent back in the history; ` +
    "a quarter with `prompt_cache_key`, a quarter with `user`, half with nothing but their text.",
  // Mean history over all turns: system + (turn index + 1/2) × (user + answer), ~6 turns.
  meanPrompt: 60 + 3 * (110 + MT_OUT),
  output: MT_OUT,
  source(seed) {
    return {
      start(clock, submit, rate, count) {
        const r = rng(seed);
        const meanTurns = (MT_TURNS[0] + MT_TURNS[1]) / 2;
        let sent = 0;
        let conv = 0;
        const startConversation = () => {
          if (sent >= count) return;
          const id = conv++;
          const turns = int(r, MT_TURNS[0], MT_TURNS[1]);
          const kind = id % 4;
          const extra = kind === 0
            ? { prompt_cache_key: `conv-${id}` }
            : kind === 1
            ? { user: `user-${id}` }
            : {};
          const history: string[][] = [];
          const turn = (k: number) => {
            if (sent >= count) return;
            sent++;
            history.push(words(r, int(r, MT_USER[0], MT_USER[1]), `c${id}w`));
            const { body, tokens } = chatBody(MT_SYSTEM, history, extra, MT_OUT);
            const output = outputWords(MT_OUT);
            submit({
              session: `conv-${id}`,
              body,
              tokens,
              output,
              onDone: () => {
                history.push(output);
                if (k + 1 < turns) clock.at(clock.now() + r() * 2000, () => turn(k + 1));
              },
            });
          };
          turn(0);
          clock.at(clock.now() + exp(r, (1000 * meanTurns) / rate), startConversation);
        };
        clock.at(0, startConversation);
      },
    };
  },
};

// ---- routers -------------------------------------------------------------------------------

/** What a router sees of the fleet. */
interface Fleet {
  engines: SimEngine[];
  ids: string[];
}

/** A router: picks a node for a request; told when its first token and its end came. */
interface Router {
  route(req: SimRequest, hashes: number[]): number;
  firstToken(node: number, req: SimRequest, ttftMs: number, cached: number): void;
  done(node: number, req: SimRequest, e2eMs: number): void;
  /** A probe poll (once a virtual second). */
  poll?(fleet: Fleet): void;
  /** The core's pick outcomes: hit, spilled, miss (affinity). */
  outcomes?(): Record<string, number>;
}

/** Cores of the gateway: one, two workers sharing state, or two frontends sharing none. */
type Frontends = "one" | "workers" | "frontends";

function coreRouter(
  fleet: Fleet,
  pick: PickKind,
  mode: Frontends,
  clock: VirtualClock,
  agreement?: { same: number; asked: number },
): Router {
  const now = () => T0 + clock.now();
  const n = mode === "one" ? 1 : 2;
  const table = mode === "workers" ? InflightTable.shared(256, 2) : undefined;
  const shared = mode === "workers" ? PrefixIndex.buffer(1_000_000) : undefined;
  const cores = Array.from({ length: n }, (_, i) =>
    new RoutingCore({
      now,
      env: () => undefined,
      logger: silentLogger,
      inflight: table
        ? new InflightTable(table.words.buffer, { capacity: 256, workers: 2 }, i)
        : undefined,
      prefixIndex: shared,
      routing: { pick, frontend_count: mode === "frontends" ? 2 : 1 },
    }));
  for (const core of cores) {
    for (const id of fleet.ids) {
      core.addNode({ id, url: `http://${id}:8000/v1`, model: "m", max_conns: 512 });
    }
  }
  let turn = 0;
  const owner = new Map<
    SimRequest,
    { core: RoutingCore; predicted?: number; wait?: number; at: number }
  >();
  return {
    route(req) {
      // Requests reach the workers (or frontends) in turn, as a shared listener spreads them.
      const core = cores[turn++ % n];
      const hint = routeHint(req.body);
      const node = core.pickNode({ model: "m" }, hintSource(hint))!;
      if (agreement && n > 1) {
        const other = cores[turn % n].explainPick({ model: "m", pick }, hint);
        agreement.asked++;
        if (other?.node_id === node.id) agreement.same++;
      }
      if (!core.startRequest(node.id)) throw new Error(`${node.id} refused a request`);
      owner.set(req, {
        core,
        predicted: node.route?.predicted_ttft_ms,
        wait: node.route?.predicted_wait_ms,
        at: clock.now(),
      });
      return fleet.ids.indexOf(node.id);
    },
    firstToken(node, req, ttftMs, cached) {
      const o = owner.get(req)!;
      o.core.observeRoute(fleet.ids[node], {
        ttft_ms: ttftMs,
        prompt_tokens: req.tokens.length,
        cached_tokens: cached,
        predicted_ttft_ms: o.predicted,
        predicted_wait_ms: o.wait,
      });
    },
    done(node, req, e2eMs) {
      const o = owner.get(req)!;
      owner.delete(req);
      o.core.finishRequest(fleet.ids[node], {
        ok: true,
        duration_ms: e2eMs,
        transport: "answered",
      });
    },
    outcomes() {
      const out: Record<string, number> = { hit: 0, spilled: 0, miss: 0 };
      for (const core of cores) {
        for (const p of core.routingMetrics().picks) out[p.outcome] += p.count;
      }
      return out;
    },
    poll(f) {
      f.engines.forEach((e, i) => {
        const c = e.counters();
        const queue = {
          running: c.running,
          waiting: c.waiting,
          kv_usage: c.kvUsage,
          prefix_queries: c.prefixQueries,
          prefix_hits: c.prefixHits,
        };
        for (const core of cores) {
          core.setCapacityReading(f.ids[i], { source: "prometheus", queue });
        }
      });
    },
  };
}

/**
 * The oracle: sees every engine's true cache and queue and sends each request where its TTFT,
 * played forward from that state (`SimEngine.predictTtft`), is least; equal predictions go to
 * the node with fewer requests.
 */
function oracleRouter(fleet: Fleet): Router {
  return {
    route(req, hashes) {
      let best = 0;
      let bestScore = Infinity;
      fleet.engines.forEach((e, i) => {
        const c = e.counters();
        const score = e.predictTtft(hashes, req.tokens.length) + (c.running + c.waiting) * 1e-6;
        if (score < bestScore) {
          bestScore = score;
          best = i;
        }
      });
      return best;
    },
    firstToken() {},
    done() {},
  };
}

// ---- one run -------------------------------------------------------------------------------

interface RunResult {
  router: string;
  ttft: ReturnType<typeof summarize>;
  e2e: ReturnType<typeof summarize>;
  rps: number;
  hitRate: number;
  busiestShare: number;
  /** Busiest node's mean inflight (running + waiting, seen by arrivals) over the nodes' mean. */
  inflightRatio: number;
  /** The same without the arriving request: the time average itself, for Poisson arrivals. */
  inflightRatioBefore: number;
  /** p99 over arrivals of (busiest node's inflight) / (mean inflight then). */
  peakP99: number;
  /** Of a session's later requests, the share on the node of its previous one. */
  sticky: number;
  /** Two frontends: how often the other would have picked the same node. */
  agreement?: number;
  /**
   * The floor: TTFT if every block any node ever computed were cached where the request went and
   * nothing queued (the base + the request's never-seen tokens' prefill) — no router does better.
   */
  floor: ReturnType<typeof summarize>;
  /** Affinity picks: shares that were hits (the affinity node) and spills (the bound moved it). */
  hits: number;
  spills: number;
}

function runOnce(
  workload: Workload,
  load: number,
  routerName: string,
  count: number,
  nodes: number,
  mode: Frontends = "one",
  seed = SEED,
): RunResult {
  const clock = new VirtualClock();
  const engines = Array.from({ length: nodes }, () => new SimEngine(clock, ENGINE));
  const fleet: Fleet = { engines, ids: engines.map((_, i) => `gpu-${i}`) };
  const agreement = mode === "frontends" ? { same: 0, asked: 0 } : undefined;
  const router = routerName === "oracle"
    ? oracleRouter(fleet)
    : coreRouter(fleet, routerName as PickKind, mode, clock, agreement);
  const capacity = fleetCapacity(workload, nodes);
  const warmup = Math.floor(count / 6);
  const ttft: number[] = [];
  const floor: number[] = [];
  const everComputed = new Set<number>();
  const e2e: number[] = [];
  const perNode = new Array(nodes).fill(0);
  const ratios: number[] = [];
  const loadSums = new Array(nodes).fill(0);
  const loadSumsBefore = new Array(nodes).fill(0);
  let prompt = 0;
  let cachedTotal = 0;
  let seen = 0;
  let firstMeasuredAt = 0;
  let lastDoneAt = 0;
  let measuredDone = 0;
  const lastNode = new Map<string, number>();
  let stickyAsked = 0;
  let stickySame = 0;
  let polling = true;
  const poll = () => {
    router.poll?.(fleet);
    if (polling) clock.at(clock.now() + 1000, poll);
  };
  if (router.poll) clock.at(0, poll);

  const submit = (req: SimRequest) => {
    const index = seen++;
    const measured = index >= warmup;
    if (measured && firstMeasuredAt === 0) firstMeasuredAt = clock.now();
    const hashes = blockHashes(req.tokens, ENGINE.blockSize);
    let known = 0;
    while (known < hashes.length && everComputed.has(hashes[known])) known++;
    if (measured) {
      const fresh = req.tokens.length - known * ENGINE.blockSize;
      floor.push(ENGINE.ttftBaseMs + fresh * ENGINE.prefillMsPerToken);
    }
    for (const h of hashes) everComputed.add(h);
    const node = router.route(req, hashes);
    const loads = engines.map((e) => e.counters().running + e.counters().waiting);
    if (measured) loads.forEach((l, i) => (loadSumsBefore[i] += l));
    loads[node]++;
    if (measured) {
      perNode[node]++;
      loads.forEach((l, i) => (loadSums[i] += l));
      const mean = loads.reduce((a, b) => a + b, 0) / nodes;
      if (mean >= 2) ratios.push(Math.max(...loads) / mean);
      const last = lastNode.get(req.session);
      if (last !== undefined) {
        stickyAsked++;
        if (last === node) stickySame++;
      }
    }
    lastNode.set(req.session, node);
    const arrived = clock.now();
    engines[node].submit(req.tokens, req.output, {
      onFirstToken: (start) => {
        router.firstToken(node, req, start.ttftMs, start.cachedTokens);
        if (measured) {
          ttft.push(start.ttftMs);
          prompt += start.promptTokens;
          cachedTotal += start.cachedTokens;
        }
      },
      onEnd: () => {
        for (const h of blockHashes([...req.tokens, ...req.output], ENGINE.blockSize)) {
          everComputed.add(h);
        }
        const took = clock.now() - arrived;
        router.done(node, req, took);
        if (measured) {
          e2e.push(took);
          measuredDone++;
          lastDoneAt = clock.now();
        }
        req.onDone?.();
      },
    });
  };
  workload.source(seed).start(clock, submit, load * capacity, count);
  // Bounded: every request ends (the engines never stall), and the poll stops with the traffic.
  for (let guard = 0; guard < 1000 && clock.pending > (router.poll ? 1 : 0); guard++) {
    clock.run(clock.now() + 60_000);
  }
  polling = false;
  clock.run();
  const span = Math.max(1, lastDoneAt - firstMeasuredAt) / 1000;
  const total = perNode.reduce((a, b) => a + b, 0);
  const ratioSummary = summarize(ratios);
  const o = router.outcomes?.() ?? {};
  const picks = (o.hit ?? 0) + (o.spilled ?? 0) + (o.miss ?? 0);
  return {
    hits: picks > 0 ? o.hit / picks : NaN,
    spills: picks > 0 ? o.spilled / picks : NaN,
    router: routerName,
    ttft: summarize(ttft),
    floor: summarize(floor),
    e2e: summarize(e2e),
    rps: measuredDone / span,
    hitRate: prompt > 0 ? cachedTotal / prompt : 0,
    busiestShare: total > 0 ? Math.max(...perNode) / total : 0,
    inflightRatio: Math.max(...loadSums) /
      Math.max(1e-9, loadSums.reduce((a, b) => a + b, 0) / nodes),
    inflightRatioBefore: Math.max(...loadSumsBefore) /
      Math.max(1e-9, loadSumsBefore.reduce((a, b) => a + b, 0) / nodes),
    peakP99: ratioSummary.p99,
    sticky: stickyAsked > 0 ? stickySame / stickyAsked : NaN,
    agreement: agreement ? agreement.same / Math.max(1, agreement.asked) : undefined,
  };
}

/**
 * The fleet's capacity, requests/s: every node running `maxRunning` sequences whose prompts are
 * all uncached, decoding at a full batch's speed — round-robin's worst case, the load levels'
 * unit.
 */
function fleetCapacity(w: Workload, nodes: number): number {
  const e = ENGINE;
  const serviceMs = e.ttftBaseMs + w.meanPrompt * e.prefillMsPerToken +
    (w.output - 1) * e.itlMs * (1 + e.decodeSlowdown);
  return (nodes * e.maxRunning * 1000) / serviceMs;
}

// ---- the cost of a pick --------------------------------------------------------------------

interface PickCost {
  /** Per round (median over rounds for p50s; the p99s of every round, sorted). */
  hintP50: number;
  hintP99s: number[];
  pickP50: number;
  pickP99s: number[];
  /** The same loop's empty timed region: what the machine adds to any measurement. */
  noiseP99s: number[];
  rrP50Ns: number;
  rrP99Ns: number;
  /** Heap bytes one affinity pick allocates (and one round_robin pick), the hint aside. */
  pickBytes: number;
  rrBytes: number;
  indexBytes: number;
  indexRssMb: number;
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/**
 * The pick's cost, wall time, in `rounds` rounds of `iterations` picks each: on a shared machine
 * one round's p99 can be a preemption (a time slice is milliseconds), so every round's p99 is
 * kept beside the p99 of an empty timed region in the same loop.
 */
function pickCost(iterations: number, rounds = 5): PickCost {
  const clock = { t: T0 };
  const skeid = new RoutingCore({ now: () => clock.t, env: () => undefined, logger: silentLogger });
  for (let i = 0; i < 32; i++) {
    skeid.addNode({ id: `n${i}`, url: `http://n${i}:8000/v1`, model: "m" });
  }
  const r = rng(9);
  // A 32k-token prompt (~4 characters a token), and others sharing most of it.
  const base = words(r, 32_000, "w").join(" ");
  const bodies = Array.from({ length: 16 }, (_, i) => ({
    model: "m",
    prompt_cache_key: `s${i}`,
    messages: [{ role: "system", content: base }, { role: "user", content: `question ${i}` }],
  }));
  const sel = { model: "m", pick: "affinity" as const };
  const hint50: number[] = [];
  const hint99: number[] = [];
  const pick50: number[] = [];
  const pick99: number[] = [];
  const noise99: number[] = [];
  for (let round = 0; round <= rounds; round++) {
    const hintTimes: number[] = [];
    const pickTimes: number[] = [];
    const noiseTimes: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const body = bodies[i % bodies.length];
      const t0 = performance.now();
      const hint = routeHint(body);
      const t1 = performance.now();
      const node = skeid.pickNode(sel, hintSource(hint))!;
      const t2 = performance.now();
      const t3 = performance.now();
      hintTimes.push((t1 - t0) * 1000);
      pickTimes.push((t2 - t1) * 1000);
      noiseTimes.push((t3 - t2) * 1000);
      skeid.startRequest(node.id);
      skeid.finishRequest(node.id, { ok: true });
    }
    if (round === 0) continue; // warm-up: the compiler's tiers, the index filling
    const h = summarize(hintTimes);
    const p = summarize(pickTimes);
    hint50.push(h.p50);
    hint99.push(h.p99);
    pick50.push(p.p50);
    pick99.push(p.p99);
    noise99.push(summarize(noiseTimes).p99);
  }
  const rrSel = { model: "m" };
  // What a pick allocates: the heap's growth over 100 picks, the median of 21 such runs (a
  // scavenge during a run only lowers it). Garbage is what makes a pick's tail on any machine:
  // the young generation fills, and the pick that finds it full pays the scavenge.
  const hints = bodies.map((b) => hintSource(routeHint(b)));
  const heapPerOp = (op: (i: number) => void) => {
    const runs: number[] = [];
    for (let k = 0; k < 21; k++) {
      const before = Deno.memoryUsage().heapUsed;
      for (let i = 0; i < 100; i++) op(i);
      runs.push((Deno.memoryUsage().heapUsed - before) / 100);
    }
    return Math.max(0, median(runs));
  };
  const pickBytes = heapPerOp((i) => skeid.pickNode(sel, hints[i % hints.length]));
  const rrBytes = heapPerOp(() => skeid.pickNode(rrSel));
  const rr: number[] = [];
  const batch = 1000;
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    for (let j = 0; j < batch; j++) skeid.pickNode(rrSel);
    rr.push(((performance.now() - t0) * 1e6) / batch);
  }
  const before = Deno.memoryUsage().rss;
  const index = new PrefixIndex({ capacity: 1_000_000, ttlMs: 600_000, now: () => clock.t });
  const blocks = new Uint32Array(1000);
  for (let p = 0; p < 1000; p++) {
    for (let b = 0; b < 1000; b++) blocks[b] = (p * 1000 + b + 1) * 2654435761 >>> 0;
    index.record(p % 32 + 1, blocks);
  }
  const after = Deno.memoryUsage().rss;
  const rrs = summarize(rr.slice(20));
  const sorted = (xs: number[]) => xs.slice().sort((a, b) => a - b);
  return {
    hintP50: median(hint50),
    hintP99s: sorted(hint99),
    pickP50: median(pick50),
    pickP99s: sorted(pick99),
    noiseP99s: sorted(noise99),
    rrP50Ns: rrs.p50,
    rrP99Ns: rrs.p99,
    pickBytes,
    rrBytes,
    indexBytes: prefixIndexBytes(1_000_000),
    indexRssMb: (after - before) / 1e6,
  };
}

// ---- report --------------------------------------------------------------------------------

const ROUTERS = ["round_robin", "least_loaded", "affinity", "oracle"];
const LOADS = [0.5, 0.8, 0.95];
const f0 = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString("en-US") : "–");
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "–");
const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "–");

function table(results: RunResult[]): string[] {
  const out = [
    "| router | TTFT p50 | p90 | p99 | e2e p50 | p90 | p99 | done/s | cache hit | busiest node | inflight busiest/mean | peak/mean p99 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of results) {
    out.push(
      `| ${r.router} | ${f0(r.ttft.p50)} | ${f0(r.ttft.p90)} | ${f0(r.ttft.p99)} | ${
        f0(r.e2e.p50)
      } | ${f0(r.e2e.p90)} | ${f0(r.e2e.p99)} | ${f2(r.rps)} | ${pct(r.hitRate)} | ${
        pct(r.busiestShare)
      } | ${f2(r.inflightRatio)} | ${f2(r.peakP99)} |`,
    );
  }
  return out;
}

interface Goal {
  goal: string;
  measured: string;
  met: boolean;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      quick: { type: "boolean" },
      out: { type: "string" },
      requests: { type: "string" },
      only: { type: "string" },
      load: { type: "string" },
      seeds: { type: "string" },
      cost: { type: "boolean" },
      frontends: { type: "string" },
    },
  });
  const count = Number(values.requests ?? (values.quick ? 600 : 3000));
  const out = values.out ??
    `${ROOT}/docs/bench/${values.quick ? "routing-quick.tmp" : "routing.md"}`;
  const started = performance.now();
  const workloads = [sharedPrefix, multiTurn, hotPrefix, unique];
  if (values.cost) {
    // The pick's cost alone, printed only.
    const c = pickCost(Number(values.requests ?? 2000));
    const us = (xs: number[]) => xs.map(f2).join(", ");
    console.log(
      `route hint p50 ${f2(c.hintP50)} µs, p99 by round ${us(c.hintP99s)} µs; affinity pick ` +
        `p50 ${f2(c.pickP50)} µs, p99 by round ${us(c.pickP99s)} µs; empty region p99 ${
          us(c.noiseP99s)
        } µs; round_robin p50 ${f0(c.rrP50Ns)} ns p99 ${f0(c.rrP99Ns)} ns; heap per pick ${
          f0(c.pickBytes)
        } B (round_robin ${f0(c.rrBytes)} B); index ${(c.indexBytes / 1e6).toFixed(1)} MB (RSS +${
          c.indexRssMb.toFixed(1)
        } MB)`,
    );
    return 0;
  }
  if (values.only !== undefined) {
    // One workload (at one load, or all three), printed only: for looking into one row.
    const w = workloads.find((x) => x.name === values.only);
    if (w === undefined) {
      console.error(`--only: no workload "${values.only}" (${workloads.map((x) => x.name)})`);
      return 2;
    }
    const loads = values.load !== undefined ? [Number(values.load)] : LOADS;
    // --seeds N: the same row under N seeds (one seed's run can swing a percentile a lot).
    const seeds = Array.from({ length: Number(values.seeds ?? 1) }, (_, i) => SEED + i);
    for (const load of loads) {
      for (const seed of seeds) {
        console.log(`## ${w.name} @ ${load}, seed ${seed}`);
        // --frontends workers|frontends: affinity alone through two cores (as in the doc's table).
        const mode = (values.frontends ?? "one") as Frontends;
        const rs = mode === "one"
          ? ROUTERS.map((r) => runOnce(w, load, r, count, 4, "one", seed))
          : [runOnce(w, load, "affinity", count, 4, mode, seed)];
        console.log(table(rs).join("\n"));
        for (const r of rs) {
          console.log(
            `${r.router}: floor p90 ${f0(r.floor.p90)} sticky ${pct(r.sticky)} affinity node ${
              pct(r.hits)
            } spilled ${pct(r.spills)}`,
          );
        }
      }
    }
    return 0;
  }
  const all = new Map<string, RunResult[]>();
  const lines: string[] = [];
  for (const w of workloads) {
    for (const load of LOADS) {
      const results = ROUTERS.map((r) => runOnce(w, load, r, count, 4));
      all.set(`${w.name}|${load}`, results);
      console.log(
        `${w.name} @ ${load}: ` +
          results.map((r) =>
            `${r.router} p90 ${f0(r.ttft.p90)} hit ${pct(r.hitRate)}` +
            (r.router === "affinity"
              ? ` (aff hit ${pct(r.hits)} spill ${pct(r.spills)} sticky ${pct(r.sticky)})`
              : "")
          ).join("; "),
      );
    }
  }
  const eight = ROUTERS.map((r) => runOnce(sharedPrefix, 0.8, r, count, 8));
  const byName = (rs: RunResult[], n: string) => rs.find((r) => r.router === n)!;
  const mtOne = byName(all.get("multi-turn|0.8")!, "affinity");
  const mtWorkers = runOnce(multiTurn, 0.8, "affinity", count, 4, "workers");
  const mtFrontends = runOnce(multiTurn, 0.8, "affinity", count, 4, "frontends");
  // The decisive rows again under more seeds: one seed's percentile can swing a lot (a session
  // placed differently changes everything after it), so the goals are read across seeds too.
  const SEED_ROWS: [Workload, number][] = [
    [multiTurn, 0.8],
    [hotPrefix, 0.5],
    [hotPrefix, 0.8],
    [hotPrefix, 0.95],
  ];
  const seedRuns = new Map<string, RunResult[][]>();
  const moreSeeds = values.quick ? [] : [SEED + 1, SEED + 2, SEED + 3, SEED + 4];
  for (const [w, load] of SEED_ROWS) {
    const runs = [all.get(`${w.name}|${load}`)!.filter((x) => x.router !== "least_loaded")];
    for (const seed of moreSeeds) {
      runs.push(
        ["round_robin", "affinity", "oracle"].map((r) =>
          runOnce(w, load, r, count, 4, "one", seed)
        ),
      );
    }
    seedRuns.set(`${w.name}|${load}`, runs);
  }
  // The --workers 2 goal under the same seeds: later requests kept on their node, two workers
  // against one.
  const workerSeeds = [{ one: mtOne, two: mtWorkers }];
  for (const seed of moreSeeds) {
    workerSeeds.push({
      one: byName(seedRuns.get("multi-turn|0.8")![workerSeeds.length], "affinity"),
      two: runOnce(multiTurn, 0.8, "affinity", count, 4, "workers", seed),
    });
  }
  // The multi-turn P90 goal over twenty seeds: its TTFTs gather in two clusters (a warm turn,
  // ~36 ms; a moved or queued one, 50–150 ms), and the P90 falls in one or the other as a tenth
  // of the requests is slow or not — for the oracle as much as for affinity — so one seed's
  // ratio says little and the share of seeds meeting it says more.
  const wideSeeds = values.quick ? [] : Array.from({ length: 20 }, (_, i) => SEED + i);
  const wide = wideSeeds.map((seed) => {
    const runs = seedRuns.get("multi-turn|0.8")![seed - SEED];
    const pick = (name: string) =>
      runs ? byName(runs, name) : runOnce(multiTurn, 0.8, name, count, 4, "one", seed);
    return { aff: pick("affinity"), or: pick("oracle") };
  });
  const cost = pickCost(values.quick ? 300 : 2000);
  const elapsed = (performance.now() - started) / 1000;

  const goals: Goal[] = [];
  for (const name of ["shared prefix", "multi-turn"]) {
    const rs = all.get(`${name}|0.8`)!;
    const [rr, aff, or] = [byName(rs, "round_robin"), byName(rs, "affinity"), byName(rs, "oracle")];
    goals.push({
      goal: `${name} @ 0.8: affinity P90 TTFT ≤ 0.3 × round_robin's`,
      measured: `${f0(aff.ttft.p90)} vs ${f0(rr.ttft.p90)} ms (${
        f2(aff.ttft.p90 / rr.ttft.p90)
      }×); the oracle ${f2(or.ttft.p90 / rr.ttft.p90)}×, the floor ${
        f2(or.floor.p90 / rr.ttft.p90)
      }× (P90 ${f0(or.floor.p90)} ms: every block ever computed cached, no queue)`,
      met: aff.ttft.p90 <= 0.3 * rr.ttft.p90,
    });
    goals.push({
      goal: `${name} @ 0.8: affinity P90 TTFT ≤ 1.5 × the oracle's`,
      measured: `${f0(aff.ttft.p90)} vs ${f0(or.ttft.p90)} ms (${f2(aff.ttft.p90 / or.ttft.p90)}×)`,
      met: aff.ttft.p90 <= 1.5 * or.ttft.p90,
    });
    goals.push({
      goal: `${name} @ 0.8: affinity cache hit rate ≥ 85% of the oracle's`,
      measured: `${pct(aff.hitRate)} vs ${pct(or.hitRate)} (${pct(aff.hitRate / or.hitRate)})`,
      met: aff.hitRate >= 0.85 * or.hitRate,
    });
  }
  for (const load of LOADS) {
    const rs = all.get(`hot prefix|${load}`)!;
    const [rr, aff] = [byName(rs, "round_robin"), byName(rs, "affinity")];
    goals.push({
      goal: `hot prefix @ ${load}: no node's inflight above 1.3 × the mean`,
      measured: `busiest node's mean inflight ${f2(aff.inflightRatio)} × the mean (${
        f2(aff.inflightRatioBefore)
      } without the arriving request; round_robin ${
        f2(rr.inflightRatio)
      }); instantaneous peak/mean p99 ${f2(aff.peakP99)} (round_robin ${f2(rr.peakP99)})`,
      met: aff.inflightRatio <= 1.3,
    });
    goals.push({
      goal: `hot prefix @ ${load}: affinity P99 TTFT ≤ round_robin's`,
      measured: `${f0(aff.ttft.p99)} vs ${f0(rr.ttft.p99)} ms`,
      met: aff.ttft.p99 <= rr.ttft.p99,
    });
  }
  for (const load of LOADS) {
    const rs = all.get(`unique|${load}`)!;
    const [ll, aff] = [byName(rs, "least_loaded"), byName(rs, "affinity")];
    goals.push({
      goal: `unique @ ${load}: affinity P50 TTFT within 5% of least_loaded's`,
      measured: `${f0(aff.ttft.p50)} vs ${f0(ll.ttft.p50)} ms (${
        pct(aff.ttft.p50 / ll.ttft.p50 - 1)
      })`,
      met: aff.ttft.p50 <= 1.05 * ll.ttft.p50,
    });
  }
  goals.push({
    goal: "--workers 2: ≥ 95% of a session's requests on the same node as with one worker",
    measured: `sessions' later requests on their previous node: ${pct(mtWorkers.sticky)} with 2 ` +
      `workers, ${pct(mtOne.sticky)} with one (${pct(mtWorkers.sticky / mtOne.sticky)})`,
    met: mtWorkers.sticky >= 0.95 * mtOne.sticky,
  });
  goals.push({
    goal: "pick ≤ 50 µs p99 (32k-token prompt, 32 nodes)",
    measured: `pick p99 ${f2(median(cost.pickP99s))} µs, the median of ${cost.pickP99s.length} ` +
      `rounds (p50 ${f2(cost.pickP50)}); the route hint of the prompt, computed once before it, ` +
      `p99 ${f2(median(cost.hintP99s))} µs (p50 ${f2(cost.hintP50)}); an empty timed region's ` +
      `p99 ${f2(median(cost.noiseP99s))} µs`,
    met: median(cost.pickP99s) <= 50,
  });
  goals.push({
    goal: "prefix index ≤ 64 MB at a million remembered blocks",
    measured: `${(cost.indexBytes / 1e6).toFixed(1)} MB by construction (RSS grew ${
      cost.indexRssMb.toFixed(1)
    } MB filling it)`,
    met: cost.indexBytes <= 64e6,
  });

  lines.push(
    "# Routing benchmark: round_robin, least_loaded, affinity and an oracle",
    "",
    `Generated by \`deno task bench:routing${values.quick ? " --quick" : ""}\` on ${
      new Date().toISOString().slice(0, 10)
    } (${count} requests per run, the first sixth not measured; seed ${SEED}; ${
      elapsed.toFixed(0)
    } s of real time for every run). Virtual time: the numbers are the seed's, not the machine's.`,
    "",
    "## The fleet",
    "",
    `4 simulated nodes (8 for one table), each the engine of \`skeid fake-model --sim\`: ` +
      `KV blocks of ${ENGINE.blockSize} tokens, ${ENGINE.numBlocks} blocks ` +
      `(${ENGINE.blockSize * ENGINE.numBlocks} tokens), at most ${ENGINE.maxRunning} ` +
      `sequences running with a FIFO queue behind, TTFT = queue wait + ${ENGINE.ttftBaseMs} ms + ` +
      `${ENGINE.prefillMsPerToken} ms × uncached prompt tokens, ${ENGINE.itlMs} ms per output ` +
      `token slowed up to ${1 + ENGINE.decodeSlowdown}× by a full batch.`,
    "",
    "Capacity (the load levels' unit): every node running its maximum with every prompt uncached " +
      "and a full batch's decode speed — round-robin's worst case. Arrivals are Poisson at 0.5, " +
      "0.8 and 0.95 of it.",
    "",
    "Routers: `round_robin`, `least_loaded` and `affinity` are the real core (`Skeid.pickNode`, " +
      "the route hint from the request body, TTFT and finishes fed back as the gateway does, and " +
      "each node's queue gauges read once a virtual second as the Prometheus probe does). The " +
      "**oracle** sees every engine's true KV cache and queue and sends each request where its " +
      "predicted TTFT (uncached prefill + queue wait) is least.",
    "",
    "Columns: TTFT and end-to-end latency in ms; done/s = completed requests per second; cache " +
      "hit = prompt tokens served from the KV cache / prompt tokens; busiest node = its share of " +
      "the requests; inflight busiest/mean = each node's inflight (running + waiting, the " +
      "arriving request counted where it went) averaged over the arrivals — for Poisson " +
      "arrivals a time average of each node's inflight (arrivals see time averages) — the " +
      "busiest node's over the nodes' mean: the reading of the hot-prefix goal; peak/mean p99 = the 99th percentile over arrivals of the busiest node's " +
      "inflight over the mean at that moment (arrivals with a mean of 2 or more; integer " +
      "counts make this ≥ 1.25 at a mean of 4 even for a perfect balancer).",
    "",
    "## Goals",
    "",
    "| goal | measured | met |",
    "|---|---|---|",
    ...goals.map((g) => `| ${g.goal} | ${g.measured} | ${g.met ? "yes" : "**no**"} |`),
    "",
  );
  for (const w of workloads) {
    lines.push(`## ${w.name}`, "", w.describe, "");
    for (const load of LOADS) {
      lines.push(`### load ${load}`, "", ...table(all.get(`${w.name}|${load}`)!), "");
    }
  }
  lines.push("## shared prefix on 8 nodes, load 0.8", "", ...table(eight), "");
  lines.push(
    "## Several workers, several frontends (multi-turn, load 0.8, affinity)",
    "",
    "| gateway | later requests of a session on its previous node | TTFT p90 | cache hit |",
    "|---|---:|---:|---:|",
    `| one process | ${pct(mtOne.sticky)} | ${f0(mtOne.ttft.p90)} | ${pct(mtOne.hitRate)} |`,
    `| \`--workers 2\` (shared inflight table and prefix index; requests alternate) | ${
      pct(mtWorkers.sticky)
    } | ${f0(mtWorkers.ttft.p90)} | ${pct(mtWorkers.hitRate)} |`,
    `| two frontends, no shared state (requests alternate) | ${pct(mtFrontends.sticky)} | ${
      f0(mtFrontends.ttft.p90)
    } | ${pct(mtFrontends.hitRate)} |`,
    "",
    `Two frontends agreed on the node for ${pct(mtFrontends.agreement ?? NaN)} of the requests ` +
      "(each request's pick asked of the other frontend too, without recording it).",
    "",
    `## Across seeds (seeds ${SEED}–${SEED + moreSeeds.length})`,
    "",
    "The decisive rows under more seeds (the tables above are seed 21's). Each cell lists the " +
      "seeds' values in seed order; the goals' ratios are per seed.",
    "",
    "| row | round_robin TTFT p90 / p99 | affinity p90 / p99 | oracle p90 / p99 | floor p90 | affinity p90 / oracle | affinity p90 / round_robin | affinity inflight busiest/mean |",
    "|---|---|---|---|---|---|---|---|",
    ...[...seedRuns.entries()].map(([row, runs]) => {
      const get = (name: string) => runs.map((rs) => byName(rs, name));
      const [rr, aff, or] = [get("round_robin"), get("affinity"), get("oracle")];
      const pair = (xs: RunResult[]) =>
        xs.map((x) => `${f0(x.ttft.p90)}/${f0(x.ttft.p99)}`).join(", ");
      return `| ${row.replace("|", " @ ")} | ${pair(rr)} | ${pair(aff)} | ${pair(or)} | ${
        or.map((x) => f0(x.floor.p90)).join(", ")
      } | ${aff.map((x, i) => f2(x.ttft.p90 / or[i].ttft.p90)).join(", ")} | ${
        aff.map((x, i) => f2(x.ttft.p90 / rr[i].ttft.p90)).join(", ")
      } | ${aff.map((x) => f2(x.inflightRatio)).join(", ")} |`;
    }),
    "",
    "`--workers 2`, multi-turn at 0.8, per seed: a session's later requests on its previous node " +
      "with two workers, with one, and their ratio (the goal: ≥ 95%): " +
      workerSeeds.map((x) =>
        `${pct(x.two.sticky)} / ${pct(x.one.sticky)} (${pct(x.two.sticky / x.one.sticky)})`
      ).join(", ") + ".",
    "",
    ...(wide.length === 0 ? [] : [
      `Multi-turn at 0.8 over ${wide.length} seeds (${SEED}–${SEED + wide.length - 1}), ` +
      "affinity P90 TTFT over the oracle's, per seed (the goal: ≤ 1.5): " +
      wide.map((x) => f2(x.aff.ttft.p90 / x.or.ttft.p90)).join(", ") +
      `; met in ${
        wide.filter((x) => x.aff.ttft.p90 <= 1.5 * x.or.ttft.p90).length
      } of ${wide.length}, median ${
        f2(median(wide.map((x) => x.aff.ttft.p90 / x.or.ttft.p90)))
      }. Mean TTFT ` +
      `over the seeds: affinity ${f0(mean(wide.map((x) => x.aff.ttft.mean)))} ms, the oracle ${
        f0(mean(wide.map((x) => x.or.ttft.mean)))
      } ms.`,
      "",
    ]),
    "## The cost of a pick",
    "",
    "32 nodes, a 32,000-token prompt (~128k characters) shared by 16 sessions, the index warm; " +
      `wall time, ${cost.pickP99s.length} rounds of the same loop after a warm-up round: the p50 ` +
      "is the rounds' median, the p99 column every round's p99, lowest first (on a shared " +
      "machine one round's p99 can be a preemption; the empty region shows what the machine " +
      "adds):",
    "",
    "| what | p50 | p99 by round |",
    "|---|---:|---:|",
    `| route hint (session key, 512 block hashes of the rendered prompt) | ${
      f2(cost.hintP50)
    } µs | ${cost.hintP99s.map(f2).join(", ")} µs |`,
    `| affinity pick (index lookups on 32 nodes, scores, bound, record) | ${
      f2(cost.pickP50)
    } µs | ${cost.pickP99s.map(f2).join(", ")} µs |`,
    `| empty timed region (the same loop) | | ${cost.noiseP99s.map(f2).join(", ")} µs |`,
    `| round_robin pick (batches of 1,000) | ${f0(cost.rrP50Ns)} ns | ${f0(cost.rrP99Ns)} ns |`,
    "",
    `Heap allocated per pick (the median growth over 100 picks, 21 runs; the load-independent ` +
      `part of the tail, since garbage brings scavenges): affinity ${f0(cost.pickBytes)} B, ` +
      `round_robin ${f0(cost.rrBytes)} B (the route hint aside).`,
    "",
    `Prefix index at a million blocks: ${(cost.indexBytes / 1e6).toFixed(1)} MB (12 bytes an ` +
      `entry, fixed when made); RSS grew ${cost.indexRssMb.toFixed(1)} MB as it filled.`,
    "",
  );
  await Deno.writeTextFile(out, lines.join("\n"));
  console.log(`\nwrote ${out} in ${elapsed.toFixed(1)} s`);
  for (const g of goals) console.log(`${g.met ? "met    " : "NOT MET"}  ${g.goal}: ${g.measured}`);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
