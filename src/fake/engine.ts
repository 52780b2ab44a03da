/**
 * The simulated engine behind `skeid fake-model --max-running N …`: how a vLLM-like server
 * schedules sequences and what its prefix cache saves, without a GPU.
 *
 * - At most `maxRunning` sequences run; the rest wait in a FIFO queue. A sequence also waits
 *   while its KV blocks do not fit beside the running ones' (the queue's head blocks it).
 * - TTFT = queue wait + `ttftBaseMs` + uncached prompt tokens × `prefillMsPerToken`.
 * - Each later token takes `itlMs × (1 + decodeSlowdown × (running − 1) / (maxRunning − 1))`,
 *   with `running` as it is at the first token: a fuller batch decodes slower.
 * - When a sequence ends, its full blocks (prompt and output) stay cached for the next request
 *   that shares the prefix (`kv_cache.ts`).
 *
 * Time comes from a `SimClock`: the wall clock when serving HTTP, a virtual one in the routing
 * benchmark. Nothing here depends on how fast the host runs.
 *
 * @module
 */
import { blockHashes, type CacheLease, KvBlockCache } from "./kv_cache.ts";
import type { SimClock } from "./sim_clock.ts";

/** The engine's settings (flags of `skeid fake-model`). */
export interface EngineSettings {
  /** Tokens per KV block (`--block-size`, default 16). */
  blockSize: number;
  /** KV blocks (`--kv-blocks`, default 2048). */
  numBlocks: number;
  /** Sequences running at once (`--max-running`, default 8). */
  maxRunning: number;
  /** Fixed part of the time to first token, ms (`--ttft-base-ms`, default 20). */
  ttftBaseMs: number;
  /** Prefill time per uncached prompt token, ms (`--prefill-ms-per-token`, default 0.1). */
  prefillMsPerToken: number;
  /** Time per output token with one sequence running, ms (`--itl-ms`, default 10). */
  itlMs: number;
  /** How much a full batch slows decoding (`--decode-slowdown`, default 0.5: 1.5× at full). */
  decodeSlowdown: number;
}

/** Defaults of the engine settings. */
export const DEFAULT_ENGINE: Readonly<EngineSettings> = Object.freeze({
  blockSize: 16,
  numBlocks: 2048,
  maxRunning: 8,
  ttftBaseMs: 20,
  prefillMsPerToken: 0.1,
  itlMs: 10,
  decodeSlowdown: 0.5,
});

/** When and how a sequence got its first token. */
export interface SequenceStart {
  /** Time waiting in the queue, ms. */
  queuedMs: number;
  /** Arrival to first token, ms. */
  ttftMs: number;
  /** Prompt tokens in the sequence. */
  promptTokens: number;
  /** Prompt tokens found in the prefix cache. */
  cachedTokens: number;
  /** Time per later token, ms. */
  itlMs: number;
  /** When the last token is due (clock ms). */
  endsAt: number;
}

/** What the engine tells about one sequence. */
export interface SequenceEvents {
  /** The first token is due now. */
  onFirstToken?(start: SequenceStart): void;
  /** The last token is due now; the sequence freed its slot. */
  onEnd?(start: SequenceStart): void;
}

/** A submitted sequence. */
export interface EngineSequence {
  /** Takes it out of the queue, or ends it early (the client went away); once. */
  cancel(): void;
}

/** Counters and gauges, as vLLM's `/metrics` names them. */
export interface EngineCounters {
  /** `vllm:num_requests_running`. */
  running: number;
  /** `vllm:num_requests_waiting`. */
  waiting: number;
  /** `vllm:kv_cache_usage_perc` (and the old `gpu_cache_usage_perc`), 0..1. */
  kvUsage: number;
  /** `vllm:prefix_cache_queries_total`: prompt tokens looked up. */
  prefixQueries: number;
  /** `vllm:prefix_cache_hits_total`: prompt tokens found. */
  prefixHits: number;
  /** `vllm:request_success_total`. */
  finished: number;
  /** Sequences submitted. */
  submitted: number;
}

interface Sequence {
  readonly tokens: readonly string[];
  readonly output: readonly string[];
  readonly hashes: number[];
  readonly total: number;
  readonly arrivedAt: number;
  readonly events: SequenceEvents;
  state: "waiting" | "running" | "done";
  lease?: CacheLease;
  start?: SequenceStart;
  cancelTimers: (() => void)[];
}

