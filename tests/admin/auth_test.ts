import { assert, assertEquals, assertNotEquals } from "../_assert.ts";
import { bearerToken, secretMatches, timingSafeEqual } from "../../src/admin/auth.ts";
import { ADMIN_KEY, adminFixture, post } from "./helpers.ts";

const ROUTES: [string, string][] = [
  ["GET", "/skeid/nodes"],
  ["POST", "/skeid/nodes"],
  ["DELETE", "/skeid/nodes/gpu-1"],
  ["POST", "/skeid/nodes/gpu-1/health"],
  ["GET", "/skeid/metrics/nodes"],
  ["GET", "/skeid/metrics"],
  ["GET", "/skeid/usage"],
  ["GET", "/skeid/config"],
  ["POST", "/skeid/config/reload"],
  ["POST", "/skeid/call/engines.list"],
  ["GET", "/skeid/whatever"],
];

Deno.test("no admin key: every /skeid/* route is a plain 404, even with a bearer", async () => {
  const f = adminFixture("");
  for (const [method, path] of ROUTES) {
    for (const token of [null, "anything", ""]) {
      const res = await f.req(path, { method, token });
      assertEquals(res.status, 404, `${method} ${path}`);
      assertEquals(await res.text(), "Not Found");
    }
  }
  assertEquals(f.state.reloads, 0, "a hidden reload route does nothing");
});

Deno.test("admin key set: no bearer → 401 with the exact body and WWW-Authenticate", async () => {
  const f = adminFixture();
  for (const [method, path] of ROUTES) {
    const res = await f.req(path, { method, token: null });
    assertEquals(res.status, 401, `${method} ${path}`);
    assertEquals(res.headers.get("www-authenticate"), 'Bearer realm="skeid-admin"');
    assertEquals(await res.json(), {
      error: { message: "Missing or invalid admin bearer token", type: "unauthorized" },
    });
  }
});

Deno.test("admin key set: a wrong bearer → 401 (other value, prefix, longer, other scheme)", async () => {
  const f = adminFixture();
  const wrong = ["nope", ADMIN_KEY.slice(0, -1), ADMIN_KEY + "x", ADMIN_KEY.toUpperCase()];
  for (const token of wrong) {
    const res = await f.req("/skeid/config", { token });
    assertEquals(res.status, 401, token);
    assertEquals(res.headers.get("www-authenticate"), 'Bearer realm="skeid-admin"');
    await res.body?.cancel();
  }
  const basic = await f.app.request("/skeid/config", {
    headers: { authorization: `Basic ${btoa("admin:" + ADMIN_KEY)}` },
  });
  assertEquals(basic.status, 401);
  await basic.body?.cancel();
  const bare = await f.app.request("/skeid/config", { headers: { authorization: ADMIN_KEY } });
  assertEquals(bare.status, 401);
  await bare.body?.cancel();
});

Deno.test("admin key set: the right bearer → 200 (any case of the scheme)", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/config");
  assertEquals(res.status, 200);
  assertEquals(await res.json(), {
    ok: true,
    error: null,
    failed_at: null,
    failures: 0,
    path: null,
    last_change: null,
    last_failure: null,
  });
  const lower = await f.app.request("/skeid/call/engines.list", {
    method: "POST",
    headers: { authorization: `bearer ${ADMIN_KEY}` },
  });
  assertEquals(lower.status, 200);
  assert(Array.isArray((await lower.json()).engines));
});

Deno.test("the admin key is read per request: set → removed → 404; changed → old key 401", async () => {
  const f = adminFixture();
  assertEquals((await f.req("/skeid/config")).status, 200);
  f.state.adminKey = "";
  const off = await f.req("/skeid/config", { token: ADMIN_KEY });
  assertEquals(off.status, 404);
  await off.body?.cancel();
  f.state.adminKey = "rotated-key";
  const old = await f.req("/skeid/config", { token: ADMIN_KEY });
  assertEquals(old.status, 401);
  await old.body?.cancel();
  const now = await f.req("/skeid/config", { token: "rotated-key" });
  assertEquals(now.status, 200);
  await now.body?.cancel();
});

Deno.test("the admin check steps aside for /skeid/registry/* (its own credentials)", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/registry/snapshot", { token: null });
  assertNotEquals(res.status, 401);
  await res.body?.cancel();
});

Deno.test("an unknown admin path with the right key is a 404", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/nothing-here");
  assertEquals(res.status, 404);
  await res.body?.cancel();
  const get = await f.req("/skeid/call/engines.list"); // GET on a POST route
  assertEquals(get.status, 404);
  await get.body?.cancel();
  const wrong = await f.req("/skeid/call/engines.list", post({}, { token: "bad" }));
  assertEquals(wrong.status, 401);
  await wrong.body?.cancel();
});

Deno.test("bearerToken parses the Authorization header", () => {
  assertEquals(bearerToken("Bearer abc"), "abc");
  assertEquals(bearerToken("  bearer   abc  "), "abc");
  assertEquals(bearerToken("Bearer"), undefined);
  assertEquals(bearerToken("Bearer a b"), undefined);
  assertEquals(bearerToken("Basic abc"), undefined);
  assertEquals(bearerToken(null), undefined);
  assertEquals(bearerToken(""), undefined);
});

Deno.test("secretMatches compares SHA-256 digests; timingSafeEqual byte-wise", async () => {
  assertEquals(await secretMatches("k", "k"), true);
  assertEquals(await secretMatches("k", "K"), false);
  assertEquals(await secretMatches("", "k"), false);
  assertEquals(await secretMatches("k".repeat(1000), "k"), false);
  assertEquals(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2])), true);
  assertEquals(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3])), false);
  assertEquals(timingSafeEqual(new Uint8Array([1]), new Uint8Array([1, 2])), false);
});

Deno.test("admin answers are never stored: no-store unless the route said otherwise", async () => {
  const f = adminFixture();
  for (const [method, path] of ROUTES) {
    const res = await f.req(path, { method });
    await res.body?.cancel();
    assertEquals(res.headers.get("cache-control"), "no-store", `${method} ${path}`);
  }
  // A refusal is not stored either.
  const refused = await f.app.request("/skeid/config");
  assertEquals(refused.status, 401);
  assertEquals(refused.headers.get("cache-control"), "no-store");
  await refused.body?.cancel();
});
