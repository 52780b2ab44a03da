import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_assert.ts";
import { CONSOLE_CSP, consoleRoutes } from "../../src/console/console_routes.ts";
import { asParsed, CONSOLE_ASSETS, CONSOLE_PAGE } from "../../src/console/assets.ts";
import { type FirstAnswer, firstAnswersBlock, seriesPath } from "../../src/console/first_calls.ts";

/** 2026-12-02T10:20:00Z: the Usage page's ranges end with 11:00. */
const NOW = Date.UTC(2026, 11, 2, 10, 20);
const SIGNED_IN = "skeid_session=good";

/**
 * The console's routes over a fake admin API: the session check answers 200 for `SIGNED_IN`'s
 * cookie and 401 otherwise; a data call answers its own path back, and its `model` filter decoded
 * (text a client chose, as an answer can hold). `data` replaces the data calls' answer. Every
 * call is recorded.
 */
function fixture(
  key = "adm-key",
  problem: string | null = null,
  data?: (path: string) => Promise<FirstAnswer>,
) {
  const state = { key, problem };
  const asked: string[] = [];
  const app = consoleRoutes({
    adminKey: () => state.key,
    adminKeyProblem: () => state.problem,
    now: () => NOW,
    firstAnswer: (path, page) => {
      asked.push(path);
      if (page.headers.get("cookie") !== SIGNED_IN) {
        return Promise.resolve({ status: 401, body: { ok: false } });
      }
      if (path === "/skeid/session") {
        return Promise.resolve({ status: 200, body: { csrf_token: "t" } });
      }
      if (data) return data(path);
      const model = new URL(path, "http://x").searchParams.get("model");
      return Promise.resolve({
        status: 200,
        body: model === null ? { echo: path } : { echo: path, model },
      });
    },
  });
  return {
    state,
    asked,
    req: (path: string, init?: RequestInit) => app.request(path, init),
    signedIn: (path: string) => app.request(path, { headers: { cookie: SIGNED_IN } }),
  };
}

/** The first answers a page's HTML carries, by path. */
function answersIn(html: string): Record<string, FirstAnswer> {
  const m = /<script type="application\/json" id="skeid-first-answers">([^<]*)<\/script>/.exec(
    html,
  );
  assert(m !== null, "the page carries its first answers");
  return JSON.parse(m[1]);
}

Deno.test("GET /skeid/ui answers the page with the strict CSP, never stored", async () => {
  const f = fixture();
  for (const path of ["/skeid/ui", "/skeid/ui/"]) {
    const res = await f.req(path);
    assertEquals(res.status, 200);
    assertMatch(res.headers.get("content-type") ?? "", /^text\/html/);
    assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
    assertEquals(res.headers.get("x-content-type-options"), "nosniff");
    assertEquals(res.headers.get("cache-control"), "private, no-store");
    const html = await res.text();
    // The page as built, its first answers where it marks them: here, no session.
    const answers = new Map([["/skeid/session", { status: 401, body: { ok: false } }]]);
    assertEquals(
      html,
      CONSOLE_PAGE.body.replace("<!--skeid:first-answers-->", firstAnswersBlock(answers)),
    );
  }
  assertStringIncludes(CONSOLE_CSP, "default-src 'self'");
  assertStringIncludes(CONSOLE_CSP, "frame-ancestors 'none'");
  assert(!CONSOLE_CSP.includes("unsafe"), "no unsafe-* source in the CSP");
});