/** A sequence that can never fit the KV cache (its prompt is too long). */
export class SequenceTooLong extends Error {
  constructor(blocks: number, numBlocks: number) {
    super(`the sequence needs ${blocks} KV blocks; the simulated cache has ${numBlocks}`);
    this.name = "SequenceTooLong";
  }
}

/** One simulated engine. */
export class SimEngine {
  /** Its settings. */
  readonly settings: Readonly<EngineSettings>;
  /** Its KV cache. */
  readonly cache: KvBlockCache;
  readonly #clock: SimClock;
  readonly #queue: Sequence[] = [];
  /** The running sequences (their `start.endsAt` says when each frees its slot). */
  readonly #runningSeqs = new Set<Sequence>();
  #running = 0;
  #prefixQueries = 0;
  #prefixHits = 0;
  #finished = 0;
  #submitted = 0;

  /** An engine on `clock` with `settings` over the defaults. */
  constructor(clock: SimClock, settings: Partial<EngineSettings> = {}) {
    this.#clock = clock;
    this.settings = Object.freeze({ ...DEFAULT_ENGINE, ...settings });
    this.cache = new KvBlockCache(this.settings.blockSize, this.settings.numBlocks);
  }

  /** The counters and gauges now. */
  counters(): EngineCounters {
    return {
      running: this.#running,
      waiting: this.#queue.length,
      kvUsage: this.cache.usage,
      prefixQueries: this.#prefixQueries,
      prefixHits: this.#prefixHits,
      finished: this.#finished,
      submitted: this.#submitted,
    };
  }

