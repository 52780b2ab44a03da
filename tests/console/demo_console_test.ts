import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { consoleLines, demoAdminKey } from "../../src/cli/demo.ts";
import { endChild } from "../_helpers/cli.ts";

Deno.test("demo admin keys are fresh, long and URL-safe", () => {
  const a = demoAdminKey();
  const b = demoAdminKey();
  assert(a !== b);
  assertMatch(a, /^[A-Za-z0-9_-]{32}$/);
  assertEquals(consoleLines("http://127.0.0.1:1", a), [
    "skeid demo: console at http://127.0.0.1:1/skeid/ui",
    `skeid demo: sign in with the admin key ${a}`,
  ]);
});

Deno.test({
  name: "skeid demo prints the console's address and a key that signs in",
  sanitizeResources: false,
  fn: async () => {
    const proc = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--allow-net",
        "--allow-read",
        "--allow-write",
        "--allow-env",
        "--allow-sys=hostname,osRelease,networkInterfaces",
        "--unstable-net",
        new URL("../../src/main.ts", import.meta.url).pathname,
        "demo",
        "--listen",
        "127.0.0.1:0",
      ],
      stdout: "piped",
      stderr: "null",
      stdin: "null",
    }).spawn();
    try {
      let out = "";
      const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
      const deadline = Date.now() + 20_000;
      // Read until both console lines are out (bounded by the deadline and the stream's end).
      while (!/sign in with the admin key \S+\n/.test(out) && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        out += value;
      }
      reader.releaseLock();
      const ui = /console at (\S+)\n/.exec(out)?.[1];
      const key = /sign in with the admin key (\S+)\n/.exec(out)?.[1];
      assert(ui && key, `demo printed: ${out}`);
      const page = await fetch(ui);
      assertEquals(page.status, 200);
      assertMatch(await page.text(), /Skeid console/);
      const session = await fetch(new URL("/skeid/session", ui), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ admin_key: key }),
      });
      assertEquals(session.status, 200);
      assert(typeof (await session.json()).csrf_token === "string");
    } finally {
      await endChild(proc);
      await proc.stdout.cancel().catch(() => {});
    }
  },
});
