/**
 * A node with `responses: native` (ADR 0028) through the `openai` SDK: it gets the Responses
 * request as it came at its `/v1/responses` (the served model written in), its answer and its
 * stream reach the client unchanged, and the usage event carries the node's own usage — also when
 * the response store continues a conversation on it.
 */
import OpenAI from "openai";
import { assert, assertEquals } from "../_assert.ts";
import { type E2E, fakeWords, nthEvent, withGateway } from "./helpers.ts";
import { tempDir } from "../_helpers/temp.ts";

const KEY = "sk-responses-native";
const ALIAS = "house";
const SERVED = "native-model";

function client(e: E2E): OpenAI {
  return new OpenAI({ apiKey: KEY, baseURL: `${e.base}/v1`, maxRetries: 0 });
}

/** The config of a gateway whose only node speaks the Responses API, reached through an alias. */
function nativeConfig(fakeUrl: string, extra: Record<string, unknown> = {}) {
  return {
    nodes: [{ id: "native-1", url: fakeUrl, model: SERVED, responses: "native" }],
    aliases: { [ALIAS]: { tiers: [{ model: SERVED }] } },
    ...extra,
  };
}

/** Runs `fn` against the native node (the fake model's URL is only known inside). */
function withNative(fn: (e: E2E) => Promise<void>, extra: Record<string, unknown> = {}) {
  return withGateway(async (e) => {
    await e.t.writeConfig(nativeConfig(e.fake.url, extra));
    await e.t.gw.config.reload();
    await fn(e);
  });
}

/** The last request the fake model got: path and body. */
function lastSent(e: E2E): { path: string; body: Record<string, unknown> } {
  const r = e.fake.requests.at(-1);
  assert(r !== undefined, "the node got a request");
  return { path: r.path, body: r.body as Record<string, unknown> };
}

Deno.test("responses native node (openai SDK): the request as it came, the answer unchanged, the node's usage billed", async () => {
  await withNative(async (e) => {
    const res = await client(e).responses.create({
      model: ALIAS,
      instructions: "Answer briefly.",
      input: "hello native node",
      tools: [{ type: "web_search" }],
      max_output_tokens: 64,
    });
    const sent = lastSent(e);
    assertEquals(sent.path, "/v1/responses");
    assertEquals(sent.body.model, SERVED, "the served model is written in");
    assertEquals(sent.body.input, "hello native node");
    assertEquals(sent.body.instructions, "Answer briefly.");
    assertEquals(sent.body.tools, [{ type: "web_search" }], "hosted tools reach a native node");
    assertEquals(sent.body.max_output_tokens, 64);
    assertEquals(sent.body.messages, undefined, "no chat call");

    assert(res.id.startsWith("resp_fake_"), `the node's own response: ${res.id}`);
    assertEquals(res.model, SERVED, "the node's answer is not rewritten");
    assertEquals(res.output_text, fakeWords(8));
    assertEquals(res.usage?.input_tokens, 5, "instructions (2 words) + input (3 words)");

    const ev = await nthEvent(e, 1);
    assertEquals(ev.api_format, "responses");
    assertEquals(ev.endpoint, "/v1/responses");
    assertEquals(ev.node_id, "native-1");
    assertEquals(ev.requested_model, ALIAS);
    assertEquals(ev.model, SERVED);
    assertEquals(ev.status_code, 200);
    assertEquals(ev.input_tokens, res.usage?.input_tokens);
    assertEquals(ev.output_tokens, res.usage?.output_tokens);
  });
});

Deno.test("responses native node (openai SDK): a stream relayed unchanged, usage from response.completed", async () => {
  await withNative(async (e) => {
    const stream = client(e).responses.stream({ model: ALIAS, input: "stream from native" });
    const types: string[] = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    const final = await stream.finalResponse();
    assertEquals(types, [
      "response.created",
      "response.output_item.added",
      "response.content_part.added",
      ...Array(8).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ], "the node's events, one delta per word, nothing added");
    assertEquals(text, fakeWords(8));
    assert(final.id.startsWith("resp_fake_"), `the node's own response: ${final.id}`);
    assertEquals(lastSent(e).body.stream, true);

    const ev = await nthEvent(e, 1);
    assertEquals(ev.ok, true);
    assertEquals(ev.input_tokens, final.usage?.input_tokens);
    assertEquals(ev.output_tokens, final.usage?.output_tokens);
    assertEquals(ev.input_tokens, 3);
    assertEquals(ev.output_tokens, 8);
  });
});

Deno.test("responses native node (openai SDK): the store continues a conversation on it", async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await withNative(async (e) => {
      const sdk = client(e);
      const first = await sdk.responses.create({ model: ALIAS, input: "first native" });
      const streamed = await sdk.responses.stream({
        model: ALIAS,
        input: "second native",
        previous_response_id: first.id,
      }).finalResponse();
      const sent = lastSent(e).body;
      assertEquals(sent.previous_response_id, undefined, "the node is not asked for our id");
      assertEquals(sent.input, [
        { type: "message", role: "user", content: "first native" },
        ...first.output,
        { type: "message", role: "user", content: "second native" },
      ]);
      assertEquals((await sdk.responses.retrieve(streamed.id)).output_text, fakeWords(8));
    }, {
      usage_store: { backend: "sqlite", sqlite_path: `${dir}/usage.sqlite` },
      responses: { store: true },
    });
  } finally {
    await cleanup();
  }
});

/** A URL where nothing listens (connections are refused: the attempt fails over). */
function deadUrl(): string {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return `http://127.0.0.1:${port}`;
}

Deno.test("responses native node: failover between a native and a chat node speaks each one's wire", async () => {
  await withGateway(async (e) => {
    const tiers = (first: string, second: string) => ({
      tiers: [{ tags: [first], model: SERVED }, { tags: [second], model: SERVED }],
    });
    await e.t.writeConfig({
      nodes: [
        { id: "native-dead", url: deadUrl(), model: SERVED, tags: ["nd"], responses: "native" },
        { id: "chat-live", url: e.fake.url, model: SERVED, tags: ["cl"] },
        { id: "chat-dead", url: deadUrl(), model: SERVED, tags: ["cd"] },
        { id: "native-live", url: e.fake.url, model: SERVED, tags: ["nl"], responses: "native" },
      ],
      aliases: { "to-chat": tiers("nd", "cl"), "to-native": tiers("cd", "nl") },
    });
    await e.t.gw.config.reload();
    const sdk = client(e);

    const chat = await sdk.responses.create({ model: "to-chat", input: "fail over to chat" });
    assertEquals(lastSent(e).path, "/v1/chat/completions", "the chat node got a chat call");
    assert(!chat.id.startsWith("resp_fake_"), `translated by the gateway: ${chat.id}`);
    assertEquals(chat.model, "to-chat");
    assertEquals(chat.output_text, fakeWords(8));

    const native = await sdk.responses.create({ model: "to-native", input: "fail over native" });
    assertEquals(lastSent(e).path, "/v1/responses", "the native node got the Responses request");
    assertEquals(lastSent(e).body.input, "fail over native");
    assert(native.id.startsWith("resp_fake_"), `the node's own answer: ${native.id}`);

    const events = await e.t.sink.waitFor(2);
    assertEquals(events.map((ev) => [ev.node_id, ev.attempts]), [
      ["chat-live", 2],
      ["native-live", 2],
    ]);
  });
});