  /**
   * The TTFT a sequence of prompt blocks `hashes` (`promptTokens` tokens) would have if it were
   * submitted now and nothing else arrived: the engine's true state played forward — each
   * running sequence frees its slot when it ends, each queued one takes the first free slot in
   * FIFO order for its own prefill and decode — then its wait, the base and its uncached
   * prefill. What a router that sees every engine's queue and cache can know (the routing
   * benchmark's oracle); blocking on KV room and later arrivals are not foreseen.
   */
  predictTtft(hashes: readonly number[], promptTokens: number): number {
    const s = this.settings;
    const now = this.#clock.now();
    const frees: number[] = [];
    for (const seq of this.#runningSeqs) frees.push(seq.start!.endsAt);
    const itl = s.itlMs * (1 + s.decodeSlowdown);
    const takeSlot = (): number => {
      if (frees.length < s.maxRunning) return now;
      let at = 0;
      for (let i = 1; i < frees.length; i++) if (frees[i] < frees[at]) at = i;
      const t = frees[at];
      frees.splice(at, 1);
      return Math.max(now, t);
    };
    for (const seq of this.#queue) {
      const start = takeSlot();
      const cached = this.cache.matched(seq.hashes) * s.blockSize;
      const first = start + s.ttftBaseMs + (seq.tokens.length - cached) * s.prefillMsPerToken;
      frees.push(first + (seq.output.length - 1) * itl);
    }
    const start = takeSlot();
    const cached = Math.min(promptTokens, this.cache.matched(hashes) * s.blockSize);
    return start - now + s.ttftBaseMs + (promptTokens - cached) * s.prefillMsPerToken;
  }

  /**
   * Queues a sequence of prompt `tokens` that generates `output` tokens (at least one). Throws
   * SequenceTooLong when its blocks exceed the whole cache.
   */
  submit(
    tokens: readonly string[],
    output: readonly string[],
    events: SequenceEvents = {},
  ): EngineSequence {
    const out = output.length > 0 ? output : ["tök0"];
    const total = this.cache.blocksFor(tokens.length, out.length);
    if (total > this.cache.numBlocks) throw new SequenceTooLong(total, this.cache.numBlocks);
    const seq: Sequence = {
      tokens,
      output: out,
      hashes: blockHashes(tokens, this.settings.blockSize),
      total,
      arrivedAt: this.#clock.now(),
      events,
      state: "waiting",
      cancelTimers: [],
    };
    this.#submitted++;
    this.#queue.push(seq);
    this.#schedule();
    return { cancel: () => this.#cancel(seq) };
  }

  /** Starts queued sequences, in order, while a slot and their blocks are free. */
  #schedule(): void {
    const s = this.settings;
    while (this.#queue.length > 0 && this.#running < s.maxRunning) {
      const seq = this.#queue[0];
      const lease = this.cache.tryStart(seq.hashes, seq.total);
      if (!lease) break; // FIFO: the head waits for blocks, and so does everyone behind it
      this.#queue.shift();
      this.#running++;
      this.#runningSeqs.add(seq);
      seq.state = "running";
      seq.lease = lease;
      this.#prefixQueries += seq.tokens.length;
      this.#prefixHits += lease.cachedTokens;
      const now = this.#clock.now();
      const uncached = seq.tokens.length - lease.cachedTokens;
      const firstAt = now + s.ttftBaseMs + uncached * s.prefillMsPerToken;
      const slow = s.maxRunning > 1 ? (this.#running - 1) / (s.maxRunning - 1) : 0;
      const itl = s.itlMs * (1 + s.decodeSlowdown * slow);
      const endsAt = firstAt + (seq.output.length - 1) * itl;
      const start: SequenceStart = {
        queuedMs: now - seq.arrivedAt,
        ttftMs: firstAt - seq.arrivedAt,
        promptTokens: seq.tokens.length,
        cachedTokens: lease.cachedTokens,
        itlMs: itl,
        endsAt,
      };
      seq.start = start;
      seq.cancelTimers.push(this.#clock.at(firstAt, () => seq.events.onFirstToken?.(start)));
      seq.cancelTimers.push(this.#clock.at(endsAt, () => this.#end(seq, true)));
    }
  }

  #end(seq: Sequence, completed: boolean): void {
    if (seq.state !== "running") return;
    seq.state = "done";
    this.#running--;
    this.#runningSeqs.delete(seq);
    const lease = seq.lease!;
    if (completed) {
      this.#finished++;
      // The output's full blocks join the cache: the next turn of a conversation sends them back.
      const b = this.settings.blockSize;
      const from = seq.hashes.length * b;
      const parent = seq.hashes.length > 0 ? seq.hashes[seq.hashes.length - 1] : undefined;
      const all = [...seq.tokens.slice(from), ...seq.output];
      this.cache.release(lease, blockHashes(all, b, 0, parent));
    } else this.cache.release(lease);
    if (completed) seq.events.onEnd?.(seq.start!);
    this.#schedule();
  }

  #cancel(seq: Sequence): void {
    if (seq.state === "waiting") {
      seq.state = "done";
      const i = this.#queue.indexOf(seq);
      if (i >= 0) this.#queue.splice(i, 1);
      this.#schedule();
      return;
    }
    for (const cancel of seq.cancelTimers) cancel();
    this.#end(seq, false);
  }
}

/** Prometheus text of an engine's counters under vLLM's names, for `model`. */
export function engineMetricsText(engine: SimEngine, model: string): string {
  const c = engine.counters();
  const label = `model_name=${JSON.stringify(model)}`;
  const s = engine.settings;
  const lines: string[] = [];
  const metric = (name: string, type: string, help: string, value: number, extra = "") => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    lines.push(`${name}{${label}${extra}} ${Number.isInteger(value) ? value.toFixed(1) : value}`);
  };
  metric("vllm:num_requests_running", "gauge", "Requests running.", c.running);
  metric("vllm:num_requests_waiting", "gauge", "Requests waiting.", c.waiting);
  metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage, 1 = full.", c.kvUsage);
  // The name before vLLM 0.10; routers that still read it keep working.
  metric("vllm:gpu_cache_usage_perc", "gauge", "KV-cache usage (old name).", c.kvUsage);
  metric("vllm:prefix_cache_queries_total", "counter", "Prompt tokens queried.", c.prefixQueries);
  metric("vllm:prefix_cache_hits_total", "counter", "Prompt tokens cached.", c.prefixHits);
  metric("vllm:request_success_total", "counter", "Requests finished.", c.finished);
  metric(
    "vllm:cache_config_info",
    "gauge",
    "KV cache configuration.",
    1,
    `,block_size="${s.blockSize}",num_gpu_blocks="${s.numBlocks}"`,
  );
  return lines.join("\n") + "\n";
}
