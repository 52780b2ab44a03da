/** `admin.session_ttl_s` and `admin.trusted_proxies` (ADR 0035): `skeid check` names path and line. */
import { assertEquals, assertStringIncludes } from "../_assert.ts";
import { run } from "../../src/cli/check.ts";
import { runCli } from "../_helpers/cli.ts";
import { tempDir } from "../_helpers/temp.ts";

Deno.test("skeid check: a bad session_ttl_s or trusted_proxies entry, with path and line", async () => {
  const tmp = await tempDir();
  try {
    const path = `${tmp.dir}/skeid.yaml`;
    await Deno.writeTextFile(
      path,
      "admin:\n  api_key: adm\n  session_ttl_s: 10\n  trusted_proxies:\n    - 10.0.0.1\n    - proxy.example\n",
    );
    const r = await runCli(run, ["--config", path]);
    assertEquals(r.code, 1);
    const text = r.err.join("\n");
    assertStringIncludes(text, "admin.session_ttl_s (line 3)");
    assertStringIncludes(text, "admin.trusted_proxies[1] (line 6)");

    await Deno.writeTextFile(
      path,
      "admin:\n  api_key: adm\n  session_ttl_s: 3600\n  trusted_proxies: [10.0.0.1, '::1']\n",
    );
    const ok = await runCli(run, ["--config", path]);
    assertEquals([ok.code, ok.err], [0, []]);
  } finally {
    await tmp.cleanup();
  }
});
