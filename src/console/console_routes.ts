/**
 * `GET /skeid/ui` and `/skeid/ui/*`: the operator's console, a single page built only on the
 * admin API (ADR 0037). Its files are public (they hold no data); every datum the page shows comes
 * from an admin route behind the admin key or a session. With the admin API off the page says
 * which variable turns it on instead.
 *
 * Every answer carries a strict Content-Security-Policy: scripts and styles from this origin only,
 * no inline script, no frames, no other origin reachable from the page.
 *
 * @module
 */
import { Hono } from "hono";
import { CONSOLE_ASSET_NAMES, CONSOLE_ASSETS, CONSOLE_PAGE, type ConsoleAsset } from "./assets.ts";
import { consoleOffPage } from "./console_off_page.ts";
import { CONSOLE_PAGE_NAMES, firstCalls, preloadLinks } from "./first_calls.ts";

/** The console's Content-Security-Policy (also what the browser tests expect). */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join("; ");

/** Headers of every console answer; `immutable` for a file served under its digest name. */
export function consoleHeaders(type: string, immutable = false): Record<string, string> {
  return {
    "content-type": type,
    "content-security-policy": CONSOLE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    // A digest name's content never changes; the page and plain names change with the program:
    // revalidate those rather than keep a stale page after an upgrade.
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  };
}

/** The stylesheet's digest name: served with the admin API off too (the off page uses it). */
const STYLE_DIGEST_NAME = CONSOLE_ASSET_NAMES.get("style.css");

/** What the console needs from the gateway. */
export interface ConsoleDeps {
  /** The admin key in force; `''` = the admin API is off. */
  adminKey(): string;
  /** Why the admin API is off though the config names a key variable, else null. */
  adminKeyProblem?(): string | null;
  /** The clock the Usage page's first range is taken from (tests set it). */
  now?(): number;
}

/** Where the page's HTML names the calls of its first screen. */
const FIRST_CALLS_MARK = "<!--skeid:first-calls-->";

/**
 * The page for `/skeid/ui/<page>?<query>`: the one HTML, naming the first calls of that page
 * (ADR 0048). It changes with the query and the hour, so it is never cached (`no-cache`, as
 * before).
 */
function pageFor(page: string, query: URLSearchParams, now: number): ConsoleAsset {
  return {
    ...CONSOLE_PAGE,
    // A function, not a string: `$&` and the like in a replacement string are patterns.
    body: CONSOLE_PAGE.body.replace(
      FIRST_CALLS_MARK,
      () => preloadLinks(firstCalls(page, query, now)),
    ),
  };
}

function answer(asset: ConsoleAsset, method: string, status = 200): Response {
  return new Response(method === "HEAD" ? null : asset.body, {
    status,
    headers: consoleHeaders(asset.type, asset.immutable),
  });
}

/** The console's routes, as a Hono app mounted before the admin routes. */
export function consoleRoutes(deps: ConsoleDeps): Hono {
  const app = new Hono();
  const serve = (name: string | undefined, method: string, url: string): Response => {
    // The stylesheet is served either way: the off page uses it too.
    if (deps.adminKey() === "" && name !== "style.css" && name !== STYLE_DIGEST_NAME) {
      const page = consoleOffPage(deps.adminKeyProblem?.() ?? null);
      return answer({ type: "text/html; charset=utf-8", body: page }, method, 503);
    }
    if (name === undefined || name === "" || CONSOLE_PAGE_NAMES.includes(name)) {
      const query = new URL(url).searchParams;
      return answer(pageFor(name || "live", query, deps.now?.() ?? Date.now()), method);
    }
    const asset = CONSOLE_ASSETS.get(name);
    if (asset) return answer(asset, method);
    return answer({ type: "text/plain; charset=utf-8", body: "Not Found" }, method, 404);
  };
  app.on(["GET", "HEAD"], "/skeid/ui", (c) => serve(undefined, c.req.method, c.req.url));
  app.on(["GET", "HEAD"], "/skeid/ui/", (c) => serve(undefined, c.req.method, c.req.url));
  app.on(
    ["GET", "HEAD"],
    "/skeid/ui/:name",
    (c) => serve(c.req.param("name"), c.req.method, c.req.url),
  );
  return app;
}
