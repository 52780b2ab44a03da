/**
 * Console sessions (ADR 0035) on the admin plane: sign in, the cookie's flags, 401s, the
 * per-address limit on failed sign-ins, CSRF on cookie-authenticated writes, sign-out, expiry,
 * and an admin key change ending every session.
 */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_assert.ts";
import { ADMIN_KEY, adminFixture } from "./helpers.ts";
import { LocalSessionStore } from "../../src/admin/sessions.ts";
import { adminRoutes, passesAdminCheck } from "../../src/admin/routes.ts";

/** An admin plane whose sessions run on a clock the test moves. */
function fixture() {
  const clock = { now: 1_700_000_000_000 };
  const sessions = new LocalSessionStore(() => clock.now);
  const f = adminFixture();
  f.deps.sessions = sessions;
  f.deps.sessionTtlS = () => 3600;
  return { app: adminRoutes(f.deps), state: f.state, clock, sessions };
}

async function signIn(app: ReturnType<typeof adminRoutes>, key = ADMIN_KEY, headers = {}) {
  return await app.request("/skeid/session", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ admin_key: key }),
  });
}

/** The cookie pair (`skeid_session=...`) of a Set-Cookie. */
function cookieOf(res: Response): string {
  const set = res.headers.get("set-cookie") ?? "";
  return set.split(";")[0];
}

Deno.test("sign in: 200 with the CSRF token and expiry, an HttpOnly SameSite=Strict cookie", async () => {
  const { app } = fixture();
  const res = await signIn(app);
  assertEquals(res.status, 200);
  const body = await res.json();
  assertMatch(body.csrf_token, /^[A-Za-z0-9_-]{22,}$/);
  assertEquals(body.expires_at, new Date(1_700_000_000_000 + 3600_000).toISOString());
  const set = res.headers.get("set-cookie")!;
  assertMatch(set, /^skeid_session=[A-Za-z0-9_-]{43}; /);
  assertStringIncludes(set, "HttpOnly");
  assertStringIncludes(set, "SameSite=Strict");
  assertStringIncludes(set, "Path=/skeid");
  assertStringIncludes(set, "Max-Age=3600");
  assert(!set.includes("Secure"), "plain HTTP from an untrusted peer: no Secure");
  // The admin key is in no part of the answer.
  assert(!JSON.stringify(body).includes(ADMIN_KEY) && !set.includes(ADMIN_KEY));
});

Deno.test("the cookie authenticates reads; a write needs x-csrf-token (403 without)", async () => {
  const { app } = fixture();
  const res = await signIn(app);
  const { csrf_token } = await res.json();
  const cookie = cookieOf(res);
  const nodes = await app.request("/skeid/nodes", { headers: { cookie } });
  assertEquals(nodes.status, 200);
  const again = await app.request("/skeid/session", { headers: { cookie } });
  assertEquals(again.status, 200);
  assertEquals((await again.json()).csrf_token, csrf_token);

  const spec = JSON.stringify({ id: "n1", url: "http://127.0.0.1:9/v1", model: "m" });
  const headers = { cookie, "content-type": "application/json" };
  for (const bad of [undefined, "wrong"]) {
    const h: Record<string, string> = { ...headers };
    if (bad) h["x-csrf-token"] = bad;
    const w = await app.request("/skeid/nodes", { method: "POST", headers: h, body: spec });
    assertEquals(w.status, 403);
    assertEquals(await w.json(), { ok: false, error: "csrf token missing or wrong" });
  }
  const ok = await app.request("/skeid/nodes", {
    method: "POST",
    headers: { ...headers, "x-csrf-token": csrf_token },
    body: spec,
  });
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
});

Deno.test("no cookie, a forged cookie, a wrong bearer: 401; the bearer key needs no CSRF", async () => {
  const { app } = fixture();
  const cases: Record<string, string>[] = [
    {},
    { cookie: "skeid_session=forged" },
    { authorization: "Bearer x" },
  ];
  for (const headers of cases) {
    const res = await app.request("/skeid/nodes", { headers });
    assertEquals(res.status, 401, JSON.stringify(headers));
    await res.body?.cancel();
  }
  assertEquals((await app.request("/skeid/session", {})).status, 401);
  const bearer = await app.request("/skeid/nodes", {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ id: "n2", url: "http://127.0.0.1:9/v1", model: "m" }),
  });
  assertEquals(bearer.status, 200);
  await bearer.body?.cancel();
});

Deno.test("wrong key at sign-in: 401; the sixth failure in a minute from one address: 429", async () => {
  const { app, clock } = fixture();
  for (let i = 0; i < 5; i++) {
    const res = await signIn(app, "nope");
    assertEquals(res.status, 401);
    assertEquals((await res.json()).error, "wrong admin key");
  }
  const blocked = await signIn(app); // even the right key waits
  assertEquals(blocked.status, 429);
  assertEquals(blocked.headers.get("retry-after"), "60");
  await blocked.body?.cancel();
  clock.now += 30_000;
  const still = await signIn(app);
  assertEquals([still.status, still.headers.get("retry-after")], [429, "30"]);
  await still.body?.cancel();
  clock.now += 30_001;
  const res = await signIn(app);
  assertEquals(res.status, 200);
  await res.body?.cancel();
});

Deno.test("bad sign-in bodies: 400 naming admin_key, not counted as failures", async () => {
  const { app } = fixture();
  for (let i = 0; i < 7; i++) {
    const res = await app.request("/skeid/session", { method: "POST", body: "{}" });
    assertEquals(res.status, 400);
    assertStringIncludes((await res.json()).error, "admin_key");
  }
  const res = await signIn(app);
  assertEquals(res.status, 200);
  await res.body?.cancel();
});

