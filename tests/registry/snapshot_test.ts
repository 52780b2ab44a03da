import { assert, assertEquals, assertNotIncludes, assertRejects } from "../_assert.ts";
import { RoutingCore } from "../../src/core/routing_core.ts";
import { buildSnapshot, signedSnapshot } from "../../src/registry/snapshot.ts";
import { verify } from "../../src/registry/sign.ts";
import { clock, SECRET } from "./helpers.ts";

const SETTINGS = { instanceId: "skeid-b", ttlS: 10 };

function downstream(workerCount = 1) {
  const c = clock(1_700_000_000_500);
  const skeid = new RoutingCore({ now: c.now, workerCount, env: () => undefined });
  return { skeid, clock: c };
}

Deno.test("snapshot: header fields, seconds on the wire, nodes sorted by id", () => {
  const { skeid } = downstream(2);
  skeid.addNode({ id: "gpu-b", url: "http://b:8000/v1", model: "m", max_conns: 8, tags: "Local" });
  skeid.addNode({ id: "gpu-a", url: "http://a:8000/v1", model: "m", max_conns: 0 });
  const snap = buildSnapshot(skeid, SETTINGS);
  assertEquals(snap.version, 1);
  assertEquals(snap.instance, "skeid-b");
  assertEquals(snap.generated_at, 1_700_000_000.5, "epoch seconds, fractional");
  assertEquals(snap.ttl, 10);
  assertEquals(snap.workers, 2);
  assertEquals(snap.nodes.map((n) => n.id), ["gpu-a", "gpu-b"]);
  assertEquals(snap.nodes[1], {
    id: "gpu-b",
    tags: ["local"],
    healthy: true,
    inflight: 0,
    max_conns: 4, // this process's share: 8 over 2 workers
    errors_in_window: 0,
    last_failure_at: null,
  });
  assertEquals(snap.nodes[0].max_conns, 0, "unlimited stays 0");
});

Deno.test("snapshot: inflight, failures in the window and health are this process's", () => {
  const { skeid, clock: c } = downstream();
  skeid.addNode({ id: "n1", url: "http://a/v1", max_conns: 4 });
  skeid.addNode({ id: "n2", url: "http://b/v1", max_conns: 4, healthy: false });
  assert(skeid.startRequest("n1"));
  assert(skeid.startRequest("n1"));
  assert(skeid.startRequest("n1"));
  skeid.finishRequest("n1", { ok: false }); // failed
  skeid.finishRequest("n1", { aborted: true }); // the client left: not a failure
  const snap = buildSnapshot(skeid, SETTINGS);
  const n1 = snap.nodes.find((n) => n.id === "n1")!;
  assertEquals(n1.inflight, 1);
  assertEquals(n1.errors_in_window, 1);
  assertEquals(n1.last_failure_at, c.now() / 1000);
  assertEquals(snap.nodes.find((n) => n.id === "n2")!.healthy, false);
});

Deno.test("snapshot: capacity only with a current reading; retry_after in epoch seconds", () => {
  const { skeid, clock: c } = downstream();
  skeid.addNode({ id: "n1", url: "http://a/v1", max_conns: 4 });
  skeid.addNode({ id: "n2", url: "http://b/v1", max_conns: 4 });
  skeid.setCapacityReading("n1", { used: 3, limit: 8, source: "prometheus", interval_ms: 2000 });
  skeid.setCapacityReading("n2", { retry_after_ms: 2000, source: "ratelimit" });
  let snap = buildSnapshot(skeid, SETTINGS);
  assertEquals(snap.nodes[0].capacity, { used: 3, limit: 8, source: "prometheus" });
  assertEquals(snap.nodes[1].capacity, {
    used: null,
    limit: null,
    source: "ratelimit",
    retry_after: (c.now() + 2000) / 1000,
  });
  c.advance(10_000); // past capacity_max_age_ms (5 s) and the backoff
  snap = buildSnapshot(skeid, SETTINGS);
  assertEquals(snap.nodes.map((n) => "capacity" in n), [false, false], "aged-out readings gone");
});

Deno.test("snapshot: whitelist only — no URL, key reference, metadata or policy", async () => {
  const { skeid } = downstream();
  skeid.addNode({
    id: "cloud-1",
    url: "https://secret-host.example:8443/v1",
    model: "private-model-name",
    api_key_ref: "secret/skeid/remote/groq",
    api_key_env: "GROQ_API_KEY_VAR",
    metadata: { rack: "b2-hidden" },
    capacity: { probe: "prometheus", url: "http://metrics-host.example/m" },
  });
  skeid.setPolicy("standard", { models: ["private-model-name"], deny_tags: ["denied-tag"] });
  const { body, signature } = await signedSnapshot(skeid, { ...SETTINGS, secret: SECRET });
  const text = new TextDecoder().decode(body);
  for (
    const leak of [
      "secret-host",
      "metrics-host",
      "private-model-name",
      "api_key",
      "GROQ_API_KEY_VAR",
      "b2-hidden",
      "metadata",
      "denied-tag",
      "k_",
      SECRET,
    ]
  ) {
    assertNotIncludes(text, leak);
  }
  assertEquals(Object.keys(JSON.parse(text).nodes[0]).sort(), [
    "errors_in_window",
    "healthy",
    "id",
    "inflight",
    "last_failure_at",
    "max_conns",
    "tags",
  ]);
  assert(await verify(body, signature, SECRET), "signed over the exact body");
});

Deno.test("signedSnapshot: never published unsigned", async () => {
  const { skeid } = downstream();
  await assertRejects(() => signedSnapshot(skeid, { ...SETTINGS, secret: "" }), Error, "unsigned");
});
