/**
 * The console in real browsers (Chromium and Firefox, each the same steps) against a real gateway (two fake nodes of `m1`, a third whose
 * model name is markup, a priced customer key with a budget, a SQLite ledger): every page and
 * what it acts on, the sign-in and its failures, CSRF, and that the page never reaches another
 * origin nor runs data as markup. Screenshots of every page go to SKEID_CONSOLE_SCREENSHOTS when
 * it is set (docs/console/ for the committed ones).
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { type FakeModel, startFakeModel } from "../../src/fake/model.ts";
import { keyIdForKey } from "../../src/core/customer_key_id.ts";
import { post, startGateway, type TestGateway } from "../integration/helpers.ts";
import { until } from "../_helpers/poll.ts";
import {
  BROWSER_INFO,
  type BrowserName,
  BROWSERS,
  launchBrowser,
  screenshot,
  type TestBrowser,
  watchedPage,
} from "./browser.ts";
import type { Page } from "puppeteer-core";
import { TcpProxy } from "../usage/helpers.ts";
import { dirname } from "node:path";

const ADMIN_KEY = "adm-console-browser-0123456789";
const XSS_MODEL = "<img src=x onerror=alert(1)>";
const ALICE = await keyIdForKey("sk-alice");

function config(a: FakeModel, b: FakeModel, x: FakeModel, dir: string): Record<string, unknown> {
  return {
    admin_api_key: ADMIN_KEY,
    nodes: [
      { id: "fake-1", url: a.url, model: "m1", max_conns: 8, tags: ["local"] },
      { id: "fake-2", url: b.url, model: "m1", max_conns: 8, tags: ["local"] },
      { id: "x-node", url: x.url, model: XSS_MODEL, max_conns: 4 },
      // One slot: a few held requests to alias `small` queue for it (who waits, on Live).
      { id: "small-1", url: a.url, model: "m2", max_conns: 1, tags: ["small"] },
    ],
    aliases: { small: { tiers: [{ tags: ["small"], model: "m2", wait_ms: 8000 }] } },
    pricing: { m1: { input_per_million: 2000, output_per_million: 4000 } },
    policies: { std: { budget: { usd: 5, period: "month" } } },
    names: { alice: ALICE },
    keys: { alice: "std" },
    usage_store: { backend: "sqlite", path: `${dir}/usage.sqlite` },
  };
}

/** A chat request to the gateway (as alice unless `auth` is null). */
function ask(
  t: TestGateway,
  model: string,
  opts: { holdMs?: number; auth?: string | null } = {},
) {
  const headers: Record<string, string> = {};
  if (opts.auth !== null) headers.authorization = `Bearer ${opts.auth ?? "sk-alice"}`;
  if (opts.holdMs) headers["x-fake-options"] = JSON.stringify({ fake_ttft_ms: opts.holdMs });
  return post(`${t.base}/v1/chat/completions`, {
    model,
    // A small max_tokens keeps the budget's reservation (the output charge) small.
    max_tokens: 16,
    messages: [{ role: "user", content: "hello there, console" }],
  }, headers);
}

/** The text of the first element matching `selector`, or '' when there is none. */
function textOf(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (el) => el.textContent ?? "").catch(() => "");
}

/** Waits until the page's `selector` text includes `part` (bounded). */
async function waitText(page: Page, selector: string, part: string, timeout = 8000) {
  await waitJs(
    page,
    `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? "")` +
      `.includes(${JSON.stringify(part)})`,
    timeout,
  ).catch(async (e) => {
    throw new Error(
      `waited for ${selector} to show '${part}'; it shows '${await textOf(page, selector)}' (${e})`,
    );
  });
}

/** Waits until the JS expression `expr` is truthy in the page (bounded, polled every 50 ms). */
async function waitJs(page: Page, expr: string, timeout = 8000): Promise<void> {
  await page.waitForFunction(expr, { timeout, polling: 50 });
}

/** The sum of the Live page's inflight cells. */
const INFLIGHT_SUM = `[...document.querySelectorAll("td[data-inflight]")]` +
  `.reduce((n, td) => n + Number(td.dataset.inflight), 0)`;

