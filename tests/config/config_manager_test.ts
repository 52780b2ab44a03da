import { assert, assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { events, harness } from "./helpers.ts";
import { ConfigLoadError } from "../../src/config/errors.ts";
import { ConfigFileMissingError } from "../../src/config/load.ts";
import { retryDelayMs } from "../../src/config/config_manager.ts";
import type { NormalizedUsageStoreConfig } from "../../src/usage/config.ts";

const ALICE = "k_" + "a".repeat(40);

const FULL = `
nodes:
  - {id: gpu-1, url: 'http://gpu-1:8000', model: qwen3-32b, tags: [local]}
  - {id: cloud-1, url: 'http://cloud-1:8000', model: llama-70b, tags: [cloud]}
pricing:
  qwen3-32b: {input_per_million: 1, output_per_million: 2}
aliases:
  house-model:
    - {tags: [local], model: qwen3-32b}
    - {tags: [cloud], model: llama-70b}
policies:
  standard: {deny_tags: [cloud]}
default_policy: standard
names:
  alice: ${ALICE}
keys:
  alice: {policy: standard, models: [house-model]}
routing:
  wait_timeout_ms: 50
`;

const ZERO = { input_per_million: 0, output_per_million: 0 };

/** What the core holds, for "exactly as before" comparisons. */
function coreState(h: ReturnType<typeof harness>) {
  return {
    nodes: h.skeid.listNodes(),
    generation: h.skeid.generation,
    qwenPrice: h.skeid.pricingForModel("qwen3-32b"),
    aliases: [...h.skeid.aliases.keys()],
    alicePolicy: h.skeid.policyForKey(ALICE),
    defaultPolicy: h.skeid.policyForKey(undefined),
    routing: { ...h.skeid.routing },
  };
}

Deno.test("first load applies every section", async () => {
  const h = harness(FULL);
  const cfg = await h.manager.load();
  assertEquals(cfg.default_policy, "standard");
  assertEquals(h.skeid.listNodes().map((n) => n.id).sort(), ["cloud-1", "gpu-1"]);
  assertEquals(h.skeid.pricingForModel("qwen3-32b"), {
    input_per_million: 1,
    output_per_million: 2,
  });
  assertEquals([...h.skeid.aliases.keys()], ["house-model"]);
  assertEquals(h.skeid.keyIdForName("alice"), ALICE);
  assertEquals(h.skeid.routePlan({ model: "house-model", api_key_id: ALICE }).tiers.length, 1);
  assertEquals(h.skeid.routing.wait_timeout_ms, 50);
  assertEquals(h.manager.status(), { ok: true, error: null, failed_at: null, failures: 0 });
  assertEquals(h.applied, 1);
  assertEquals(h.manager.current(), cfg);
});

Deno.test("first load: a missing file and a bad file both throw and are reported", async () => {
  const missing = harness(undefined);
  await assertRejects(() => missing.manager.load(), ConfigFileMissingError);
  const bad = harness("routing: {wait_poll_ms: 0}\n");
  const e = await assertRejects(() => bad.manager.load(), ConfigLoadError);
  assertMatch(e.message, /routing\.wait_poll_ms \(line 1\): must be >= 1/);
  const st = bad.manager.status();
  assertEquals([st.ok, st.failures], [false, 1]);
  assertEquals(st.failed_at, new Date(bad.clock.t).toISOString().replace(/\.\d{3}Z$/, "Z"));
  assertMatch(st.error!, /wait_poll_ms/);
  // Logged as the first load it was: no reload, no retry promised (serve exits on it).
  assertEquals(events(bad, "config_reload_failed"), []);
  const [logged] = events(bad, "config_load_failed");
  assertMatch(String(logged.error), /wait_poll_ms/);
  assertEquals("retry_in_ms" in logged, false);
});

Deno.test("a reload that fails halfway leaves nodes, pricing, aliases and policies exactly as before", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.skeid.setNodeHealth("gpu-1", false);
  const before = coreState(h);
  // New nodes, prices and routing that are fine, then an alias that is not.
  const broken = FULL
    .replace("gpu-1:8000", "gpu-1-new:8000")
    .replace("input_per_million: 1,", "input_per_million: 9,")
    .replace("wait_timeout_ms: 50", "wait_timeout_ms: 999")
    .replace(
      "- {tags: [cloud], model: llama-70b}",
      "- {tags: [cloud], model: llama-70b, wait_ms: -5}",
    );
  assert(broken.includes("wait_ms: -5"));
  h.fs.write(h.path, broken, 2000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(coreState(h), before);
  assertEquals(h.applied, 1);
  const st = h.manager.status();
  assertEquals([st.ok, st.failures], [false, 1]);
  assertMatch(st.error!, /aliases\.house-model\[1\]\.wait_ms \(line 10\): must be a number >= 0/);
  await assertRejects(() => h.manager.reload(), ConfigLoadError);
  assertEquals(coreState(h), before);
  assertEquals(h.manager.status().failures, 2);
});

Deno.test("a section removed from the file goes back to empty", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.fs.write(h.path, "routing: {wait_timeout_ms: 50}\n", 2000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.listNodes(), []);
  assertEquals(h.skeid.pricingForModel("qwen3-32b"), ZERO);
  assertEquals(h.skeid.aliases.size, 0);
  assertEquals(h.skeid.policyForKey(ALICE), null);
  assertEquals(h.skeid.keyIdForName("alice"), undefined);
});

