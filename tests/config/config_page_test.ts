/**
 * The Config page's view of the config manager: the last change and the last failure (each error
 * with path and line), and a dry run of the file on disk that applies nothing.
 */
import { assert, assertEquals } from "../_assert.ts";
import { harness } from "./helpers.ts";

const BASE = `
nodes:
  - {id: n1, url: 'http://n1:8000', model: m}
routing:
  wait_timeout_ms: 50
`;

Deno.test("config history: the sections of the last change, the last failure with lines", async () => {
  const h = harness(BASE);
  await h.manager.load();
  assertEquals(h.manager.history(), { path: h.path, last_change: null, last_failure: null });

  h.fs.write(
    h.path,
    BASE.replace("wait_timeout_ms: 50", "wait_timeout_ms: 70") + "pricing: {}\n",
    2000,
  );
  await h.manager.reload();
  const change = h.manager.history().last_change!;
  assertEquals(change.sections, ["pricing", "routing"]);
  assert(change.at.endsWith("Z"));

  h.fs.write(h.path, BASE.replace("wait_timeout_ms: 50", "wait_timeout_ms: soon"), 3000);
  await h.manager.reload().catch(() => {});
  const failure = h.manager.history().last_failure!;
  assertEquals(failure.errors.length, 1);
  assertEquals([failure.errors[0].path, failure.errors[0].line], ["routing.wait_timeout_ms", 5]);
  // The change before it is still the last change.
  assertEquals(h.manager.history().last_change!.sections, ["pricing", "routing"]);
});

Deno.test("config check: what a reload would change, or every error; nothing applied", async () => {
  const h = harness(BASE);
  await h.manager.load();
  const same = await h.manager.check();
  assertEquals([same.ok, same.changes.sections, same.errors], [true, [], []]);
  assertEquals(same.file_sha256, h.manager.applied().file_sha256);

  const next = BASE.replace("model: m}", "model: m2}") + "aliases: {a: [{model: m2}]}\n";
  h.fs.write(h.path, next, 2000);
  const dry = await h.manager.check();
  assertEquals([dry.ok, dry.changes.sections, dry.path], [true, ["aliases", "nodes"], h.path]);
  assert(dry.file_sha256 !== same.file_sha256);
  // Nothing was applied: the node serves m still, no change or failure was recorded.
  assertEquals(h.skeid.listNodes()[0].model, "m");
  assertEquals(h.manager.history().last_change, null);

  h.fs.write(
    h.path,
    "nodes:\n  - {id: n1, url: 'http://n1:8000', model: m, max_conns: lots}\n",
    3000,
  );
  const bad = await h.manager.check();
  assertEquals(bad.ok, false);
  assertEquals(bad.errors.map((e) => [e.path, e.line]), [["nodes[0].max_conns", 2]]);
  assertEquals(h.manager.history().last_failure, null);
  assertEquals(h.manager.status().ok, true);

  h.fs.write(h.path, "nodes: [\n", 4000);
  const yaml = await h.manager.check();
  assertEquals(yaml.ok, false);
  assert(yaml.errors[0].line !== null, JSON.stringify(yaml.errors));
});
