/**
 * The capacity probes of one gateway: one running probe per node whose capacity block asks for
 * one, started, restarted and stopped as the probed part of the inventory changes — the worker
 * count and, per node id, its url and capacity block. A health flip restarts nothing, nor does a
 * config reload that leaves those alone.
 *
 * The manager follows the inventory by itself: it listens to the core's change events and
 * compares the inventory generation (one number, cheap enough for the request path), then
 * refreshes on a microtask. `refresh()` does the same on demand.
 *
 * @module
 */
import type { RoutingCore } from "../core/routing_core.ts";
import type { CapacitySpec, Node } from "../core/types.ts";
import type { Logger } from "../log.ts";
import { errorMessage } from "../error_message.ts";
import type { ProbeFactories } from "./custom.ts";
import { probeKindOf } from "./for_node.ts";
import { DEFAULT_PROBE_TIMEOUTS, loggableUrl, pollPeriodMs, type ProbeTimeouts } from "./probe.ts";
import { ProbeRunner, type ProbeTimers, realTimers } from "./runner.ts";

/** What the probes need from the gateway around them. */
export interface CapacityProbeDeps {
  /** The core whose nodes are probed and which gets the readings. */
  skeid: RoutingCore;
  /** Where probe starts and stops are logged (URLs without user info or query; no secret). */
  logger: Logger;
  /** Environment (registry secret and bearer variables); default `Deno.env.get`. */
  env?: (name: string) => string | undefined;
  /** Fetch for probe requests; default the global one. */
  fetch?: typeof fetch;
  /** Named factories for `probe: custom` with `class:`. */
  factories?: ProbeFactories;
  /** Timer functions; default the real ones (tests inject theirs). */
  timers?: ProbeTimers;
  /** Probe request timeouts; default connect 2 s, request 3 s. */
  timeouts?: Partial<ProbeTimeouts>;
  /** Whether to follow inventory changes by itself (default true); else call `refresh()`. */
  follow?: boolean;
}

/** One node's probe as `status()` shows it. */
export interface ProbeStatus {
  /** The probed node's id. */
  node_id: string;
  /** The probe kind: `prometheus`, `registry` or `custom`. */
  probe: string;
  /** Whether it runs (false: its block could not work; see `error`). */
  running: boolean;
  /** The endpoint it reads (user info and query removed), when it reads one. */
  url?: string;
  /** Its last state (`ok`, `accepted`, `unreachable`, `failed`, …), null before the first. */
  state: string | null;
  /** Poll period, ms. */
  period_ms: number;
  /** Why it was not started. */
  error?: string;
}

/** The running probes of one gateway. */
export interface CapacityProbes {
  /** Starts, restarts and stops probes to match the inventory now. */
  refresh(): void;
  /** Stops every probe (forgetting their readings) and waits for polls in flight. */
  close(): Promise<void>;
  /** Every probed node's probe. */
  status(): ProbeStatus[];
  /** Polls one node's probe (or all) now, unless a poll is in flight, and waits for it. */
  pollNow(nodeId?: string): Promise<void>;
  /** Waits until no poll is in flight. */
  settled(): Promise<void>;
}

interface Entry {
  signature: string;
  kind: string;
  periodMs: number;
  runner?: ProbeRunner;
  error?: string;
}

/** Numbers for functions by identity (held weakly), so a signature can name them. */
class FunctionIds {
  readonly #ids = new WeakMap<object, number>();
  #next = 0;

  /** The number of `fn`, the same every time it is asked. */
  of(fn: object): number {
    let id = this.#ids.get(fn);
    if (id === undefined) this.#ids.set(fn, id = ++this.#next);
    return id;
  }
}

/** Canonical text of a capacity block; a function (an in-process `code`) counts by identity. */
function blockSignature(block: CapacitySpec | undefined, fnIds: FunctionIds): string {
  const sort = (value: unknown): unknown => {
    if (typeof value === "function") return `\u0000function#${fnIds.of(value)}`;
    if (Array.isArray(value)) return value.map(sort);
    if (typeof value === "object" && value !== null) {
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value).sort()) {
        out[key] = sort((value as Record<string, unknown>)[key]);
      }
      return out;
    }
    return value;
  };
  return JSON.stringify(sort(block ?? null));
}

/** The manager; see {@link startCapacityProbes}. */
export class ProbeManager implements CapacityProbes {
  readonly #deps: CapacityProbeDeps;
  readonly #env: (name: string) => string | undefined;
  readonly #timers: ProbeTimers;
  readonly #timeouts: ProbeTimeouts;
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new Set<Promise<void>>();
  readonly #fnIds = new FunctionIds();
  readonly #unsubscribe: (() => void) | undefined;
  #generation = -1;
  #scheduled = false;
  #closed = false;