Deno.test("each page's address asks its first calls while the HTML is built", async () => {
  const f = fixture();
  const at = async (path: string) => {
    f.asked.length = 0;
    const answers = answersIn(await (await f.signedIn(path)).text());
    assertEquals(Object.keys(answers), f.asked, "the page carries every answer it asked for");
    return [...f.asked];
  };
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

Deno.test("without a session a page asks nothing past the session check", async () => {
  const f = fixture();
  const html = await (await f.req("/skeid/ui/requests")).text();
  assertEquals(f.asked, ["/skeid/session"]);
  assertEquals(answersIn(html), { "/skeid/session": { status: 401, body: { ok: false } } });
  f.asked.length = 0;
  const head = await f.req("/skeid/ui/requests", {
    method: "HEAD",
    headers: { cookie: SIGNED_IN },
  });
  assertEquals(await head.text(), "");
  assertEquals(f.asked, [], "a HEAD asks nothing");
});

Deno.test("a page's address is text in its HTML: markup in the query stays data", async () => {
  const f = fixture();
  const evil = '"></script><!--<script>alert(1)</script>';
  const res = await f.signedIn(`/skeid/ui/requests?model=${encodeURIComponent(evil)}&limit=3`);
  const html = await res.text();
  assertEquals(html.match(/<script\b/g)?.length, 2, "the answers' data block and the script");
  assert(!html.includes("alert(1)</script>"));
  const block = html.slice(html.indexOf('id="skeid-first-answers">'));
  assert(!block.slice(25, block.indexOf("</script>")).includes("<"), "no < in the block");
  const path = "/skeid/usage/events?limit=3&model=%22%3E%3C%2Fscript%3E%3C%21--%3Cscript%3E" +
    "alert%281%29%3C%2Fscript%3E";
  // The answer held the markup itself, decoded: it comes back whole, as data.
  assertEquals(answersIn(html)[path], { status: 200, body: { echo: path, model: evil } });
  assertEquals(res.headers.get("content-security-policy"), CONSOLE_CSP);
});

Deno.test("a first call that fails or is slow is left out: the script asks for it", async () => {
  const slow = fixture("adm-key", null, () => new Promise(() => {}));
  const started = performance.now();
  const html = await (await slow.signedIn("/skeid/ui/requests")).text();
  assert(performance.now() - started < 5000, "the page did not wait for the hung call");
  assertEquals(Object.keys(answersIn(html)), ["/skeid/session"], "the hung call is left out");
  const failing = fixture("adm-key", null, () => Promise.reject(new Error("store down")));
  const res = await failing.signedIn("/skeid/ui/requests");
  assertEquals(res.status, 200, "a failed call does not fail the page");
  assertEquals(Object.keys(answersIn(await res.text())), ["/skeid/session"]);
});

Deno.test("the inline text is the parser's: CRLF line ends become LF before the hash", () => {
  assertEquals(asParsed("a\r\nb\rc\n"), "a\nb\nc\n");
  assert(!CONSOLE_PAGE.body.includes("\r"), "no CR in the page");
  assertEquals(CONSOLE_ASSETS.get("app.js")?.body, asParsed(CONSOLE_ASSETS.get("app.js")!.body));
});

Deno.test("an answer's text never ends its data block, whatever it holds", () => {
  const body = { error: "</script><script>alert(1)</script><!-- \u2028 $& '\"" };
  const block = firstAnswersBlock(new Map([["/skeid/x", { status: 500, body }]]));
  const inner = block.slice(block.indexOf(">") + 1, block.lastIndexOf("</script>"));
  assert(!inner.includes("<"), `no < inside the block: ${inner}`);
  assertEquals(JSON.parse(inner), { "/skeid/x": { status: 500, body } });
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

Deno.test("the page carries its own script and stylesheet, admitted by their hashes", async () => {
  const html = CONSOLE_PAGE.body;
  const hash = async (text: string) =>
    `'sha256-${
      btoa(String.fromCharCode(
        ...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))),
      ))
    }'`;
  const js = CONSOLE_ASSETS.get("app.js")?.body ?? "";
  const css = CONSOLE_ASSETS.get("style.css")?.body ?? "";
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assertEquals(scripts.map((m) => m[1]), [' type="module"'], "one script element: the module");
  assertEquals(scripts[0][2], js, "its text is app.js, exactly");
  const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)];
  assertEquals(styles.map((m) => m[1]), [css], "one style element: style.css, exactly");
  assertStringIncludes(CONSOLE_CSP, `script-src 'self' ${await hash(js)}`);
  assertStringIncludes(CONSOLE_CSP, `style-src 'self' ${await hash(css)}`);
  assert(!html.includes('src="/skeid/ui/'), "nothing fetched before the first screen");
  const rest = html.replace(/<(script|style)\b[\s\S]*?<\/\1>/g, "");
  assert(!/\son[a-z]+=/i.test(rest), "no inline event handler");
  assert(!/\sstyle=/i.test(rest), "no inline style");
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
  const key = "adm-console-on-0123456789";
  const on = await startGateway({ nodes: [], admin_api_key: key });
  try {
    const page = await fetch(`${on.base}/skeid/ui/requests`);
    assertEquals(page.status, 200);
    assertEquals(page.headers.get("content-security-policy"), CONSOLE_CSP);
    const out = answersIn(await page.text());
    assertEquals(Object.keys(out), ["/skeid/session"], "signed out: the session check only");
    assertEquals(out["/skeid/session"].status, 401);
    // Signed in, the page carries the admin API's own answers to its first calls.
    const signIn = await fetch(`${on.base}/skeid/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ admin_key: key }),
    });
    assertEquals(signIn.status, 200);
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0];
    const { csrf_token } = await signIn.json();
    const signed = await fetch(`${on.base}/skeid/ui/requests`, { headers: { cookie } });
    const html = await signed.text();
    const answers = answersIn(html);
    const session = answers["/skeid/session"];
    assertEquals(session.status, 200);
    assertEquals((session.body as { csrf_token: string }).csrf_token, csrf_token);
    const events = answers["/skeid/usage/events?limit=50"];
    const direct = await fetch(`${on.base}/skeid/usage/events?limit=50`, { headers: { cookie } });
    assertEquals(events, { status: direct.status, body: await direct.json() });
  } finally {
    await on.stop();
  }
});
