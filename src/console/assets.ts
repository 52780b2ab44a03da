/**
 * The console's static files, part of the module graph (text imports), so `deno compile`'s binary
 * carries them and nothing is read from disk or fetched at run time. Each is served under
 * `/skeid/ui/<name>`, and under a name carrying a digest of its text (`app.3f2a….js`) that the
 * page refers to: that name never changes its content, so a browser keeps the file — and the
 * script's compiled code — between loads, and an upgrade brings new names. The page itself is
 * `/skeid/ui`, always revalidated.
 *
 * @module
 */
import { createHash } from "node:crypto";
import indexHtml from "./web/index.html" with { type: "text" };
import appJs from "./web/app.js" with { type: "text" };
import styleCss from "./web/style.css" with { type: "text" };

/** One static file of the console. */
export interface ConsoleAsset {
  /** The `content-type` it is served with. */
  type: string;
  /** Its text. */
  body: string;
  /** True when served under its digest name: its content never changes (cached for a year). */
  immutable?: boolean;
}

/** `app.js` → `app.<16 hex of the SHA-256 of body>.js`. */
function digestName(name: string, body: string): string {
  const dot = name.lastIndexOf(".");
  const digest = createHash("sha256").update(body).digest("hex").slice(0, 16);
  return `${name.slice(0, dot)}.${digest}${name.slice(dot)}`;
}

const FILES: readonly [string, ConsoleAsset][] = [
  ["app.js", { type: "text/javascript; charset=utf-8", body: appJs }],
  ["style.css", { type: "text/css; charset=utf-8", body: styleCss }],
];

/** The digest name of each file (`app.js` → `app.<digest>.js`), as the page refers to them. */
export const CONSOLE_ASSET_NAMES: ReadonlyMap<string, string> = new Map(
  FILES.map(([name, asset]) => [name, digestName(name, asset.body)]),
);

/** The console's other files by name (the path after `/skeid/ui/`): plain and digest names. */
export const CONSOLE_ASSETS: ReadonlyMap<string, ConsoleAsset> = new Map([
  ...FILES,
  ...FILES.map(([name, asset]): [string, ConsoleAsset] => [
    CONSOLE_ASSET_NAMES.get(name) ?? name,
    { ...asset, immutable: true },
  ]),
]);

/** The console's page (what `/skeid/ui` answers), its files referred to by their digest names. */
export const CONSOLE_PAGE: ConsoleAsset = {
  type: "text/html; charset=utf-8",
  body: FILES.reduce(
    (html, [name]) =>
      html.replaceAll(`/skeid/ui/${name}"`, `/skeid/ui/${CONSOLE_ASSET_NAMES.get(name)}"`),
    indexHtml,
  ),
};
