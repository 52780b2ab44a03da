/**
 * The secret fence on every path: each field that names a variable, found from the schema and
 * the source rather than listed here, is given each of Skeid's own secret variables through the
 * config file, a reload, `POST /skeid/nodes`, `nodes.add` and `usage.configure`.
 */
import { assert, assertEquals, assertMatch } from "../_assert.ts";
import { z } from "zod";
import { ConfigLoadError, formatIssue } from "../../src/config/errors.ts";
import { loadConfigValue } from "../../src/config/load.ts";
import { VARIABLE_FIELDS } from "../../src/config/own_secrets.ts";
import { configSchema } from "../../src/config/config_schema.ts";
import { REGISTRY_PROBE_KEYS } from "../../src/config/registry_probe_block.ts";
import { adminRoutes } from "../../src/admin/routes.ts";
import { Gateway } from "../../src/gateway.ts";
import { memoryLogger } from "../../src/log.ts";
import { freshPgDatabase, pgTestGate } from "../_helpers/pg.ts";

const SECRET = "s".repeat(40);
const vars: Record<string, string> = {
  SKEID_REGISTRY_SECRET: SECRET,
  MY_ADMIN: "adm-0123456789abcdef",
  READ_KEY: "read-0123456789abcdef",
  PG_PASS: "pw",
  UPSTREAM_KEY: "up",
  DOWN_READ: "down",
  SKEID_ADMIN_API_KEY: "fixed-admin",
  PGPASSWORD: "fixed-pg",
  OPENBAO_SECRET_ID: "bao",
  SKEID_KEY_PEPPER: "pepper",
};
const env = (name: string) => vars[name];

/** Each own secret of the configs below, with the place that reads it (none: fixed). */
const OWN: [string, string | undefined][] = [
  ["MY_ADMIN", "admin_api_key_env"],
  ["SKEID_REGISTRY_SECRET", "registry.secret_env"],
  ["READ_KEY", "registry.read_key_env"],
  ["PG_PASS", "usage_store.password_env"],
  ["SKEID_ADMIN_API_KEY", "admin_api_key_env"],
  ["PGPASSWORD", "usage_store.password_env"],
  ["OPENBAO_SECRET_ID", undefined],
  ["SKEID_KEY_PEPPER", "api_keys.pepper_env"],
];

function node(): Record<string, unknown> {
  return {
    id: "n",
    url: "http://127.0.0.1:9/v1",
    api_key_env: "UPSTREAM_KEY",
    capacity: { probe: "registry", secret_env: "SKEID_REGISTRY_SECRET", read_key_env: "DOWN_READ" },
  };
}

function base(withStore: boolean): Record<string, unknown> {
  return {
    admin_api_key_env: "MY_ADMIN",
    registry: { enabled: true, secret_env: "SKEID_REGISTRY_SECRET", read_key_env: "READ_KEY" },
    ...(withStore ? { usage_store: { backend: "postgresql", password_env: "PG_PASS" } } : {}),
    nodes: [node()],
  };
}

/** Sets `place` (`nodes[].capacity.read_key_env`: `[]` is index 0) in `root` to `value`. */
function setAt(root: Record<string, unknown>, place: string, value: string): void {
  const keys = place.replaceAll("[]", ".0").split(".");
  let at: Record<string, unknown> = root;
  for (const key of keys.slice(0, -1)) {
    at[key] ??= /^\d+$/.test(key) ? [] : {};
    at = at[key] as Record<string, unknown>;
  }
  at[keys[keys.length - 1]] = value;
}

/** Every place of a field naming a variable, from the zod schema and the probe's key list. */
function schemaPlaces(): string[] {
  const out: string[] = [];
  const walk = (s: z.ZodType, place: string): void => {
    let t: z.ZodType = s;
    while (t instanceof z.ZodOptional || t instanceof z.ZodNullable) t = t.unwrap() as z.ZodType;
    if (t instanceof z.ZodObject) {
      for (const [k, v] of Object.entries(t.shape as Record<string, z.ZodType>)) {
        walk(v, place === "" ? k : `${place}.${k}`);
      }
    } else if (place.endsWith("_env")) out.push(place);
  };
  walk(configSchema, "");
  for (const k of REGISTRY_PROBE_KEYS) if (k.endsWith("_env")) out.push(`nodes[].capacity.${k}`);
  return out;
}