Deno.test("sign-out: CSRF needed, 204, the cookie cleared and the session gone on the server", async () => {
  const { app, sessions } = fixture();
  const res = await signIn(app);
  const { csrf_token } = await res.json();
  const cookie = cookieOf(res);
  const noCsrf = await app.request("/skeid/session", { method: "DELETE", headers: { cookie } });
  assertEquals(noCsrf.status, 403);
  await noCsrf.body?.cancel();
  const out = await app.request("/skeid/session", {
    method: "DELETE",
    headers: { cookie, "x-csrf-token": csrf_token },
  });
  assertEquals(out.status, 204);
  assertMatch(out.headers.get("set-cookie")!, /^skeid_session=; .*Max-Age=0/);
  assertEquals(sessions.size, 0);
  assertEquals((await app.request("/skeid/nodes", { headers: { cookie } })).status, 401);
});

Deno.test("a session expires; an admin key change ends it; the same key again does not revive it", async () => {
  const { app, clock, state } = fixture();
  const a = cookieOf(await signIn(app));
  clock.now += 3600_000;
  assertEquals((await app.request("/skeid/nodes", { headers: { cookie: a } })).status, 401);

  const b = cookieOf(await signIn(app));
  assertEquals((await app.request("/skeid/nodes", { headers: { cookie: b } })).status, 200);
  state.adminKey = "another-admin-key-987654";
  assertEquals((await app.request("/skeid/nodes", { headers: { cookie: b } })).status, 401);
  state.adminKey = ADMIN_KEY;
  assertEquals((await app.request("/skeid/nodes", { headers: { cookie: b } })).status, 401);
});

Deno.test("Secure only over TLS or X-Forwarded-Proto: https from a trusted hop", async () => {
  const f = adminFixture();
  f.deps.trustedProxies = () => new Set(["10.0.0.5"]);
  const app = adminRoutes(f.deps);
  const at = (hostname: string) => ({ remoteAddr: { transport: "tcp", hostname, port: 1 } });
  const req = (url: string, headers: Record<string, string>) =>
    new Request(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ admin_key: ADMIN_KEY }),
    });
  const xfp = { "x-forwarded-proto": "https" };
  const trusted = await app.fetch(req("http://gw/skeid/session", xfp), at("10.0.0.5"));
  assertStringIncludes(trusted.headers.get("set-cookie")!, "; Secure");
  const untrusted = await app.fetch(req("http://gw/skeid/session", xfp), at("10.0.0.6"));
  assert(!untrusted.headers.get("set-cookie")!.includes("Secure"));
  const tls = await app.fetch(req("https://gw/skeid/session", {}), at("10.0.0.6"));
  assertStringIncludes(tls.headers.get("set-cookie")!, "; Secure");
});

Deno.test("failed sign-ins count per client address: X-Forwarded-For only from a trusted hop", async () => {
  const f = adminFixture();
  f.deps.trustedProxies = () => new Set(["10.0.0.5"]);
  f.deps.sessions = new LocalSessionStore();
  const app = adminRoutes(f.deps);
  const at = (hostname: string) => ({ remoteAddr: { transport: "tcp", hostname, port: 1 } });
  const attempt = (peer: string, xff?: string) =>
    app.fetch(
      new Request("http://gw/skeid/session", {
        method: "POST",
        headers: xff ? { "x-forwarded-for": xff } : {},
        body: JSON.stringify({ admin_key: "wrong" }),
      }),
      at(peer),
    );
  for (let i = 0; i < 5; i++) {
    await (await attempt("10.0.0.5", `1.1.1.${i}, 2.2.2.2`)).body?.cancel();
  }
  // Five failures of 2.2.2.2 behind the trusted hop: it waits, another client behind it does not.
  assertEquals((await attempt("10.0.0.5", "3.3.3.3, 2.2.2.2")).status, 429);
  assertEquals((await attempt("10.0.0.5", "2.2.2.3")).status, 401);
  // An untrusted peer's X-Forwarded-For is ignored: its failures are its own address's.
  for (let i = 0; i < 5; i++) await (await attempt("10.9.9.9", `9.9.9.${i}`)).body?.cancel();
  assertEquals((await attempt("10.9.9.9", "8.8.8.8")).status, 429);
});

Deno.test("the session store is bounded: the oldest session goes first", async () => {
  const store = new LocalSessionStore(Date.now, 3);
  const made = [];
  for (let i = 0; i < 4; i++) made.push(await store.create("h", 60_000));
  assertEquals(store.size, 3);
  assertEquals(await store.find(made[0].token, "h"), undefined);
  assert(await store.find(made[3].token, "h"));
});

Deno.test("/skeid/ui and /skeid/ui/* pass the admin check to a later handler", () => {
  for (const p of ["/skeid/ui", "/skeid/ui/", "/skeid/ui/app.js", "/skeid/registry/snapshot"]) {
    assert(passesAdminCheck(p), p);
  }
  for (const p of ["/skeid/uix", "/skeid/nodes", "/skeid/session"]) assert(!passesAdminCheck(p), p);
});

Deno.test("admin API off: /skeid/session is a 404 like every admin route", async () => {
  const f = adminFixture("");
  const res = await signIn(f.app, "");
  assertEquals(res.status, 404);
  await res.body?.cancel();
});
