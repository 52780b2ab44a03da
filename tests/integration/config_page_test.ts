/**
 * The Config page through a real gateway: `GET /skeid/config` names the file, its digest, the
 * last change and the last failure; `POST /skeid/config/check` dry-runs the file on disk.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startGateway } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";

const ADMIN = { authorization: "Bearer adm-config-0123456789" };

function config(wait: number | string) {
  return {
    admin_api_key: "adm-config-0123456789",
    nodes: [{ id: "n1", url: "http://127.0.0.1:9/v1", model: "m" }],
    routing: { wait_timeout_ms: wait },
  };
}

Deno.test("config page: file, digest, last change, last failure; the dry run of the file", async () => {
  const t = await startGateway(config(50));
  try {
    const get = async () =>
      await (await fetch(`${t.base}/skeid/config`, { headers: ADMIN })).json();
    const check = async () =>
      await (await fetch(`${t.base}/skeid/config/check`, { method: "POST", headers: ADMIN }))
        .json();
    const first = await get();
    assertEquals([first.ok, first.path, first.last_change, first.last_failure], [
      true,
      t.configPath,
      null,
      null,
    ]);
    assert(/^[0-9a-f]{64}$/.test(first.file_sha256) && typeof first.applied_at === "string");
    const same = await check();
    assertEquals([same.ok, same.changes, same.errors, same.file_sha256], [
      true,
      { sections: [] },
      [],
      first.file_sha256,
    ]);

    await t.writeConfig(config(75));
    let c = await get();
    await until(async () => (c = await get()).last_change !== null, "the reload applied", 10_000);
    assertEquals(c.last_change.sections, ["routing"]);

    await t.writeConfig(config("soon"));
    await until(async () => (c = await get()).last_failure !== null, "the reload failed", 10_000);
    assertEquals(c.last_failure.errors.map((e: { path: string }) => e.path), [
      "routing.wait_timeout_ms",
    ]);
    assert(typeof c.last_failure.errors[0].line === "number");
    const bad = await check();
    assertEquals([bad.ok, bad.errors[0].path], [false, "routing.wait_timeout_ms"]);
  } finally {
    await t.stop();
  }
});
