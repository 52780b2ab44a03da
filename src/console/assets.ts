/**
 * The console's static files, part of the module graph (text imports), so `deno compile`'s binary
 * carries them and nothing is read from disk or fetched at run time. Each is served under
 * `/skeid/ui/<name>`; the page itself is `/skeid/ui`.
 *
 * @module
 */
import indexHtml from "./web/index.html" with { type: "text" };
import appJs from "./web/app.js" with { type: "text" };
import styleCss from "./web/style.css" with { type: "text" };

/** One static file of the console. */
export interface ConsoleAsset {
  /** The `content-type` it is served with. */
  type: string;
  /** Its text. */
  body: string;
}

/** The console's page: what `/skeid/ui` (and any unknown page path under it) answers. */
export const CONSOLE_PAGE: ConsoleAsset = { type: "text/html; charset=utf-8", body: indexHtml };

/** The console's other files by name (the path after `/skeid/ui/`). */
export const CONSOLE_ASSETS: ReadonlyMap<string, ConsoleAsset> = new Map([
  ["app.js", { type: "text/javascript; charset=utf-8", body: appJs }],
  ["style.css", { type: "text/css; charset=utf-8", body: styleCss }],
]);
