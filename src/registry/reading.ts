/**
 * A verified snapshot → the one capacity reading admission consumes for the node that stands for
 * that downstream Skeid (ADR 0019). Written down once, beside the
 * encoder, so both halves of the registry agree on what the numbers mean.
 *
 * `used` is the downstream's own number. It is never added to this process's inflight: the
 * requests this process sent are already in it (ADR 0019).
 *
 * @module
 */
import { normalizeTags } from "../core/tags.ts";
import { isJsonObject } from "../core/json.ts";

/** The reading a snapshot maps to; both null = no ceiling (does not narrow admission). */
export interface SnapshotReading {
  /**
   * Requests the selected downstream nodes are busy with: `limit` minus their summed free slots.
   */
  used: number | null;
  /**
   * Requests the selected downstream nodes may take in all (summed max_conns or reading limits).
   */
  limit: number | null;
}

/** Options of {@link readingFromSnapshot}. */
export interface SnapshotReadingOptions {
  /** Count only downstream nodes carrying every one of these tags. */
  tags?: readonly string[];
  /** Now, epoch ms (a pending backoff is `retry_after` in seconds after this). */
  now: number;
}

/** A number from a JSON number or a numeric string, else 0 (as the original reads them). */
function num(value: unknown): number {
  if (typeof value === "number") return Number.isFinite(value) ? value : 0;
  if (typeof value === "string" && /^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$/.test(value)) {
    return Number(value);
  }
  return 0;
}

/**
 * Over the downstream nodes that are healthy and carry every wanted tag: free per node is
 * `max_conns − inflight` (or the node's limit when it has no max_conns), at most
 * `limit − used` of its own reading when that has a limit, 0 while its backoff is pending,
 * clamped to [0, limit]. `limit` sums the nodes' limits (max_conns, else the reading's limit),
 * `used` is that minus the summed free. A node with no ceiling at all (and no backoff) makes the
 * whole downstream unbounded; no selected node reads as full (1 of 1): that downstream would
 * answer 503, so routing should go elsewhere.
 */
export function readingFromSnapshot(
  snapshot: unknown,
  options: SnapshotReadingOptions,
): SnapshotReading {
  const want = normalizeTags(options.tags ?? []);
  const nowS = options.now / 1000;
  const nodes = isJsonObject(snapshot) && Array.isArray(snapshot.nodes) ? snapshot.nodes : [];
  let limit = 0;
  let free = 0;
  let selected = 0;
  for (const node of nodes) {
    if (!isJsonObject(node) || !node.healthy) continue;
    if (want.length > 0) {
      const have = new Set(
        (Array.isArray(node.tags) ? node.tags : [])
          .filter((t): t is string => typeof t === "string")
          .map((t) => t.toLowerCase()),
      );
      if (want.some((t) => !have.has(t))) continue;
    }
    selected++;
    const max = num(node.max_conns);
    const inflight = num(node.inflight);
    const cap = isJsonObject(node.capacity) ? node.capacity : undefined;
    const capLimit = cap ? num(cap.limit) : 0;
    const backoff = cap !== undefined && num(cap.retry_after) > nowS;

    const nodeLimit = max > 0 ? max : capLimit;
    if (nodeLimit <= 0) {
      // Nothing bounds this node, so nothing bounds the downstream — unless it is backing off,
      // in which case it simply has no slots to offer.
      if (backoff) continue;
      return { used: null, limit: null };
    }
    let nodeFree = max > 0 ? max - inflight : nodeLimit;
    if (capLimit > 0) nodeFree = Math.min(nodeFree, capLimit - num(cap?.used));
    if (backoff) nodeFree = 0;
    nodeFree = Math.min(Math.max(nodeFree, 0), nodeLimit);
    limit += nodeLimit;
    free += nodeFree;
  }
  if (selected === 0 || limit <= 0) return { used: 1, limit: 1 };
  return { used: limit - free, limit };
}
