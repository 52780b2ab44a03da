/**
 * `/skeid/session` (ADR 0035): sign in with the admin key once, get an opaque session cookie and
 * its CSRF token; read the session back; sign out, which ends it on the server. The admin
 * middleware lets this path through to here, where each method does its own check.
 *
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { secretMatches } from "./auth.ts";
import { type SessionStore, sha256Hex } from "./sessions.ts";
import {
  cameOverTls,
  clearedCookie,
  clientAddress,
  type ConnectionInfo,
  cookieValue,
  CSRF_ERROR,
  csrfMatches,
  remoteOf,
  SESSION_COOKIE,
  sessionCookie,
} from "./session_auth.ts";
import { isJsonObject, jsonValue } from "../core/json.ts";
import { errorMessage } from "../error_message.ts";
import type { Logger } from "../log.ts";

/** The path of the session routes. */
export const SESSION_PATH = "/skeid/session";

/** What the session routes read. */
export interface SessionDeps {
  sessions: SessionStore;
  /** The admin key in force (`''`: off; the middleware has answered 404 before). */
  adminKey(): string;
  /** Lifetime of a new session, s. */
  sessionTtlS(): number;
  /** Peers whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed. */
  trustedProxies(): ReadonlySet<string>;
  logger: Logger;
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/** A session as the routes answer it: the CSRF token and the expiry, never the cookie value. */
function sessionBody(s: { csrf_token: string; expires_at: number }): unknown {
  return { csrf_token: s.csrf_token, expires_at: new Date(s.expires_at).toISOString() };
}

/** The session routes. */
export function sessionRoutes(deps: SessionDeps): Hono {
  const app = new Hono();
  const conn = (c: Context): ConnectionInfo => ({ remote: remoteOf(c.env) });
  const secure = (c: Context) =>
    cameOverTls(c.req.url, c.req.raw.headers, conn(c), deps.trustedProxies());

  app.post(SESSION_PATH, async (c) => {
    const addr = clientAddress(c.req.raw.headers, conn(c), deps.trustedProxies());
    const wait = await deps.sessions.signInWait(addr);
    if (wait > 0) return tooMany(wait);
    let body: unknown;
    try {
      body = jsonValue(await c.req.text());
    } catch (err) {
      return json({ ok: false, error: `body is not valid JSON: ${errorMessage(err)}` }, 400);
    }
    const presented = isJsonObject(body) ? body.admin_key : undefined;
    if (typeof presented !== "string" || presented === "") {
      return json({ ok: false, error: "admin_key: required (a string)" }, 400);
    }
    const key = deps.adminKey();
    if (!(await secretMatches(presented, key))) {
      const next = await deps.sessions.signInFailed(addr);
      deps.logger.warn("admin_sign_in_failed", { client: addr, blocked_ms: next });
      return json({ ok: false, error: "wrong admin key" }, 401);
    }
    const ttlS = deps.sessionTtlS();
    const session = await deps.sessions.create(await sha256Hex(key), ttlS * 1000);
    deps.logger.info("admin_session_started", { client: addr });
    return json(sessionBody(session), 200, {
      "set-cookie": sessionCookie(session.token, ttlS, secure(c)),
      "cache-control": "no-store",
    });
  });

  app.get(SESSION_PATH, async (c) => {
    const session = await current(c);
    if (!session) return json({ ok: false, error: "no session" }, 401);
    return json(sessionBody(session), 200, { "cache-control": "no-store" });
  });

  app.delete(SESSION_PATH, async (c) => {
    const token = cookieValue(c.req.header("cookie"), SESSION_COOKIE);
    const session = await current(c);
    if (!session) return json({ ok: false, error: "no session" }, 401);
    if (!csrfMatches(c.req.header("x-csrf-token"), session.csrf_token)) {
      return json({ ok: false, error: CSRF_ERROR }, 403);
    }
    if (token) await deps.sessions.end(token);
    deps.logger.info("admin_session_ended", {});
    return new Response(null, {
      status: 204,
      headers: { "set-cookie": clearedCookie(secure(c)) },
    });
  });

  async function current(c: Context) {
    const token = cookieValue(c.req.header("cookie"), SESSION_COOKIE);
    if (!token) return undefined;
    const key = deps.adminKey();
    return await deps.sessions.find(token, await sha256Hex(key));
  }

  return app;
}

function tooMany(waitMs: number): Response {
  const s = Math.max(1, Math.ceil(waitMs / 1000));
  return json(
    { ok: false, error: `too many failed sign-ins from this address; try again in ${s} s` },
    429,
    { "retry-after": String(s) },
  );
}
