import { assertEquals, assertMatch } from "../_assert.ts";
import { adminFixture, post } from "./helpers.ts";

const NODE = { id: "gpu-1", url: "http://127.0.0.1:9/v1", model: "qwen3", max_conns: 4 };

Deno.test("GET /skeid/nodes answers the nodes payload", async () => {
  const f = adminFixture();
  f.skeid.addNode(NODE);
  const res = await f.req("/skeid/nodes");
  assertEquals(res.status, 200);
  const body = await res.json();
  assertEquals(body.nodes.map((n: { id: string }) => n.id), ["gpu-1"]);
  assertEquals(body.nodes[0].healthy, true);
});

Deno.test("POST /skeid/nodes adds a node with defaults; routing sees it at once", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/nodes", post({ ...NODE, tags: "Local, GB10" }));
  assertEquals(res.status, 200);
  const body = await res.json();
  assertEquals(body.ok, true);
  assertEquals(body.node.id, "gpu-1");
  assertEquals(body.node.engine, "openaibase");
  assertEquals(body.node.tags, ["local", "gb10"]);
  assertEquals(f.skeid.pickNode({ model: "qwen3" })?.id, "gpu-1");
});

Deno.test("POST /skeid/nodes with a bad spec → 400 OpenAI error naming the field", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/nodes", post({ ...NODE, engine: "openai-compatible" }));
  assertEquals(res.status, 400);
  const body = await res.json();
  assertEquals(body.error.type, "invalid_request_error");
  assertMatch(body.error.message, /engine/);
  assertMatch(body.error.message, /openai-compatible/);
  assertEquals(f.skeid.getNode("gpu-1"), undefined, "nothing was added");
});

Deno.test("POST /skeid/nodes without an id or url → 400 naming the missing field", async () => {
  const f = adminFixture();
  const noId = await f.req("/skeid/nodes", post({ url: "http://127.0.0.1:9" }));
  assertEquals(noId.status, 400);
  assertMatch((await noId.json()).error.message, /\bid\b/);
  const noUrl = await f.req("/skeid/nodes", post({ id: "x" }));
  assertEquals(noUrl.status, 400);
  assertMatch((await noUrl.json()).error.message, /\burl\b/);
  assertEquals(f.skeid.listNodes().length, 0);
});

Deno.test("POST /skeid/nodes with a body that is not a JSON object → 400", async () => {
  const f = adminFixture();
  for (const body of ["{not json", "[1,2]", '"gpu-1"', ""]) {
    const res = await f.req("/skeid/nodes", post(body));
    assertEquals(res.status, 400, body);
    const json = await res.json();
    assertEquals(json.error.type, "invalid_request_error");
  }
});

Deno.test("DELETE /skeid/nodes/:id removes; unknown → 404 {ok:false,error}", async () => {
  const f = adminFixture();
  f.skeid.addNode(NODE);
  const res = await f.req("/skeid/nodes/gpu-1", { method: "DELETE" });
  assertEquals(res.status, 200);
  assertEquals(await res.json(), { ok: true });
  assertEquals(f.skeid.getNode("gpu-1"), undefined);
  const again = await f.req("/skeid/nodes/gpu-1", { method: "DELETE" });
  assertEquals(again.status, 404);
  const body = await again.json();
  assertEquals(body.ok, false);
  assertMatch(body.error, /gpu-1/);
});

Deno.test("POST /skeid/nodes/:id/health drains and restores; the pick follows", async () => {
  const f = adminFixture();
  f.skeid.addNode(NODE);
  const off = await f.req("/skeid/nodes/gpu-1/health", post({ healthy: false }));
  assertEquals(off.status, 200);
  assertEquals(await off.json(), { ok: true, id: "gpu-1", healthy: false });
  assertEquals(f.skeid.getNode("gpu-1")?.healthy, false);
  assertEquals(f.skeid.pickNode({ model: "qwen3" }), undefined);
  const on = await f.req("/skeid/nodes/gpu-1/health", post({ healthy: true }));
  assertEquals(on.status, 200);
  await on.body?.cancel();
  assertEquals(f.skeid.getNode("gpu-1")?.healthy, true);
});

Deno.test("POST /skeid/nodes/:id/health on an unknown node → 404, creates nothing", async () => {
  const f = adminFixture();
  const res = await f.req("/skeid/nodes/ghost/health", post({ healthy: true }));
  assertEquals(res.status, 404);
  const body = await res.json();
  assertEquals(body.ok, false);
  assertMatch(body.error, /ghost/);
  assertEquals(f.skeid.getNode("ghost"), undefined);
  assertEquals(f.skeid.listNodes().length, 0);
});

Deno.test("POST /skeid/nodes/:id/health with a non-boolean → 400, health unchanged", async () => {
  const f = adminFixture();
  f.skeid.addNode(NODE);
  for (const body of [{ healthy: 0 }, { healthy: "false" }, {}, [true], "nope"]) {
    const res = await f.req("/skeid/nodes/gpu-1/health", post(body));
    assertEquals(res.status, 400, JSON.stringify(body));
    const json = await res.json();
    assertEquals(json.ok, false);
    assertEquals(typeof json.error, "string");
  }
  assertEquals(f.skeid.getNode("gpu-1")?.healthy, true);
});
