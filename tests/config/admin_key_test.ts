import { assertEquals } from "../_assert.ts";
import { resolveAdminKey } from "../../src/config/admin_key.ts";
import { loadConfigText } from "../../src/config/load.ts";

/** The admin key a YAML config resolves to, with `vars` as the environment. */
function keyFor(yaml: string, vars: Record<string, string>, explicit?: string) {
  const loaded = loadConfigText(yaml, { env: (n) => vars[n], explicitAdminKey: explicit });
  return loaded.adminKey;
}

const ENV = { SKEID_ADMIN_API_KEY: "from-env", ADM_VAR: "from-var", EMPTY_VAR: "" };

Deno.test("admin key order: explicit > config's first present > SKEID_ADMIN_API_KEY > off", () => {
  const cases: [string, string | undefined, Record<string, string>, string, string][] = [
    // yaml, explicit key, env, expected key, expected source
    ["{}", undefined, {}, "", "none"],
    ["{}", undefined, ENV, "from-env", "SKEID_ADMIN_API_KEY"],
    ["{}", "cli", ENV, "cli", "explicit"],
    ["admin_api_key: flat", "cli", ENV, "cli", "explicit"],
    ["admin_api_key: flat", undefined, ENV, "flat", "admin_api_key"],
    ["admin_api_key: 12345", undefined, ENV, "12345", "admin_api_key"],
    // admin_api_key outranks admin_api_key_env, which outranks admin.api_key ...
    ["admin_api_key: flat\nadmin_api_key_env: ADM_VAR", undefined, ENV, "flat", "admin_api_key"],
    [
      "admin_api_key_env: ADM_VAR\nadmin: {api_key: nested}",
      undefined,
      ENV,
      "from-var",
      "admin_api_key_env",
    ],
    ["admin: {api_key: nested, api_key_env: ADM_VAR}", undefined, ENV, "nested", "admin.api_key"],
    ["admin: {api_key_env: ADM_VAR}", undefined, ENV, "from-var", "admin.api_key_env"],
    // present but empty, or naming an unset/empty variable: admin off, no fallback to the env key
    ["admin_api_key: ''", undefined, ENV, "", "admin_api_key"],
    ["admin_api_key:", undefined, ENV, "", "admin_api_key"],
    ["admin_api_key_env: NOT_SET", undefined, ENV, "", "admin_api_key_env"],
    ["admin: {api_key_env: EMPTY_VAR}", undefined, ENV, "", "admin.api_key_env"],
    ["admin: {api_key: ''}", undefined, ENV, "", "admin.api_key"],
    // an admin block naming neither key leaves the decision to SKEID_ADMIN_API_KEY
    ["admin: {}", undefined, ENV, "from-env", "SKEID_ADMIN_API_KEY"],
    ["admin:", undefined, ENV, "from-env", "SKEID_ADMIN_API_KEY"],
    // an empty explicit key is no explicit key
    ["admin_api_key: flat", "", ENV, "flat", "admin_api_key"],
  ];
  // A named variable that is unset or empty is said (check and serve tell why the API is off).
  const unset: Record<string, string> = {
    "admin_api_key_env: NOT_SET": "NOT_SET",
    "admin: {api_key_env: EMPTY_VAR}": "EMPTY_VAR",
  };
  for (const [yaml, explicit, env, key, source] of cases) {
    const want = unset[yaml] ? { key, source, unset: unset[yaml] } : { key, source };
    assertEquals(keyFor(yaml + "\n", env, explicit), want, `${yaml} / ${explicit}`);
  }
});

Deno.test("without a config the explicit key, else SKEID_ADMIN_API_KEY decides", () => {
  assertEquals(resolveAdminKey(undefined, (n) => (ENV as Record<string, string>)[n]), {
    key: "from-env",
    source: "SKEID_ADMIN_API_KEY",
  });
  assertEquals(resolveAdminKey(undefined, () => undefined, "x").key, "x");
  assertEquals(resolveAdminKey(undefined, () => undefined).key, "");
});
