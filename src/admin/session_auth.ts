/**
 * How the admin plane tells who is asking (ADR 0035): the admin key as a bearer token, or a
 * console session's cookie — with the session's CSRF token on every write it authenticates. Also
 * what a sign-in needs to know of the connection: the client address its failures are counted
 * under and whether the cookie may be marked `Secure`; both trust `X-Forwarded-*` only from a
 * hop listed in `admin.trusted_proxies`.
 *
 * @module
 */
import { timingSafeEqual } from "./auth.ts";

/** The session cookie's name. Its `Path=/skeid` keeps it off every data-plane request. */
export const SESSION_COOKIE = "skeid_session";

/** Default session lifetime, s (`admin.session_ttl_s`): a working day. */
export const DEFAULT_SESSION_TTL_S = 12 * 3600;

/** The answer of a cookie-authenticated write without the session's CSRF token. */
export const CSRF_ERROR = "csrf token missing or wrong";

/** What the connection of a request says about its origin (the server's handler info). */
export interface ConnectionInfo {
  /** The peer's address; undefined when not known (a request made in process). */
  remote?: string;
}

/** The value of cookie `name` in a `Cookie` header, or undefined. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The peer address of Deno's handler info (`c.env` of the app), if it has one. */
export function remoteOf(info: unknown): string | undefined {
  if (typeof info !== "object" || info === null) return undefined;
  const addr = (info as { remoteAddr?: { hostname?: unknown } }).remoteAddr;
  return typeof addr?.hostname === "string" ? addr.hostname : undefined;
}

/**
 * The client address sign-in failures are counted under: the peer, or — when the peer is a
 * trusted hop — the last address its `X-Forwarded-For` names (the one that hop saw).
 */
export function clientAddress(
  headers: Headers,
  conn: ConnectionInfo,
  trusted: ReadonlySet<string>,
): string {
  const peer = conn.remote ?? "unknown";
  if (!trusted.has(peer)) return peer;
  const forwarded = headers.get("x-forwarded-for");
  if (!forwarded) return peer;
  const hops = forwarded.split(",").map((s) => s.trim()).filter((s) => s !== "");
  return hops.at(-1) ?? peer;
}

/** Whether the request came over TLS, itself or (said by a trusted hop) before that hop. */
export function cameOverTls(
  url: string,
  headers: Headers,
  conn: ConnectionInfo,
  trusted: ReadonlySet<string>,
): boolean {
  if (url.startsWith("https:")) return true;
  if (conn.remote === undefined || !trusted.has(conn.remote)) return false;
  const proto = headers.get("x-forwarded-proto")?.split(",")[0].trim().toLowerCase();
  return proto === "https";
}

/** The Set-Cookie of a new session. */
export function sessionCookie(token: string, ttlS: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/skeid; Max-Age=${ttlS}` +
    (secure ? "; Secure" : "");
}

/** The Set-Cookie that clears the session cookie. */
export function clearedCookie(secure: boolean): string {
  return sessionCookie("", 0, secure);
}

const encoder = new TextEncoder();

/** Whether the presented CSRF token is the session's (constant time over the bytes). */
export function csrfMatches(presented: string | null | undefined, expected: string): boolean {
  if (!presented) return false;
  return timingSafeEqual(encoder.encode(presented), encoder.encode(expected));
}

/** Whether a method changes something (a cookie-authenticated one needs the CSRF token). */
export function isWrite(method: string): boolean {
  return method !== "GET" && method !== "HEAD";
}
