import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { Hono } from "hono";
import { adminFixture, post } from "./helpers.ts";

Deno.test("GET /skeid/usage passes the filters, default limit 50; 200 when ok", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/usage?since=2026-01-01T00:00:00Z&api_key_id=k_1&model=m");
  assertEquals(res.status, 200);
  assertEquals(await res.json(), f.state.report);
  assertEquals(f.state.reportFilters, [
    { since: "2026-01-01T00:00:00Z", api_key_id: "k_1", model: "m", limit: 50 },
  ]);
});

Deno.test("GET /skeid/usage: explicit limit, empty filters dropped, bad limit → default", async () => {
  const f = adminFixture();
  await (await f.req("/skeid/usage?limit=7&model=&since=")).body?.cancel();
  await (await f.req("/skeid/usage?limit=lots")).body?.cancel();
  assertEquals(f.state.reportFilters, [{ limit: 7 }, { limit: 50 }]);
});

Deno.test("GET /skeid/usage answers 400 when the report is not ok (no store)", async () => {
  const f = adminFixture();
  f.state.report = { ok: false, enabled: false, error: "usage_store not configured" };
  const res = await f.req("/skeid/usage");
  assertEquals(res.status, 400);
  assertEquals(await res.json(), {
    ok: false,
    enabled: false,
    error: "usage_store not configured",
  });
});

Deno.test("GET /skeid/config shows the reload status with its message", async () => {
  const f = adminFixture();
  f.state.reloadStatus = {
    ok: false,
    error: "nodes[2].engine: unknown engine 'x'",
    failed_at: "2026-09-25T16:08:30Z",
    failures: 3,
  };
  const res = await f.req("/skeid/config");
  assertEquals(res.status, 200);
  // Without a config manager behind it the Config page's fields say there is nothing to show.
  assertEquals(await res.json(), {
    ...f.state.reloadStatus,
    path: null,
    last_change: null,
    last_failure: null,
  });
});

Deno.test("POST /skeid/config/reload: ok → 200; a failure → 500 with the message", async () => {
  const f = adminFixture();
  const ok = await f.req("/skeid/config/reload", { method: "POST" });
  assertEquals(ok.status, 200);
  const body = await ok.json();
  assertEquals(body.ok, true);
  assertEquals(f.state.reloads, 1);
  f.state.reloadError = "nodes[0].url: missing";
  const bad = await f.req("/skeid/config/reload", { method: "POST" });
  assertEquals(bad.status, 500);
  const badBody = await bad.json();
  assertEquals(badBody.ok, false);
  assertEquals(badBody.error, "nodes[0].url: missing");
  assertEquals(f.state.reloads, 2);
});

Deno.test("POST /skeid/call/:function: JSON args in, JSON result out", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/call/engines.list", post({}));
  assertEquals(res.status, 200);
  const body = await res.json();
  assert(body.engines.includes("openaibase"));
  const empty = await f.req("/skeid/call/engines.list", { method: "POST" });
  assertEquals(empty.status, 200, "an empty body is no args");
  await empty.body?.cancel();
});

Deno.test("POST /skeid/call/:function: errors carry their status and {ok:false,error}", async () => {
  const f = adminFixture();
  const unknown = await f.req("/skeid/call/nodes.explode", post({}));
  assertEquals(unknown.status, 404);
  assertEquals(await unknown.json(), { ok: false, error: "unknown function 'nodes.explode'" });
  const missing = await f.req("/skeid/call/route.plan", post({}));
  assertEquals(missing.status, 400);
  assertEquals(await missing.json(), {
    ok: false,
    error: "route.plan: missing required argument 'model'",
  });
  const notObject = await f.req("/skeid/call/route.plan", post([1]));
  assertEquals(notObject.status, 400);
  assertMatch((await notObject.json()).error, /args must be a JSON object/);
  const badJson = await f.req("/skeid/call/route.plan", post("{oops"));
  assertEquals(badJson.status, 400);
  assertMatch((await badJson.json()).error, /not valid JSON/);
  const noHook = await f.req("/skeid/call/usage.report", post({}));
  assertEquals(noHook.status, 501);
  assertEquals(await noHook.json(), { ok: false, error: "usage.report: no usage store" });
});

Deno.test("POST /skeid/call/:function round trip through the core: capacity.set → capacity.get", async () => {
  const f = adminFixture();
  f.skeid.addNode({ id: "gpu-1", url: "http://127.0.0.1:9", model: "m" });
  const set = await f.req(
    "/skeid/call/capacity.set",
    post({ id: "gpu-1", used: 2, limit: 4, source: "custom" }),
  );
  assertEquals(set.status, 200);
  await set.body?.cancel();
  const get = await f.req("/skeid/call/capacity.get", post({ id: "gpu-1" }));
  assertEquals(await get.json(), {
    capacity: { source: "custom", used: 2, limit: 4, at: 1_700_000_000 },
  });
});

Deno.test("mounted under a parent app: admin routes work, the parent's registry route is untouched", async () => {
  const f = adminFixture();
  const parent = new Hono();
  parent.get("/skeid/registry/snapshot", (c) => c.json({ version: 1 }));
  parent.route("/", f.app);
  parent.get("/health", (c) => c.json({ status: "ok" }));
  const snap = await parent.request("/skeid/registry/snapshot");
  assertEquals(snap.status, 200, "no admin bearer needed for the registry route");
  assertEquals(await snap.json(), { version: 1 });
  const health = await parent.request("/health");
  assertEquals(health.status, 200);
  await health.body?.cancel();
  const noBearer = await parent.request("/skeid/config");
  assertEquals(noBearer.status, 401);
  await noBearer.body?.cancel();
  const ok = await parent.request("/skeid/config", {
    headers: { authorization: `Bearer ${f.state.adminKey}` },
  });
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
});

Deno.test("GET /skeid/workers: a process serving alone lists itself as the one worker", async () => {
  const f = adminFixture();
  f.skeid.addNode({ id: "n1", url: "http://127.0.0.1:9/v1", model: "m", max_conns: 4 });
  assert(f.skeid.startRequest("n1"), "one request admitted");
  const res = await f.req("/skeid/workers");
  assertEquals(res.status, 200);
  assertEquals(await res.json(), {
    workers: [{
      index: 0,
      started_at: "2023-11-14T22:13:20.000Z",
      restarts: 0,
      requests: 1,
      inflight: 1,
    }],
  });
  assertEquals((await f.req("/skeid/workers", { token: "wrong" })).status, 401);
});
