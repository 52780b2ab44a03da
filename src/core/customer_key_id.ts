/**
 * Customer key ids: `k_` + the full SHA-1 hex of the presented customer key (ADR 0018), via Web
 * Crypto. The id identifies a customer, it does not authenticate one: what authenticates is
 * that the caller presented the customer key it was derived from. So a config may name ids,
 * never customer keys.
 *
 * @module
 */

const encoder = new TextEncoder();

/** The id of a request that presented no customer key. */
export const ANONYMOUS_KEY_ID = "anonymous";

/** The customer key id of a presented customer key; `anonymous` for an empty one. */
export async function keyIdForKey(key: string): Promise<string> {
  if (key === "") return ANONYMOUS_KEY_ID;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-1", encoder.encode(key)));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return `k_${hex}`;
}
