/**
 * Customer key ids: `k_` + the full SHA-1 hex of the presented key (ADR 0016), via Web Crypto.
 * SKELETON — owner: core-routing.
 * @module
 */

/** The customer key id of a presented customer key. */
export function keyIdForKey(_key: string): Promise<string> {
  throw new Error("TODO");
}
