/**
 * The request path's use of the key broker: the key a node's `api_key_ref` resolves to, ready
 * for `nodeKeyFromEnv(node, env, brokerKey)`. Synchronous on a cache hit so a warm request pays
 * no promise; a miss waits only for its own reference, never for other requests.
 *
 * @module
 */
import type { Node } from "../core/types.ts";
import type { KeyAnswer, KeyBroker } from "./broker.ts";

const keyOf = (answer: KeyAnswer): string | undefined => "key" in answer ? answer.key : undefined;

/**
 * The broker's key for `node`, or undefined when the node names no `api_key_ref`, there is no
 * broker, or the resolution failed (the broker warned once with the reference; the caller falls
 * back to `api_key_env`). A promise only when the cache had nothing for the reference.
 */
export function brokerKeyFor(
  node: Pick<Node, "api_key_ref">,
  broker: KeyBroker | undefined,
): string | undefined | Promise<string | undefined> {
  const ref = node.api_key_ref;
  if (broker === undefined || ref === undefined || ref.length === 0) return undefined;
  const hit = broker.cached(ref);
  if (hit !== undefined) return keyOf(hit);
  return broker.keyFor(ref).then(keyOf);
}

/** Starts resolving every reference the nodes name, so the first requests find a warm cache. */
export function warmKeys(
  nodes: Iterable<Pick<Node, "api_key_ref">>,
  broker: KeyBroker | undefined,
): void {
  if (broker === undefined) return;
  const refs = new Set<string>();
  for (const node of nodes) if (node.api_key_ref) refs.add(node.api_key_ref);
  for (const ref of refs) if (broker.cached(ref) === undefined) void broker.keyFor(ref);
}