async function signIn(page: Page, key: string): Promise<void> {
  await page.waitForSelector("#admin-key", { timeout: 8000 });
  await page.type("#admin-key", key);
  await page.click("form.signin button[type=submit]");
}

for (const name of BROWSERS) {
  Deno.test({
    name: `console in ${
      BROWSER_INFO[name].label
    }: sign-in, every page, its actions and its failures`,
    // puppeteer keeps its protocol connection's timers and sockets past a step.
    sanitizeOps: false,
    sanitizeResources: false,
    fn: (t) => consoleInBrowser(t, name),
  });
}

async function consoleInBrowser(t: Deno.TestContext, name: BrowserName): Promise<void> {
  {
    const fakeA = startFakeModel({ tokens: 12 });
    const fakeB = startFakeModel({ tokens: 12 });
    const fakeX = startFakeModel({ tokens: 4, modelName: XSS_MODEL });
    const dir = await Deno.makeTempDir({ prefix: "skeid-console-" });
    const gw = await startGateway(config(fakeA, fakeB, fakeX, dir), { sink: false });
    // The page's own browser context saves its downloads here (the Usage page's CSV).
    const downloads = await Deno.makeTempDir({ prefix: "skeid-dl-" });
    let tb: TestBrowser | undefined;
    let proxy: TcpProxy | undefined;
    /** Chromium's pictures are docs/console's; Firefox's go beside them, in firefox/. */
    const shot = (page: Page, file: string, hide: string[] = []) =>
      screenshot(page, name === "chromium" ? file : `${name}/${file}`, hide);
    try {
      tb = await launchBrowser(name);
      const w = await watchedPage(tb.browser, { downloads });
      const { page } = w;
      await page.setViewport({ width: 1280, height: 820 });
      // The browser reaches the gateway through a TCP proxy the test can cut (a lost stream).
      proxy = new TcpProxy({ hostname: "127.0.0.1", port: gw.server.addr.port });
      const origin = `http://127.0.0.1:${proxy.port}`;
      const ui = `${origin}/skeid/ui`;

      await t.step("a wrong key shows the 401 message", async () => {
        await page.goto(ui, { waitUntil: "load" });
        await shot(page, "signin");
        await signIn(page, "not-the-key");
        await waitText(page, ".message", "Wrong admin key (401)");
        assertEquals(
          await page.$eval("#admin-key", (el) => (el as unknown as { value: string }).value),
          "",
        );
      });

      await t.step("sign in: the key is kept nowhere in the browser", async () => {
        await signIn(page, ADMIN_KEY);
        await waitText(page, "main h1", "Live");
        await waitText(page, "#stream", "live");
        const kept = await page.evaluate(
          "({ local: localStorage.length, session: sessionStorage.length, " +
            "cookie: document.cookie, url: location.href })",
        ) as { local: number; session: number; cookie: string; url: string };
        assertEquals(kept.local, 0);
        assertEquals(kept.session, 0);
        assertEquals(kept.cookie, "", "the session cookie is HttpOnly, no other cookie");
        assert(!kept.url.includes(ADMIN_KEY));
        const cookies = await page.cookies();
        assert(cookies.every((c) => !c.value.includes(ADMIN_KEY)), "no cookie holds the key");
        const sessionCookie = cookies.find((c) => c.name === "skeid_session");
        assert(sessionCookie?.httpOnly, "skeid_session is HttpOnly");
        assertEquals(sessionCookie?.sameSite, "Strict");
      });

      await t.step("Live: a node's inflight rises while requests are held", async () => {
        const held = [0, 1, 2, 3].map(() => ask(gw, "m1", { holdMs: 2500 }));
        // Three to a one-slot alias: one in flight, two wait in its tier, each shown with its key.
        const queued = [0, 1, 2].map(() => ask(gw, "small", { holdMs: 1200 }));
        await waitJs(page, `${INFLIGHT_SUM} >= 5`);
        await waitText(page, "main table:not(.nodes)", ALICE);
        await waitText(page, "main table:not(.nodes)", "small");
        await shot(page, "live");
        for (const r of await Promise.all([...held, ...queued])) assertEquals(r.status, 200);
        await waitJs(page, `${INFLIGHT_SUM} === 0`);
      });

      await t.step("a model name of markup shows as text, runs nothing", async () => {
        assertEquals((await ask(gw, XSS_MODEL)).status, 200);
        await waitText(page, 'tr[data-node="x-node"]', XSS_MODEL);
        assertEquals(await page.$$eval("main img", (els) => els.length), 0);
        assertEquals(w.dialogs, []);
      });

      await t.step("Live: mark a node unhealthy and requests avoid it", async () => {
        await page.click('button[aria-label="Mark unhealthy fake-2"]');
        await waitText(page, 'tr[data-node="fake-2"] td[data-label="Health"]', "unhealthy");
        await waitText(page, ".note", "fake-2 marked unhealthy");
        const before = fakeB.stats.started;
        for (let i = 0; i < 6; i++) assertEquals((await ask(gw, "m1")).status, 200);
        assertEquals(fakeB.stats.started, before, "fake-2 got none of the requests");
        await page.click('button[aria-label="Mark healthy fake-2"]');
        await waitText(page, 'tr[data-node="fake-2"] td[data-label="Health"]', "healthy");
      });

      await t.step("Live: drain a node and undrain it", async () => {
        await page.click('button[aria-label="Drain fake-1"]');
        await waitText(page, 'tr[data-node="fake-1"] td[data-label="Health"]', "draining");
        await page.click('button[aria-label="Undrain fake-1"]');
        await waitJs(
          page,
          `!(document.querySelector('tr[data-node="fake-1"] td[data-label="Health"]')` +
            `?.textContent ?? "draining").includes("draining")`,
        );
      });

      await t.step("a lost stream says so and reconnects", async () => {
        proxy!.down();
        try {
          await waitText(page, "#stream", "disconnected — reconnecting");
        } finally {
          proxy!.up();
        }
        await waitText(page, "#stream", "Stream: live", 15_000);
      });

      await t.step("a write without the CSRF token is refused (403)", async () => {
        const status = await page.evaluate(async () =>
          (await fetch("/skeid/nodes/fake-1/drain", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ draining: true }),
          })).status
        );
        assertEquals(status, 403);
      });

      await t.step("Keys: a budget fills as the key spends", async () => {
        await page.click('nav a[data-page="keys"]');
        await waitText(page, `tr[data-key="${ALICE}"]`, "of $5.00");
        const before = await textOf(page, `tr[data-key="${ALICE}"] .spent`);
        for (let i = 0; i < 3; i++) assertEquals((await ask(gw, "m1")).status, 200);
        await waitJs(
          page,
          `(document.querySelector('tr[data-key="${ALICE}"] .spent')?.textContent ?? "") ` +
            `!== ${JSON.stringify(before)}`,
        );
        await shot(page, "keys");
      });

      await t.step("Usage: charts and table of the day, CSV download", async () => {
        await gw.group.flushUsage();
        await page.click('nav a[data-page="usage"]');
        await page.waitForSelector("body[data-usage-drawn]", { timeout: 8000 });
        assertEquals(await page.$$eval("figure.card svg.chart", (els) => els.length), 5);
        await waitText(page, "table.usage", "m1");
        await waitText(page, "table.usage", XSS_MODEL);
        assertEquals(await page.$$eval("main img", (els) => els.length), 0);
        await shot(page, "usage");
        await page.click("a[download]");
        let csv = "";
        await until(
          async () => {
            for await (const e of Deno.readDir(downloads)) {
              if (e.name.endsWith(".csv")) csv = await Deno.readTextFile(`${downloads}/${e.name}`);
            }
            return csv.length > 0;
          },
          "the CSV download",
          8000,
          50,
        );
        assertStringIncludes(csv.split("\n")[0], "requests");
        assertStringIncludes(csv, "m1");

        // A segment's tooltip names its bucket, group and value once a pointer is over it.
        await page.hover("figure.card svg.chart rect");
        await waitText(page, "figure.card svg.chart rect > title", ": ");

        // Its own address: the page's HTML carried the series' answer, and the session check's.
        await page.goto(`${ui}/usage?range=30d&by=key`, { waitUntil: "load" });
        await page.waitForSelector("body[data-usage-drawn]", { timeout: 8000 });
        assertEquals(
          await page.$eval("#usage-by", (el) => (el as unknown as { value: string }).value),
          "key",
        );
        const calls = await page.evaluate(
          `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname)`,
        ) as string[];
        assertEquals(calls, [], "no request before the first chart: its answer was in the HTML");
      });

      await t.step("Requests: latest first, filtered by node, one in full", async () => {
        await page.click('nav a[data-page="requests"]');
        await page.waitForSelector("tr[data-event]", { timeout: 8000 });
        await shot(page, "requests");
        await page.type("#f-node", "fake-2");
        await page.click("form.filters button[type=submit]");
        await waitJs(
          page,
          `(() => { const n = [...document.querySelectorAll('tr[data-event] td[data-label="Node"]')]` +
            `.map((td) => td.textContent); return n.length > 0 && n.every((x) => x === "fake-2"); })()`,
        );
        await page.click("tr[data-event] button.link");
        await waitText(page, ".detail pre", '"event_id"');
        await waitText(page, ".detail pre", "fake-2");

        // Keyset paging: three a page, "Older" appends the next three, none twice, newest first.
        await page.goto(`${ui}/requests?limit=3`, { waitUntil: "load" });
        await waitJs(page, `document.querySelectorAll("tr[data-event]").length === 3`);
        // The page's HTML carried its first answers: the first screen asked for nothing.
        const calls = await page.evaluate(
          `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname)`,
        ) as string[];
        assertEquals(calls, [], "no request before the first screen: its answer was in the HTML");
        await page.click("main p > button:not([hidden])");
        await waitJs(page, `document.querySelectorAll("tr[data-event]").length === 6`);
        const rows = await page.evaluate(
          `[...document.querySelectorAll("tr[data-event]")].map((tr) => ` +
            `[tr.dataset.event, tr.querySelector("button.link").textContent])`,
        ) as [string, string][];
        assertEquals(new Set(rows.map(([id]) => id)).size, 6, "no event shown twice");
        const times = rows.map(([, at]) => at);
        assertEquals(times, [...times].sort().reverse(), "newest first");

        // An address of the old form (the page in the hash) still opens its view, at its own.
        await page.goto(`${ui}#/requests?limit=2`, { waitUntil: "load" });
        await waitJs(page, `document.querySelectorAll("tr[data-event]").length === 2`);
        assertEquals(
          await page.evaluate("location.pathname + location.search + location.hash"),
          "/skeid/ui/requests?limit=2",
        );
        // One naming no page becomes the landing page's address, which a reload also finds.
        await page.goto(`${ui}#/signin`, { waitUntil: "load" });
        await waitJs(page, `location.pathname === "/skeid/ui"`);
        await page.reload({ waitUntil: "load" });
        await waitJs(page, `document.title.startsWith("Live")`);
        // Back to the Requests page of two rows, which the steps after this one start from.
        await page.goto(`${ui}/requests?limit=2`, { waitUntil: "load" });
        await waitJs(page, `document.querySelectorAll("tr[data-event]").length === 2`);
      });

      await t.step(
        "Config: the file in force, a dry run, a failed reload and its errors",
        async () => {
          await page.click('nav a[data-page="config"]');
          await waitText(page, ".facts", gw.configPath);
          await page.click(".controls button:first-child");
          await waitText(page, ".result h2", "Dry run: the file is valid");
          const good = await Deno.readTextFile(gw.configPath);
          // A node whose url is a number: the loader names the path and line.
          await Deno.writeTextFile(gw.configPath, good.replace(/url: http:[^\n]*/, "url: 12"));
          try {
            await page.click(".controls button:first-child");
            await waitText(page, ".result h2", "Dry run: the file has errors");
            await waitText(page, ".result .errors", "nodes");
            await page.click(".controls button:last-child");
            await waitText(page, ".result h2", "Reload failed");
            await waitText(page, ".failure .errors", "nodes");
            await shot(page, "config", [dirname(gw.configPath)]);
          } finally {
            await Deno.writeTextFile(gw.configPath, good);
          }
          await page.click(".controls button:last-child");
          await waitText(page, ".result h2", "Reloaded");
        },
      );

      await t.step("Back returns to the page before; the skip link stays on the page", async () => {
        // Config was reached from the Requests page of two rows (a nav click: a new entry).
        await page.evaluate("history.back()");
        await waitText(page, "main h1", "Requests");
        await waitJs(page, `document.querySelectorAll("tr[data-event]").length === 2`);
        // A mark on the row element itself: a page mounted again would have new rows.
        await page.evaluate(`document.querySelector("tr[data-event]").dataset.probe = "kept"`);
        await page.focus("a.skip");
        await page.keyboard.press("Enter");
        await waitJs(page, `location.hash === "#main"`);
        assertEquals(await textOf(page, "main h1"), "Requests");
        assertEquals(
          await page.evaluate(`document.querySelector("tr[data-event]")?.dataset.probe ?? ""`),
          "kept",
          "the page was not mounted again",
        );
      });

      await t.step("a narrow window shows rows as labelled cards", async () => {
        await page.setViewport({ width: 390, height: 800 });
        await page.click('nav a[data-page="live"]');
        await page.waitForSelector('tr[data-node="fake-1"]', { timeout: 8000 });
        const display = await page.evaluate(
          `getComputedStyle(document.querySelector("thead")).display`,
        );
        assertEquals(display, "none");
        await shot(page, "live-narrow");
        await page.setViewport({ width: 1280, height: 820 });
      });

      await t.step("sign out ends the session on the server", async () => {
        await page.click("#signout");
        await waitText(page, ".message", "Signed out.");
        const status = await page.evaluate(
          `fetch("/skeid/session").then((r) => r.status)`,
        );
        assertEquals(status, 401);
      });

      await t.step("a forged session cookie goes back to sign-in", async () => {
        const url = new URL(origin);
        await page.setCookie({
          name: "skeid_session",
          value: "forged-session-value",
          domain: url.hostname,
          path: "/skeid",
        });
        await page.goto(`${ui}/keys`, { waitUntil: "load" });
        await page.waitForSelector("#admin-key", { timeout: 8000 });
        assertEquals(await page.$$eval("tr[data-key]", (els) => els.length), 0, "no key shown");
      });

      await t.step("too many wrong keys from one address: the 429 message", async () => {
        // One wrong key was tried at the start; sign-in refuses after a few in a row.
        for (let i = 0; i < 8; i++) {
          // Cleared first, so each answer is this attempt's.
          await page.evaluate(`document.querySelector(".message").textContent = ""`);
          await signIn(page, `wrong-${i}`);
          await waitText(page, ".message", "(4");
          if ((await textOf(page, ".message")).includes("(429)")) break;
        }
        await waitText(page, ".message", "Too many failed sign-ins from this address (429)");
      });

      await t.step("the watch sees a CSP refusal (the checks below can fail)", async () => {
        const before = w.errors.length;
        // An inline script, as data turned into markup would add: the CSP refuses to run it.
        await page.evaluate(
          `(() => { const el = document.createElement("script");` +
            `el.textContent = "document.title = 'ran'"; document.head.append(el); })()`,
        );
        // Chromium logs a refusal of its own too; the event is what both browsers report.
        const reported = () => w.errors.slice(before).some((e) => e.includes("csp refused"));
        await until(() => Promise.resolve(reported()), "the CSP refusal reported", 8000, 50);
        assertStringIncludes(
          w.errors.slice(before).find((e) => e.includes("csp refused")) ?? "",
          "csp refused: script-src",
        );
        assert((await page.title()) !== "ran", "the inline script did not run");
        w.errors.splice(before);
      });

      assertEquals(w.foreign, [], "no request left for another origin");
      assertEquals(w.dialogs, [], "no dialog opened");
      assertEquals(
        w.errors.filter((e) =>
          // Chromium logs each non-2xx answer (the 401s and 403s asked for above, the offline
          // step); Firefox reports the stream's lost connection (the offline step) as an error.
          !e.startsWith("console: Failed to load resource") &&
          !(e.includes("establish a connection to the server at") && e.includes("/skeid/live"))
        ),
        [],
        "no script error, no CSP refusal",
      );
    } finally {
      await tb?.close();
      await proxy?.close();
      await gw.stop();
      await Promise.all([fakeA.close(), fakeB.close(), fakeX.close()]);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      await Deno.remove(downloads, { recursive: true }).catch(() => {});
    }
  }
}
