/**
 * One issuer's signing keys (ADR 0029): its JWKS fetched when the config is applied, again when
 * its `Cache-Control: max-age` runs out (between 1 minute and 1 day; 5 minutes without one), and
 * at once when a token names a `kid` it does not hold — at most once per `jwks_min_interval_s`,
 * one fetch at a time. A document is bounded (1 MiB, 100 keys, 5 s). A fetch that fails keeps
 * the keys already held: tokens they sign keep working, an unknown `kid` is refused.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { isJsonObject, parseJson } from "../core/json.ts";
import type { Logger } from "../log.ts";
import type { JwtAlgorithm, JwtIssuer } from "./jwt_section.ts";

/** Bounds of a JWKS document. */
const MAX_BYTES = 1024 * 1024;
const MAX_KEYS = 100;
const FETCH_TIMEOUT_MS = 5000;
/** How long a document is kept: its max-age within these, else the default. */
const MIN_AGE_S = 60;
const MAX_AGE_S = 86400;
const DEFAULT_AGE_S = 300;

/** The Web Crypto parameters of each algorithm: import, then verify. */
const PARAMS: Record<JwtAlgorithm, {
  kty: string;
  crv?: string;
  importAs: RsaHashedImportParams | EcKeyImportParams | Algorithm;
  verifyAs: AlgorithmIdentifier | EcdsaParams;
}> = {
  RS256: {
    kty: "RSA",
    importAs: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    verifyAs: "RSASSA-PKCS1-v1_5",
  },
  ES256: {
    kty: "EC",
    crv: "P-256",
    importAs: { name: "ECDSA", namedCurve: "P-256" },
    verifyAs: { name: "ECDSA", hash: "SHA-256" },
  },
  EdDSA: { kty: "OKP", crv: "Ed25519", importAs: { name: "Ed25519" }, verifyAs: "Ed25519" },
};

/** The verify parameters of an algorithm. */
export function verifyParams(alg: JwtAlgorithm): AlgorithmIdentifier | EcdsaParams {
  return PARAMS[alg].verifyAs;
}

/** A key of the document, imported for the one algorithm it is for. */
interface HeldKey {
  alg: JwtAlgorithm;
  key: CryptoKey;
}

/** The keys of one issuer. */
export class Jwks {
  readonly #issuer: JwtIssuer;
  readonly #logger: Logger;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  #keys = new Map<string, HeldKey[]>();
  #fetching: Promise<void> | undefined;
  #lastFetchMs = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** Starts the first fetch at once. */
  constructor(issuer: JwtIssuer, logger: Logger, fetcher: typeof fetch, now: () => number) {
    this.#issuer = issuer;
    this.#logger = logger;
    this.#fetch = fetcher;
    this.#now = now;
    void this.#refetch();
  }

  /**
   * The keys a token's `kid` (and `alg`) may be verified with; an unknown `kid` fetches the
   * document again first when the rate limit allows. Empty: none.
   */
  async keysFor(kid: string | undefined, alg: JwtAlgorithm): Promise<CryptoKey[]> {
    await this.#fetching;
    let held = this.#held(kid, alg);
    if (held.length === 0 && this.#now() - this.#lastFetchMs >= this.#minIntervalMs()) {
      await this.#refetch();
      held = this.#held(kid, alg);
    }
    return held;
  }

  #minIntervalMs(): number {
    return this.#issuer.jwks_min_interval_s * 1000;
  }

  #held(kid: string | undefined, alg: JwtAlgorithm): CryptoKey[] {
    const list = kid === undefined ? [...this.#keys.values()].flat() : this.#keys.get(kid) ?? [];
    return list.filter((k) => k.alg === alg).map((k) => k.key);
  }

  /** One fetch at a time; the next is scheduled from its max-age. */
  #refetch(): Promise<void> {
    this.#fetching ??= (async () => {
      this.#lastFetchMs = this.#now();
      let ageS = DEFAULT_AGE_S;
      try {
        const res = await this.#fetch(this.#issuer.jwks_url, {
          signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
          headers: { accept: "application/json" },
        });
        const text = await boundedText(res);
        if (res.status !== 200) throw new Error(`answered ${res.status}`);
        this.#keys = await importKeys(text, this.#issuer.algorithms);
        ageS = maxAge(res.headers.get("cache-control")) ?? DEFAULT_AGE_S;
      } catch (err) {
        // The keys held stay in force; the next unknown kid (or the timer) tries again.
        this.#logger.warn("jwks_fetch_failed", {
          issuer: this.#issuer.name,
          jwks_url: this.#issuer.jwks_url,
          error: errorMessage(err),
        });
        ageS = MIN_AGE_S;
      } finally {
        this.#fetching = undefined;
      }
      this.#schedule(Math.min(MAX_AGE_S, Math.max(MIN_AGE_S, ageS)));
    })();
    return this.#fetching;
  }

  #schedule(seconds: number): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    const timer = setTimeout(() => void this.#refetch(), seconds * 1000);
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  /** Stops the refresh timer. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}

/** The body of a JWKS answer, refused past `MAX_BYTES`. */
async function boundedText(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return "";
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_BYTES) {
      await reader.cancel().catch(() => {});
      throw new Error(`JWKS larger than ${MAX_BYTES} bytes`);
    }
    parts.push(value);
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.byteLength;
  }
  return new TextDecoder().decode(all);
}

/** The `max-age` of a Cache-Control header, seconds. */
function maxAge(header: string | null): number | undefined {
  const m = header === null ? null : /(?:^|,)\s*max-age\s*=\s*(\d+)/i.exec(header);
  return m === null ? undefined : Number(m[1]);
}

/**
 * The document's keys by `kid` ("" for a key without one), each imported for every allowed
 * algorithm its type fits (a key that names its `alg` only for that one). Keys of other types,
 * for encryption, or private ones are skipped.
 */
async function importKeys(
  text: string,
  allowed: readonly JwtAlgorithm[],
): Promise<Map<string, HeldKey[]>> {
  const doc = parseJson(text);
  if (!isJsonObject(doc) || !Array.isArray(doc.keys)) throw new Error("not a JWKS document");
  if (doc.keys.length > MAX_KEYS) throw new Error(`JWKS with more than ${MAX_KEYS} keys`);
  const out = new Map<string, HeldKey[]>();
  for (const jwk of doc.keys) {
    if (!isJsonObject(jwk) || (jwk.use !== undefined && jwk.use !== "sig") || "d" in jwk) {
      continue;
    }
    const kid = typeof jwk.kid === "string" ? jwk.kid : "";
    for (const alg of allowed) {
      const p = PARAMS[alg];
      if (jwk.kty !== p.kty || (p.crv !== undefined && jwk.crv !== p.crv)) continue;
      if (jwk.alg !== undefined && jwk.alg !== alg) continue;
      try {
        const { alg: _alg, key_ops: _ops, ...bare } = jwk as JsonWebKey & Record<string, unknown>;
        const key = await crypto.subtle.importKey("jwk", bare, p.importAs, false, ["verify"]);
        const list = out.get(kid) ?? [];
        list.push({ alg, key });
        out.set(kid, list);
      } catch {
        // A key Web Crypto does not take is not one tokens can be verified with.
      }
    }
  }
  return out;
}
