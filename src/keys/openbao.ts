/**
 * The OpenBao (Vault-compatible) client behind the key broker: AppRole login at start, token
 * renewal (`renew-self`, one in flight, on a timer and on demand), KV v2 reads and LIST. Tokens
 * and keys live in this object only; errors and log lines carry a reference, a path or an HTTP
 * status, never a token, a key or a response body.
 *
 * @module
 */
import type { Logger } from "../log.ts";
import type { KeyAnswer, KeyResolver } from "./broker.ts";
import { isJsonObject, parseJson } from "../core/json.ts";

/** Token renewal period when none is given: 300 s. */
export const DEFAULT_RENEW_SECS = 300;
/** Renewal period used when the one given is missing or below 1 s. */
export const FALLBACK_RENEW_SECS = 60;
/** Bound on one OpenBao HTTP exchange, headers and body: 10 s. */
export const DEFAULT_OPENBAO_TIMEOUT_MS = 10_000;
/** A token this close to its expiry is renewed before use: 60 s. */
export const REFRESH_MARGIN_MS = 60_000;
/** Token lifetime assumed when OpenBao reports none: 3600 s. */
export const DEFAULT_TOKEN_TTL_SECS = 3600;

/** Starts a recurring timer and returns what stops it. */
export type Schedule = (tick: () => void, everyMs: number) => () => void;

/** The renewal timer Deno gives: unref'd, so a CLI that used the client can still exit. */
export function intervalSchedule(tick: () => void, everyMs: number): () => void {
  const id = setInterval(tick, everyMs);
  Deno.unrefTimer(id);
  return () => clearInterval(id);
}

/** How to reach OpenBao and with which AppRole credentials. */
export interface OpenBaoTarget {
  /** Base URL, e.g. `http://127.0.0.1:8200` (a trailing `/` is dropped). */
  addr: string;
  /** AppRole role_id. */
  roleId: string;
  /** AppRole secret_id; dropped from memory once the login succeeded. */
  secretId: string;
}

/** Tuning and hooks; times in milliseconds except `renewSecs`. */
export interface OpenBaoOptions {
  /** Epoch milliseconds (default `Date.now`); drives token expiry. */
  now?: () => number;
  /** Where renewal warnings and the fatal expiry go. */
  logger?: Logger;
  /** Renewal timer period in seconds (default 300; missing or < 1 → 60). */
  renewSecs?: number;
  /**
   * Called once when a timer renewal fails after the token expired: this process can no longer
   * resolve keys and must stop (the orchestrator restarts it and it logs in again).
   */
  onFatal?: (error: Error) => void;
  /** PEM CA certificates to trust besides the system ones (a dev vault's own CA). */
  caCerts?: string[];
  /** Bound on one OpenBao exchange (default 10 000). */
  timeoutMs?: number;
  /** The renewal timer (default {@link intervalSchedule}); tests inject a manual one. */
  schedule?: Schedule;
}

/** A token from OpenBao, or why there is none. */
export type TokenAnswer = { token: string } | { error: string };

type Exchange = { status: number; json: unknown } | { failure: string };

/**
 * The KV v2 API path of a reference: leading `/` dropped, the mount `secret` gets `data/` after
 * it (`secret/skeid/remote/groq` → `secret/data/skeid/remote/groq`); other mounts are used as
 * given. Only a first segment exactly `secret` is rewritten (`secrets/x` is left alone).
 */
export function kvPath(ref: string): string {
  let path = ref.replace(/^\/+/, "");
  if (path === "secret") path = "secret/data/";
  else if (path.startsWith("secret/")) path = "secret/data/" + path.slice("secret/".length);
  return path;
}

/**
 * The URL path below `/v1/` for an API path, each segment percent-encoded; undefined when a
 * segment is empty, `.` or `..` (a reference must name one secret, not walk the tree).
 */
export function encodedApiPath(path: string, allowTrailingSlash = false): string | undefined {
  let p = path.replace(/^\/+/, "");
  if (allowTrailingSlash) p = p.replace(/\/+$/, "");
  if (p === "") return undefined;
  const segments = p.split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) return undefined;
  return segments.map(encodeURIComponent).join("/");
}

