/**
 * `GET /skeid/ui` and `/skeid/ui/*`: the operator's console, a single page built only on the
 * admin API (ADR 0037). Its files are public (they hold no data); every datum the page shows comes
 * from an admin route behind the admin key or a session. With the admin API off the page says
 * which variable turns it on instead.
 *
 * Every answer carries a strict Content-Security-Policy: scripts and styles from this origin or
 * the page's own inline script and stylesheet (admitted by their hashes, never `unsafe-inline`),
 * no frames, no other origin reachable from the page.
 *
 * @module
 */
import { Hono } from "hono";
import {
  CONSOLE_ASSETS,
  CONSOLE_INLINE_SOURCES,
  CONSOLE_PAGE,
  type ConsoleAsset,
} from "./assets.ts";
import { consoleOffPage } from "./console_off_page.ts";
import {
  CONSOLE_PAGE_NAMES,
  type FirstAnswer,
  firstAnswersBlock,
  firstCalls,
} from "./first_calls.ts";

/** The console's Content-Security-Policy (also what the browser tests expect). */
export const CONSOLE_CSP = [
  "default-src 'self'",
  `script-src 'self' ${CONSOLE_INLINE_SOURCES.script}`,
  `style-src 'self' ${CONSOLE_INLINE_SOURCES.style}`,
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join("; ");

/**
 * Headers of every console answer. A page can carry admin answers (its first calls'): it is never
 * stored; the files change with the program, so they are revalidated.
 */
export function consoleHeaders(type: string, page = false): Record<string, string> {
  return {
    "content-type": type,
    "content-security-policy": CONSOLE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": page ? "private, no-store" : "no-cache",
  };
}

/** What the console needs from the gateway. */
export interface ConsoleDeps {
  /** The admin key in force; `''` = the admin API is off. */
  adminKey(): string;
  /** Why the admin API is off though the config names a key variable, else null. */
  adminKeyProblem?(): string | null;
  /** The clock the Usage page's first range is taken from (tests set it). */
  now?(): number;
  /**
   * The gateway's answer to `GET path` with the `page` request's cookie (its session), on the
   * page's connection (`info`, the server's handler info as Hono holds it), as the page's script
   * would have had it; without this the page carries no first answers.
   */
  firstAnswer?(
    path: string,
    page: Request,
    info: unknown,
  ): Promise<FirstAnswer>;
}

/** Where the page's HTML names the calls of its first screen. */
const FIRST_ANSWERS_MARK = "<!--skeid:first-answers-->";

/**
 * The page for `/skeid/ui/<page>?<query>`: the one HTML, carrying the answers to that page's first
 * calls (ADR 0051). The session check goes first; without a session the page carries only its
 * 401, and shows the sign-in form at once. A call that fails or takes longer than
 * `FIRST_ANSWER_BUDGET_MS` (a slow or locked usage store) is left out, and the one after it too:
 * the page's script then asks for it itself, behind its own "Loading…", as before.
 */
async function pageFor(
  page: string,
  req: Request,
  info: unknown,
  deps: ConsoleDeps,
): Promise<ConsoleAsset> {
  const answers = new Map<string, FirstAnswer>();
  if (deps.firstAnswer && req.method === "GET") {
    const query = new URL(req.url).searchParams;
    for (const path of firstCalls(page, query, deps.now?.() ?? Date.now())) {
      const answer = await withinBudget(deps.firstAnswer(path, req, info));
      if (answer === undefined) break;
      answers.set(path, answer);
      if (answer.status === 401) break;
    }
  }
  return {
    ...CONSOLE_PAGE,
    // A function, not a string: `$&` and the like in a replacement string are patterns.
    body: CONSOLE_PAGE.body.replace(FIRST_ANSWERS_MARK, () => firstAnswersBlock(answers)),
  };
}

/** How long a page waits for one first call's answer before going without it, ms. */
export const FIRST_ANSWER_BUDGET_MS = 150;

/** The answer, or undefined when it failed or did not come within the budget. */
async function withinBudget(answer: Promise<FirstAnswer>): Promise<FirstAnswer | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), FIRST_ANSWER_BUDGET_MS);
  });
  try {
    return await Promise.race([answer.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

function answer(asset: ConsoleAsset, method: string, status = 200, page = false): Response {
  return new Response(method === "HEAD" ? null : asset.body, {
    status,
    headers: consoleHeaders(asset.type, page),
  });
}

/** The console's routes, as a Hono app mounted before the admin routes. */
export function consoleRoutes(deps: ConsoleDeps): Hono {
  const serve = async (
    name: string | undefined,
    req: Request,
    info: unknown,
  ): Promise<Response> => {
    const method = req.method;
    // The stylesheet is served either way: the off page uses it too.
    if (deps.adminKey() === "" && name !== "style.css") {
      const page = consoleOffPage(deps.adminKeyProblem?.() ?? null);
      return answer({ type: "text/html; charset=utf-8", body: page }, method, 503, true);
    }
    if (name === undefined || name === "" || CONSOLE_PAGE_NAMES.includes(name)) {
      return answer(await pageFor(name || "live", req, info, deps), method, 200, true);
    }
    const asset = CONSOLE_ASSETS.get(name);
    if (asset) return answer(asset, method);
    return answer({ type: "text/plain; charset=utf-8", body: "Not Found" }, method, 404);
  };
  const app = new Hono();
  app.on(["GET", "HEAD"], "/skeid/ui", (c) => serve(undefined, c.req.raw, c.env));
  app.on(["GET", "HEAD"], "/skeid/ui/", (c) => serve(undefined, c.req.raw, c.env));
  app.on(
    ["GET", "HEAD"],
    "/skeid/ui/:name",
    (c) => serve(c.req.param("name"), c.req.raw, c.env),
  );
  return app;
}