Deno.test("a routing key removed goes back to the value before any config", async () => {
  const h = harness("routing: {wait_timeout_ms: 50, frontend_count: 2}\n", {
    routing: { wait_timeout_ms: 1234 },
    env: { SKEID_FRONTEND_COUNT: "3" },
  });
  assertEquals(h.skeid.baseRouting.wait_timeout_ms, 1234);
  assertEquals(h.skeid.baseRouting.frontend_count, 3);
  await h.manager.load();
  assertEquals([h.skeid.routing.wait_timeout_ms, h.skeid.routing.frontend_count], [50, 2]);
  h.fs.write(h.path, "routing: {frontend_count: 2}\n", 2000);
  await h.manager.maybeReload();
  assertEquals([h.skeid.routing.wait_timeout_ms, h.skeid.routing.frontend_count], [1234, 2]);
  h.fs.write(h.path, "{}\n", 3000);
  await h.manager.maybeReload();
  assertEquals(h.skeid.routing.frontend_count, 3);
});

Deno.test("a routing key no config ever set is left to whoever set it", async () => {
  const h = harness("routing: {wait_timeout_ms: 50}\n");
  h.skeid.setRouting({ max_attempts: 7 });
  await h.manager.load();
  h.fs.write(h.path, "{}\n", 2000);
  await h.manager.maybeReload();
  assertEquals(h.skeid.routing.max_attempts, 7);
  assertEquals(h.skeid.routing.wait_timeout_ms, h.skeid.baseRouting.wait_timeout_ms);
});

Deno.test("a section no applied config declared is left alone; declared, it replaces", async () => {
  const h = harness("routing: {wait_timeout_ms: 50}\n");
  h.skeid.addNode({ id: "admin-node", url: "http://admin:1", model: "m" });
  h.skeid.setModelPricing("m", { input_per_million: 3 });
  h.skeid.setModelAlias("a", [{ tags: ["x"] }]);
  h.skeid.setPolicy("p", {});
  await h.manager.load();
  assertEquals(h.skeid.listNodes().map((n) => n.id), ["admin-node"]);
  assertEquals(h.skeid.pricingForModel("m").input_per_million, 3);
  assertEquals([...h.skeid.aliases.keys()], ["a"]);
  // Declaring nodes replaces the inventory (the admin node is lost, as the seed says).
  h.fs.write(h.path, "nodes:\n  - {id: gpu-1, url: 'http://gpu-1:1'}\n", 2000);
  await h.manager.maybeReload();
  assertEquals(h.skeid.listNodes().map((n) => n.id), ["gpu-1"]);
  assertEquals(h.skeid.pricingForModel("m").input_per_million, 3, "pricing still undeclared");
  // Removing it again empties it.
  h.fs.write(h.path, "{}\n", 3000);
  await h.manager.maybeReload();
  assertEquals(h.skeid.listNodes(), []);
});