/** Every `…_env` name the source reads (node specs and usage stores have no zod schema). */
async function sourceFieldNames(): Promise<Set<string>> {
  const names = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    for await (const e of Deno.readDir(dir)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.name.endsWith(".ts")) {
        const text = await Deno.readTextFile(path);
        for (const m of text.matchAll(/["'`.]([a-z][a-z0-9_]*_env)\b/g)) names.add(m[1]);
      }
    }
  };
  await walk(new URL("../../src", import.meta.url).pathname);
  return names;
}

/** The places walked: the fence's own table, and whatever the schema shows besides. */
const PLACES = [...new Set([...VARIABLE_FIELDS.keys(), ...schemaPlaces()])];

/** Whether `place` may name `secret`: only when it reads it for the purpose its owner does. */
function allowed(place: string, owner: string | undefined): boolean {
  if (owner === undefined) return false;
  const mine = VARIABLE_FIELDS.get(place)?.what;
  return mine !== undefined && mine === VARIABLE_FIELDS.get(owner)?.what;
}

function loadErrors(root: Record<string, unknown>): string[] {
  try {
    loadConfigValue(root, { env, hostname: () => "h" });
  } catch (e) {
    if (e instanceof ConfigLoadError) return e.issues.map(formatIssue);
    throw e;
  }
  return [];
}

const indexed = (place: string) => place.replaceAll("[]", "[0]");

Deno.test("every field that names a variable has a place in the fence", async () => {
  for (const place of schemaPlaces()) assert(VARIABLE_FIELDS.has(place), place);
  const tails = new Set([...VARIABLE_FIELDS.keys()].map((p) => p.split(".").at(-1)));
  for (const name of await sourceFieldNames()) {
    assert(tails.has(name), `${name} is read from the config but the fence has no place for it`);
  }
  assert(PLACES.includes("nodes[].capacity.read_key_env"));
  assert(PLACES.includes("usage_store.password_env"));
});

Deno.test("config file: no field names an own secret read for another purpose", () => {
  assertEquals(loadErrors(base(true)), []);
  for (const place of PLACES) {
    for (const [secret, owner] of OWN) {
      const root = base(true);
      setAt(root, place, secret);
      const errors = loadErrors(root);
      const label = `${place} = ${secret}: ${errors.join("; ")}`;
      if (allowed(place, owner)) {
        assertEquals(errors, [], label);
        continue;
      }
      const at = indexed(place).replace(/[.[\]]/g, "\\$&");
      const fenced = new RegExp(
        `^${at}( \\(line \\d+\\))?: variable ${secret} is one of Skeid's own secrets`,
      );
      assertEquals(errors.filter((e) => fenced.test(e)).length, 1, label);
    }
  }
});

/** POSTs to `gw`'s admin routes with the admin key: the status and the body's text. */
function adminPost(gw: Gateway): (path: string, body: unknown) => Promise<{
  status: number;
  text: string;
}> {
  const app = adminRoutes(gw.adminDeps());
  return async (path, body) => {
    const res = await app.request(path, {
      method: "POST",
      headers: { authorization: `Bearer ${vars.MY_ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };
}

Deno.test("reload, POST /skeid/nodes, nodes.add and usage.configure hold the same fence", async () => {
  const dir = await Deno.makeTempDir();
  const configPath = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(configPath, JSON.stringify(base(false)));
  const gw = await Gateway.open({ configPath, env, logger: memoryLogger(), keyBroker: null });
  const post = adminPost(gw);
  try {
    // PG_PASS is no secret of this gateway's config (it has no usage store).
    const own = OWN.filter(([s]) => s !== "PG_PASS");
    for (const place of PLACES) {
      for (const [secret, owner] of own) {
        if (allowed(place, owner)) continue;
        const label = `${place} = ${secret}`;
        const named = new RegExp(`variable ${secret} is one of Skeid's own secrets`);

        const root = base(false);
        setAt(root, place, secret);
        await Deno.writeTextFile(configPath, JSON.stringify(root));
        const reload = await post("/skeid/call/config.reload", {});
        assert(reload.status >= 400, `reload ${label}: ${reload.text}`);
        assert(named.test(reload.text), `reload ${label}: ${reload.text}`);

        if (place.startsWith("nodes[].")) {
          const spec = { ...node(), id: "leak" };
          setAt(spec, place.slice("nodes[].".length), secret);
          const field = place.slice("nodes[].".length);
          const admin = await post("/skeid/nodes", spec);
          assertEquals(admin.status, 400, `POST /skeid/nodes ${label}: ${admin.text}`);
          const fieldNamed = new RegExp(`(^|; )${field}: ${named.source}`);
          assertMatch(JSON.parse(admin.text).error.message, fieldNamed, label);
          const call = await post("/skeid/call/nodes.add", { node: spec });
          assertEquals(call.status, 400, `nodes.add ${label}: ${call.text}`);
          assertMatch(call.text, named, `nodes.add ${label}`);
          assertEquals(gw.skeid.getNode("leak"), undefined, label);
        }
        if (place.startsWith("usage_store.")) {
          const store = { backend: "postgresql", host: "127.0.0.1", port: 9 };
          setAt(store, place.slice("usage_store.".length), secret);
          const call = await post("/skeid/call/usage.configure", { usage_store: store });
          assertEquals(call.status, 400, `usage.configure ${label}: ${call.text}`);
          assertMatch(call.text, named, `usage.configure ${label}`);
        }
      }
    }
    // The config in force is still the first one.
    assertEquals(gw.skeid.listNodes().map((n) => n.api_key_env), ["UPSTREAM_KEY"]);
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a node holding an own secret's variable never sends it upstream", async () => {
  const dir = await Deno.makeTempDir();
  const configPath = `${dir}/skeid.json`;
  await Deno.writeTextFile(configPath, JSON.stringify({ admin_api_key_env: "MY_ADMIN" }));
  const gw = await Gateway.open({ configPath, env, logger: memoryLogger(), keyBroker: null });
  try {
    // Past every check (straight into the core): the key read for it still comes out unset.
    const leak = gw.skeid.addNode({
      id: "x",
      url: "http://127.0.0.1:9/v1",
      api_key_env: "MY_ADMIN",
    });
    assertEquals(gw.nodeKey(leak), null);
    const fine = gw.skeid.addNode({
      id: "y",
      url: "http://127.0.0.1:9/v1",
      api_key_env: "UPSTREAM_KEY",
    });
    assertEquals(gw.nodeKey(fine), "up");
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "a usage store configured through usage.configure fences its password variable at once",
  ignore: (await pgTestGate()).ignore,
  async fn() {
    const db = await freshPgDatabase();
    const dir = await Deno.makeTempDir();
    const configPath = `${dir}/skeid.json`;
    await Deno.writeTextFile(configPath, JSON.stringify({ admin_api_key_env: "MY_ADMIN" }));
    const live: Record<string, string> = { ...vars, LIVE_PW: "unused-by-trust-auth" };
    const gw = await Gateway.open({
      configPath,
      env: (n) => live[n],
      logger: memoryLogger(),
      keyBroker: null,
    });
    const post = adminPost(gw);
    try {
      const configured = await post("/skeid/call/usage.configure", {
        usage_store: { backend: "postgresql", dsn: db.dsn, password_env: "LIVE_PW" },
      });
      assertEquals(configured.status, 200, configured.text);
      const spec = { id: "leak", url: "http://127.0.0.1:9/v1", api_key_env: "LIVE_PW" };
      const added = await post("/skeid/nodes", spec);
      assertEquals(added.status, 400, added.text);
      assertMatch(added.text, /variable LIVE_PW is one of Skeid's own secrets/);
      const called = await post("/skeid/call/nodes.add", { node: spec });
      assertEquals(called.status, 400, called.text);
      assertEquals(gw.skeid.getNode("leak"), undefined);
    } finally {
      await gw.close();
      await db.drop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