/** The `api_key` of a KV read: `data.data.api_key` (KV v2), else `data.api_key` (KV v1). */
export function keyFromPayload(payload: unknown): string | undefined {
  if (!isJsonObject(payload) || !isJsonObject(payload.data)) return undefined;
  const data = payload.data;
  const v2 = isJsonObject(data.data) ? data.data.api_key : undefined;
  if (typeof v2 === "string" && v2.length > 0) return v2;
  return typeof data.api_key === "string" && data.api_key.length > 0 ? data.api_key : undefined;
}

/** `auth.client_token` and `auth.ttl` (seconds, default 3600 when missing or ≤ 0). */
function authOf(payload: unknown): { token: string; ttlSecs: number } {
  const auth = isJsonObject(payload) && isJsonObject(payload.auth) ? payload.auth : {};
  const token = typeof auth.client_token === "string" ? auth.client_token : "";
  const ttl = typeof auth.ttl === "string" ? Number(auth.ttl) : auth.ttl;
  const ttlSecs = typeof ttl === "number" && Number.isFinite(ttl) && ttl > 0
    ? ttl
    : DEFAULT_TOKEN_TTL_SECS;
  return { token, ttlSecs };
}

/** What went wrong with a fetch, in words that hold no URL, header or body. */
function describeFailure(err: unknown): string {
  // Deno's fetch says "fetch failed" and puts the reason in `cause`; only a class of it is kept.
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e !== undefined && i < 4; i++) {
    parts.push(e instanceof Error ? `${e.name} ${e.message}` : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  // The URL may hold words like "ssl" in a host name; the reason is what is classified.
  const text = parts.join(" ").replace(/\(https?:\/\/[^)]*\)/gi, "");
  if (/certificate|tls|ssl/i.test(text)) {
    return "no response (TLS handshake failed; is the certificate trusted? see OPENBAO_CACERT)";
  }
  if (/refused/i.test(text)) return "no response (connection refused)";
  if (/dns|lookup|resolve|not known/i.test(text)) return "no response (host not resolved)";
  return "no response (connection failed)";
}

const ok = (status: number) => status >= 200 && status < 300;

/**
 * An OpenBao session: log in with {@link login}, then {@link resolveKeyAsync} per reference
 * (renewing first when the token is due) and {@link startRenewal} for the timer. A
 * {@link KeyResolver}: wrap it in a `CachingKeyBroker` for the request path.
 */
export class OpenBao implements KeyResolver {
  readonly #addr: string;
  readonly #roleId: string;
  #secretId: string | undefined;
  readonly #now: () => number;
  readonly #logger: Logger | undefined;
  readonly #renewMs: number;
  readonly #onFatal: ((error: Error) => void) | undefined;
  readonly #timeoutMs: number;
  readonly #schedule: Schedule;
  readonly #client: Deno.HttpClient | undefined;
  readonly #inFlight = new Set<AbortController>();
  /** Token for API calls; empty until the first renewal. */
  #apiToken: string | undefined;
  /** Token renew-self is called with: the login token, then each renewed one. */
  #renewToken: string | undefined;
  #expiresAt = 0;
  #renewing: Promise<TokenAnswer> | undefined;
  #stopTimer: (() => void) | undefined;
  #fatal = false;
  #closed = false;

  /** A session not yet logged in; nothing is sent until {@link login}. */
  constructor(target: OpenBaoTarget, opts: OpenBaoOptions = {}) {
    let addr = target.addr.trim();
    while (addr.endsWith("/")) addr = addr.slice(0, -1);
    this.#addr = addr;
    this.#roleId = target.roleId;
    this.#secretId = target.secretId;
    this.#now = opts.now ?? Date.now;
    this.#logger = opts.logger;
    const renewSecs = opts.renewSecs ?? DEFAULT_RENEW_SECS;
    this.#renewMs =
      (Number.isFinite(renewSecs) && renewSecs >= 1 ? renewSecs : FALLBACK_RENEW_SECS) *
      1000;
    this.#onFatal = opts.onFatal;
    this.#timeoutMs = Math.max(1, opts.timeoutMs ?? DEFAULT_OPENBAO_TIMEOUT_MS);
    this.#schedule = opts.schedule ?? intervalSchedule;
    this.#client = opts.caCerts?.length
      ? Deno.createHttpClient({ caCerts: opts.caCerts })
      : undefined;
  }

