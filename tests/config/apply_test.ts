import { assertEquals, assertMatch, assertRejects } from "../_assert.ts";
import { applyLoadedConfig, initialApplyState } from "../../src/config/apply.ts";
import { loadConfigText } from "../../src/config/load.ts";
import { ConfigManager } from "../../src/config/config_manager.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import type { Node, NodeSpec } from "../../src/core/types.ts";
import { silentLogger } from "../../src/log.ts";
import { FakeFs } from "./helpers.ts";

const env = () => undefined;
const load = (text: string) => loadConfigText(text, { env });

Deno.test("apply: declared sections replace, state remembers what was declared", () => {
  const skeid = new RoutingCore({ env });
  const r = applyLoadedConfig(
    skeid,
    load(
      "nodes:\n  - {id: a, url: 'http://a:1'}\npricing: {m: {input_per_million: 1}}\n" +
        "aliases: {x: [{tags: [t]}]}\npolicies: {p: {}}\nrouting: {max_attempts: 2}\n",
    ),
    initialApplyState(),
  );
  assertEquals([...r.state.declared].sort(), ["aliases", "nodes", "policy", "pricing"]);
  assertEquals([...r.state.routingKeys], ["max_attempts"]);
  assertEquals(r.changes, [
    "nodes replaced (1)",
    "pricing replaced (1)",
    "aliases replaced (1)",
    "policies replaced",
  ]);
  assertEquals(skeid.routing.max_attempts, 2);
  // Nothing declared and nothing declared before: nothing touched.
  const none = applyLoadedConfig(skeid, load("{}\n"), initialApplyState());
  assertEquals(none.changes, []);
  assertEquals(skeid.listNodes().length, 1);
});

Deno.test("apply: a section is listed only when its content changes", () => {
  const skeid = new RoutingCore({ env });
  const text = "pricing: {m: {input_per_million: 1}, n: {input_per_million: 2}}\n" +
    "aliases: {x: [{tags: [t]}]}\npolicies: {p: {limits: {rpm: 5}}}\nnames: {a: " +
    "k_" + "a".repeat(40) + "}\nkeys: {a: p}\n";
  const first = applyLoadedConfig(skeid, load(text), initialApplyState());
  assertEquals(first.changes, [
    "pricing replaced (2)",
    "aliases replaced (1)",
    "policies replaced",
  ]);
  // The same content, written in another order and loaded again: new objects, nothing changed.
  const reordered = "keys: {a: p}\npolicies: {p: {limits: {rpm: 5}}}\n" +
    "aliases: {x: [{tags: [t]}]}\npricing: {n: {input_per_million: 2}, m: {input_per_million: 1}}\n" +
    "names: {a: " + "k_" + "a".repeat(40) + "}\n";
  const same = applyLoadedConfig(skeid, load(reordered), first.state);
  assertEquals(same.changes, []);
  const rpm = applyLoadedConfig(skeid, load(text.replace("rpm: 5", "rpm: 6")), same.state);
  assertEquals(rpm.changes, ["policies replaced"]);
  const keys = applyLoadedConfig(
    skeid,
    load(text.replace("rpm: 5", "rpm: 6") + "default_policy: p\n"),
    rpm.state,
  );
  assertEquals(keys.changes, ["policies replaced"], "default_policy is a policy section");
  const alias = applyLoadedConfig(skeid, load(text.replace("tags: [t]", "tags: [u]")), keys.state);
  assertEquals(alias.changes, ["aliases replaced (1)", "policies replaced"]);
  const removed = applyLoadedConfig(skeid, load("{}\n"), alias.state);
  assertEquals(removed.changes, ["pricing emptied", "aliases emptied", "policies emptied"]);
});

/** A core whose node replacement fails, as if it disagreed with load.ts's validation. */
class RefusingSkeid extends RoutingCore {
  refuse = false;
  override replaceNodes(specs: NodeSpec[]): Node[] {
    if (this.refuse) throw new Error("replaceNodes refused");
    return super.replaceNodes(specs);
  }
}

Deno.test("apply: when the core refuses the nodes, nothing else changes", () => {
  const skeid = new RefusingSkeid({ env });
  const first = applyLoadedConfig(
    skeid,
    load("nodes:\n  - {id: a, url: 'http://a:1'}\npricing: {m: {input_per_million: 1}}\n"),
    initialApplyState(),
  );
  skeid.refuse = true;
  let threw = false;
  try {
    applyLoadedConfig(
      skeid,
      load(
        "nodes:\n  - {id: b, url: 'http://b:1'}\npricing: {m: {input_per_million: 7}}\n" +
          "routing: {max_attempts: 9}\n",
      ),
      first.state,
    );
  } catch (e) {
    threw = true;
    assertMatch(String(e), /refused/);
  }
  assertEquals(threw, true);
  assertEquals(skeid.listNodes().map((n) => n.id), ["a"]);
  assertEquals(skeid.pricingForModel("m").input_per_million, 1);
  assertEquals(skeid.routing.max_attempts, skeid.baseRouting.max_attempts);
});

Deno.test("manager: a store prepared for a reload the core then refuses is discarded", async () => {
  const fs = new FakeFs();
  const path = "/etc/skeid.yaml";
  fs.write(path, "nodes:\n  - {id: a, url: 'http://a:1'}\n", 1000);
  const skeid = new RefusingSkeid({ env });
  const events: string[] = [];
  const manager = new ConfigManager({
    skeid,
    path,
    env,
    fs,
    logger: silentLogger,
    hooks: {
      prepareUsageStore(cfg) {
        events.push(`prepare ${cfg.backend}`);
        return Promise.resolve({
          install: () => Promise.resolve(void events.push(`install ${cfg.backend}`)),
          discard: () => Promise.resolve(void events.push(`discard ${cfg.backend}`)),
        });
      },
    },
  });
  await manager.load();
  skeid.refuse = true;
  fs.write(
    path,
    "nodes:\n  - {id: b, url: 'http://b:1'}\nusage_store: {backend: sqlite, sqlite_path: /tmp/x.db}\n",
    2000,
  );
  await assertRejects(() => manager.reload(), Error);
  assertEquals(events, ["prepare sqlite", "discard sqlite"]);
  assertEquals(skeid.listNodes().map((n) => n.id), ["a"]);
  assertEquals(manager.status().ok, false);
  await manager.close();
});
