import { assertEquals } from "../_assert.ts";
import { Skeid } from "../../src/core/skeid.ts";
import { ConfigManager } from "../../src/config/manager.ts";
import { memoryLogger } from "../../src/log.ts";
import { tempDir } from "../_helpers/temp.ts";

/** Resolves with `p`, or rejects after `ms` (the timer is always cleared). */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A watched config in a temp folder; `next()` resolves on the next applied config. */
async function setup(reloadIntervalMs: number, watchEvents = true) {
  const { dir, cleanup } = await tempDir("skeid-config-watch-");
  const path = `${dir}/skeid.yaml`;
  await Deno.writeTextFile(path, "routing: {wait_timeout_ms: 10}\n");
  const skeid = new Skeid({ env: () => undefined });
  let wake: (() => void) | undefined;
  const manager = new ConfigManager({
    skeid,
    path,
    env: () => undefined,
    logger: memoryLogger(),
    reloadIntervalMs,
    watchEvents,
    hooks: { onApplied: () => wake?.() },
  });
  await manager.load();
  manager.watch();
  const next = () => new Promise<void>((resolve) => (wake = resolve));
  const done = async () => {
    await manager.close();
    await cleanup();
  };
  return { dir, path, skeid, manager, next, done, cleanup };
}

Deno.test("watch: an edit in place and an editor-style replace are applied within a second", async () => {
  // A long poll interval: what is seen here comes from the folder watcher.
  const t = await setup(60_000);
  try {
    let applied = t.next();
    const started = performance.now();
    await Deno.writeTextFile(t.path, "routing: {wait_timeout_ms: 20}\n");
    await within(applied, 5000, "in-place edit applied");
    assertEquals(t.skeid.routing.wait_timeout_ms, 20);
    const first = performance.now() - started;

    applied = t.next();
    const tmp = `${t.dir}/.skeid.yaml.swp`;
    await Deno.writeTextFile(tmp, "routing: {wait_timeout_ms: 30}\n");
    await Deno.rename(tmp, t.path);
    await within(applied, 5000, "replaced file applied");
    assertEquals(t.skeid.routing.wait_timeout_ms, 30);
    assertEquals(t.manager.status().ok, true);
    // "Within about a second" of an edit; the bound above only stops a hung test.
    assertEquals(first < 2000, true, `took ${first} ms (the issue asks for 2 s)`);
  } finally {
    await t.done();
  }
});

Deno.test("watch: the mtime poll alone picks up a change (no folder event needed)", async () => {
  const t = await setup(100, false);
  try {
    const applied = t.next();
    // A different size too, so even an edit within the same millisecond is seen.
    await Deno.writeTextFile(t.path, "routing: {wait_timeout_ms: 400}\n");
    await within(applied, 5000, "change applied");
    assertEquals(t.skeid.routing.wait_timeout_ms, 400);
  } finally {
    await t.done();
  }
});

Deno.test("watch: close stops watching; later edits are not applied", async () => {
  const t = await setup(50);
  await t.manager.close();
  await Deno.writeTextFile(t.path, "routing: {wait_timeout_ms: 99}\n");
  assertEquals(await t.manager.maybeReload(), false);
  assertEquals(t.skeid.routing.wait_timeout_ms, 10);
  await t.cleanup();
});
