/**
 * When each customer key was last seen: the `created_at` of its latest usage event recorded by
 * this ledger since start (the Keys page's `last_seen`). Bounded: past {@link MAX_KEYS} the key
 * seen longest ago is forgotten first. One map write per event, no parsing.
 *
 * @module
 */

/** Customer keys remembered at once. */
export const MAX_KEYS = 100_000;

/** The last `created_at` per customer key id. */
export class LastSeen {
  readonly #at = new Map<string, string>();
  readonly #cap: number;
  /** The key seen last (the map's last entry). */
  #newest: string | undefined;

  constructor(cap = MAX_KEYS) {
    this.#cap = cap;
  }

  /** Notes a usage event of `keyId` stamped `createdAt`. */
  seen(keyId: string, createdAt: string): void {
    // The newest already (one busy key): a set keeps its place, which is the last one.
    if (keyId === this.#newest) {
      this.#at.set(keyId, createdAt);
      return;
    }
    this.#newest = keyId;
    // Delete first: the map's order is then the order keys were last seen in.
    this.#at.delete(keyId);
    this.#at.set(keyId, createdAt);
    if (this.#at.size > this.#cap) {
      const oldest = this.#at.keys().next().value;
      if (oldest !== undefined) this.#at.delete(oldest);
    }
  }

  /** The `created_at` of the key's last event since start, or null. */
  of(keyId: string): string | null {
    return this.#at.get(keyId) ?? null;
  }
}
