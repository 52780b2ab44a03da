/**
 * A real browser for the console's browser tests, driven by puppeteer-core: Debian's Chromium
 * over the DevTools protocol and Debian's Firefox ESR over WebDriver BiDi, each started headless
 * with a fresh profile and no network of its own. Every page is watched for requests to another
 * origin (aborted and recorded), dialogs (a script injected through data would open one),
 * uncaught errors and CSP refusals. When a browser cannot start the test fails saying why; it is
 * never skipped.
 *
 * @module
 */
import puppeteer, { type Browser, type Page } from "puppeteer-core";

/** The browsers the console is tested in. */
export type BrowserName = "chromium" | "firefox";

/** Every browser the console's tests run in, in the order they run. */
export const BROWSERS: readonly BrowserName[] = ["chromium", "firefox"];

/** How a browser is named to people, and where Debian puts it (`scripts/browser-ensure`). */
export const BROWSER_INFO: Readonly<
  Record<BrowserName, { label: string; path: string; env: string; pkg: string }>
> = {
  chromium: {
    label: "Chromium",
    path: Deno.env.get("SKEID_CHROMIUM") ?? "/usr/bin/chromium",
    env: "SKEID_CHROMIUM",
    pkg: "chromium",
  },
  firefox: {
    label: "Firefox",
    path: Deno.env.get("SKEID_FIREFOX") ?? "/usr/bin/firefox-esr",
    env: "SKEID_FIREFOX",
    pkg: "firefox-esr",
  },
};

/** Chromium's flags: no network of its own, no first-run work, no GPU, no sandbox (root). */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Firefox's preferences on top of puppeteer's own test profile (which already turns off
 * updates, safe browsing, telemetry uploads and remote settings): everything else that would
 * open a connection of its own on a machine that has no way out.
 */
export const FIREFOX_PREFS: Record<string, string | number | boolean> = {
  "app.normandy.enabled": false,
  "app.shield.optoutstudies.enabled": false,
  "app.update.auto": false,
  "app.update.enabled": false,
  "browser.region.network.url": "",
  "browser.region.update.enabled": false,
  "browser.newtabpage.activity-stream.feeds.section.topstories": false,
  "browser.newtabpage.activity-stream.feeds.snippets": false,
  "browser.ping-centre.telemetry": false,
  "browser.safebrowsing.provider.google4.updateURL": "",
  "browser.safebrowsing.provider.mozilla.updateURL": "",
  "captivedetect.canonicalURL": "",
  "extensions.blocklist.enabled": false,
  "extensions.getAddons.showPane": false,
  "messaging-system.rsexperimentloader.enabled": false,
  "network.captive-portal-service.enabled": false,
  "network.connectivity-service.enabled": false,
  "network.dns.disablePrefetch": true,
  "network.prefetch-next": false,
  "network.trr.mode": 5,
  "toolkit.telemetry.enabled": false,
  "toolkit.telemetry.server": "",
  "toolkit.telemetry.unified": false,
};

/** A started browser and its throw-away profile. */
export interface TestBrowser {
  name: BrowserName;
  browser: Browser;
  /** Ends the browser and removes its profile. */
  close(): Promise<void>;
}

