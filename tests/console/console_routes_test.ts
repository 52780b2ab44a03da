import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_assert.ts";
import { CONSOLE_CSP, consoleRoutes } from "../../src/console/console_routes.ts";
import { CONSOLE_ASSET_NAMES, CONSOLE_ASSETS, CONSOLE_PAGE } from "../../src/console/assets.ts";
import { preloadLinks, seriesPath } from "../../src/console/first_calls.ts";

/** 2026-12-02T10:20:00Z: the Usage page's ranges end with 11:00. */
const NOW = Date.UTC(2026, 11, 2, 10, 20);

function fixture(key = "adm-key", problem: string | null = null) {
  const state = { key, problem };
  const app = consoleRoutes({
    adminKey: () => state.key,
    adminKeyProblem: () => state.problem,
    now: () => NOW,
  });
  return { state, req: (path: string, init?: RequestInit) => app.request(path, init) };
}

Deno.test("GET /skeid/ui answers the page with the strict CSP and nosniff", async () => {
  const f = fixture();
  for (const path of ["/skeid/ui", "/skeid/ui/"]) {
    const res = await f.req(path);
    assertEquals(res.status, 200);
    assertMatch(res.headers.get("content-type") ?? "", /^text\/html/);
    assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
    assertEquals(res.headers.get("x-content-type-options"), "nosniff");
    const html = await res.text();
    // The page as built, its first calls named where it marks them: here Live's session check.
    assertEquals(
      html,
      CONSOLE_PAGE.body.replace(
        "<!--skeid:first-calls-->",
        '<link rel="preload" as="fetch" crossorigin="anonymous" href="/skeid/session">',
      ),
    );
  }
  assertStringIncludes(CONSOLE_CSP, "default-src 'self'");
  assertStringIncludes(CONSOLE_CSP, "script-src 'self'");
  assertStringIncludes(CONSOLE_CSP, "frame-ancestors 'none'");
  assert(!CONSOLE_CSP.includes("unsafe"), "no unsafe-* source in the CSP");
});

/** The hrefs of the page's fetch preloads, attribute text decoded. */
function preloads(html: string): string[] {
  return [
    ...html.matchAll(/<link rel="preload" as="fetch" crossorigin="anonymous" href="([^"]*)">/g),
  ]
    .map((m) => m[1].replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))));
}

Deno.test("each page's address names its first calls for the browser to send at once", async () => {
  const f = fixture();
  const at = async (path: string) => preloads(await (await f.req(path)).text());
  assertEquals(await at("/skeid/ui/live"), ["/skeid/session"]);
  assertEquals(await at("/skeid/ui/keys"), ["/skeid/session", "/skeid/tenancy"]);
  assertEquals(await at("/skeid/ui/config"), ["/skeid/session", "/skeid/config"]);
  // The Usage page's range ends with the current hour; its default is the last 24 hours by model.
  assertEquals(await at("/skeid/ui/usage"), [
    "/skeid/session",
    "/skeid/usage/series?from=2026-12-01T11%3A00%3A00.000Z&to=2026-12-02T11%3A00%3A00.000Z" +
    "&by=model&step=hour",
  ]);
  assertEquals(await at("/skeid/ui/usage?range=30d&by=key"), [
    "/skeid/session",
    "/skeid/usage/series?from=2026-11-03T00%3A00%3A00.000Z&to=2026-12-02T11%3A00%3A00.000Z" +
    "&by=key&step=day",
  ]);
  assertEquals(
    seriesPath("hour", "node", NOW),
    "/skeid/usage/series?" +
      "from=2026-12-02T10%3A00%3A00.000Z&to=2026-12-02T11%3A00%3A00.000Z&by=node&step=hour",
  );
  // Unknown choices fall back as the page's selects do.
  assertEquals(await at("/skeid/ui/usage?range=year&by=x"), await at("/skeid/ui/usage"));
  assertEquals(await at("/skeid/ui/requests"), ["/skeid/session", "/skeid/usage/events?limit=50"]);
  assertEquals(await at("/skeid/ui/requests?limit=500&node=+gpu-3+&status=429&x=1"), [
    "/skeid/session",
    "/skeid/usage/events?limit=50&node=gpu-3&status=429",
  ]);
});

Deno.test("a page's address is text in its HTML: markup in the query stays in the URL", async () => {
  const f = fixture();
  const res = await f.req(
    `/skeid/ui/requests?model=${encodeURIComponent('"><script>alert(1)</script>')}&limit=3`,
  );
  const html = await res.text();
  assertEquals(html.match(/<script\b/g)?.length, 1, "only the page's own script element");
  assert(!html.includes("alert(1)</script>"));
  assertEquals(preloads(html), [
    "/skeid/session",
    "/skeid/usage/events?limit=3&model=%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E",
  ]);
  assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
  assertEquals(res.headers.get("cache-control"), "no-cache");
});

Deno.test("the console's files are served with their types; an unknown one is 404", async () => {
  const f = fixture();
  const js = await f.req("/skeid/ui/app.js");
  assertEquals(js.status, 200);
  assertMatch(js.headers.get("content-type") ?? "", /^text\/javascript/);
  assertEquals(js.headers.get("content-security-policy"), CONSOLE_CSP);
  assertEquals(await js.text(), CONSOLE_ASSETS.get("app.js")?.body);
  const css = await f.req("/skeid/ui/style.css");
  assertMatch(css.headers.get("content-type") ?? "", /^text\/css/);
  await css.body?.cancel();
  const missing = await f.req("/skeid/ui/nope.js");
  assertEquals(missing.status, 404);
  await missing.body?.cancel();
  const head = await f.req("/skeid/ui", { method: "HEAD" });
  assertEquals(head.status, 200);
  assertEquals(await head.text(), "");
});

