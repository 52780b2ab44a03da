import { assert, assertEquals } from "../_assert.ts";
import { Hono } from "hono";
import { RoutingCore } from "../../src/core/routing_core.ts";
import {
  type RegistryPublishing,
  registrySnapshotRoute,
  SNAPSHOT_PATH,
} from "../../src/registry/route.ts";
import { SIGNATURE_HEADER, verify } from "../../src/registry/sign.ts";
import { RegistrySettings } from "../../src/config/registry.ts";
import { adminRoutes } from "../../src/admin/routes.ts";
import { GatewayMetrics } from "../../src/admin/metrics.ts";
import { FunctionTable } from "../../src/core/functions.ts";
import { silentLogger } from "../../src/log.ts";
import { ADMIN_KEY, clock, READ_KEY, SECRET } from "./helpers.ts";

interface Fixture {
  app: Hono;
  state: { registry?: RegistryPublishing; adminKey: string };
  get(token?: string | null): Promise<Response>;
}

function settings(readKey?: string, secret = SECRET): RegistrySettings {
  return new RegistrySettings(
    secret,
    readKey,
    "SECRET_VAR",
    readKey ? "READ_VAR" : undefined,
    10,
    "skeid-b",
    60,
  );
}

function fixture(state: Fixture["state"]): Fixture {
  const skeid = new RoutingCore({ now: clock().now, env: () => undefined });
  skeid.addNode({ id: "gpu-1", url: "http://gpu-1:8000/v1", model: "m", max_conns: 8 });
  const app = registrySnapshotRoute({
    skeid,
    registry: () => state.registry,
    adminKey: () => state.adminKey,
  });
  return {
    app,
    state,
    get: (token = ADMIN_KEY) =>
      Promise.resolve(
        app.request(SNAPSHOT_PATH, {
          headers: token === null ? {} : { authorization: `Bearer ${token}` },
        }),
      ),
  };
}

Deno.test("route: 404 while the registry is off", async () => {
  const f = fixture({ adminKey: ADMIN_KEY });
  const res = await f.get();
  assertEquals(res.status, 404);
  await res.body?.cancel();
});

Deno.test("route: 404 when no credential could read it (no admin key, no read key)", async () => {
  const f = fixture({ adminKey: "", registry: settings() });
  const res = await f.get("anything");
  assertEquals(res.status, 404);
  await res.body?.cancel();
});

Deno.test("route: 401 on a missing or wrong bearer", async () => {
  const f = fixture({ adminKey: ADMIN_KEY, registry: settings(READ_KEY) });
  for (const token of [null, "wrong-token", `${ADMIN_KEY}x`]) {
    const res = await f.get(token);
    assertEquals(res.status, 401, `token ${token}`);
    assertEquals(await res.json(), {
      error: { message: "Missing or invalid bearer token", type: "unauthorized" },
    });
    assertEquals(res.headers.get(SIGNATURE_HEADER), null);
  }
});

Deno.test("route: the admin key or the read key opens it; signed canonical body, no-store", async () => {
  const f = fixture({ adminKey: ADMIN_KEY, registry: settings(READ_KEY) });
  for (const token of [ADMIN_KEY, READ_KEY]) {
    const res = await f.get(token);
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("cache-control"), "no-store");
    assert(res.headers.get("content-type")!.startsWith("application/json"));
    const body = new Uint8Array(await res.arrayBuffer());
    assert(await verify(body, res.headers.get(SIGNATURE_HEADER), SECRET), "signature verifies");
    const snap = JSON.parse(new TextDecoder().decode(body));
    assertEquals(snap.version, 1);
    assertEquals(snap.instance, "skeid-b");
    assertEquals(snap.ttl, 10);
    assertEquals(snap.nodes.map((n: { id: string }) => n.id), ["gpu-1"]);
  }
});

Deno.test("route: a read key alone (admin API off) opens the snapshot", async () => {
  const f = fixture({ adminKey: "", registry: settings(READ_KEY) });
  const ok = await f.get(READ_KEY);
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
  const admin = await f.get(ADMIN_KEY);
  assertEquals(admin.status, 401, "no admin key is in force, so it is just a wrong token");
  await admin.body?.cancel();
});

Deno.test("route: 503 when no signing secret is in force (never published unsigned)", async () => {
  const f = fixture({ adminKey: ADMIN_KEY, registry: settings(undefined, "") });
  const res = await f.get();
  assertEquals(res.status, 503);
  assertEquals(await res.json(), {
    error: { message: "Registry secret is not set", type: "unavailable" },
  });
  // The wrong token still gets 401 first: nothing is told to a caller without a credential.
  const anon = await f.get("wrong");
  assertEquals(anon.status, 401);
  await anon.body?.cancel();
});

Deno.test("route: settings are read per request, so a reload turns it on and off", async () => {
  const f = fixture({ adminKey: ADMIN_KEY });
  const off = await f.get();
  assertEquals(off.status, 404);
  await off.body?.cancel();
  f.state.registry = settings();
  const on = await f.get();
  assertEquals(on.status, 200);
  await on.body?.cancel();
});

Deno.test("route: mounted beside other routes, it answers only its own path and GET", async () => {
  const f = fixture({ adminKey: ADMIN_KEY, registry: settings() });
  const app = new Hono();
  app.route("/", f.app);
  app.get("/other", (c) => c.text("other"));
  const post = await app.request(SNAPSHOT_PATH, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
  });
  assertEquals(post.status, 404);
  await post.body?.cancel();
  const other = await app.request("/other");
  assertEquals(await other.text(), "other");
});

Deno.test("route: beside the admin plane, the read key opens the snapshot and nothing else", async () => {
  const skeid = new RoutingCore({ now: clock().now, env: () => undefined });
  skeid.addNode({ id: "gpu-1", url: "http://gpu-1:8000/v1", max_conns: 8 });
  const registry = settings(READ_KEY);
  const admin = adminRoutes({
    skeid,
    functions: new FunctionTable(skeid),
    adminKey: () => ADMIN_KEY,
    reloadStatus: () => ({ ok: true, error: null, failed_at: null, failures: 0 }),
    reload: () => Promise.resolve(true),
    usageReport: () => Promise.resolve({ ok: true, enabled: false }),
    metrics: new GatewayMetrics(),
    logger: silentLogger,
  });
  const snapshot = registrySnapshotRoute({
    skeid,
    registry: () => registry,
    adminKey: () => ADMIN_KEY,
  });
  // Either mount order works: the admin check steps aside for /skeid/registry/*.
  for (const parts of [[admin, snapshot], [snapshot, admin]]) {
    const app = new Hono();
    for (const part of parts) app.route("/", part);
    const get = (path: string, token: string) =>
      app.request(path, { headers: { authorization: `Bearer ${token}` } });
    const snap = await get(SNAPSHOT_PATH, READ_KEY);
    assertEquals(snap.status, 200);
    await snap.body?.cancel();
    const nodes = await get("/skeid/nodes", READ_KEY);
    assertEquals(nodes.status, 401, "the read key is not an admin key");
    await nodes.body?.cancel();
    const asAdmin = await get("/skeid/nodes", ADMIN_KEY);
    assertEquals(asAdmin.status, 200);
    await asAdmin.body?.cancel();
  }
});
