/**
 * Console sessions through a real gateway (ADR 0035): a session made by sign-in authenticates
 * the admin routes served by the worker and those answered for the group; it survives a reload
 * and ends when the admin key changes. With SKEID_TEST_WORKERS=2 every request below may land on
 * either worker (each connection closed), and a worker holds no session of its own.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startGateway } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";

function config(adminKey: string, extra: Record<string, unknown> = {}) {
  return {
    admin: { api_key: adminKey, session_ttl_s: 600 },
    nodes: [{ id: "n1", url: "http://127.0.0.1:9/v1", model: "m" }],
    ...extra,
  };
}

Deno.test("console session: good on every admin route, across a reload, ended by a key change", async () => {
  const t = await startGateway(config("adm-one-0123456789"));
  try {
    const signIn = await fetch(`${t.base}/skeid/session`, {
      method: "POST",
      headers: { connection: "close", "content-type": "application/json" },
      body: JSON.stringify({ admin_key: "adm-one-0123456789" }),
    });
    assertEquals(signIn.status, 200);
    const { csrf_token, expires_at } = await signIn.json();
    assert(Date.parse(expires_at) - Date.now() > 590_000, expires_at);
    const set = signIn.headers.get("set-cookie")!;
    assert(set.includes("Max-Age=600"), set);
    const cookie = set.split(";")[0];
    const get = async (path: string) => {
      const res = await fetch(`${t.base}${path}`, { headers: { cookie, connection: "close" } });
      await res.body?.cancel();
      return res.status;
    };
    // Served by the worker (nodes), answered for the group (config, workers), the session itself.
    for (let i = 0; i < 4; i++) {
      assertEquals(
        await Promise.all(["/skeid/nodes", "/skeid/config", "/skeid/workers", "/skeid/session"]
          .map(get)),
        [200, 200, 200, 200],
      );
    }
    // A write with the cookie and its CSRF token, handed to every worker.
    const health = await fetch(`${t.base}/skeid/nodes/n1/health`, {
      method: "POST",
      headers: { cookie, "x-csrf-token": csrf_token, connection: "close" },
      body: JSON.stringify({ healthy: false }),
    });
    assertEquals(health.status, 200);
    await health.body?.cancel();
    const noCsrf = await fetch(`${t.base}/skeid/nodes/n1/health`, {
      method: "POST",
      headers: { cookie, connection: "close" },
      body: JSON.stringify({ healthy: true }),
    });
    assertEquals(noCsrf.status, 403);
    await noCsrf.body?.cancel();

    // A reload that keeps the admin key keeps the session.
    await t.writeConfig(config("adm-one-0123456789", { routing: { wait_timeout_ms: 1234 } }));
    const reload = await fetch(`${t.base}/skeid/config/reload`, {
      method: "POST",
      headers: { cookie, "x-csrf-token": csrf_token, connection: "close" },
    });
    assertEquals(reload.status, 200);
    await reload.body?.cancel();
    await t.group.configApplied();
    assertEquals(await get("/skeid/nodes"), 200);

    // A new admin key ends it, on every worker.
    await t.writeConfig(config("adm-two-0123456789"));
    await until(async () => (await get("/skeid/config")) === 401, "the new admin key", 10_000, 50);
    await t.group.configApplied();
    for (let i = 0; i < 4; i++) assertEquals(await get("/skeid/nodes"), 401);
  } finally {
    await t.stop();
  }
});

Deno.test("console session: sign-out on one connection ends it for every later one", async () => {
  const t = await startGateway(config("adm-one-0123456789"));
  try {
    const signIn = await fetch(`${t.base}/skeid/session`, {
      method: "POST",
      headers: { connection: "close" },
      body: JSON.stringify({ admin_key: "adm-one-0123456789" }),
    });
    const { csrf_token } = await signIn.json();
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0];
    const out = await fetch(`${t.base}/skeid/session`, {
      method: "DELETE",
      headers: { cookie, "x-csrf-token": csrf_token, connection: "close" },
    });
    assertEquals(out.status, 204);
    await out.body?.cancel();
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${t.base}/skeid/nodes`, {
        headers: { cookie, connection: "close" },
      });
      assertEquals(res.status, 401);
      await res.body?.cancel();
    }
  } finally {
    await t.stop();
  }
});
