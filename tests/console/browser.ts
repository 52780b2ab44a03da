/**
 * A real Chromium for the console's browser tests, driven by puppeteer-core over the DevTools
 * protocol: started headless with a fresh profile, every page watched for requests to another
 * origin (aborted and recorded), dialogs (a script injected through data would open one),
 * uncaught errors and CSP refusals. When Chromium cannot start the test fails saying why; it is
 * never skipped.
 *
 * @module
 */
import puppeteer, { type Browser, type Page } from "puppeteer-core";

/** Where Debian's `chromium` package puts the browser (`scripts/browser-ensure` installs it). */
export const CHROMIUM = Deno.env.get("SKEID_CHROMIUM") ?? "/usr/bin/chromium";

/** The flags of every launch: no network of its own, no first-run work, no GPU, no sandbox (root). */
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

/** A started browser and its throw-away profile. */
export interface TestBrowser {
  browser: Browser;
  /** Ends the browser and removes its profile. */
  close(): Promise<void>;
}

/** Starts Chromium; throws an error naming the binary and what went wrong. */
export async function launchBrowser(): Promise<TestBrowser> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `browser tests: no Chromium at ${CHROMIUM}; run scripts/browser-ensure ` +
        "(it installs Debian's chromium package) or set SKEID_CHROMIUM",
    );
  }
  const profile = await Deno.makeTempDir({ prefix: "skeid-chromium-" });
  let browser: Browser;
  try {
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`],
      timeout: 30_000,
    });
  } catch (e) {
    await Deno.remove(profile, { recursive: true }).catch(() => {});
    throw new Error(`browser tests: Chromium at ${CHROMIUM} did not start: ${String(e)}`);
  }
  return {
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
  /** Uncaught page errors and console errors (CSP refusals log there). */
  errors: string[];
}

/** Opens a page whose every request is checked: only 127.0.0.1 (and `data:`) may be reached. */
export async function watchedPage(browser: Browser): Promise<WatchedPage> {
  const page = await browser.newPage();
  const seen: WatchedPage = { page, foreign: [], dialogs: [], errors: [] };
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
  await Deno.mkdir(SCREENSHOT_DIR, { recursive: true });
  // The test gateway's files live in a temp folder: the committed pictures show a usual place.
  if (hide.length > 0) {
    await page.evaluate(
      `(() => { const hide = ${JSON.stringify(hide)};` +
        `const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);` +
        `for (let n = w.nextNode(); n; n = w.nextNode()) ` +
        `for (const h of hide) n.textContent = n.textContent.replaceAll(h, "/etc/skeid"); })()`,
    );
  }

  await page.screenshot({ path: `${SCREENSHOT_DIR}/${name}.png`, fullPage: true });
}
