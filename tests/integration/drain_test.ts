/**
 * `POST /skeid/nodes/:id/drain`: a draining node admits nothing new while its in-flight request
 * finishes; it shows as `draining` in `/skeid/nodes`; an unknown node is a 404 naming it. With
 * SKEID_TEST_WORKERS=2 the drain reaches every worker.
 */
import { assert, assertEquals } from "../_assert.ts";
import { startFakeModel } from "../../src/fake/model.ts";
import { chat, post, startGateway } from "./helpers.ts";
import { until } from "../_helpers/poll.ts";

const ADMIN = { authorization: "Bearer adm-drain-0123456789" };

Deno.test("drain: in-flight finishes, new requests avoid the node, undrain lets them back", async () => {
  const fake = startFakeModel();
  const t = await startGateway({
    admin_api_key: "adm-drain-0123456789",
    nodes: [
      { id: "a", url: fake.url, model: "m" },
      { id: "b", url: fake.url, model: "m" },
    ],
  });
  try {
    const slow = post(`${t.base}/v1/chat/completions`, chat("m", { fake_ttft_ms: 800 }));
    let held = "";
    await until(async () => {
      for (const id of ["a", "b"]) {
        if ((await t.group.nodeMetrics(id))?.inflight === 1) held = id;
      }
      return held !== "";
    }, "the slow request in flight");
    const other = held === "a" ? "b" : "a";
    const drain = await fetch(`${t.base}/skeid/nodes/${held}/drain`, {
      method: "POST",
      headers: ADMIN,
      body: JSON.stringify({ draining: true }),
    });
    assertEquals(drain.status, 200);
    const state = await drain.json();
    assertEquals([state.ok, state.node.id, state.node.draining], [true, held, true]);

    const listed = await (await fetch(`${t.base}/skeid/nodes`, { headers: ADMIN })).json();
    assertEquals(
      listed.nodes.map((n: { id: string; draining: boolean }) => [n.id, n.draining]),
      [["a", held === "a"], ["b", held === "b"]],
    );
    for (let i = 0; i < 6; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), { connection: "close" });
      assertEquals([r.status, r.headers.get("x-skeid-node")], [200, other]);
    }
    const done = await slow;
    assertEquals([done.status, done.headers.get("x-skeid-node")], [200, held]);

    const undrain = await fetch(`${t.base}/skeid/nodes/${held}/drain`, {
      method: "POST",
      headers: ADMIN,
      body: JSON.stringify({ draining: false }),
    });
    assertEquals((await undrain.json()).node.draining, false);
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"), { connection: "close" });
      seen.add(r.headers.get("x-skeid-node")!);
    }
    assert(seen.has(held), `requests reach ${held} again: ${[...seen]}`);
  } finally {
    await t.stop();
    await fake.close();
  }
});

Deno.test("drain: an unknown node is a 404 naming it; a bad body a 400", async () => {
  const t = await startGateway({
    admin_api_key: "adm-drain-0123456789",
    nodes: [{ id: "a", url: "http://127.0.0.1:9/v1", model: "m" }],
  });
  try {
    const unknown = await fetch(`${t.base}/skeid/nodes/ghost/drain`, {
      method: "POST",
      headers: ADMIN,
      body: JSON.stringify({ draining: true }),
    });
    assertEquals([unknown.status, (await unknown.json()).error], [404, "unknown node 'ghost'"]);
    const bad = await fetch(`${t.base}/skeid/nodes/a/drain`, {
      method: "POST",
      headers: ADMIN,
      body: JSON.stringify({ draining: "yes" }),
    });
    assertEquals([bad.status, (await bad.json()).error], [400, "draining must be true or false"]);
  } finally {
    await t.stop();
  }
});
