/**
 * The relay keeps a finished Responses `response` (the response store's ticket, ADR 0028) before
 * the event that ends the stream goes out — translated chat streams and native Responses streams
 * alike — and a stream that fails is not kept.
 */
import { assert, assertEquals, assertNotIncludes, assertStringIncludes } from "../_assert.ts";
import { faceFor } from "../../src/faces/index.ts";
import type { JsonObject, RelayMode, StreamTranslator } from "../../src/faces/face.ts";
import { type RelayOutcome, StreamRelay } from "../../src/proxy/relay.ts";

const enc = new TextEncoder();
const frame = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;

function body(pieces: string[], failAt?: number): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i === failAt) return c.error(new Error("error reading a body from connection"));
      if (i >= pieces.length) return c.close();
      c.enqueue(enc.encode(pieces[i++]));
    },
  });
}

/**
 * Relays `pieces`; the ticket notes what the client had read when `keep` was called and holds
 * the relay until `release` — so the test sees what went out before the response was kept.
 */
async function relayKept(
  mode: RelayMode,
  translator: StreamTranslator,
  pieces: string[],
  failAt?: number,
): Promise<{ text: string; readAtKeep: string | undefined; kept: JsonObject[] }> {
  let text = "";
  let readAtKeep: string | undefined;
  const kept: JsonObject[] = [];
  let outcome: RelayOutcome | undefined;
  const r = new StreamRelay({
    mode,
    body: body(pieces, failAt),
    upstream: new AbortController(),
    translator,
    owner: { relayEnded: (o) => (outcome = o) },
    now: Date.now,
    startedAt: Date.now(),
    ticket: {
      keep: async (response) => {
        readAtKeep = text;
        // Give the reader every chance to take more before the keep settles.
        for (let i = 0; i < 20; i++) await Promise.resolve();
        assertEquals(text, readAtKeep, "nothing went out while the response was being kept");
        if (response) kept.push(response);
      },
    },
  });
  const reader = new ReadableStream<Uint8Array>(r).getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  assert(outcome !== undefined, "the relay ended");
  return { text, readAtKeep, kept };
}

const chatChunk = (content: string) => frame({ choices: [{ index: 0, delta: { content } }] });
const chatEnd = frame({
  choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 2 },
});

Deno.test("response ticket: a translated stream is kept before response.completed goes out", async () => {
  const translator = faceFor("responses").streamTranslator("/v1/responses", "m1", {});
  const { text, readAtKeep, kept } = await relayKept("translate", translator, [
    chatChunk("hello"),
    chatChunk(" there"),
    chatEnd,
    "data: [DONE]\n\n",
  ]);
  assert(readAtKeep !== undefined, "keep was called");
  assertNotIncludes(readAtKeep, "response.completed");
  assertStringIncludes(readAtKeep, "response.output_text.delta");
  assertStringIncludes(text, "event: response.completed");
  assertEquals(kept.length, 1);
  assertEquals(kept[0].status, "completed");
  assertStringIncludes(text, `"id":"${kept[0].id}"`);
});

Deno.test("response ticket: a native stream is kept before its response.completed frame goes out", async () => {
  const native = faceFor("responses").native!;
  const response = {
    id: "resp_node_1",
    object: "response",
    status: "completed",
    output: [],
    usage: { input_tokens: 4, output_tokens: 2, total_tokens: 6 },
  };
  const event = (type: string, n: number, fields: JsonObject) =>
    `event: ${type}\n${frame({ type, sequence_number: n, ...fields })}`;
  const translator = native.streamTranslator("/v1/responses", "m1");
  const { text, readAtKeep, kept } = await relayKept("raw", translator, [
    event("response.created", 0, { response: { ...response, status: "in_progress" } }),
    event("response.output_text.delta", 1, { delta: "hi" }),
    event("response.completed", 2, { response }),
  ]);
  assert(readAtKeep !== undefined, "keep was called");
  assertNotIncludes(readAtKeep, "response.completed");
  assertStringIncludes(text, "event: response.completed");
  assertEquals(kept, [response]);
  assertEquals(translator.usage, response.usage, "usage read from response.completed");
  assertEquals(translator.contentBytes, 2);
});

Deno.test("response ticket: a stream that breaks is not kept; it ends with response.failed", async () => {
  const translator = faceFor("responses").streamTranslator("/v1/responses", "m1", {});
  const { text, readAtKeep, kept } = await relayKept(
    "translate",
    translator,
    [chatChunk("hello")],
    1,
  );
  assertEquals(readAtKeep, undefined, "nothing to keep");
  assertEquals(kept, []);
  assertStringIncludes(text, "event: response.failed");
});

Deno.test("native responses face: the request as it came (a copy), a broken stream ends with response.failed", () => {
  const native = faceFor("responses").native!;
  const client = { model: "alias", input: "x", tools: [{ type: "web_search" }], stream: true };
  const up = native.toUpstream("/v1/responses", client);
  assertEquals(up.path, "/responses");
  assertEquals(up.stream, true);
  assertEquals(up.requestedModel, "alias");
  const sent = JSON.parse(String(native.upstreamBody(up, "served", undefined)));
  assertEquals(sent, { ...client, model: "served" });
  assertEquals(client.model, "alias", "the client's body is not changed");
  assertEquals(native.passesThrough, true);
  assertEquals(native.relayMode(up), "raw");

  const t = native.streamTranslator("/v1/responses", "alias");
  t.pass!({ type: "response.created", sequence_number: 0, response: { id: "resp_n" } });
  t.pass!({ type: "response.output_text.delta", sequence_number: 1, delta: "ok" });
  const failed = t.fail(502, "Upstream error: connection closed mid-stream");
  assertStringIncludes(failed, "event: response.failed\n");
  const data = JSON.parse(failed.split("data: ")[1]);
  assertEquals(data.sequence_number, 2, "the next sequence number");
  assertEquals(data.response.id, "resp_n");
  assertEquals(data.response.status, "failed");
});
