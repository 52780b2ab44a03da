/**
 * A connect timeout for upstream calls sent through `fetch` (HTTPS nodes, or every node with
 * `SKEID_UPSTREAM_CLIENT=fetch`). `fetch` has no connect timeout of its own and no way to tell
 * when its connection is up, so one timer cannot bound the connect apart from the wait for
 * headers (which may take minutes for a long non-streamed answer). Instead, before a call to an
 * origin not reached lately, a plain TCP connect to it is tried within the bound: a host that
 * drops packets fails in `SKEID_UPSTREAM_CONNECT_TIMEOUT`, not the OS connect timeout. An origin
 * reached is trusted for {@link FRESH_MS}, and again checked after any failed call to it, so the
 * check costs one extra handshake per origin and window, not one per request.
 *
 * Through an HTTP(S) proxy (`HTTPS_PROXY`, ...) the origin is not what `fetch` connects to, so
 * the check is off.
 *
 * @module
 */

/** How long an origin reached is trusted without a new check, ms. */
export const FRESH_MS = 30_000;
/** Origins remembered (node URLs are few; the map is cleared when it grows past this). */
const MAX_ORIGINS = 1024;

/** Options of a ConnectCheck. */
export interface ConnectCheckOptions {
  /** Bound on the connect, ms. */
  timeoutMs: number;
  /** Epoch-ms clock. */
  now?: () => number;
  /** Off: every call passes (a proxy is configured). */
  enabled?: boolean;
}

/** Checks that an upstream origin accepts a TCP connection within the connect timeout. */
export class ConnectCheck {
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #enabled: boolean;
  /** When each origin (`host:port`) was last reached. */
  readonly #reached = new Map<string, number>();
  /** Checks in flight, one per origin, shared by the calls that wait for it. */
  readonly #checking = new Map<string, Promise<void>>();

  /** A check with the given bound. */
  constructor(opts: ConnectCheckOptions) {
    this.#timeoutMs = opts.timeoutMs;
    this.#now = opts.now ?? Date.now;
    this.#enabled = opts.enabled ?? true;
  }

  /**
   * Resolves when `url`'s origin was reached lately or accepts a connection now; rejects when it
   * does not within the timeout (or refuses).
   */
  reach(url: string): Promise<void> {
    if (!this.#enabled) return Promise.resolve();
    const origin = originOf(url);
    if (origin === undefined) return Promise.resolve();
    const key = `${origin.hostname}:${origin.port}`;
    const at = this.#reached.get(key);
    if (at !== undefined && this.#now() - at < FRESH_MS) return Promise.resolve();
    let checking = this.#checking.get(key);
    if (checking === undefined) {
      checking = this.#connect(origin.hostname, origin.port).then(() => {
        if (this.#reached.size >= MAX_ORIGINS) this.#reached.clear();
        this.#reached.set(key, this.#now());
      }).finally(() => this.#checking.delete(key));
      this.#checking.set(key, checking);
    }
    return checking;
  }

  /** A call to `url` failed: its origin is checked again before the next one. */
  forget(url: string): void {
    const origin = originOf(url);
    if (origin !== undefined) this.#reached.delete(`${origin.hostname}:${origin.port}`);
  }

  async #connect(hostname: string, port: number): Promise<void> {
    const connecting = Deno.connect({ hostname, port });
    const ms = this.#timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`connect timed out after ${ms} ms`)), ms);
    });
    try {
      const conn = await Promise.race([connecting, timedOut]);
      conn.close();
    } catch (err) {
      // Deno.connect cannot be cancelled: close what arrives too late.
      connecting.then((late) => late.close(), () => {});
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }
}

function originOf(url: string): { hostname: string; port: number } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const dflt = u.protocol === "https:" ? 443 : u.protocol === "http:" ? 80 : 0;
  if (dflt === 0) return undefined;
  return { hostname: u.hostname.replace(/^\[|\]$/g, ""), port: u.port ? Number(u.port) : dflt };
}

/** Whether `fetch` goes through a proxy (the origin is then not what it connects to). */
export function proxyConfigured(env: (name: string) => string | undefined): boolean {
  for (const name of ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"]) {
    if ((env(name) ?? env(name.toLowerCase()) ?? "").trim() !== "") return true;
  }
  return false;
}

/**
 * `inner` behind a connect check: the call waits for `check.reach` first, and a failed call
 * makes the next one to its origin check again.
 */
export function connectCheckedFetch(
  check: ConnectCheck,
  inner: typeof fetch = fetch,
): typeof fetch {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    await check.reach(url);
    try {
      return await inner(input, init);
    } catch (err) {
      check.forget(url);
      throw err;
    }
  };
}
