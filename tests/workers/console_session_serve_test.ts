/**
 * Console sessions through `skeid serve --workers 2` (ADR 0035): a session made on whichever
 * worker took the sign-in is good on every worker (each request on a new connection), and a
 * sign-out on one ends it on all.
 */
import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { endChild } from "../_helpers/cli.ts";
import { fileURLToPath } from "node:url";
import { tempDir } from "../_helpers/temp.ts";

const launcher = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

Deno.test("serve --workers 2: one session for the group, ended everywhere by sign-out", async () => {
  const tmp = await tempDir();
  await Deno.writeTextFile(
    `${tmp.dir}/skeid.yaml`,
    "admin:\n  api_key: adm-serve-0123456789\n" +
      "nodes:\n  - id: n\n    url: http://127.0.0.1:9/v1\n    model: m\n",
  );
  const proc = new Deno.Command(launcher, {
    args: [
      "serve",
      "--config",
      `${tmp.dir}/skeid.yaml`,
      "--listen",
      "127.0.0.1:0",
      "--workers",
      "2",
    ],
    stdout: "piped",
    stderr: "null",
    env: { SKEID_LOG_LEVEL: "error" },
  }).spawn();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let text = "";
    const end = Date.now() + 30_000;
    while (!/--workers 2/.test(text) && Date.now() < end) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    assertMatch(text, /--workers 2/);
    const base = text.match(/http:\/\/127\.0\.0\.1:\d+/)![0];
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
    await endChild(proc);
    await reader.cancel().catch(() => {});
    await tmp.cleanup();
  }
});
