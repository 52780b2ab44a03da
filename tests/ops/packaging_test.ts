/**
 * The shipped binary, container and unit as an operator uses them: one flag list, the build's
 * check without denort, `systemd-analyze verify` on the unit, the HEALTHCHECK's command.
 */
import { fileURLToPath } from "node:url";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_assert.ts";
import { startServer } from "../../src/server.ts";
import { run as health } from "../../src/cli/health.ts";
import { LISTENER_DENO_VERSION } from "../../src/edge/listener.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

async function sh(cmd: string, args: string[], env?: Record<string, string>) {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("packaging: scripts/skeid and scripts/build take their flags from scripts/flags alone", async () => {
  for (const script of ["scripts/skeid", "scripts/build"]) {
    const text = await Deno.readTextFile(`${ROOT}${script}`);
    assertStringIncludes(text, '. "$_here/flags"', `${script} sources scripts/flags`);
    assertStringIncludes(text, '"${SKEID_DENO_FLAGS[@]}"', `${script} uses the list`);
    assert(!/--allow-(net|read|write|env|sys)/.test(text), `${script} has no flag of its own`);
  }
});

Deno.test("packaging: docs/operations.md lists exactly the flags of scripts/flags", async () => {
  const flags = await Deno.readTextFile(`${ROOT}scripts/flags`);
  const list = flags.slice(flags.indexOf("SKEID_DENO_FLAGS=("));
  const inScript = [...list.matchAll(/^\s+(--[a-z0-9-]+(?:=\S+)?)$/gm)].map((m) => m[1]).sort();
  const ops = await Deno.readTextFile(`${ROOT}docs/operations.md`);
  const section = ops.slice(ops.indexOf("## Permissions"), ops.indexOf("## Upstream keys"));
  const inDocs = [...section.matchAll(/^\| `(--[^`]+)`/gm)].map((m) => m[1]).sort();
  assert(inScript.length >= 5, `flags read from scripts/flags: ${inScript}`);
  assertEquals(inDocs, inScript);
});

Deno.test("packaging: scripts/deno-env accepts only the Deno the listener is built on", async () => {
  const text = await Deno.readTextFile(`${ROOT}scripts/deno-env`);
  assertStringIncludes(text, `DENO_VERSION="${LISTENER_DENO_VERSION}"`);
  // The check matches the exact version, not any 2.x.
  assertStringIncludes(text, 'grep -q "^deno $DENO_VERSION "');
  // The tests run on it (scripts/test sources deno-env).
  assertEquals(Deno.version.deno, LISTENER_DENO_VERSION);
});

Deno.test("packaging: scripts/build --check compiles the module graph with the exact flags", async () => {
  const r = await sh(`${ROOT}scripts/build`, ["--check"]);
  assertEquals(r.code, 0, r.stderr);
  assertMatch(r.stdout, /module graph compiles with the flags of scripts\/flags \(--allow-net /);
});

Deno.test("packaging: the systemd unit passes systemd-analyze verify (stand-in executable)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "skeid-unit-" });
  try {
    const exe = `${dir}/skeid`;
    await Deno.writeTextFile(exe, "#!/bin/sh\nexit 0\n");
    await Deno.chmod(exe, 0o755);
    const unit = (await Deno.readTextFile(`${ROOT}scripts/skeid.service`))
      .replaceAll("/usr/local/bin/skeid", exe);
    assertMatch(unit, /^ExecStartPre=\S+ check --config /m, "checks the config before start");
    assertMatch(unit, /^ExecStart=\S+ serve .*--workers \d+/m, "--workers on ExecStart");
    await Deno.writeTextFile(`${dir}/skeid.service`, unit);
    const r = await sh("systemd-analyze", ["verify", `${dir}/skeid.service`]);
    assertEquals(r.code, 0, r.stderr);
    assert(!/Unknown|ignoring|not executable/i.test(r.stderr), `no warning: ${r.stderr}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("packaging: the Dockerfile builds from source in two stages and runs non-root", async () => {
  const text = await Deno.readTextFile(`${ROOT}Dockerfile`);
  const stages = text.match(/^FROM /gm) ?? [];
  assertEquals(stages.length, 2, "two stages");
  assertStringIncludes(text, "./scripts/build", "stage one compiles with scripts/build");
  assertStringIncludes(text, "COPY --from=build /src/dist/skeid", "stage two takes the binary");
  assertMatch(text, /^USER skeid$/m);
  assertMatch(text, /^HEALTHCHECK .*\n?.*skeid", "health"/m);
  assert(!/COPY dist\//.test(text), "needs no prebuilt file");
});

Deno.test("packaging: skeid health exits 0 on a serving gateway and 1 on a dead port", async () => {
  const server = await startServer({ hostname: "127.0.0.1", port: 0 });
  try {
    assertEquals(await health(["--url", `http://127.0.0.1:${server.addr.port}/health`]), 0);
    assertEquals(
      await health(["--url", `http://127.0.0.1:${server.addr.port}`]),
      0,
      "a base URL asks its /health",
    );
  } finally {
    await server.stop(0);
  }
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (dead.addr as Deno.NetAddr).port;
  dead.close();
  assertEquals(
    await health(["--url", `http://127.0.0.1:${port}/health`, "--timeout-ms", "2000"]),
    1,
  );
});
