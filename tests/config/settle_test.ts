import { assert, assertEquals } from "../_assert.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import {
  ConfigManager,
  DEFAULT_SETTLE_MS,
  settleMsFromEnv,
} from "../../src/config/config_manager.ts";
import type { Config } from "../../src/config/config_schema.ts";
import { memoryLogger } from "../../src/log.ts";
import { tempDir } from "../_helpers/temp.ts";
import { harness } from "./helpers.ts";

const FULL = [
  "nodes:",
  "  - {id: local, url: 'http://127.0.0.1:9', models: [m], tags: [local]}",
  "  - {id: cloud, url: 'http://127.0.0.1:8', models: [m], tags: [cloud]}",
  "policies:",
  "  no-cloud: {deny_tags: [cloud]}",
  "default_policy: no-cloud",
  "",
].join("\n");
/** What the rewrite adds. */
const EDIT = "routing: {wait_timeout_ms: 77}\n";
/** The same file cut before `policies:`: the first write of an in-place rewrite. */
const HALF = FULL.slice(0, FULL.indexOf("policies:"));

Deno.test("settle: SKEID_CONFIG_SETTLE_MS sets the settle time; default 500 ms", () => {
  assertEquals(DEFAULT_SETTLE_MS, 500);
  assertEquals(settleMsFromEnv(() => undefined), 500);
  assertEquals(settleMsFromEnv(() => "0"), 0);
  assertEquals(settleMsFromEnv(() => "1200"), 1200);
  assertEquals(settleMsFromEnv(() => "soon"), 500);
});

Deno.test("settle: an in-place change applies only once unchanged for the settle time", async () => {
  const h = harness("{}\n", { settleMs: 500 });
  try {
    await h.manager.load();
    h.fs.write(h.path, HALF, 2000);
    assertEquals(await h.manager.maybeReload(), false, "the first half is not applied at once");
    h.clock.advance(300);
    h.fs.write(h.path, FULL, 2300);
    assertEquals(await h.manager.fileChanged(), false, "the second part restarts the wait");
    h.clock.advance(400);
    assertEquals(await h.manager.maybeReload(), false, "400 ms unchanged is not yet 500");
    assertEquals(h.applied, 1, "only the first load was applied");
    h.clock.advance(100);
    assertEquals(await h.manager.maybeReload(), true, "applied once settled");
    assertEquals(h.applied, 2);
    assertEquals(h.skeid.policySet.defaultPolicy?.deny_tags, ["cloud"]);
  } finally {
    await h.manager.close();
  }
});

Deno.test("settle: a file replaced by rename (new inode) is read at once", async () => {
  const h = harness("{}\n", { settleMs: 60_000 });
  h.fs.write(h.path, "{}\n", 1000, 1);
  try {
    await h.manager.load();
    h.fs.write(h.path, FULL, 2000, 2);
    assertEquals(await h.manager.fileChanged(), true);
    assertEquals(h.skeid.listNodes().length, 2);
  } finally {
    await h.manager.close();
  }
});

Deno.test("settle: a real two-part in-place write 300 ms apart is never served half", async () => {
  const { dir, cleanup } = await tempDir("skeid-config-settle-");
  const path = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(path, FULL);
  const applied: Config[] = [];
  let wake: (() => void) | undefined;
  const manager = new ConfigManager({
    skeid: new RoutingCore({ env: () => undefined }),
    path,
    env: () => undefined,
    logger: memoryLogger(),
    reloadIntervalMs: 50,
    hooks: {
      onApplied: (cfg) => {
        applied.push(cfg);
        wake?.();
      },
    },
  });
  try {
    await manager.load();
    manager.watch();
    const next = new Promise<void>((resolve) => (wake = resolve));
    // The same rewrite twice over, each time cut before `policies:` for 300 ms: the gap is
    // the scenario (a careless writer), not a wait for something a poll could see.
    const file = await Deno.open(path, { write: true, truncate: true });
    await file.write(new TextEncoder().encode(HALF));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await file.write(new TextEncoder().encode(FULL.slice(HALF.length) + EDIT));
    file.close();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      next,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error("the edit was never applied")), 10_000);
      }),
    ]).finally(() => clearTimeout(timer));
    assertEquals(applied.length, 2, "the first load and the whole edit, nothing between");
    assertEquals(applied[1].routing?.wait_timeout_ms, 77, "the edit is what was applied");
    for (const cfg of applied) {
      assert(cfg.default_policy === "no-cloud", "every applied version has its policies");
    }
  } finally {
    await manager.close();
    await cleanup();
  }
});
