/**
 * The key broker contract: turns a node's `api_key_ref` into an upstream key, in memory only.
 * {@link CachingKeyBroker} gives any resolver the caching and coalescing the request path needs,
 * so a resolver only has to answer one reference at a time.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import type { Logger } from "../log.ts";

/** What a resolution gives: the upstream key, or why there is none (never the key itself). */
export type KeyAnswer = { key: string } | { error: string };

/** The request path's view of a broker. Never throws; never writes anything to disk. */
export interface KeyBroker {
  /**
   * The key for `ref`. A live cache entry answers at once; a miss is one resolution however many
   * callers wait for it, and all of them get the same answer. Always resolves, never rejects.
   */
  keyFor(ref: string): Promise<KeyAnswer>;
  /**
   * The live cache entry for `ref`, synchronously: the cached key or cached failure, or undefined
   * when nothing is cached (never asked, expired, forgotten). Lets the hot path skip a promise.
   */
  cached(ref: string): KeyAnswer | undefined;
  /** Drops the cached answer for `ref`, or every cached answer; what a key rotation calls. */
  forget(ref?: string): void;
  /** Stops timers and in-flight calls and drops every key and token held. Idempotent. */
  close(): Promise<void>;
}

/**
 * Resolves one reference, uncached. Implement `resolveKey` (blocking-style: return the key, or
 * throw / return nothing when it cannot) or `resolveKeyAsync` (carries its own reason), or both;
 * `resolveKeyAsync` wins when present.
 */
export interface KeyResolver {
  /** Blocking-style resolution; may also return a promise. A throw becomes the error. */
  resolveKey?(ref: string): string | null | undefined | Promise<string | null | undefined>;
  /** Non-blocking resolution with its own reason on failure. */
  resolveKeyAsync?(ref: string): Promise<KeyAnswer>;
  /** Releases what the resolver holds (timers, tokens, HTTP clients). */
  close?(): void | Promise<void>;
}

/** Caching settings; times in milliseconds. */
export interface CachingKeyBrokerOptions {
  /** How long a resolved key stays cached (default 300 000; 0 disables). */
  cacheTtlMs?: number;
  /** How long a failed resolution is remembered (default 5 000; 0 disables). */
  negativeCacheTtlMs?: number;
  /** Longest one resolution may take before it counts as failed (default 30 000). */
  resolveTimeoutMs?: number;
  /** Epoch milliseconds (default `Date.now`). */
  now?: () => number;
  /** Where a failed resolution is warned about, once per resolution (not per waiting caller). */
  logger?: Logger;
}

/** Built-in positive cache lifetime: 300 s. */
export const DEFAULT_CACHE_TTL_MS = 300_000;
/** Built-in negative cache lifetime: 5 s — short, so a fixed misconfiguration does not stick. */
export const DEFAULT_NEGATIVE_CACHE_TTL_MS = 5_000;
/** Built-in bound on one resolution, so a resolver that never answers cannot hang requests. */
export const DEFAULT_RESOLVE_TIMEOUT_MS = 30_000;

interface CacheEntry {
  answer: KeyAnswer;
  expires: number;
}

function errorText(err: unknown): string {
  const text = errorMessage(err);
  return text.trim() || "key resolution failed";
}

/** Turns what a resolver gave into an answer: an empty key is a failure, too. */
function normalize(value: unknown, fallback: string): KeyAnswer {
  if (typeof value === "string") return value.length > 0 ? { key: value } : { error: fallback };
  if (value !== null && typeof value === "object") {
    const v = value as Record<string, unknown>;
    if (typeof v.key === "string" && v.key.length > 0) return { key: v.key };
    if (typeof v.error === "string" && v.error.length > 0) return { error: v.error };
  }
  return { error: fallback };
}

/**
 * A {@link KeyBroker} over a {@link KeyResolver}: positive and negative cache with their own
 * lifetimes, one resolution in flight per reference. Memory only; `close()` drops everything.
 */
