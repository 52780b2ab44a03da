/**
 * `skeid key create|list|rotate|revoke` against a running gateway's admin API (ADR 0029): the
 * key printed once, the listing paged through, a revocation in force at the next request.
 */
import { assert, assertEquals, assertStringIncludes } from "../_assert.ts";
import { run } from "../../src/cli/key.ts";
import { runCli } from "../_helpers/cli.ts";
import { ask, withGateway } from "../customer_keys/helpers.ts";

const ENV = { SKEID_ADMIN_API_KEY: "adm" };

Deno.test("skeid key: create, list, rotate and revoke through the admin API", async () => {
  await withGateway(async (t) => {
    const url = ["--url", t.base];
    const send = async (key: string) => (await ask(t, key)).status;
    const none = await runCli(run, ["list", ...url], ENV);
    assertEquals([none.code, none.out], [0, []], "no keys: nothing on stdout");
    assertEquals(none.err, ["skeid key: no keys match"]);
    const made = await runCli(run, ["create", ...url, "--name", "ci", "--policy", "std"], ENV);
    assertEquals(made.code, 0, made.err.join("\n"));
    const key = made.out[0];
    assert(key.startsWith("sk-skeid-ik_"), key);
    assertEquals(await send(key), 200);
    const id = key.split("-")[2];

    for (const name of ["b", "c"]) {
      assertEquals((await runCli(run, ["create", ...url, "--name", name], ENV)).code, 0);
    }
    const listed = await runCli(run, ["list", ...url], ENV);
    assertEquals(listed.code, 0, listed.err.join("\n"));
    const lines = listed.out[0].split("\n");
    assertEquals(lines.length, 3, listed.out[0]);
    assert(lines.some((l) => l.startsWith(`${id}\tissued\tactive\tci\tstd`)), listed.out[0]);
    assert(!listed.out[0].includes(key), "the listing never shows a key");

    const rotated = await runCli(run, ["rotate", id, ...url, "--grace-s", "0"], ENV);
    assertEquals(rotated.code, 0, rotated.err.join("\n"));
    assertEquals(await send(key), 401, "grace 0: the old key ends at once");
    assertEquals(await send(rotated.out[0]), 200);

    const revoked = await runCli(run, ["revoke", id, ...url], ENV);
    assertEquals(revoked.code, 0, revoked.err.join("\n"));
    assertStringIncludes(revoked.out[0], "revoked");
    assertEquals(await send(rotated.out[0]), 401);

    const bad = await runCli(run, ["create", ...url, "--policy", "nope"], ENV);
    assertEquals(bad.code, 1);
    assertStringIncludes(bad.err.join("\n"), "policy: unknown policy 'nope'");
    const noKey = await runCli(run, ["list", ...url], {});
    assertEquals(noKey.code, 2);
    assertStringIncludes(noKey.err.join("\n"), "SKEID_ADMIN_API_KEY");
    assertEquals((await runCli(run, ["rotate", ...url], ENV)).code, 2, "rotate needs an id");
  });
});

Deno.test("skeid key: a gateway that is not there is named with the reason", async () => {
  // A port that was just free: nothing listens on it.
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const r = await runCli(run, ["list", "--url", `http://127.0.0.1:${port}`], ENV);
  assertEquals(r.code, 1);
  const err = r.err.join("\n");
  assertStringIncludes(err, `skeid key: GET http://127.0.0.1:${port}/skeid/keys`);
  assertStringIncludes(err, "Connection refused");
});
