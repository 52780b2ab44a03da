/**
 * The file-descriptor case, scripted: `skeid serve` under `ulimit -n 160` takes 400 silent client
 * connections (far past the limit) without exiting, and answers `/health` at once when they go.
 */
import { fileURLToPath } from "node:url";
import { assert, assertEquals } from "../_assert.ts";
import { readListening } from "./serve_helpers.ts";

const LAUNCHER = fileURLToPath(new URL("../../scripts/skeid", import.meta.url));

Deno.test("listener: 400 silent connections under ulimit -n 160 never end the process", async () => {
  const child = new Deno.Command("bash", {
    args: ["-c", `ulimit -n 160 && exec "$0" serve --listen 127.0.0.1:0`, LAUNCHER],
    stdout: "piped",
    stderr: "piped",
    env: { SKEID_LOG_LEVEL: "error" },
  }).spawn();
  const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  const conns: Deno.Conn[] = [];
  let exited = false;
  child.status.then(() => exited = true);
  try {
    const base = await readListening(stdout);
    const port = Number(new URL(base).port);
    for (let i = 0; i < 400 && !exited; i++) {
      try {
        conns.push(await Deno.connect({ hostname: "127.0.0.1", port }));
      } catch {
        break; // our own side may run out first; the server must not care
      }
    }
    assert(conns.length >= 300, `opened ${conns.length} connections`);
    const mid = await fetch(`${base}/health`).catch((err) => err as Error);
    if (mid instanceof Response) await mid.body?.cancel();
    assert(!exited, "the server is still running with every connection open");
    for (const c of conns) c.close();
    conns.length = 0;
    const res = await fetch(`${base}/health`);
    assertEquals(res.status, 200, "serves again once load dropped");
    await res.body?.cancel();
    assert(!exited, "still running");
  } finally {
    for (const c of conns) c.close();
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    const status = await child.status;
    await stdout.cancel().catch(() => {});
    const err = await stderr;
    assert(!/Too many open files/.test(err) || status.code === 0, `no crash: ${err.slice(-500)}`);
    assertEquals(status.code, 0, `exit 0 on SIGTERM: ${err.slice(-2000)}`);
  }
});
