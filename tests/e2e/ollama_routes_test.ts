/**
 * The Ollama routes clients call besides chat: the legacy `/api/embeddings`, `/api/show`, the
 * `GET /` / `HEAD /` probe, `/api/version`, and load/unload requests (answered locally: no node
 * call, no usage event); and unknown routes answering 404 in the face's JSON shape.
 */
import { Ollama } from "ollama";
import { assert, assertEquals } from "../_assert.ts";
import { embeddingVector } from "../../src/fake/content.ts";
import type { JsonObject } from "../../src/faces/face.ts";
import { post } from "../integration/helpers.ts";
import { CHAT_MODEL, type E2E, EMBED_MODEL, withGateway } from "./helpers.ts";

function client(e: E2E): Ollama {
  return new Ollama({ host: e.base });
}

Deno.test("ollama routes: embeddings (legacy) answers one vector and is billed", async () => {
  await withGateway(async (e) => {
    const res = await client(e).embeddings({ model: EMBED_MODEL, prompt: "hello world" });
    assertEquals(res.embedding, embeddingVector("hello world"));
    const [ev] = await e.t.sink.waitFor(1);
    assertEquals(ev.endpoint, "/api/embeddings");
    assertEquals(ev.input_tokens, 2);
  });
});

Deno.test("ollama routes: show answers from the inventory; version is one Codex accepts", async () => {
  await withGateway(async (e) => {
    const show = await client(e).show({ model: CHAT_MODEL });
    assertEquals(show.capabilities, ["completion", "tools"]);
    assert(typeof show.details.family === "string", "details.family is a string");
    const missing = await post(`${e.base}/api/show`, { model: "nope" });
    assertEquals(missing.status, 404);
    assertEquals(missing.json, { error: "model 'nope' not found" });
    const { version } = await client(e).version();
    const [major, minor, patch] = version.split(".").map(Number);
    assert(major > 0 || minor > 13 || (minor === 13 && patch >= 4), `${version} >= 0.13.4`);
    assertEquals(e.fake.requests.length, 0, "nothing reached the node");
  });
});

Deno.test("ollama routes: GET / and HEAD / answer `Ollama is running`", async () => {
  await withGateway(async (e) => {
    const get = await fetch(`${e.base}/`);
    assertEquals([get.status, await get.text()], [200, "Ollama is running"]);
    const head = await fetch(`${e.base}/`, { method: "HEAD" });
    await head.body?.cancel();
    assertEquals(head.status, 200);
  });
});

Deno.test("ollama routes: load and unload are answered locally, no node call, no usage event", async () => {
  await withGateway(async (e) => {
    const load = await client(e).generate({ model: CHAT_MODEL, prompt: "", keep_alive: "5m" });
    assertEquals([load.done, load.done_reason, load.model], [true, "load", CHAT_MODEL]);
    const unload = await client(e).chat({ model: CHAT_MODEL, messages: [], keep_alive: 0 });
    assertEquals([unload.done, unload.done_reason], [true, "unload"]);
    const streamed = await post(`${e.base}/api/generate`, { model: CHAT_MODEL });
    assertEquals(streamed.json.done_reason, "load", "a stream request (the default) too");
    assertEquals(e.fake.requests.length, 0, "nothing reached the node");
    await e.t.gw.ledger.flush();
    assertEquals(e.t.sink.events.length, 0, "no usage event");
    // A load of a model no node serves is not answered "loaded": it gets what any request for
    // that model gets (the model-not-found refusal), and still reaches no node.
    const nope = await post(`${e.base}/api/generate`, { model: "nope", prompt: "" });
    assertEquals(nope.status, 503);
    assertEquals(nope.json, { error: "No healthy node available for model 'nope'" });
    assertEquals(e.fake.requests.length, 0, "nothing reached the node for it either");
    // A real request right after goes through as usual.
    const real = await client(e).generate({ model: CHAT_MODEL, prompt: "hi", stream: false });
    assert((real.response ?? "").length > 0, "a real answer");
    assertEquals(e.fake.requests.length, 1);
  });
});

Deno.test("unknown routes: 404 in the face's JSON shape, nothing forwarded", async () => {
  await withGateway(async (e) => {
    const api = await post(`${e.base}/api/pull`, { model: CHAT_MODEL });
    assertEquals(api.status, 404);
    assertEquals(api.json, { error: "404 page not found: POST /api/pull" });
    const v1 = await fetch(`${e.base}/v1/files/abc`);
    assertEquals(v1.status, 404);
    assertEquals(await v1.json(), {
      error: { message: "Invalid URL (GET /v1/files/abc)", type: "invalid_request_error" },
    });
    assertEquals(e.fake.requests.length, 0);
  });
});

Deno.test("ollama think: the node's reasoning comes back as message.thinking, JSON and stream", async () => {
  await withGateway(async (e) => {
    const messages = [{ role: "user", content: "why?" }];
    const res = await client(e).chat({ model: CHAT_MODEL, messages, think: true, stream: false });
    assertEquals(res.message.thinking, "thinking tök0 tök1 tök2 tök3 tök4 tök5 tök6 tök7");
    assertEquals((e.fake.requests.at(-1)?.body as JsonObject).reasoning_effort, "medium");
    let thinking = "";
    const stream = await client(e).chat({ model: CHAT_MODEL, messages, think: true, stream: true });
    for await (const part of stream) thinking += part.message.thinking ?? "";
    assertEquals(thinking, "thinking tök0 tök1 tök2 tök3 tök4 tök5 tök6 tök7");
  });
});
