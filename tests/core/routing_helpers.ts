/**
 * Shared fixtures of the routing-core tests: a core on a hand-driven clock, an empty
 * environment and a logger that keeps its lines.
 *
 * @module
 */
import { RoutingCore, type SkeidOptions } from "../../src/core/routing_core.ts";
import { type Logger, memoryLogger } from "../../src/log.ts";
import type { NodeSpec } from "../../src/core/types.ts";

/** A core with its clock and the lines it logged. */
export interface Fixture {
  skeid: RoutingCore;
  clock: { t: number };
  logger: Logger & { lines: Record<string, unknown>[] };
}

/** A core whose clock is `clock.t` (epoch ms) and whose environment is `env` (default empty). */
export function core(opts: SkeidOptions & { vars?: Record<string, string> } = {}): Fixture {
  const clock = { t: 1_700_000_000_000 };
  const logger = memoryLogger();
  const vars = opts.vars ?? {};
  const skeid = new RoutingCore({
    now: () => clock.t,
    env: (name) => vars[name],
    logger,
    ...opts,
  });
  return { skeid, clock, logger };
}

/** A node spec serving model `m` unless overridden. */
export function spec(id: string, extra: NodeSpec = {}): NodeSpec {
  return { id, url: `http://${id}:8000/v1`, model: "m", ...extra };
}

/** Ids of `n` consecutive picks of a selection (picks do not admit). */
export function picks(
  skeid: RoutingCore,
  sel: Parameters<RoutingCore["pickNode"]>[0],
  n: number,
): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(skeid.pickNode(sel)?.id ?? "-");
  return out;
}

/** How often each id occurs. */
export function counts(ids: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const id of ids) out[id] = (out[id] ?? 0) + 1;
  return out;
}