Deno.test("the page refers to its files by digest names, cached for good; itself revalidated", async () => {
  const f = fixture();
  const page = await f.req("/skeid/ui");
  assertEquals(page.headers.get("cache-control"), "no-cache");
  const html = await page.text();
  for (const name of ["app.js", "style.css"]) {
    const digestName = CONSOLE_ASSET_NAMES.get(name) ?? "";
    assertMatch(digestName, /^(app|style)\.[0-9a-f]{16}\.(js|css)$/);
    assertStringIncludes(html, `"/skeid/ui/${digestName}"`);
    assert(!html.includes(`"/skeid/ui/${name}"`), `the page names ${name} only by its digest`);
    const res = await f.req(`/skeid/ui/${digestName}`);
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
    assertEquals(await res.text(), CONSOLE_ASSETS.get(name)?.body);
    // The plain name still answers (an old page open across an upgrade), revalidated.
    const plain = await f.req(`/skeid/ui/${name}`);
    assertEquals(plain.headers.get("cache-control"), "no-cache");
    await plain.body?.cancel();
  }
  // Another digest of a known file is not that file.
  const stale = await f.req("/skeid/ui/app.0000000000000000.js");
  assertEquals(stale.status, 404);
  await stale.body?.cancel();
});

Deno.test("with the admin API off the page names the variable to set", async () => {
  const f = fixture("");
  const res = await f.req("/skeid/ui");
  assertEquals(res.status, 503);
  assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
  const text = await res.text();
  assertStringIncludes(text, "SKEID_ADMIN_API_KEY");
  assertStringIncludes(text, "admin API is off");
  // The page's script is not served while the plane is off; its stylesheet is.
  const js = await f.req("/skeid/ui/app.js");
  assertEquals(js.status, 503);
  await js.body?.cancel();
  const css = await f.req("/skeid/ui/style.css");
  assertEquals(css.status, 200);
  await css.body?.cancel();
  f.state.problem =
    "the admin API is off: admin_api_key_env names OPS_KEY, which is unset or empty";
  const named = await (await f.req("/skeid/ui")).text();
  assertStringIncludes(named, "OPS_KEY");
  f.state.problem = "names <b>";
  assertStringIncludes(await (await f.req("/skeid/ui")).text(), "ames &#60;b&#62;");
});

Deno.test("the page has no inline script and the script never parses data as HTML", () => {
  const html = CONSOLE_PAGE.body;
  for (const m of html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)) {
    assertEquals(m[1].trim(), "", "no inline script");
    assertStringIncludes(m[0], `src="/skeid/ui/${CONSOLE_ASSET_NAMES.get("app.js")}"`);
  }
  assert(!/\son[a-z]+=/i.test(html), "no inline event handler");
  assert(!/\sstyle=/i.test(html), "no inline style");
  const js = CONSOLE_ASSETS.get("app.js")?.body ?? "";
  for (const sink of ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("]) {
    assert(!js.includes(sink), `app.js uses no ${sink}`);
  }
  assert(!js.includes("localStorage") && !js.includes("sessionStorage"), "nothing stored");
  assert(!js.includes("document.cookie"), "the script never touches cookies");
  assert(!/https?:\/\//.test(js.replaceAll("http://www.w3.org/2000/svg", "")), "no other origin");
});

Deno.test("the whole console is at most 150 KB compressed", async () => {
  let total = 0;
  for (const body of [CONSOLE_PAGE.body, ...[...CONSOLE_ASSETS.values()].map((a) => a.body)]) {
    const gz = new Blob([body]).stream().pipeThrough(new CompressionStream("gzip"));
    total += (await new Response(gz).arrayBuffer()).byteLength;
  }
  assert(total <= 150 * 1024, `console is ${total} bytes gzipped`);
});

Deno.test("through a served gateway: /skeid/ui with the admin API off, then on", async () => {
  const { startGateway } = await import("../integration/helpers.ts");
  const gw = await startGateway({ nodes: [] });
  try {
    const off = await fetch(`${gw.base}/skeid/ui`);
    assertEquals(off.status, 503);
    assertStringIncludes(await off.text(), "SKEID_ADMIN_API_KEY");
    const api = await fetch(`${gw.base}/skeid/nodes`);
    assertEquals(api.status, 404, "the admin API itself stays hidden");
    await api.body?.cancel();
  } finally {
    await gw.stop();
  }
  const on = await startGateway({ nodes: [], admin_api_key: "adm-console-on-0123456789" });
  try {
    const page = await fetch(`${on.base}/skeid/ui`);
    assertEquals(page.status, 200);
    assertEquals(page.headers.get("content-security-policy"), CONSOLE_CSP);
    assertStringIncludes(await page.text(), `/skeid/ui/${CONSOLE_ASSET_NAMES.get("app.js")}`);
  } finally {
    await on.stop();
  }
});

Deno.test("a preload link's address is escaped as an attribute, whatever it holds", () => {
  const html = preloadLinks(["/skeid/x?a=\"><img src=x onerror=alert(1)>&b='$&"]);
  assertEquals(
    html,
    '<link rel="preload" as="fetch" crossorigin="anonymous" ' +
      'href="/skeid/x?a=&#34;&#62;&#60;img src=x onerror=alert(1)&#62;&#38;b=&#39;$&#38;">',
  );
});
