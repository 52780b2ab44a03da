/**
 * Console sessions through `skeid serve --workers 2` (ADR 0035): a session made on whichever
 * worker took the sign-in is good on every worker (each request on a new connection), and a
 * sign-out on one ends it on all.
 */
import { assert, assertEquals } from "../_assert.ts";
import { type ServedGroup, serveWorkers } from "../_helpers/cli.ts";
import { tempDir } from "../_helpers/temp.ts";

Deno.test("serve --workers 2: one session for the group, ended everywhere by sign-out", async () => {
  const tmp = await tempDir();
  await Deno.writeTextFile(
    `${tmp.dir}/skeid.yaml`,
    "admin:\n  api_key: adm-serve-0123456789\n" +
      "nodes:\n  - id: n\n    url: http://127.0.0.1:9/v1\n    model: m\n",
  );
  let served: ServedGroup | undefined;
  try {
    served = await serveWorkers(`${tmp.dir}/skeid.yaml`);
    const { base } = served;
    const signIn = await fetch(`${base}/skeid/session`, {
      method: "POST",
      headers: { connection: "close" },
      body: JSON.stringify({ admin_key: "adm-serve-0123456789" }),
    });
    assertEquals(signIn.status, 200);
    const { csrf_token } = await signIn.json();
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0];
    const status = async (path: string) => {
      const r = await fetch(`${base}${path}`, { headers: { cookie, connection: "close" } });
      await r.body?.cancel();
      return r.status;
    };
    const before: number[] = [];
    for (let i = 0; i < 8; i++) {
      before.push(await status(i % 2 ? "/skeid/nodes" : "/skeid/live/snapshot"));
    }
    assert(before.every((s) => s === 200), `${before}`);
    const out = await fetch(`${base}/skeid/session`, {
      method: "DELETE",
      headers: { cookie, "x-csrf-token": csrf_token, connection: "close" },
    });
    assertEquals(out.status, 204);
    await out.body?.cancel();
    const after: number[] = [];
    for (let i = 0; i < 8; i++) after.push(await status("/skeid/nodes"));
    assert(after.every((s) => s === 401), `${after}`);
  } finally {
    await served?.stop();
    await tmp.cleanup();
  }
});
