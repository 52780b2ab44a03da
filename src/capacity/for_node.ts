/**
 * Which probe a node's capacity block asks for. `inflight` (the default), `none` and
 * `ratelimit` run nothing: inflight is plain admission, and rate-limit headers are read off the
 * responses the proxy already has. `prometheus`, `registry` and `custom` poll on a timer.
 *
 * @module
 */
import type { Node } from "../core/types.ts";
import type { CapacityProbe, ProbeContext } from "./probe.ts";
import { prometheusProbe } from "./prometheus.ts";
import { registryProbe } from "./registry_probe.ts";
import { customProbe, type ProbeFactories } from "./custom.ts";

/** Probe kinds that run on a timer. */
export const POLLING_PROBE_KINDS: readonly string[] = Object.freeze([
  "prometheus",
  "registry",
  "custom",
]);

/** Kinds that need nothing running. */
const PASSIVE_KINDS: readonly string[] = Object.freeze(["inflight", "none", "ratelimit"]);

/** The probe kind of a node (`probe`, else `type`, lowercased; `inflight` without a block). */
export function probeKindOf(node: Pick<Node, "capacity">): string {
  const block = node.capacity;
  if (!block) return "inflight";
  const raw = block.probe ?? block.type;
  return typeof raw === "string" && raw.trim() !== "" ? raw.trim().toLowerCase() : "inflight";
}

/** Whether a node's block asks for a probe on a timer; throws `unknown capacity probe '<kind>'`. */
export function wantsProbe(node: Pick<Node, "capacity">): boolean {
  const kind = probeKindOf(node);
  if (PASSIVE_KINDS.includes(kind)) return false;
  if (POLLING_PROBE_KINDS.includes(kind)) return true;
  throw new Error(`unknown capacity probe '${kind}'`);
}

/** Builds the probe of `ctx.node`'s kind; throws when the block cannot work. */
export function buildProbe(ctx: ProbeContext, factories?: ProbeFactories): CapacityProbe {
  const kind = probeKindOf(ctx.node);
  switch (kind) {
    case "prometheus":
      return prometheusProbe(ctx);
    case "registry":
      return registryProbe(ctx);
    case "custom":
      return customProbe(ctx, factories);
    default:
      throw new Error(`unknown capacity probe '${kind}'`);
  }
}
