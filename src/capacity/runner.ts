/**
 * One running probe: its timer, the one poll it may have in flight, its state, and the guards
 * that keep a stopped probe from writing. A poll that throws forgets the probe's own reading and
 * is warned once, when the probe starts failing, not on every poll.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { Node } from "../core/types.ts";
import type { Logger } from "../log.ts";
import { errorMessage } from "../error_message.ts";
import type { ProbeFactories } from "./custom.ts";
import { buildProbe, probeKindOf } from "./for_node.ts";
import {
  type CapacityProbe,
  pollPeriodMs,
  type ProbeContext,
  probeGet,
  type ProbeTimeouts,
} from "./probe.ts";

/** The timer functions a runner uses (tests inject their own to check the period). */
export interface ProbeTimers {
  /** Calls `fn` every `ms`; answers a handle for `clearInterval`. */
  setInterval(fn: () => void, ms: number): unknown;
  /** Stops a timer `setInterval` answered. */
  clearInterval(handle: unknown): void;
}

/** The real timers. */
export const realTimers: ProbeTimers = {
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (handle) => clearInterval(handle as ReturnType<typeof setInterval>),
};

/** What a runner needs. */
export interface ProbeRunnerOptions {
  /** The core that gets the node's capacity readings. */
  skeid: RoutingCore;
  /** The node (a copy) as it is when the probe starts. */
  node: Node;
  /** Where the probe's state changes are logged. */
  logger: Logger;
  /** Environment (registry secret and bearer variables), read per poll, in memory only. */
  env: (name: string) => string | undefined;
  /** Fetch for probe requests. */
  fetch: typeof fetch;
  /** Timer functions for the poll period. */
  timers: ProbeTimers;
  /** Bounds on a probe request: until headers, and in all. */
  timeouts: ProbeTimeouts;
  /** Named factories for `probe: custom` with `class:`. */
  factories?: ProbeFactories;
  /** Told of every poll started, so the owner can wait for them at close. */
  track?(poll: Promise<void>): void;
}

/** States that are the expected case: the first one is not worth a log line. */
const GOOD_STATES = new Set(["ok", "accepted"]);

/** One node's probe on its timer. */
export class ProbeRunner {
  /** The probed node's id. */
  readonly nodeId: string;
  /** The probe kind (`prometheus`, `registry`, `custom`), also the readings' source. */
  readonly kind: string;
  /** Poll period, ms. */
  readonly periodMs: number;
  /** The endpoint the probe reads, when it reads one. */
  readonly url: string | undefined;

  readonly #opts: ProbeRunnerOptions;
  readonly #probe: CapacityProbe;
  readonly #abort = new AbortController();
  #timer: unknown;
  #inflight: Promise<void> | undefined;
  #stopped = false;
  #state: string | undefined;

  /** Builds the probe; throws (nothing started) when its block cannot work. */
  constructor(opts: ProbeRunnerOptions) {
    this.#opts = opts;
    this.nodeId = opts.node.id;
    this.kind = probeKindOf(opts.node);
    this.periodMs = pollPeriodMs(opts.node.capacity?.interval_ms, opts.skeid.workerCount);
    this.#probe = buildProbe(this.#context(), opts.factories);
    this.url = this.#probe.url;
  }

  /** The last state entered (`ok`, `unreachable`, `failed`, …); undefined before the first. */
  get state(): string | undefined {
    return this.#state;
  }

  /** Whether `stop` ran. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Polls once now, then every period. Safe to call twice. */
  start(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#timer = this.#opts.timers.setInterval(() => {
      void this.poll();
    }, this.periodMs);
    void this.poll();
  }

  /** One poll, unless one is in flight: then that one. Never rejects. */
  poll(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#inflight) return this.#inflight;
    let started: Promise<void>;
    try {
      started = Promise.resolve(this.#probe.poll());
    } catch (err) {
      started = Promise.reject(err);
    }
    const run = started.then(() => this.#succeeded(), (err) => this.#failed(err)).finally(() => {
      if (this.#inflight === run) this.#inflight = undefined;
    });
    this.#inflight = run;
    this.#opts.track?.(run);
    return run;
  }

  /** Stops the timer, aborts a poll in flight and forgets this probe's reading. */
  stop(): void {
    if (this.#stopped) return;
    if (this.#timer !== undefined) this.#opts.timers.clearInterval(this.#timer);
    this.#timer = undefined;
    // Forget first: once stopped, the guards drop whatever this probe says.
    this.#forgetOwn();
    this.#stopped = true;
    this.#abort.abort(new DOMException("capacity probe stopped", "AbortError"));
  }

  #forgetOwn(): void {
    this.#opts.skeid.forgetCapacity(this.nodeId, this.kind);
  }

  #succeeded(): void {
    // A probe that does not name its states (a custom one) is back to ok once a poll works.
    if (this.#state === "failed") this.#enter("ok");
  }

  #failed(err: unknown): void {
    if (this.#stopped) return;
    this.#forgetOwn();
    this.#enter("failed", errorMessage(err));
  }

  #enter(state: string, detail?: string): void {
    if (this.#stopped || state === this.#state) return;
    const was = this.#state;
    this.#state = state;
    const good = GOOD_STATES.has(state);
    if (was === undefined && good) return;
    const fields = {
      node_id: this.nodeId,
      probe: this.kind,
      state,
      ...(detail !== undefined ? { detail } : {}),
      message: state === "failed"
        ? `capacity probe for '${this.nodeId}' failed: ${detail ?? "unknown error"}`
        : `${this.kind} probe for '${this.nodeId}': ${state}${detail ? ` (${detail})` : ""}`,
    };
    if (good) this.#opts.logger.info("capacity_probe_state", fields);
    else this.#opts.logger.warn("capacity_probe_state", fields);
  }

  #context(): ProbeContext {
    const opts = this.#opts;
    const { skeid } = opts;
    // deno-lint-ignore no-this-alias
    const runner = this;
    const node = Object.freeze({ ...opts.node });
    return {
      skeid,
      node,
      config: node.capacity ?? { probe: runner.kind, interval_ms: runner.periodMs },
      source: runner.kind,
      get periodMs() {
        return runner.periodMs;
      },
      env: opts.env,
      signal: this.#abort.signal,
      get stopped() {
        return runner.#stopped;
      },
      now: () => skeid.now(),
      report(reading) {
        if (runner.#stopped) return undefined;
        return skeid.setCapacityReading(runner.nodeId, {
          ...reading,
          source: runner.kind,
          interval_ms: runner.periodMs,
        });
      },
      forget() {
        if (!runner.#stopped) runner.#forgetOwn();
      },
      enter(state, detail) {
        runner.#enter(state, detail);
      },
      get(url, headers) {
        return probeGet(opts.fetch, url, {
          headers,
          stop: runner.#abort.signal,
          timeouts: opts.timeouts,
        });
      },
    };
  }
}
