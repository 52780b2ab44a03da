/**
 * Capacity test helpers: a core on a movable clock, a probe manager whose interval timer is
 * recorded (never fires by itself), and the log lines it wrote.
 *
 * @module
 */
import { RoutingCore } from "../../src/core/routing_core.ts";
import { memoryLogger } from "../../src/log.ts";
import { type CapacityProbeDeps, ProbeManager } from "../../src/capacity/probe_manager.ts";
import type { ProbeTimers } from "../../src/capacity/runner.ts";

/** Interval timers recorded instead of run: the test fires them with `fire()`. */
export class ManualTimers implements ProbeTimers {
  /** Live timers by handle. */
  readonly live = new Map<number, { fn: () => void; ms: number }>();
  #next = 1;

  setInterval(fn: () => void, ms: number): number {
    const id = this.#next++;
    this.live.set(id, { fn, ms });
    return id;
  }

  clearInterval(handle: unknown): void {
    this.live.delete(handle as number);
  }

  /** The periods of the live timers, ms. */
  periods(): number[] {
    return [...this.live.values()].map((t) => t.ms);
  }

  /** Fires every live timer once. */
  fire(): void {
    for (const t of [...this.live.values()]) t.fn();
  }
}

/** A core, its clock, a probe manager and the manager's log. */
export interface ProbeFixture {
  skeid: RoutingCore;
  /** The core's clock, epoch ms; set it to move time. */
  time: { now: number };
  probes: ProbeManager;
  timers: ManualTimers;
  logger: ReturnType<typeof memoryLogger>;
  /** Log lines of one event. */
  events(event: string): Record<string, unknown>[];
}

/** Builds a fixture; `start` runs `refresh()` (the manager follows the inventory anyway). */
export function probeFixture(
  opts: { workerCount?: number; deps?: Partial<CapacityProbeDeps>; capacityMaxAgeMs?: number } = {},
): ProbeFixture {
  const time = { now: 1_700_000_000_000 };
  const skeid = new RoutingCore({
    now: () => time.now,
    workerCount: opts.workerCount,
    capacityMaxAgeMs: opts.capacityMaxAgeMs ?? 60_000,
    env: () => undefined,
  });
  const logger = memoryLogger();
  const timers = new ManualTimers();
  const probes = new ProbeManager({ skeid, logger, timers, env: () => undefined, ...opts.deps });
  return {
    skeid,
    time,
    probes,
    timers,
    logger,
    events: (event) => logger.lines.filter((l) => l.event === event),
  };
}

/** Lets queued microtasks and one macrotask turn run (the manager refreshes on a microtask). */
export function turn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