  /** The renewal timer period in milliseconds. */
  get renewEveryMs(): number {
    return this.#renewMs;
  }

  /** Epoch milliseconds at which the current token expires (0 before the login). */
  get tokenExpiresAt(): number {
    return this.#expiresAt;
  }

  /**
   * AppRole login (`POST /v1/auth/approle/login`). The token it gives is the renew token; the
   * first use renews it into the API token. Throws an error naming the HTTP status on failure.
   */
  async login(): Promise<void> {
    if (this.#secretId === undefined) throw new Error("OpenBao AppRole login already used");
    const r = await this.#exchange("POST", "auth/approle/login", undefined, {
      role_id: this.#roleId,
      secret_id: this.#secretId,
    });
    if ("failure" in r) throw new Error(`OpenBao AppRole login failed: ${r.failure}`);
    if (!ok(r.status)) throw new Error(`OpenBao AppRole login failed: HTTP ${r.status}`);
    const { token, ttlSecs } = authOf(r.json);
    if (token === "") throw new Error("OpenBao AppRole login returned no token");
    // The secret id is single-use in the reference stack and not needed again, so it is not
    // kept: a lost token means a restart, never a silent re-login.
    this.#secretId = undefined;
    this.#renewToken = token;
    this.#apiToken = undefined;
    this.#expiresAt = this.#now() + ttlSecs * 1000;
  }

  /** True when there is no API token yet or it expires within the next 60 s. */
  needsRefresh(): boolean {
    return this.#apiToken === undefined || this.#now() >= this.#expiresAt - REFRESH_MARGIN_MS;
  }

  /**
   * Renews the token (`POST /v1/auth/token/renew-self`); the new token becomes both the API and
   * the renew token. One renewal at a time: concurrent callers share it, since OpenBao would
   * answer N calls with N tokens, N−1 of them stale at once.
   */
  renew(): Promise<TokenAnswer> {
    if (this.#renewing !== undefined) return this.#renewing;
    const renewing = (async () => {
      try {
        return await this.#renewOnce();
      } finally {
        this.#renewing = undefined;
      }
    })();
    this.#renewing = renewing;
    return renewing;
  }

  async #renewOnce(): Promise<TokenAnswer> {
    const current = this.#apiToken ?? this.#renewToken;
    if (current === undefined) return { error: "No renew token available" };
    const r = await this.#exchange("POST", "auth/token/renew-self", current, {});
    if ("failure" in r) return { error: `OpenBao token renewal failed: ${r.failure}` };
    if (!ok(r.status)) return { error: `OpenBao token renewal failed: HTTP ${r.status}` };
    const { token, ttlSecs } = authOf(r.json);
    if (token === "") return { error: "renew-self returned no client_token" };
    if (this.#closed) return { error: "key broker closed" };
    this.#apiToken = token;
    this.#renewToken = token;
    this.#expiresAt = this.#now() + ttlSecs * 1000;
    return { token };
  }

  /**
   * Reads the `api_key` of the secret `ref` names (KV v2, KV v1 shape accepted), renewing the
   * token first when it is due. Never throws; a failure names the reference and the status.
   */
  async resolveKeyAsync(ref: string): Promise<KeyAnswer> {
    if (ref.length === 0) return { error: "no key reference" };
    if (this.#closed) return { error: "key broker closed" };
    const path = encodedApiPath(kvPath(ref));
    if (path === undefined) return { error: `invalid key reference '${ref}'` };
    if (this.needsRefresh()) {
      const renewed = await this.renew();
      if ("error" in renewed) return renewed;
    }
    const token = this.#apiToken;
    if (token === undefined) return { error: "No OpenBao token" };
    const r = await this.#exchange("GET", path, token);
    if (this.#closed) return { error: "key broker closed" };
    if ("failure" in r) return { error: `OpenBao read failed for '${ref}': ${r.failure}` };
    if (!ok(r.status)) return { error: `OpenBao read failed for '${ref}': HTTP ${r.status}` };
    const key = keyFromPayload(r.json);
    return key === undefined ? { error: `OpenBao returned no api_key for '${ref}'` } : { key };
  }

  /**
   * The names under an API path via `LIST` (`secret/metadata/skeid/remote` for KV v2: no
   * `secret/` rewriting here). Empty on any failure, which is warned with the path and status.
   * For setup scripts and the CLI, not the request path.
   */
  async listSecrets(path: string): Promise<string[]> {
    const apiPath = encodedApiPath(path, true);
    if (apiPath === undefined || this.#closed) return [];
    if (this.needsRefresh()) {
      const renewed = await this.renew();
      if ("error" in renewed) {
        this.#logger?.warn("openbao_list_failed", { path, message: renewed.error });
        return [];
      }
    }
    const token = this.#apiToken;
    if (token === undefined) return [];
    const r = await this.#exchange("LIST", apiPath + "/", token);
    if ("failure" in r || !ok(r.status)) {
      const why = "failure" in r ? r.failure : `HTTP ${r.status}`;
      this.#logger?.warn("openbao_list_failed", {
        path,
        message: `OpenBao list failed for '${path}': ${why}`,
      });
      return [];
    }
    const data = isJsonObject(r.json) && isJsonObject(r.json.data) ? r.json.data : {};
    return Array.isArray(data.keys)
      ? data.keys.filter((k): k is string => typeof k === "string")
      : [];
  }

  /**
   * Starts renewing every `renewSecs` (not scaled by workers or frontends: each process holds
   * its own token). Safe to call twice.
   */
  startRenewal(): void {
    if (this.#stopTimer !== undefined || this.#closed || this.#fatal) return;
    this.#stopTimer = this.#schedule(() => void this.renewTick(), this.#renewMs);
  }

  /**
   * One timer renewal. Failing while the token is still valid warns and waits for the next tick
   * (a blip is not worth dropping traffic for); failing after expiry stops the timer and calls
   * `onFatal` once.
   */
  async renewTick(): Promise<void> {
    if (this.#closed || this.#fatal) return;
    const r = await this.renew();
    if (!("error" in r) || this.#closed || this.#fatal) return;
    if (this.#now() >= this.#expiresAt) {
      this.#fatal = true;
      this.#stopTimer?.();
      this.#stopTimer = undefined;
      const message = `OpenBao token renewal failed and the token has expired: ${r.error}`;
      this.#logger?.error("openbao_token_expired", { message });
      this.#onFatal?.(new Error(message));
      return;
    }
    this.#logger?.warn("openbao_renewal_failed", {
      message: `OpenBao token renewal failed (token still valid): ${r.error}`,
    });
  }

  /** Stops the timer and every call in flight and drops the tokens. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopTimer?.();
    this.#stopTimer = undefined;
    for (const controller of this.#inFlight) controller.abort();
    this.#inFlight.clear();
    this.#apiToken = undefined;
    this.#renewToken = undefined;
    this.#secretId = undefined;
    this.#expiresAt = 0;
    try {
      this.#client?.close();
    } catch {
      // already closed
    }
  }

  /** One JSON exchange with OpenBao, headers and body within the timeout; never throws. */
  async #exchange(method: string, path: string, token?: string, body?: unknown): Promise<Exchange> {
    if (this.#closed) return { failure: "key broker closed" };
    const controller = new AbortController();
    this.#inFlight.add(controller);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.#timeoutMs);
    try {
      const headers: Record<string, string> = { accept: "application/json" };
      if (token !== undefined) headers["x-vault-token"] = token;
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(`${this.#addr}/v1/${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
        ...(this.#client ? { client: this.#client } : {}),
      });
      // Read the body either way (it frees the connection); only a 2xx one is looked at.
      const text = await res.text();
      let json: unknown = undefined;
      if (ok(res.status)) {
        json = parseJson(text);
      }
      return { status: res.status, json };
    } catch (err) {
      if (this.#closed) return { failure: "key broker closed" };
      if (timedOut) return { failure: `no response (timed out after ${this.#timeoutMs} ms)` };
      return { failure: describeFailure(err) };
    } finally {
      clearTimeout(timer);
      this.#inFlight.delete(controller);
    }
  }
}