  /** Creates the manager; nothing starts before `refresh()`. */
  constructor(deps: CapacityProbeDeps) {
    this.#deps = deps;
    this.#env = deps.env ?? ((name) => Deno.env.get(name));
    this.#timers = deps.timers ?? realTimers;
    this.#timeouts = { ...DEFAULT_PROBE_TIMEOUTS, ...deps.timeouts };
    if (deps.follow !== false) {
      const skeid = deps.skeid;
      this.#unsubscribe = skeid.onCapacityChange(() => {
        if (this.#scheduled || this.#closed || skeid.generation === this.#generation) return;
        this.#scheduled = true;
        // Not inside the core's notification: starting a probe may report a reading at once.
        queueMicrotask(() => {
          this.#scheduled = false;
          this.refresh();
        });
      });
    }
  }

  refresh(): void {
    if (this.#closed) return;
    const { skeid, logger } = this.#deps;
    this.#generation = skeid.generation;
    const wanted = new Map<string, { node: Node; signature: string }>();
    for (const node of skeid.listNodes()) {
      const kind = probeKindOf(node);
      if (kind === "inflight" || kind === "none" || kind === "ratelimit") continue;
      const signature = `${skeid.workerCount}\n${node.url}\n${
        blockSignature(node.capacity, this.#fnIds)
      }`;
      wanted.set(node.id, { node, signature });
    }
    for (const [id, entry] of this.#entries) {
      if (wanted.get(id)?.signature === entry.signature) continue;
      this.#entries.delete(id);
      if (entry.runner) {
        entry.runner.stop();
        logger.info("capacity_probe_stopped", { node_id: id, probe: entry.kind });
      }
    }
    for (const [id, { node, signature }] of wanted) {
      if (this.#entries.has(id)) continue;
      this.#start(node, signature);
    }
  }

  #start(node: Node, signature: string): void {
    const { skeid, logger } = this.#deps;
    const kind = probeKindOf(node);
    const periodMs = pollPeriodMs(node.capacity?.interval_ms, skeid.workerCount);
    let runner: ProbeRunner;
    try {
      runner = new ProbeRunner({
        skeid,
        node,
        logger,
        env: this.#env,
        fetch: this.#deps.fetch ?? fetch,
        timers: this.#timers,
        timeouts: this.#timeouts,
        factories: this.#deps.factories,
        track: (poll) => {
          this.#pending.add(poll);
          poll.finally(() => this.#pending.delete(poll));
        },
      });
    } catch (err) {
      const error = errorMessage(err);
      this.#entries.set(node.id, { signature, kind, periodMs, error });
      logger.warn("capacity_probe_not_started", {
        node_id: node.id,
        probe: kind,
        error,
        message: `capacity probe for '${node.id}' not started: ${error}`,
      });
      return;
    }
    this.#entries.set(node.id, { signature, kind, periodMs, runner });
    logger.info("capacity_probe_started", {
      node_id: node.id,
      probe: kind,
      period_ms: periodMs,
      ...(runner.url !== undefined ? { url: loggableUrl(runner.url) } : {}),
    });
    runner.start();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe?.();
    for (const entry of this.#entries.values()) entry.runner?.stop();
    this.#entries.clear();
    await this.settled();
  }

  status(): ProbeStatus[] {
    const out: ProbeStatus[] = [];
    for (const [id, entry] of this.#entries) {
      const status: ProbeStatus = {
        node_id: id,
        probe: entry.kind,
        running: entry.runner !== undefined,
        state: entry.runner?.state ?? null,
        period_ms: entry.periodMs,
      };
      if (entry.runner?.url !== undefined) status.url = loggableUrl(entry.runner.url);
      if (entry.error !== undefined) status.error = entry.error;
      out.push(status);
    }
    return out;
  }

  async pollNow(nodeId?: string): Promise<void> {
    const polls: Promise<void>[] = [];
    for (const [id, entry] of this.#entries) {
      if (entry.runner && (nodeId === undefined || id === nodeId)) polls.push(entry.runner.poll());
    }
    await Promise.all(polls);
  }

  async settled(): Promise<void> {
    // Bounded: a poll is bounded by its request timeout, and a stopped probe starts no new one.
    for (let i = 0; i < 100 && this.#pending.size > 0; i++) {
      await Promise.allSettled([...this.#pending]);
    }
  }
}

/**
 * Starts the capacity probes of a gateway: one per node whose capacity block asks for
 * `prometheus`, `registry` or `custom`, following the inventory from then on.
 */
export function startCapacityProbes(deps: CapacityProbeDeps): CapacityProbes {
  const manager = new ProbeManager(deps);
  manager.refresh();
  return manager;
}
