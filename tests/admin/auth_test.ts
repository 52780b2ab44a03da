import assert from "node:assert/strict";
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
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(await res.text(), "Not Found");
    }
  }
  assert.equal(f.state.reloads, 0, "a hidden reload route does nothing");
});

Deno.test("admin key set: no bearer → 401 with the exact body and WWW-Authenticate", async () => {
  const f = adminFixture();
  for (const [method, path] of ROUTES) {
    const res = await f.req(path, { method, token: null });
    assert.equal(res.status, 401, `${method} ${path}`);
    assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="skeid-admin"');
    assert.deepEqual(await res.json(), {
      error: { message: "Missing or invalid admin bearer token", type: "unauthorized" },
    });
  }
});

Deno.test("admin key set: a wrong bearer → 401 (other value, prefix, longer, other scheme)", async () => {
  const f = adminFixture();
  const wrong = ["nope", ADMIN_KEY.slice(0, -1), ADMIN_KEY + "x", ADMIN_KEY.toUpperCase()];
  for (const token of wrong) {
    const res = await f.req("/skeid/config", { token });
    assert.equal(res.status, 401, token);
    assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="skeid-admin"');
    await res.body?.cancel();
  }
  const basic = await f.app.request("/skeid/config", {
    headers: { authorization: `Basic ${btoa("admin:" + ADMIN_KEY)}` },
  });
  assert.equal(basic.status, 401);
  await basic.body?.cancel();
  const bare = await f.app.request("/skeid/config", { headers: { authorization: ADMIN_KEY } });
  assert.equal(bare.status, 401);
  await bare.body?.cancel();
});

Deno.test("admin key set: the right bearer → 200 (any case of the scheme)", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/config");
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { ok: true, error: null, failed_at: null, failures: 0 });
  const lower = await f.app.request("/skeid/call/engines.list", {
    method: "POST",
    headers: { authorization: `bearer ${ADMIN_KEY}` },
  });
  assert.equal(lower.status, 200);
  assert.ok(Array.isArray((await lower.json()).engines));
});

Deno.test("the admin key is read per request: set → removed → 404; changed → old key 401", async () => {
  const f = adminFixture();
  assert.equal((await f.req("/skeid/config")).status, 200);
  f.state.adminKey = "";
  const off = await f.req("/skeid/config", { token: ADMIN_KEY });
  assert.equal(off.status, 404);
  await off.body?.cancel();
  f.state.adminKey = "rotated-key";
  const old = await f.req("/skeid/config", { token: ADMIN_KEY });
  assert.equal(old.status, 401);
  await old.body?.cancel();
  const now = await f.req("/skeid/config", { token: "rotated-key" });
  assert.equal(now.status, 200);
  await now.body?.cancel();
});

Deno.test("the admin check steps aside for /skeid/registry/* (its own credentials)", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/registry/snapshot", { token: null });
  assert.notEqual(res.status, 401);
  await res.body?.cancel();
});

Deno.test("an unknown admin path with the right key is a 404", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/nothing-here");
  assert.equal(res.status, 404);
  await res.body?.cancel();
  const get = await f.req("/skeid/call/engines.list"); // GET on a POST route
  assert.equal(get.status, 404);
  await get.body?.cancel();
  const wrong = await f.req("/skeid/call/engines.list", post({}, { token: "bad" }));
  assert.equal(wrong.status, 401);
  await wrong.body?.cancel();
});

Deno.test("bearerToken parses the Authorization header", () => {
  assert.equal(bearerToken("Bearer abc"), "abc");
  assert.equal(bearerToken("  bearer   abc  "), "abc");
  assert.equal(bearerToken("Bearer"), undefined);
  assert.equal(bearerToken("Bearer a b"), undefined);
  assert.equal(bearerToken("Basic abc"), undefined);
  assert.equal(bearerToken(null), undefined);
  assert.equal(bearerToken(""), undefined);
});

Deno.test("secretMatches compares SHA-256 digests; timingSafeEqual byte-wise", async () => {
  assert.equal(await secretMatches("k", "k"), true);
  assert.equal(await secretMatches("k", "K"), false);
  assert.equal(await secretMatches("", "k"), false);
  assert.equal(await secretMatches("k".repeat(1000), "k"), false);
  assert.equal(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2])), true);
  assert.equal(timingSafeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3])), false);
  assert.equal(timingSafeEqual(new Uint8Array([1]), new Uint8Array([1, 2])), false);
});
