/**
 * Aliases and tiers. SKELETON — owner: core-routing.
 * @module
 */
import type { Alias } from "./types.ts";

/**
 * Normalizes an alias spec: `{tiers:[...]}` or a bare list of tiers. Per tier: tags, model
 * (default the alias name), engine (normalized), wait_ms (default 0). Throws on empty tiers
 * or a scalar spec.
 */
export function normalizeAlias(_name: string, _spec: unknown): Alias {
  throw new Error("TODO");
}
