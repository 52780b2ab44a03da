/**
 * Node normalization and the inventory. SKELETON — owner: core-routing.
 * @module
 */
import type { Node, NodeSpec } from "./types.ts";

/** A node spec that cannot be used; `path` names the field (e.g. `engine`). */
export class NodeSpecError extends Error {
  constructor(message: string, readonly field?: string) {
    super(message);
    this.name = "NodeSpecError";
  }
}

/**
 * Applies a node's defaults (model '', engine openaibase, weight ≥ 1, max_conns 0, healthy,
 * tags, metadata, /v1 appended). Returns undefined for an entry without id or url (the caller
 * warns and skips it); throws NodeSpecError on an unknown engine or another bad field.
 */
export function normalizeNode(_spec: NodeSpec): Node | undefined {
  throw new Error("TODO");
}