Deno.test("an unchanged nodes section keeps the node list, its generation and admin-set health", async () => {
  const h = harness(FULL);
  await h.manager.load();
  assert(h.skeid.setNodeHealth("gpu-1", false));
  const generation = h.skeid.generation;
  // Another section changes; the nodes section is the same (re-ordered keys, new comment).
  const sameNodes = FULL
    .replace("input_per_million: 1,", "input_per_million: 5,")
    .replace(
      "- {id: gpu-1, url: 'http://gpu-1:8000', model: qwen3-32b, tags: [local]}",
      "- {url: 'http://gpu-1:8000', id: gpu-1, tags: [local], model: qwen3-32b} # moved keys",
    );
  h.fs.write(h.path, sameNodes, 2000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.pricingForModel("qwen3-32b").input_per_million, 5);
  assertEquals(h.skeid.getNode("gpu-1")?.healthy, false);
  assertEquals(h.skeid.generation, generation);
  // A changed nodes section replaces the list: the config's health comes back.
  h.fs.write(h.path, sameNodes.replace("model: llama-70b", "model: llama-405b"), 3000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.getNode("gpu-1")?.healthy, true);
  assert(h.skeid.generation > generation);
});

Deno.test("a reload logs only the sections that changed", async () => {
  const h = harness(
    FULL.replace(
      "standard: {deny_tags: [cloud]}",
      "standard: {deny_tags: [cloud], limits: {rpm: 60}}",
    ),
  );
  await h.manager.load();
  assertEquals(events(h, "config_applied")[0].changes, [
    "nodes replaced (2)",
    "pricing replaced (1)",
    "aliases replaced (1)",
    "policies replaced",
  ]);
  // Only a policy's limits.rpm changes (and the pricing's keys are re-ordered).
  h.fs.write(
    h.path,
    FULL.replace(
      "standard: {deny_tags: [cloud]}",
      "standard: {deny_tags: [cloud], limits: {rpm: 30}}",
    )
      .replace(
        "{input_per_million: 1, output_per_million: 2}",
        "{output_per_million: 2, input_per_million: 1}",
      ),
    2000,
  );
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[1].changes, ["policies replaced"]);
  assertEquals(h.skeid.keyPolicy(undefined).limits?.rpm, 30);
  // The limit removed (and the routing changed): the policies changed again.
  h.fs.write(h.path, FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 60"), 3000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[2].changes, ["policies replaced", "routing changed"]);
  // Only the routing changes: the routing alone is listed.
  h.fs.write(h.path, FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 70"), 4000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[3].changes, ["routing changed"]);
  // A price set in the core since is put back by the next reload, and that is a change.
  h.skeid.setModelPricing("qwen3-32b", { input_per_million: 9, output_per_million: 2 });
  h.skeid.setPolicy("standard", {});
  h.fs.write(h.path, FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 80"), 5000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[4].changes, [
    "pricing replaced (1)",
    "policies replaced",
    "routing changed",
  ]);
  // A section the core's apply does not describe is named too: set, then removed.
  const last = FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 80");
  h.fs.write(h.path, `${last}responses:\n  store: false\n`, 6000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[5].changes, ["responses set"]);
  h.fs.write(h.path, last, 7000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(events(h, "config_applied")[6].changes, ["responses removed"]);
  assertEquals(h.skeid.pricingForModel("qwen3-32b").input_per_million, 1);
});

Deno.test("a new mtime with the same content applies nothing", async () => {
  const h = harness(FULL);
  await h.manager.load();
  const gen = h.skeid.generation;
  h.fs.write(h.path, FULL, 2000);
  assertEquals(await h.manager.maybeReload(), false);
  h.fs.write(h.path, "# a comment\n" + FULL + "\nunknown_top_level: 1\n", 3000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(h.applied, 1);
  assertEquals(h.skeid.generation, gen);
  assertEquals(events(h, "config_applied").length, 1);
  // And an unchanged mtime does not even read the file.
  const reads = h.fs.reads;
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(h.fs.reads, reads);
});

Deno.test("a failed version is retried with back-off 1, 2, 4 ... 60 s; a new mtime is read at once", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.fs.write(h.path, "routing: {wait_poll_ms: 0}\n", 2000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(h.manager.status().failures, 1);
  let reads = h.fs.reads;
  const expected = [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000];
  for (const [i, delay] of expected.entries()) {
    assertEquals(retryDelayMs(i + 1), delay);
    h.clock.advance(delay - 1);
    await h.manager.maybeReload();
    assertEquals(h.fs.reads, reads, `no retry before ${delay} ms (retry ${i + 1})`);
    h.clock.advance(1);
    await h.manager.maybeReload();
    assertEquals(h.fs.reads, reads + 1, `retry ${i + 1} after ${delay} ms`);
    reads = h.fs.reads;
    assertEquals(h.manager.status().failures, i + 2);
  }
  // A new mtime is read at once, back-off or not; a new broken version starts again at 1 s.
  h.fs.write(h.path, "routing: {frontend_count: 0}\n", 3000);
  await h.manager.maybeReload();
  assertEquals(h.fs.reads, reads + 1);
  assertMatch(h.manager.status().error!, /frontend_count/);
  reads = h.fs.reads;
  h.clock.advance(1000);
  await h.manager.maybeReload();
  assertEquals(h.fs.reads, reads + 1, "a new version's back-off starts at 1 s");
  // A good version at a new mtime: applied at once, status back to ok.
  h.fs.write(h.path, FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 60"), 4000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.manager.status(), { ok: true, error: null, failed_at: null, failures: 0 });
  assertEquals(h.skeid.routing.wait_timeout_ms, 60);
  // No failed version: no retry reads while the mtime stands still.
  reads = h.fs.reads;
  h.clock.advance(120_000);
  await h.manager.maybeReload();
  assertEquals(h.fs.reads, reads);
});

Deno.test("reverting a failed edit to the applied content clears the failure", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.fs.write(h.path, "nodes: 3\n", 2000);
  await h.manager.maybeReload();
  assertEquals(h.manager.status().ok, false);
  h.fs.write(h.path, FULL, 3000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(h.manager.status().ok, true);
  assertEquals(h.applied, 1);
});

Deno.test("a deleted file keeps the config in force, warned once until it is back", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.fs.remove(h.path);
  for (let i = 0; i < 5; i++) {
    h.clock.advance(10_000);
    assertEquals(await h.manager.maybeReload(), false);
  }
  assertEquals(events(h, "config_file_missing").length, 1);
  assertEquals(h.skeid.listNodes().length, 2);
  assertEquals(h.manager.status().ok, true, "a missing file is not a failed reload");
  h.fs.write(h.path, FULL, 5000);
  assertEquals(await h.manager.maybeReload(), false, "same content: nothing to apply");
  assertEquals(events(h, "config_file_back").length, 1);
  h.fs.remove(h.path);
  await h.manager.maybeReload();
  assertEquals(events(h, "config_file_missing").length, 2, "warned again after it was back");
  // An explicit reload of a missing file fails and says so.
  await assertRejects(() => h.manager.reload(), ConfigFileMissingError);
  assertEquals(h.manager.status().ok, false);
  assertMatch(h.manager.status().error!, /config file not found/);
});

Deno.test("an explicit reload of unchanged content changes nothing and returns the config", async () => {
  const h = harness(FULL);
  const first = await h.manager.load();
  const gen = h.skeid.generation;
  assertEquals(await h.manager.reload(), first);
  assertEquals(h.skeid.generation, gen);
  assertEquals(h.applied, 1);
});

Deno.test("the admin key is re-resolved on every applied config; an explicit key wins", async () => {
  const h = harness("admin_api_key: from-file\n", {
    env: { SKEID_ADMIN_API_KEY: "from-env", V: "from-var" },
  });
  await h.manager.load();
  assertEquals(h.manager.adminApiKey(), "from-file");
  h.fs.write(h.path, "admin: {api_key_env: V}\n", 2000);
  await h.manager.maybeReload();
  assertEquals(h.manager.adminApiKey(), "from-var");
  h.fs.write(h.path, "{}\n", 3000);
  await h.manager.maybeReload();
  assertEquals(h.manager.adminApiKey(), "from-env", "removed from the config: the variable");
  h.fs.write(h.path, "admin_api_key: ''\n", 4000);
  await h.manager.maybeReload();
  assertEquals(h.manager.adminApiKey(), "", "present but empty: off");
  assertEquals(h.manager.setAdminApiKey("explicit"), "explicit");
  h.fs.write(h.path, "admin_api_key: from-file\n", 5000);
  await h.manager.maybeReload();
  assertEquals(h.manager.adminApiKey(), "explicit", "a reload never replaces an explicit key");
  assertEquals(h.manager.setAdminApiKey(""), "from-file", "cleared: the config's key at once");
  // A failing config keeps the key in force.
  h.fs.write(h.path, "admin_api_key: other\nnodes: 3\n", 6000);
  await h.manager.maybeReload();
  assertEquals(h.manager.adminApiKey(), "from-file");
});

Deno.test("an explicit key passed at construction outranks the config", async () => {
  const h = harness("admin_api_key: from-file\n", { explicitAdminKey: "cli" });
  assertEquals(h.manager.adminApiKey(), "cli");
  await h.manager.load();
  assertEquals(h.manager.adminApiKey(), "cli");
});

Deno.test("usage store: prepared before the core commit, installed after, only when changed", async () => {
  const order: string[] = [];
  const prepared: NormalizedUsageStoreConfig[] = [];
  const ref: { h?: ReturnType<typeof harness> } = {};
  const h = ref.h = harness(
    FULL + "usage_store: {backend: jsonlog, path: /tmp/skeid-cfg-test-events/}\n",
    {
      hooks: {
        prepareUsageStore(cfg) {
          prepared.push(cfg);
          order.push(`prepare nodes=${ref.h!.skeid.listNodes().length}`);
          return Promise.resolve(() => {
            order.push(`install nodes=${ref.h!.skeid.listNodes().length}`);
            return Promise.resolve();
          });
        },
      },
    },
  );
  await h.manager.load();
  assertEquals(order, ["prepare nodes=0", "install nodes=2"]);
  assertEquals(prepared[0].backend, "jsonlog");
  // Another section changes: the store is not touched.
  h.fs.write(
    h.path,
    FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 51") +
      "usage_store: {backend: jsonlog, path: /tmp/skeid-cfg-test-events/}\n",
    2000,
  );
  await h.manager.maybeReload();
  assertEquals(prepared.length, 1);
  // The store changes: prepared and installed again.
  h.fs.write(
    h.path,
    FULL + "usage_store: {backend: sqlite, sqlite_path: /tmp/skeid-cfg-test.db}\n",
    3000,
  );
  await h.manager.maybeReload();
  assertEquals(prepared.map((p) => p.backend), ["jsonlog", "sqlite"]);
  assertEquals(order.length, 4);
});

Deno.test("usage store: a store that fails to prepare fails the whole reload", async () => {
  let fail = false;
  const discarded: string[] = [];
  const h = harness(FULL + "usage_store: {backend: sqlite, sqlite_path: /tmp/a.db}\n", {
    hooks: {
      prepareUsageStore(cfg) {
        if (fail) return Promise.reject(new Error(`cannot open ${cfg.backend}`));
        return Promise.resolve({
          install: () => Promise.resolve(),
          discard: () => {
            discarded.push(cfg.backend);
            return Promise.resolve();
          },
        });
      },
    },
  });
  await h.manager.load();
  const before = coreState(h);
  fail = true;
  h.fs.write(h.path, "usage_store: {backend: sqlite, sqlite_path: /tmp/b.db}\n", 2000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(coreState(h), before);
  assertMatch(h.manager.status().error!, /cannot open sqlite/);
  assertEquals(discarded, []);
});

Deno.test("usage store: removed from the config, the running store stays with one warning", async () => {
  let prepares = 0;
  const h = harness("usage_db_path: /tmp/skeid-cfg-test.db\n", {
    hooks: {
      prepareUsageStore() {
        prepares++;
        return Promise.resolve(() => Promise.resolve());
      },
    },
  });
  await h.manager.load();
  assertEquals(prepares, 1);
  h.fs.write(h.path, "routing: {max_attempts: 2}\n", 2000);
  await h.manager.maybeReload();
  h.fs.write(h.path, "routing: {max_attempts: 3}\n", 3000);
  await h.manager.maybeReload();
  const warned = events(h, "usage_store_removed");
  assertEquals(warned.length, 1);
  assertMatch(String(warned[0].message), /^usage_store was removed from the config/);
  assertEquals(prepares, 1, "nothing prepared, nothing removed");
  // Declared again (the same store): nothing to prepare.
  h.fs.write(h.path, "usage_db_path: /tmp/skeid-cfg-test.db\n", 4000);
  await h.manager.maybeReload();
  assertEquals(prepares, 1);
});

Deno.test("usage store: SKEID_USAGE_DB is the default when the config names none", async () => {
  const seen: NormalizedUsageStoreConfig[] = [];
  const h = harness("{}\n", {
    env: { SKEID_USAGE_DB: "/tmp/skeid-cfg-env.db" },
    hooks: {
      prepareUsageStore(cfg) {
        seen.push(cfg);
        return Promise.resolve(() => Promise.resolve());
      },
    },
  });
  await h.manager.load();
  assertEquals(seen.length, 1);
  assertEquals(seen[0].backend, "sqlite");
  assertEquals((seen[0] as { path: string }).path, "/tmp/skeid-cfg-env.db");
  h.fs.write(h.path, "routing: {max_attempts: 2}\n", 2000);
  await h.manager.maybeReload();
  assertEquals(seen.length, 1);
  assertEquals(events(h, "usage_store_removed").length, 0);
});

Deno.test("manifests: by key id (a short id in the config matches its full id), kept on failure", async () => {
  const SHORT = "k_" + "c".repeat(12);
  const FULL_C = SHORT + "d".repeat(28);
  const text = FULL + "manifest: {enabled: true, public_url: 'https://llm.example.com'}\n";
  const yaml = text.replace(
    "keys:\n  alice: {policy: standard, models: [house-model]}\n",
    "keys:\n  alice: {policy: standard, models: [house-model], manifest: {models: [house-model]}}\n" +
      `  ${SHORT}: {manifest: {models: [qwen3-32b]}}\n`,
  );
  const h = harness(yaml);
  await h.manager.load();
  assert(h.manager.manifestEnabled());
  const alice = JSON.parse(h.manager.manifestFor(ALICE)!);
  assertEquals(alice.models.map((m: { id: string }) => m.id), [
    "house-model",
    "house-model",
    "house-model",
  ]);
  assertEquals(JSON.parse(h.manager.manifestFor(FULL_C)!).models[0].id, "qwen3-32b");
  assertEquals(h.manager.manifestFor("k_" + "e".repeat(40)), undefined);
  h.fs.write(h.path, yaml.replace("public_url: 'https://llm.example.com'", "public_url: ''"), 2000);
  await h.manager.maybeReload();
  assertEquals(h.manager.status().ok, false);
  assert(h.manager.manifestFor(ALICE), "the previous manifests stay in force");
});

Deno.test("registry settings: resolved at apply, kept when a reload fails, off when removed", async () => {
  const SECRET = "x".repeat(40);
  const h = harness("admin_api_key: adm\nregistry: {enabled: true, secret_env: REG}\n", {
    env: { REG: SECRET },
  });
  await h.manager.load();
  assertEquals(h.manager.registry()?.secret, SECRET);
  assertEquals(h.manager.registry()?.instanceId, "test-host");
  h.fs.write(h.path, "registry: {enabled: true, secret_env: REG}\n", 2000);
  await h.manager.maybeReload();
  assertMatch(h.manager.status().error!, /credential/);
  assertEquals(h.manager.registry()?.secret, SECRET);
  h.fs.write(h.path, "admin_api_key: adm\n", 3000);
  await h.manager.maybeReload();
  assertEquals(h.manager.registry(), undefined);
});

Deno.test("warnings of an applied config are logged; the reload error never carries a secret", async () => {
  const h = harness("nodes:\n  - {url: 'http://x:1'}\nadmin_api_key: sup3r-s3cret\n");
  await h.manager.load();
  const w = events(h, "config_warning");
  assertEquals(w.length, 1);
  assertMatch(String(w[0].warning), /^nodes\[0\] \(line 2\): skipped/);
  assertEquals(h.manager.warnings().length, 1);
  h.fs.write(h.path, "admin_api_key: [sup3r-s3cret]\n", 2000);
  await h.manager.maybeReload();
  const err = h.manager.status().error!;
  assertMatch(err, /admin_api_key \(line 1\): must be a string/);
  assert(!err.includes("sup3r-s3cret"));
  assert(!JSON.stringify(h.logger.lines).includes("sup3r-s3cret"));
});

Deno.test("no config file: an empty config, admin key from the explicit key or environment", async () => {
  const { RoutingCore } = await import("../../src/core/routing_core.ts");
  const { ConfigManager } = await import("../../src/config/config_manager.ts");
  const { silentLogger } = await import("../../src/log.ts");
  const env = (n: string) => (n === "SKEID_ADMIN_API_KEY" ? "env-key" : undefined);
  const skeid = new RoutingCore({ env });
  const m = new ConfigManager({ skeid, env, logger: silentLogger });
  assertEquals(await m.load(), {});
  assertEquals(m.adminApiKey(), "env-key");
  assertEquals(await m.maybeReload(), false);
  assertEquals(m.status().ok, true);
  await m.close();
});

Deno.test("concurrent maybeReload calls share one check", async () => {
  const h = harness(FULL);
  await h.manager.load();
  const stats = h.fs.stats;
  const results = await Promise.all(Array.from({ length: 50 }, () => h.manager.maybeReload()));
  assertEquals(results.every((r) => r === false), true);
  assertEquals(h.fs.stats - stats, 1);
});

Deno.test("a reload that retags a node: the old selection no longer matches, the new one does", async () => {
  const h = harness(
    "nodes:\n  - {id: a, url: 'http://a:1', model: m, tags: [Local, GB10]}\n" +
      "  - {id: b, url: 'http://b:1', model: m, tags: 'cloud, groq'}\n",
  );
  await h.manager.load();
  assertEquals(h.skeid.selectNodes({ tags: ["local", "gb10"] }).map((n) => n.id), ["a"]);
  assertEquals(h.skeid.selectNodes({ tags: ["groq"] }).map((n) => n.id), ["b"]);
  assertEquals(h.skeid.pickNode({ model: "m", tags: ["cloud"] })?.id, "b");
  h.fs.write(
    h.path,
    "nodes:\n  - {id: a, url: 'http://a:1', model: m, tags: [cloud]}\n" +
      "  - {id: b, url: 'http://b:1', model: m, tags: 'cloud, groq'}\n",
    2000,
  );
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.selectNodes({ tags: ["local"] }), []);
  assertEquals(h.skeid.selectNodes({ tags: ["cloud"] }).map((n) => n.id).sort(), ["a", "b"]);
  assertEquals(h.skeid.routeState({ model: "m", tags: ["local"] }).has_eligible, false);
});

Deno.test("one failed version read by the mtime poll and then the watcher counts one failure", async () => {
  const h = harness(FULL);
  await h.manager.load();
  h.fs.write(h.path, "nodes: 3\n", 2000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(h.manager.status().failures, 1);
  // The watcher's event for the same edit reads the same text again: no second failure.
  assertEquals(await h.manager.fileChanged(), false);
  assertEquals(h.manager.status().failures, 1);
  assertEquals(events(h, "config_reload_failed").length, 1);
  // Once the back-off has passed, a read is a retry and counts.
  h.clock.advance(1000);
  await h.manager.fileChanged();
  assertEquals(h.manager.status().failures, 2);
  // A changed text is read and judged at once.
  h.fs.write(h.path, "nodes: 4\n", 3000);
  await h.manager.fileChanged();
  assertEquals(h.manager.status().failures, 3);
});

Deno.test("an emptied config file (an in-place rewrite seen mid-way) is not applied", async () => {
  const h = harness(FULL);
  await h.manager.load();
  const before = coreState(h);
  h.fs.write(h.path, "", 2000);
  assertEquals(await h.manager.maybeReload(), false);
  assertEquals(await h.manager.fileChanged(), false);
  assertEquals(coreState(h), before, "every node, price, alias and policy still in force");
  assertEquals(h.manager.status().ok, true, "a file mid-write is not a failed reload");
  assertEquals(events(h, "config_file_empty").length, 1, "warned once");
  // An explicit reload of an empty file fails and says how to empty the config on purpose.
  await assertRejects(() => h.manager.reload(), ConfigLoadError);
  assertMatch(h.manager.status().error!, /config file is empty/);
  assertEquals(coreState(h), before);
  // The write completes: applied at once.
  h.fs.write(h.path, FULL.replace("wait_timeout_ms: 50", "wait_timeout_ms: 70"), 3000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.routing.wait_timeout_ms, 70);
  // Emptied on purpose with `{}`: applied (every section removed).
  h.fs.write(h.path, "{}\n", 4000);
  assertEquals(await h.manager.maybeReload(), true);
  assertEquals(h.skeid.listNodes().length, 0);
});

Deno.test("applied(): when the config in force was applied, and the SHA-256 of its file text", async () => {
  const hex = async (text: string) =>
    Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  const first = "routing: {wait_timeout_ms: 50}\n";
  const h = harness(first);
  assertEquals(h.manager.applied(), { applied_at: null, file_sha256: null }, "nothing yet");
  await h.manager.load();
  const loadedAt = h.clock.t;
  assertEquals(h.manager.applied(), { applied_at: iso(loadedAt), file_sha256: await hex(first) });
  // The same config in other words (a comment): the file's digest moves, the apply time does not.
  h.clock.advance(5000);
  const commented = "# tuned\n" + first;
  h.fs.write(h.path, commented, 2000);
  await h.manager.maybeReload();
  assertEquals(h.manager.applied(), {
    applied_at: iso(loadedAt),
    file_sha256: await hex(commented),
  });
  // A real change: both move.
  h.clock.advance(5000);
  const changed = "routing: {wait_timeout_ms: 60}\n";
  h.fs.write(h.path, changed, 3000);
  await h.manager.maybeReload();
  assertEquals(h.manager.applied(), {
    applied_at: iso(h.clock.t),
    file_sha256: await hex(changed),
  });
  // A broken edit: the config in force, and what it says, stay.
  h.clock.advance(5000);
  h.fs.write(h.path, "routing: [\n", 4000);
  await h.manager.maybeReload().catch(() => {});
  assertEquals(h.manager.applied().file_sha256, await hex(changed));
});