export class CachingKeyBroker implements KeyBroker {
  readonly #resolver: KeyResolver;
  readonly #cacheTtlMs: number;
  readonly #negativeTtlMs: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #logger: Logger | undefined;
  readonly #cache = new Map<string, CacheEntry>();
  readonly #pending = new Map<string, Promise<KeyAnswer>>();
  #closed = false;

  /** Wraps `resolver`; see {@link CachingKeyBrokerOptions} for the defaults. */
  constructor(resolver: KeyResolver, opts: CachingKeyBrokerOptions = {}) {
    this.#resolver = resolver;
    this.#cacheTtlMs = Math.max(0, opts.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS);
    this.#negativeTtlMs = Math.max(0, opts.negativeCacheTtlMs ?? DEFAULT_NEGATIVE_CACHE_TTL_MS);
    this.#timeoutMs = Math.max(1, opts.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS);
    this.#now = opts.now ?? Date.now;
    this.#logger = opts.logger;
  }

  /** {@inheritDoc KeyBroker.keyFor} */
  keyFor(ref: string): Promise<KeyAnswer> {
    if (typeof ref !== "string" || ref.length === 0) {
      return Promise.resolve({ error: "no key reference" });
    }
    if (this.#closed) return Promise.resolve({ error: "key broker closed" });
    const hit = this.cached(ref);
    if (hit !== undefined) return Promise.resolve(hit);
    // One round-trip per reference, however many requests wait: a cold cache at concurrency 64
    // must not become 64 identical vault calls.
    const inFlight = this.#pending.get(ref);
    if (inFlight !== undefined) return inFlight;
    const resolution = this.#resolve(ref).then((answer) => {
      // A forget() while this was in flight (a rotation) detached it: its answer may predate
      // the rotation, so it goes to the callers already waiting but not into the cache.
      if (this.#pending.get(ref) === resolution) {
        this.#pending.delete(ref);
        this.#store(ref, answer);
      }
      if ("error" in answer) {
        this.#logger?.warn("key_resolve_failed", {
          api_key_ref: ref,
          message: `KeyBroker resolve failed for '${ref}': ${answer.error}`,
        });
      }
      return answer;
    });
    this.#pending.set(ref, resolution);
    return resolution;
  }

  /** {@inheritDoc KeyBroker.cached} */
  cached(ref: string): KeyAnswer | undefined {
    const entry = this.#cache.get(ref);
    if (entry === undefined) return undefined;
    if (entry.expires <= this.#now()) {
      this.#cache.delete(ref);
      return undefined;
    }
    return entry.answer;
  }

  /** {@inheritDoc KeyBroker.forget} */
  forget(ref?: string): void {
    if (ref !== undefined && ref.length > 0) {
      this.#cache.delete(ref);
      this.#pending.delete(ref);
      return;
    }
    this.#cache.clear();
    this.#pending.clear();
  }

  /** {@inheritDoc KeyBroker.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.forget();
    try {
      await this.#resolver.close?.();
    } catch {
      // Closing is best effort; nothing is left to protect once the keys are dropped.
    }
  }

  #store(ref: string, answer: KeyAnswer): void {
    if (this.#closed) return;
    const ttl = "key" in answer ? this.#cacheTtlMs : this.#negativeTtlMs;
    if (ttl <= 0) return;
    this.#cache.set(ref, { answer, expires: this.#now() + ttl });
  }

  /** One uncached resolution, bounded in time; never rejects. */
  async #resolve(ref: string): Promise<KeyAnswer> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<KeyAnswer>((resolve) => {
      timer = setTimeout(
        () => resolve({ error: `key resolution timed out after ${this.#timeoutMs} ms` }),
        this.#timeoutMs,
      );
    });
    try {
      return await Promise.race([this.#ask(ref), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #ask(ref: string): Promise<KeyAnswer> {
    const resolver = this.#resolver;
    try {
      if (resolver.resolveKeyAsync) {
        return normalize(await resolver.resolveKeyAsync(ref), "no key resolved");
      }
      if (resolver.resolveKey) {
        return normalize(await resolver.resolveKey(ref), "no key resolved");
      }
      return { error: "key resolver implements neither resolveKey nor resolveKeyAsync" };
    } catch (err) {
      return { error: errorText(err) };
    }
  }
}
