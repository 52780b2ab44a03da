/**
 * Node selection: which nodes a selection makes eligible, the route key that names a selection,
 * and weighted round-robin over the eligible nodes. Everything derived from the inventory is
 * computed once per selection and kept until the inventory changes; per request only admission
 * is evaluated, because inflight is the one thing that moves between two picks.
 *
 * @module
 */
import type { Node, Selection } from "./types.ts";
import type { NodeRecord } from "./inventory.ts";
import { normalizeEngineId } from "./engines.ts";
import { normalizeTags } from "./tags.ts";

/** Whether a node carries every one of `tags` (AND). */
export function hasAllTags(node: Pick<Node, "tags">, tags: readonly string[]): boolean {
  for (const tag of tags) if (!node.tags.includes(tag)) return false;
  return true;
}

/** Whether a node carries any of `tags` (one denied tag rules a node out). */
export function hasAnyTag(node: Pick<Node, "tags">, tags: readonly string[]): boolean {
  for (const tag of tags) if (node.tags.includes(tag)) return true;
  return false;
}

/**
 * Eligibility without health: the node's model is '' or the selection's (an empty selection
 * model matches any node), engines match when either side is '' or both are equal, it carries
 * every tag and none of the denied ones.
 */
export function nodeMatches(
  node: Node,
  model: string,
  engine: string,
  tags: readonly string[],
  denyTags: readonly string[],
): boolean {
  return (model === "" || node.model === "" || node.model === model) &&
    (engine === "" || node.engine === "" || node.engine === engine) &&
    hasAllTags(node, tags) && !hasAnyTag(node, denyTags);
}

/**
 * The round-robin route key of a normalized selection: `model|engine`, or
 * `model|engine|tags[|-denytags]` when tags or denied tags are given. Different selections
 * over one model address different node sets, so they keep different cursors.
 */
export function routeKey(
  model: string,
  engine: string,
  tags: readonly string[],
  denyTags: readonly string[],
): string {
  if (tags.length === 0 && denyTags.length === 0) return `${model}|${engine}`;
  const base = `${model}|${engine}|${tags.join(",")}`;
  return denyTags.length ? `${base}|-${denyTags.join(",")}` : base;
}

/** A tags value as given, joined for a cache key (a string passes through). */
function rawList(list: unknown): string {
  return Array.isArray(list) ? `a${list.join("\u0001")}` : `s${list ?? ""}`;
}

/** A normalized selection with its eligible nodes and round-robin state. */
export interface RouteEntry {
  /** The route key (`model|engine[|tags][|-denytags]`). */
  readonly key: string;
  /** Requested served model; `''` matches every node. */
  readonly model: string;
  /** Normalized engine constraint; `''` = any. */
  readonly engine: string;
  /** Normalized tags a node must all carry. */
  readonly tags: readonly string[];
  /** Normalized tags a node must carry none of. */
  readonly denyTags: readonly string[];
  /** Eligible (healthy, matching) nodes in id order. */
  readonly nodes: readonly NodeRecord[];
  /** Smooth weighted round-robin: current weight per node. */
  readonly current: Float64Array;
  /** Set when the entry was evicted, so an alias of its raw key is not trusted any more. */
  dead: boolean;
}

/** Selections kept at once; requested models are client input, so the working set is bounded. */
export const ROUTE_CACHE_MAX_ENTRIES = 256;

/**
 * Route entries per selection, valid for one inventory state. Lookups by the selection as
 * given (one string join, one map lookup); a miss normalizes tags and engine once and shares
 * the entry of the equal normalized selection. `invalidate` drops everything (cursors too):
 * a cursor describes one node set.
 */
export class RouteTable {
  #byKey = new Map<string, RouteEntry>();
  #byRaw = new Map<string, RouteEntry>();

  /** `nodesById` answers the inventory in id order (read on a miss only). */
  constructor(
    private readonly nodesById: () => readonly NodeRecord[],
    private readonly maxEntries = ROUTE_CACHE_MAX_ENTRIES,
  ) {}

  /** Forgets every entry; call on every inventory change. */
  invalidate(): void {
    this.#byKey.clear();
    this.#byRaw.clear();
  }

  /** Number of normalized selections held. */
  get size(): number {
    return this.#byKey.size;
  }

  /** The entry of a selection. Throws on an unknown engine (see normalizeEngineId). */
  entry(sel: Selection): RouteEntry {
    const raw = `${sel.model ?? ""}\u0000${sel.engine ?? ""}\u0000${rawList(sel.tags)}\u0000${
      rawList(sel.deny_tags)
    }`;
    const hit = this.#byRaw.get(raw);
    if (hit && !hit.dead) return hit;

    const model = sel.model ?? "";
    const engine = normalizeEngineId(sel.engine ?? "");
    const tags = Object.freeze(normalizeTags(sel.tags));
    const denyTags = Object.freeze(normalizeTags(sel.deny_tags));
    const key = routeKey(model, engine, tags, denyTags);
    let entry = this.#byKey.get(key);
    if (!entry) {
      const nodes = this.nodesById().filter((r) =>
        r.node.healthy && nodeMatches(r.node, model, engine, tags, denyTags)
      );
      entry = {
        key,
        model,
        engine,
        tags,
        denyTags,
        nodes,
        current: new Float64Array(nodes.length),
        dead: false,
      };
      // A selection no node matches (a requested model the config does not know: client input,
      // up to megabytes) is answered but never kept; it has no cursor worth keeping either.
      if (nodes.length === 0) return entry;
      // FIFO eviction keeps memory bounded whatever names clients send; an evicted route
      // restarts its fairness if it comes back.
      while (this.#byKey.size >= this.maxEntries) {
        const oldest = this.#byKey.keys().next().value as string;
        this.#byKey.get(oldest)!.dead = true;
        this.#byKey.delete(oldest);
      }
      this.#byKey.set(key, entry);
    }
    if (this.#byRaw.size >= this.maxEntries * 4) this.#byRaw.clear();
    this.#byRaw.set(raw, entry);
    return entry;
  }
}

/**
 * Smooth weighted round-robin (as nginx does it) over the entry's nodes that `admits` accepts:
 * over any run of Σweight picks with the same nodes admitting, each node is picked exactly
 * weight times, interleaved rather than in bursts. Nodes admission refuses neither gain nor
 * lose position. Answers the index of the chosen node, or -1.
 */
export function pickWeighted(entry: RouteEntry, admits: (record: NodeRecord) => boolean): number {
  const { nodes, current } = entry;
  let best = -1;
  let total = 0;
  for (let i = 0; i < nodes.length; i++) {
    const record = nodes[i];
    if (!admits(record)) continue;
    const weight = record.node.weight;
    current[i] += weight;
    total += weight;
    if (best < 0 || current[i] > current[best]) best = i;
  }
  if (best >= 0) current[best] -= total;
  return best;
}
