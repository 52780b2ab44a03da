/**
 * The node key lookup: the upstream key a node is called with, from the key broker
 * (`api_key_ref`) or the environment (`api_key_env`). Synchronous on a broker cache hit so a warm
 * request pays no promise; a miss waits only for its own reference, never for other requests.
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

/**
 * The node's own key: undefined when the node names no key source (the client's credentials go
 * through), `null` when it names one that resolved nothing (the node must not be called, ADR
 * 0013), else the key. The environment is the gateway's in-memory view; a key broker's answer
 * (`brokerKey`, when one is configured) comes first.
 */
export function nodeKeyFromEnv(
  node: Pick<Node, "api_key_env" | "api_key_ref">,
  env: (name: string) => string | undefined,
  brokerKey?: string,
): string | null | undefined {
  if (brokerKey !== undefined && brokerKey.length > 0) return brokerKey;
  if (node.api_key_env) {
    const value = env(node.api_key_env);
    if (value !== undefined && value.length > 0) return value;
    return null;
  }
  return node.api_key_ref ? null : undefined;
}

/**
 * The node's own key (see `nodeKeyFromEnv`): the key broker's answer for `api_key_ref` (a cache
 * hit is synchronous; a miss makes only this request wait), else `api_key_env` read from `env`.
 */
export function nodeKey(
  node: Node,
  broker: KeyBroker | undefined,
  env: (name: string) => string | undefined,
): string | null | undefined | Promise<string | null | undefined> {
  const fromBroker = brokerKeyFor(node, broker);
  if (fromBroker instanceof Promise) {
    return fromBroker.then((key) => nodeKeyFromEnv(node, env, key));
  }
  return nodeKeyFromEnv(node, env, fromBroker);
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
