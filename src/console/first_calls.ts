/**
 * The admin API calls a console page makes first, answered by the gateway while it builds the
 * page's HTML and carried in it as a JSON data block (ADR 0051): the page's script takes each
 * answer instead of asking, so the first screen waits on no request of its own. Each URL is
 * built exactly as the page's script builds it from the same address
 * (`/skeid/ui/usage?range=30d`); a URL that differs (an hour turned between the two) only costs
 * the request the script then makes.
 *
 * @module
 */

/** The console's pages, each at `/skeid/ui/<page>` (`/skeid/ui` is Live). */
export const CONSOLE_PAGE_NAMES: readonly string[] = [
  "live",
  "keys",
  "usage",
  "requests",
  "config",
];

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The Usage page's series query for a range ending with the current hour (app.js seriesQuery). */
export function seriesPath(range: string, by: string, now: number): string {
  const hourStart = Math.floor(now / HOUR) * HOUR;
  const to = new Date(hourStart + HOUR).toISOString();
  let q: Record<string, string>;
  if (range === "hour") q = { from: new Date(hourStart).toISOString(), to, by, step: "hour" };
  else if (range === "day") {
    q = { from: new Date(hourStart - 23 * HOUR).toISOString(), to, by, step: "hour" };
  } else {
    const dayStart = Math.floor(now / DAY) * DAY;
    q = { from: new Date(dayStart - 29 * DAY).toISOString(), to, by, step: "day" };
  }
  return `/skeid/usage/series?${new URLSearchParams(q)}`;
}

/** The Usage page's choices and their defaults (app.js's two selects). */
const RANGES = ["hour", "day", "30d"];
const SPLITS = ["key", "alias", "model", "node"];
/** The Requests page's filters, in the order its form has them (app.js FILTERS). */
const FILTERS = ["api_key_id", "model", "node", "status", "error_type"];

/** The page's first data call (besides the session check), or null when it makes none. */
function dataPath(page: string, params: URLSearchParams, now: number): string | null {
  switch (page) {
    case "keys":
      return "/skeid/tenancy";
    case "config":
      return "/skeid/config";
    case "usage": {
      const range = params.get("range") ?? "";
      const by = params.get("by") ?? "";
      return seriesPath(
        RANGES.includes(range) ? range : "day",
        SPLITS.includes(by) ? by : "model",
        now,
      );
    }
    case "requests": {
      const asked = Number(params.get("limit"));
      const limit = Number.isInteger(asked) && asked >= 1 && asked <= 200 ? asked : 50;
      const q = new URLSearchParams({ limit: String(limit) });
      for (const name of FILTERS) {
        const v = (params.get(name) ?? "").trim();
        if (v) q.set(name, v);
      }
      return `/skeid/usage/events?${q}`;
    }
    default:
      // Live draws from its stream, which the page opens itself.
      return null;
  }
}

/** The calls `page` makes first at `params`: the session check, then its data. */
export function firstCalls(page: string, params: URLSearchParams, now: number): string[] {
  const data = dataPath(page, params, now);
  return data === null ? ["/skeid/session"] : ["/skeid/session", data];
}

/** One first call's answer, as the page's script takes it instead of asking. */
export interface FirstAnswer {
  /** The admin route's HTTP status. */
  status: number;
  /** Its JSON body (null when it had none). */
  body: unknown;
}

/** The id of the element that carries a page's first answers. */
export const FIRST_ANSWERS_ID = "skeid-first-answers";

/**
 * The first answers as a JSON data block: `type="application/json"` is never run (the CSP's
 * `script-src` is not asked), and every `<` is written `\u003c`, so no text in an answer — a
 * model name, an error message — can close the element or open a comment.
 */
export function firstAnswersBlock(answers: ReadonlyMap<string, FirstAnswer>): string {
  const json = JSON.stringify(Object.fromEntries(answers)).replaceAll("<", "\\u003c");
  return `<script type="application/json" id="${FIRST_ANSWERS_ID}">${json}</script>`;
}
