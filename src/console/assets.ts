/**
 * The console's static files, part of the module graph (text imports), so `deno compile`'s binary
 * carries them and nothing is read from disk or fetched at run time. The page (`/skeid/ui`)
 * carries the script and the stylesheet inline; each is also served under `/skeid/ui/<name>`
 * (the off page uses the stylesheet).
 *
 * @module
 */
import { createHash } from "node:crypto";
import indexHtml from "./web/index.html" with { type: "text" };
import appJsText from "./web/app.js" with { type: "text" };
import styleCssText from "./web/style.css" with { type: "text" };

/**
 * Text as the HTML parser hands it to an inline element: line breaks as LF. The CSP hash is of
 * that text, so a checkout with CRLF line ends (git's autocrlf) would otherwise hash other bytes
 * than the browser does, and the browser would refuse the page's own script.
 */
export function asParsed(text: string): string {
  return text.replace(/\r\n?/g, "\n");
}

const appJs = asParsed(appJsText);
const styleCss = asParsed(styleCssText);

/** One static file of the console. */
export interface ConsoleAsset {
  /** The `content-type` it is served with. */
  type: string;
  /** Its text. */
  body: string;
}

/** The console's other files by name (the path after `/skeid/ui/`). */
export const CONSOLE_ASSETS: ReadonlyMap<string, ConsoleAsset> = new Map([
  ["app.js", { type: "text/javascript; charset=utf-8", body: appJs }],
  ["style.css", { type: "text/css; charset=utf-8", body: styleCss }],
]);

/** A CSP hash source (`'sha256-…'`) admitting exactly `text` as an inline script or style. */
function hashSource(text: string): string {
  return `'sha256-${createHash("sha256").update(text).digest("base64")}'`;
}

/** The CSP sources of the page's inline script and stylesheet (ADR 0051). */
export const CONSOLE_INLINE_SOURCES = {
  script: hashSource(appJs),
  style: hashSource(styleCss),
} as const;

/**
 * The console's page (what `/skeid/ui` answers), with its script and stylesheet inline (ADR
 * 0051): a fresh page then asks for nothing before its first screen.
 */
export const CONSOLE_PAGE: ConsoleAsset = {
  type: "text/html; charset=utf-8",
  body: inline(
    inline(indexHtml, '<link rel="stylesheet" href="/skeid/ui/style.css">', "style", styleCss),
    '<script type="module" src="/skeid/ui/app.js"></script>',
    'script type="module"',
    appJs,
  ),
};

/** `html` with the element `tag` replaced by `<open>text</close>`; throws when `tag` is absent. */
function inline(html: string, tag: string, open: string, text: string): string {
  if (!html.includes(tag)) throw new Error(`console page: no ${tag} to inline`);
  if (/<\/(script|style)|<!--/i.test(text)) {
    throw new Error(`console page: the text of ${tag} could end its element early`);
  }
  const close = open.split(" ")[0];
  // A function, not a string: `$&` and the like in a replacement string are patterns.
  return html.replace(tag, () => `<${open}>${text}</${close}>`);
}
