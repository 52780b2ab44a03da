import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { loadConfigText } from "../../src/config/load.ts";
import { fenceMessage, ownSecretVariables } from "../../src/config/own_secrets.ts";
import { adminRoutes } from "../../src/admin/routes.ts";
import { Gateway } from "../../src/gateway.ts";
import { memoryLogger } from "../../src/log.ts";

const SECRET = "s".repeat(40);
const vars: Record<string, string> = {
  SKEID_REGISTRY_SECRET: SECRET,
  MY_ADMIN: "adm-0123456789abcdef",
  PG_PASS: "pw",
  UPSTREAM_KEY: "up",
};
const env = (name: string) => vars[name];

const BASE = [
  "admin_api_key_env: MY_ADMIN",
  "registry:",
  "  enabled: true",
  "  secret_env: SKEID_REGISTRY_SECRET",
  "usage_store:",
  "  backend: postgresql",
  "  password_env: PG_PASS",
];

function nodeErrors(apiKeyEnv: string): string[] {
  const text = [
    ...BASE,
    "nodes:",
    "  - id: cloud",
    "    url: http://127.0.0.1:9/v1",
    `    api_key_env: ${apiKeyEnv}`,
  ].join("\n") + "\n";
  try {
    loadConfigText(text, { env, hostname: () => "h" });
  } catch (e) {
    if (e instanceof ConfigLoadError) return e.issues.map(formatIssue);
    throw e;
  }
  return [];
}

Deno.test("a node's api_key_env naming one of Skeid's own secrets fails the load", () => {
  const cases: [string, RegExp][] = [
    ["SKEID_REGISTRY_SECRET", /registry\.secret_env/],
    ["MY_ADMIN", /admin_api_key_env/],
    ["SKEID_ADMIN_API_KEY", /admin key/],
    ["PG_PASS", /usage_store\.password_env/],
    ["OPENBAO_SECRET_ID", /OpenBao/],
  ];
  for (const [name, where] of cases) {
    const errors = nodeErrors(name);
    assertEquals(errors.length, 1, `${name}: ${errors.join("; ")}`);
    assertMatch(errors[0], /^nodes\[0\]\.api_key_env \(line \d+\): variable /, name);
    assertMatch(errors[0], new RegExp(`variable ${name} `), name);
    assertMatch(errors[0], where, name);
  }
});

Deno.test("a node's own key variable still loads", () => {
  assertEquals(nodeErrors("UPSTREAM_KEY"), []);
});

Deno.test("ownSecretVariables lists the config's secret variables with their paths", () => {
  const own = ownSecretVariables({
    admin: { api_key_env: "A" },
    registry: { secret_env: "R", read_key_env: "RK" },
    nodes: [{ id: "x", url: "u", capacity: { probe: "registry", admin_key_env: "P" } }],
  });
  const where = (name: string) => own.get(name)?.map((u) => u.where);
  assertEquals(where("A"), ["admin.api_key_env"]);
  assertEquals(where("R"), ["registry.secret_env"]);
  assertEquals(where("RK"), ["registry.read_key_env"]);
  assertEquals(where("P"), ["nodes[0].capacity.admin_key_env"]);
  assertEquals(fenceMessage({ api_key_env: "SOMETHING_ELSE" }, "nodes[]", own), undefined);
});

Deno.test("POST /skeid/nodes refuses an api_key_env naming the registry secret", async () => {
  const dir = await Deno.makeTempDir();
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, BASE.slice(0, 4).join("\n") + "\n");
  const gw = await Gateway.open({ configPath, env, logger: memoryLogger(), keyBroker: null });
  try {
    const app = adminRoutes(gw.adminDeps());
    const add = (apiKeyEnv: string) =>
      app.request("/skeid/nodes", {
        method: "POST",
        headers: { authorization: `Bearer ${vars.MY_ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ id: "leak", url: "http://127.0.0.1:9/v1", api_key_env: apiKeyEnv }),
      });
    for (const name of ["SKEID_REGISTRY_SECRET", "MY_ADMIN", "OPENBAO_ROLE_ID"]) {
      const res = await add(name);
      const body = await res.json();
      assertEquals(res.status, 400, `${name}: ${JSON.stringify(body)}`);
      assertMatch(body.error.message, new RegExp(`^api_key_env: variable ${name} `));
      assert(gw.skeid.getNode("leak") === undefined, `${name}: no node was added`);
    }
    const ok = await add("UPSTREAM_KEY");
    assertEquals(ok.status, 200, await ok.text());
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