/** Starts a browser; throws an error naming the binary and what went wrong. */
export async function launchBrowser(name: BrowserName = "chromium"): Promise<TestBrowser> {
  const info = BROWSER_INFO[name];
  try {
    await Deno.stat(info.path);
  } catch {
    throw new Error(
      `browser tests: no ${info.label} at ${info.path}; run scripts/browser-ensure ` +
        `(it installs Debian's ${info.pkg} package) or set ${info.env}`,
    );
  }
  const profile = await Deno.makeTempDir({ prefix: `skeid-${name}-` });
  let browser: Browser;
  try {
    browser = name === "chromium"
      ? await puppeteer.launch({
        executablePath: info.path,
        headless: true,
        args: [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`],
        timeout: 30_000,
      })
      : await puppeteer.launch({
        browser: "firefox",
        executablePath: info.path,
        headless: true,
        userDataDir: profile,
        extraPrefsFirefox: FIREFOX_PREFS,
        // Run as root in a container there is no display; headless must be said to the process.
        env: { ...Deno.env.toObject(), MOZ_HEADLESS: "1" },
        timeout: 30_000,
      });
  } catch (e) {
    await Deno.remove(profile, { recursive: true }).catch(() => {});
    throw new Error(`browser tests: ${info.label} at ${info.path} did not start: ${String(e)}`);
  }
  return {
    name,
    browser,
    close: async () => {
      await browser.close().catch(() => {});
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    },
  };
}

/** A page and what was seen on it. */
export interface WatchedPage {
  page: Page;
  /** URLs of requests to any origin but 127.0.0.1 (each was aborted). */
  foreign: string[];
  /** Messages of dialogs that opened (each was dismissed). */
  dialogs: string[];
  /** Uncaught page errors, console errors and CSP refusals. */
  errors: string[];
}

/**
 * Reports each CSP refusal as a console error in every document of the page: the standard
 * `securitypolicyviolation` event, so both browsers say it the same way (added before any of
 * the page's own script runs).
 */
const CSP_WATCH = `document.addEventListener("securitypolicyviolation", (e) =>
  console.error("csp refused: " + e.violatedDirective + " " + e.blockedURI));`;

/**
 * Opens a page whose every request is checked: only 127.0.0.1 (and `data:`) may be reached.
 * `downloads` names a folder the page's downloads go to (its own browser context).
 */
export async function watchedPage(
  browser: Browser,
  opts: { downloads?: string } = {},
): Promise<WatchedPage> {
  const context = opts.downloads === undefined
    ? browser.defaultBrowserContext()
    : await browser.createBrowserContext({
      downloadBehavior: { policy: "allow", downloadPath: opts.downloads },
    });
  const page = await context.newPage();
  const seen: WatchedPage = { page, foreign: [], dialogs: [], errors: [] };
  await page.evaluateOnNewDocument(CSP_WATCH);
  // Request interception: the DevTools protocol's Fetch domain in Chromium, WebDriver BiDi's
  // network intercepts in Firefox; either way every request waits for this handler.
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    const url = new URL(req.url());
    if (url.protocol === "data:" || url.hostname === "127.0.0.1") {
      req.continue().catch(() => {});
      return;
    }
    seen.foreign.push(req.url());
    req.abort().catch(() => {});
  });
  page.on("dialog", (d) => {
    seen.dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.on("pageerror", (e) => seen.errors.push(`pageerror: ${String(e)}`));
  page.on("console", (m) => {
    if (m.type() === "error") seen.errors.push(`console: ${m.text()}`);
  });
  return seen;
}

/** Where screenshots go: `SKEID_CONSOLE_SCREENSHOTS` (e.g. docs/console), else nowhere. */
export const SCREENSHOT_DIR = Deno.env.get("SKEID_CONSOLE_SCREENSHOTS") ?? "";

/**
 * Saves a full-page screenshot as `<name>.png` when screenshots are asked for; each text of
 * `hide` (a temp folder) shows as `/etc/skeid` in the picture.
 */
export async function screenshot(page: Page, name: string, hide: string[] = []): Promise<void> {
  if (SCREENSHOT_DIR === "") return;
  const path = `${SCREENSHOT_DIR}/${name}.png`;
  await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  // The test gateway's files live in a temp folder: the committed pictures show a usual place.
  if (hide.length > 0) {
    await page.evaluate(
      `(() => { const hide = ${JSON.stringify(hide)};` +
        `const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);` +
        `for (let n = w.nextNode(); n; n = w.nextNode()) ` +
        `for (const h of hide) n.textContent = n.textContent.replaceAll(h, "/etc/skeid"); })()`,
    );
  }

  await page.screenshot({ path, fullPage: true });
}
