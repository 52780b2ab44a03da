/**
 * Customer identity: which customer key a request presented, and its customer key id. The id is
 * `k_` + SHA-1 hex of the key (core `keyIdForKey`, async through Web Crypto); a small LRU cache
 * of key → id means the digest runs once per key, not once per request.
 *
 * The cache holds customer keys in memory only (they are never logged or written anywhere).
 *
 * @module
 */

/** The id billed and routed for requests without a customer key. */
export const ANONYMOUS = "anonymous";

const BEARER = /^\s*bearer(?:\s+|$)/i;

/**
 * The customer key a request presented: `Authorization` minus a leading `Bearer ` (any case),
 * else `x-api-key`; undefined when neither carries one.
 */
export function presentedKey(headers: Headers): string | undefined {
  const auth = headers.get("authorization");
  if (auth !== null) {
    const key = auth.replace(BEARER, "").trim();
    if (key.length > 0) return key;
  }
  const apiKey = headers.get("x-api-key");
  if (apiKey !== null) {
    const key = apiKey.trim();
    if (key.length > 0) return key;
  }
  return undefined;
}

/** The key id a trusted front named (`x-skeid-key-id`, else `x-api-key-id`), or undefined. */
export function headerKeyId(headers: Headers): string | undefined {
  const id = headers.get("x-skeid-key-id") ?? headers.get("x-api-key-id");
  if (id === null) return undefined;
  const trimmed = id.trim();
  return trimmed.length > 0 ? trimmed : undefined;
}

/** Options of a KeyIdCache. */
export interface KeyIdCacheOptions {
  /** Derives a customer key id (core `keyIdForKey`). */
  derive: (key: string) => Promise<string>;
  /** How many keys to remember (default 4096). */
  capacity?: number;
}

/** customer key → customer key id, least recently used entries evicted first. */
export class KeyIdCache {
  readonly #derive: (key: string) => Promise<string>;
  readonly #capacity: number;
  readonly #ids = new Map<string, string>();
  /** Digests in progress, so N concurrent first requests of one key run it once. */
  readonly #pending = new Map<string, Promise<string>>();
  /** The most recently used key: already last in the LRU order, so not moved again. */
  #last: string | undefined;

  /** An empty cache deriving ids with `opts.derive`, holding at most `opts.capacity` keys. */
  constructor(opts: KeyIdCacheOptions) {
    this.#derive = opts.derive;
    this.#capacity = Math.max(1, opts.capacity ?? 4096);
  }

  /** How many keys are cached. */
  get size(): number {
    return this.#ids.size;
  }

  /** The cached id of a key, or undefined (no digest is started). */
  peek(key: string): string | undefined {
    const id = this.#ids.get(key);
    if (id !== undefined && key !== this.#last) {
      // Refresh recency: Map iteration order is insertion order, so re-insert at the end. The
      // key used last is at the end already: a delete and set per request would churn the
      // map's table for nothing (one customer key behind a busy client is the common case).
      this.#ids.delete(key);
      this.#ids.set(key, id);
      this.#last = key;
    }
    return id;
  }

  /** The id of a key: from the cache when known (synchronously), else derived once. */
  idFor(key: string): string | Promise<string> {
    const id = this.peek(key);
    if (id !== undefined) return id;
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      pending = this.#derive(key).then(
        (derived) => {
          this.#pending.delete(key);
          this.#ids.set(key, derived);
          this.#last = key;
          if (this.#ids.size > this.#capacity) {
            const oldest = this.#ids.keys().next().value;
            if (oldest !== undefined) this.#ids.delete(oldest);
          }
          return derived;
        },
        (err: unknown) => {
          this.#pending.delete(key);
          throw err;
        },
      );
      this.#pending.set(key, pending);
    }
    return pending;
  }

  /** Forgets every key (e.g. after a config change that should not matter, for tests). */
  clear(): void {
    this.#ids.clear();
    this.#last = undefined;
  }
}

/**
 * The customer key id a request presents: the trusted header's id (only with
 * `routing.trust_key_id_header`), else the id of the presented customer key, else undefined.
 */
export function requestKeyId(
  headers: Headers,
  trustHeader: boolean,
  cache: KeyIdCache,
): string | undefined | Promise<string> {
  if (trustHeader) {
    const id = headerKeyId(headers);
    if (id !== undefined) return id;
  }
  const key = presentedKey(headers);
  return key === undefined ? undefined : cache.idFor(key);
}
