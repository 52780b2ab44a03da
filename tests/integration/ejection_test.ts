/**
 * Node ejection on the request path (ADR 0021): transport failures eject a node, requests fail
 * over at once while it is out, and a half-open trial closes the ejection when the node answers.
 */
import { startFakeModel } from "../../src/fake/model.ts";
import { assert, assertEquals } from "../_assert.ts";
import { fullListener } from "../proxy/http1_helpers.ts";
import { assertIdle, chat, post, startGateway, until } from "./helpers.ts";

const ADMIN = { headers: { authorization: "Bearer admin-secret" } };

/** A free port, closed again (the gateway is already bound, so it cannot take it). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test({
  name: "ejection: a host that never accepts costs connect timeouts until ejected, then none",
  // A connect the kernel never answers stays pending in the runtime after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dead = await fullListener();
    const live = startFakeModel();
    const t = await startGateway({
      admin: { api_key: "admin-secret" },
      nodes: [
        { id: "dead", url: `${dead.url}/v1`, model: "m" },
        { id: "live", url: live.url, model: "m" },
      ],
    }, { env: { SKEID_UPSTREAM_CONNECT_TIMEOUT: "0.3" }, upstreamTimeoutMs: 60_000 });
    try {
      const group = t.group;
      let slow = 0;
      // Bounded: the dead node is picked again within a few requests (least loaded, both idle).
      for (let i = 0; i < 40 && (await group.ejection("dead")).state !== "ejected"; i++) {
        const started = Date.now();
        const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
        assertEquals(r.status, 200, "a connect timeout fails over to the live node");
        assertEquals(r.headers.get("x-skeid-node"), "live");
        if (Date.now() - started >= 250) slow++;
      }
      const ejection = await group.ejection("dead");
      assertEquals(ejection.state, "ejected", "two transport failures in a row eject the node");
      assertEquals(slow, 2, "each transport failure before the ejection cost one connect timeout");

      // While ejected nobody is sent there: answers come at once, the node is never started.
      const before = (await group.nodeMetrics("dead"))!.started;
      for (let i = 0; i < 4; i++) {
        const started = Date.now();
        const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
        assertEquals(r.status, 200);
        assertEquals(r.headers.get("x-skeid-node"), "live");
        assert(Date.now() - started < 250, "no connect timeout while the node is ejected");
      }
      if (Date.now() < ejection.ejected_until!) {
        assertEquals(
          (await group.nodeMetrics("dead"))!.started,
          before,
          "the ejected node got nothing",
        );
      }

      // Visible to the operator: the admin JSON and Prometheus.
      const nodes = await (await fetch(`${t.base}/skeid/metrics/nodes`, ADMIN)).json();
      const shown = nodes.ejections.find((e: { node_id: string }) => e.node_id === "dead");
      assert(shown !== undefined, "/skeid/metrics/nodes lists the ejected node");
      assertEquals(shown.consecutive_failures, 2);
      assertEquals(shown.ejections_total, 1);
      const prom = await (await fetch(`${t.base}/skeid/metrics`, ADMIN)).text();
      assert(prom.includes('skeid_node_ejections_total{node="dead"} 1'), prom);
      assert(prom.includes('skeid_node_transport_failures{node="live"} 0'), prom);
      await t.group.flushUsage();
      assertIdle(t.gw);
    } finally {
      await t.stop();
      await live.close();
      dead.close();
    }
  },
});

Deno.test("ejection: a half-open trial that gets an answer closes the ejection", async () => {
  const live = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "live", url: live.url, model: "m" }] });
  const port = freePort();
  let back: ReturnType<typeof startFakeModel> | undefined;
  try {
    await t.writeConfig({
      nodes: [
        { id: "flaky", url: `http://127.0.0.1:${port}/v1`, model: "m" },
        { id: "live", url: live.url, model: "m" },
      ],
    });
    const skeid = t.gw.skeid;
    const group = t.group;
    await until(() => skeid.getNode("flaky") !== undefined, 5000, "the reload adds the node");
    await group.configApplied();
    // Connection refused (nothing listens): two in a row eject it.
    for (let i = 0; i < 40 && (await group.ejection("flaky")).state !== "ejected"; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      assertEquals(r.status, 200);
    }
    assertEquals((await group.ejection("flaky")).state, "ejected");
    back = startFakeModel({ port });
    await until(
      async () => (await group.ejection("flaky")).state === "due",
      5000,
      "the ejection time ends",
    );
    // The next requests include the trial (bounded: least loaded picks it soon).
    for (let i = 0; i < 40 && (await group.ejection("flaky")).state !== "closed"; i++) {
      const r = await post(`${t.base}/v1/chat/completions`, chat("m"));
      assertEquals(r.status, 200);
    }
    const after = await group.ejection("flaky");
    assertEquals(after.state, "closed", "the trial's answer closes the ejection");
    assertEquals(after.consecutive_failures, 0);
    assert(back.requests.length >= 1, "the trial reached the node");
    assertIdle(t.gw);
  } finally {
    await t.stop();
    await live.close();
    await back?.close();
  }
});
