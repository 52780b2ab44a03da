/**
 * Console sessions (ADR 0035): the admin key exchanged once for an opaque server-side session.
 * The cookie holds 256 random bits; the store keeps only their SHA-256 (a session is looked up by
 * hash, so no comparison of the secret itself leaks timing), the session's CSRF token, its expiry
 * and the SHA-256 of the admin key it was made with: a session made with another admin key than
 * the one in force now is no session. The admin key itself is never kept.
 *
 * The store is bounded (at most {@link MAX_SESSIONS}; the oldest goes first) and swept of expired
 * sessions as it is used. Failed sign-ins are counted per client address in a rolling minute.
 * With `--workers N` the supervisor holds the one store and the workers ask it
 * (`GatewayGroup.sessions`).
 *
 * @module
 */

/** Sessions held at once; a new one past this ends the oldest. */
export const MAX_SESSIONS = 10_000;
/** Failed sign-ins a client address may make in {@link SIGN_IN_WINDOW_MS}. */
export const SIGN_IN_FAILURES = 5;
/** The rolling window failed sign-ins are counted in, ms. */
export const SIGN_IN_WINDOW_MS = 60_000;
/** Client addresses whose failures are tracked at once (the oldest forgotten first). */
const MAX_TRACKED_ADDRESSES = 10_000;

/** A session as the admin plane sees it (never its cookie value). */
export interface ConsoleSession {
  /** The token every cookie-authenticated write must carry in `x-csrf-token`. */
  csrf_token: string;
  /** Epoch ms it ends. */
  expires_at: number;
}

/** A session just made: its cookie value (shown once, in Set-Cookie) and its view. */
export interface NewSession extends ConsoleSession {
  /** The cookie value: opaque random bytes, base64url. */
  token: string;
}

/**
 * Where sessions and failed sign-ins are kept: this process's {@link LocalSessionStore}, or the
 * supervisor's for a worker of a group. Every method is async so both kinds fit.
 */
export interface SessionStore {
  /** Makes a session for the admin key whose SHA-256 is `keyHash`, ending in `ttlMs`. */
  create(keyHash: string, ttlMs: number): Promise<NewSession>;
  /** The session of a cookie value, when it exists, is unexpired and was made with `keyHash`. */
  find(token: string, keyHash: string): Promise<ConsoleSession | undefined>;
  /** Ends the session of a cookie value (nothing when there is none). */
  end(token: string): Promise<void>;
  /** Ms until `addr` may try to sign in again; 0 when it may now. */
  signInWait(addr: string): Promise<number>;
  /** Counts a failed sign-in of `addr`; answers {@link signInWait} after it. */
  signInFailed(addr: string): Promise<number>;
}

const encoder = new TextEncoder();

/** Lowercase hex of SHA-256 over a string. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
  let out = "";
  for (const b of digest) out += b.toString(16).padStart(2, "0");
  return out;
}

/** `n` random bytes as base64url without padding. */
function randomToken(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

interface Held extends ConsoleSession {
  keyHash: string;
}

/** The sessions of one process (or of the supervisor, for its group). */
export class LocalSessionStore implements SessionStore {
  /** By SHA-256 of the cookie value, in creation order (a Map keeps it: the oldest first). */
  readonly #sessions = new Map<string, Held>();
  /** Failed sign-in times per client address, oldest first. */
  readonly #failures = new Map<string, number[]>();
  readonly #now: () => number;
  readonly #cap: number;

  constructor(now: () => number = Date.now, cap = MAX_SESSIONS) {
    this.#now = now;
    this.#cap = cap;
  }

  /** Sessions held now (expired ones not yet swept included). */
  get size(): number {
    return this.#sessions.size;
  }

  async create(keyHash: string, ttlMs: number): Promise<NewSession> {
    const now = this.#now();
    this.#sweep(now);
    while (this.#sessions.size >= this.#cap) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    // 32 bytes: 256 bits for the cookie, 128 bits for the CSRF token.
    const token = randomToken(32);
    const held: Held = { csrf_token: randomToken(16), expires_at: now + ttlMs, keyHash };
    this.#sessions.set(await sha256Hex(token), held);
    return { token, csrf_token: held.csrf_token, expires_at: held.expires_at };
  }

  async find(token: string, keyHash: string): Promise<ConsoleSession | undefined> {
    const id = await sha256Hex(token);
    const held = this.#sessions.get(id);
    if (!held) return undefined;
    if (held.expires_at <= this.#now() || held.keyHash !== keyHash) {
      // Expired, or made with an admin key no longer in force: gone for good.
      this.#sessions.delete(id);
      return undefined;
    }
    return { csrf_token: held.csrf_token, expires_at: held.expires_at };
  }

  async end(token: string): Promise<void> {
    this.#sessions.delete(await sha256Hex(token));
  }

  signInWait(addr: string): Promise<number> {
    return Promise.resolve(this.#wait(addr, this.#now()));
  }

  signInFailed(addr: string): Promise<number> {
    const now = this.#now();
    const times = this.#recent(addr, now);
    times.push(now);
    this.#failures.delete(addr);
    this.#failures.set(addr, times);
    while (this.#failures.size > MAX_TRACKED_ADDRESSES) {
      const oldest = this.#failures.keys().next().value;
      if (oldest === undefined) break;
      this.#failures.delete(oldest);
    }
    return Promise.resolve(this.#wait(addr, now));
  }

  #recent(addr: string, now: number): number[] {
    return (this.#failures.get(addr) ?? []).filter((t) => t > now - SIGN_IN_WINDOW_MS);
  }

  #wait(addr: string, now: number): number {
    const times = this.#recent(addr, now);
    if (times.length < SIGN_IN_FAILURES) return 0;
    // Allowed again once the failure that made the count reach the limit leaves the window.
    return times[times.length - SIGN_IN_FAILURES] + SIGN_IN_WINDOW_MS - now;
  }

  /** Drops expired sessions: in creation order, they expire roughly in that order too. */
  #sweep(now: number): void {
    for (const [id, held] of this.#sessions) {
      if (held.expires_at <= now) this.#sessions.delete(id);
    }
  }
}
