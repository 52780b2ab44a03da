/**
 * The admin API calls a console page makes first, named in the page's HTML as
 * `<link rel="preload" as="fetch">` so the browser sends them the moment the HTML arrives,
 * while it is still starting the page's script (ADR 0048). Each URL is built exactly as the
 * page's script builds it from the same address (`/skeid/ui/usage?range=30d`): the script's
 * `fetch` of that URL then takes the preloaded answer instead of asking again. A URL that
 * differs (an hour turned between the two) only costs the second request it always made.
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
      // Live draws from its stream, which a preload cannot open.
      return null;
  }
}

/** The calls `page` makes first at `params`: the session check, then its data. */
export function firstCalls(page: string, params: URLSearchParams, now: number): string[] {
  const data = dataPath(page, params, now);
  return data === null ? ["/skeid/session"] : ["/skeid/session", data];
}

function escapeAttr(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/**
 * The `<link>` elements naming `calls` for the browser to fetch at once. `crossorigin` gives
 * them the mode and credentials of a plain same-origin `fetch(url)` (cors, same-origin), which
 * is what lets that fetch take the preloaded answer.
 */
export function preloadLinks(calls: readonly string[]): string {
  return calls.map((url) =>
    `<link rel="preload" as="fetch" crossorigin="anonymous" href="${escapeAttr(url)}">`
  ).join("\n    ");
}
