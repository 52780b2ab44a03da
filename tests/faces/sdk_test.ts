/**
 * The real client libraries read what the faces write: requests the SDKs build go through
 * `toUpstream`, a scripted upstream answer goes back through the face, and the SDK's parsed
 * result is checked. No network: each SDK gets a `fetch` that answers in-process.
 */
import { deepStrictEqual, rejects, strictEqual } from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import type { JsonObject, StreamTranslator, UpstreamRequest } from "../../src/faces/face.ts";
import { faceFor } from "../../src/faces/index.ts";
import { finishChunk, FIXED_NOW, roleChunk, textChunk, toolChunk, usageChunk } from "./helpers.ts";

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** A fetch that maps the SDK's request through `face` and answers with `answer(upstream)`. */
function faceFetch(
  name: "anthropic" | "ollama",
  seen: UpstreamRequest[],
  answer: (req: UpstreamRequest, t: StreamTranslator | undefined) => Response,
): Fetch {
  const face = faceFor(name, { now: () => FIXED_NOW });
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const text = input instanceof Request ? await input.text() : String(init?.body ?? "");
    const req = face.toUpstream(url.pathname, JSON.parse(text) as JsonObject);
    seen.push(req);
    const t = req.stream
      ? face.streamTranslator(url.pathname, req.requestedModel, req.context)
      : undefined;
    return answer(req, t);
  };
}

function streamResponse(t: StreamTranslator, chunks: JsonObject[]): Response {
  let body = "";
  for (const c of chunks) body += t.chunk(c);
  body += t.end({ totalMs: 30, ttftMs: 10 });
  return new Response(body, { headers: { "content-type": t.contentType } });
}

Deno.test("anthropic SDK: streamed text + tool_use turn assembles into the final message", async () => {
  const seen: UpstreamRequest[] = [];
  const client = new Anthropic({
    apiKey: "test-key",
    baseURL: "http://127.0.0.1:9",
    maxRetries: 0,
    fetch: faceFetch("anthropic", seen, (_req, t) =>
      streamResponse(t!, [
        roleChunk(),
        textChunk("Checking "),
        textChunk("the weather."),
        toolChunk(0, { id: "toolu_42", name: "get_weather", args: '{"city":' }),
        toolChunk(0, { args: '"Boston"}' }),
        finishChunk("tool_calls"),
        usageChunk(14, 9),
      ])),
  });
  const stream = client.messages.stream({
    model: "house-model",
    max_tokens: 100,
    system: "Be brief.",
    messages: [{ role: "user", content: "Weather in Boston?" }],
    tools: [{
      name: "get_weather",
      description: "weather",
      input_schema: { type: "object", properties: { city: { type: "string" } } },
    }],
  });
  const msg = await stream.finalMessage();
  strictEqual(msg.model, "house-model");
  strictEqual(msg.stop_reason, "tool_use");
  deepStrictEqual(msg.content, [
    { type: "text", text: "Checking the weather." },
    { type: "tool_use", id: "toolu_42", name: "get_weather", input: { city: "Boston" } },
  ]);
  strictEqual(msg.usage.input_tokens, 14);
  strictEqual(msg.usage.output_tokens, 9);
  // What went upstream: one OpenAI chat call asking for usage.
  strictEqual(seen.length, 1);
  strictEqual(seen[0].path, "/chat/completions");
  deepStrictEqual(seen[0].body.stream_options, {
    include_usage: true,
    continuous_usage_stats: true,
  });
  deepStrictEqual((seen[0].body.messages as JsonObject[])[0], {
    role: "system",
    content: "Be brief.",
  });
});

Deno.test("anthropic SDK: a stream that fails mid-way rejects with the API error", async () => {
  const client = new Anthropic({
    apiKey: "test-key",
    baseURL: "http://127.0.0.1:9",
    maxRetries: 0,
    fetch: faceFetch("anthropic", [], (_req, t) => {
      const body = t!.chunk(roleChunk()) + t!.chunk(textChunk("Hel")) +
        t!.fail(502, "Upstream error: connection reset");
      return new Response(body, { headers: { "content-type": t!.contentType } });
    }),
  });
  const stream = client.messages.stream({
    model: "house-model",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
  });
  await rejects(stream.finalMessage(), (e: unknown) => {
    strictEqual(e instanceof Anthropic.APIError, true);
    strictEqual(String((e as Error).message).includes("connection reset"), true);
    return true;
  });
});

/** An Anthropic SDK client whose every call the face answers with the chat `answer`. */
function anthropicAnswering(seen: UpstreamRequest[], answer: JsonObject): Anthropic {
  const face = faceFor("anthropic", { now: () => FIXED_NOW });
  return new Anthropic({
    apiKey: "test-key",
    baseURL: "http://127.0.0.1:9",
    maxRetries: 0,
    fetch: faceFetch("anthropic", seen, (req) =>
      Response.json(
        face.fromUpstream("/v1/messages", answer, req.requestedModel, req.context),
      )),
  });
}

Deno.test("anthropic SDK: non-stream answer parses, model is the requested one", async () => {
  const client = anthropicAnswering([], {
    id: "chatcmpl-9",
    model: "served-model",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "Hello there" },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  });
  const msg = await client.messages.create({
    model: "house-model",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
  });
  strictEqual(msg.id, "msg_chatcmpl-9");
  strictEqual(msg.model, "house-model");
  deepStrictEqual(msg.content, [{ type: "text", text: "Hello there" }]);
  strictEqual(msg.stop_reason, "end_turn");
  deepStrictEqual(msg.usage, { input_tokens: 5, output_tokens: 2 });
});

Deno.test("anthropic SDK: output_config.format reaches the node as response_format; the JSON comes back", async () => {
  const seen: UpstreamRequest[] = [];
  const schema = {
    type: "object" as const,
    properties: { city: { type: "string" as const }, temp: { type: "number" as const } },
    required: ["city", "temp"],
    additionalProperties: false,
  };
  const client = anthropicAnswering(seen, {
    id: "chatcmpl-s",
    choices: [{
      index: 0,
      message: { role: "assistant", content: '{"city":"Oslo","temp":4}' },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 9, completion_tokens: 8 },
  });
  const msg = await client.messages.create({
    model: "house-model",
    max_tokens: 50,
    messages: [{ role: "user", content: "Weather in Oslo as JSON" }],
    output_config: { format: { type: "json_schema", schema } },
  });
  deepStrictEqual(seen[0].body.response_format, {
    type: "json_schema",
    json_schema: { name: "output", schema, strict: true },
  });
  const block = msg.content[0];
  strictEqual(block.type, "text");
  deepStrictEqual(JSON.parse(block.type === "text" ? block.text : ""), { city: "Oslo", temp: 4 });
  strictEqual(msg.stop_reason, "end_turn");
});

Deno.test("ollama client: streamed chat with a tool call, then the done line", async () => {
  const seen: UpstreamRequest[] = [];
  const ollama = new Ollama({
    host: "http://127.0.0.1:9",
    fetch: faceFetch("ollama", seen, (_req, t) =>
      streamResponse(t!, [
        roleChunk(),
        textChunk("Hel"),
        textChunk("lo"),
        toolChunk(0, { id: "call_1", name: "get_weather", args: '{"city":"Oslo"}' }),
        finishChunk("tool_calls"),
        usageChunk(7, 3),
      ])),
  });
  const parts = [];
  for await (
    const part of await ollama.chat({
      model: "house-model",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    })
  ) parts.push(part);
  strictEqual(parts.map((p) => p.message.content).join(""), "Hello");
  const withTools = parts.filter((p) => p.message.tool_calls);
  strictEqual(withTools.length, 1);
  deepStrictEqual(withTools[0].message.tool_calls, [
    { id: "call_1", function: { name: "get_weather", arguments: { city: "Oslo" } } },
  ]);
  const last = parts[parts.length - 1];
  strictEqual(last.done, true);
  strictEqual(last.done_reason, "tool_calls");
  strictEqual(last.prompt_eval_count, 7);
  strictEqual(last.eval_count, 3);
  strictEqual(last.total_duration, 30_000_000);
  strictEqual(last.prompt_eval_duration, 10_000_000);
  strictEqual(last.eval_duration, 20_000_000);
  strictEqual(seen[0].stream, true);
});

Deno.test("ollama client: a stream that fails ends with an error the client throws", async () => {
  const ollama = new Ollama({
    host: "http://127.0.0.1:9",
    fetch: faceFetch("ollama", [], (_req, t) => {
      const body = t!.chunk(textChunk("Hel")) + t!.fail(502, "Upstream error: connection reset");
      return new Response(body, { headers: { "content-type": t!.contentType } });
    }),
  });
  const it = await ollama.chat({
    model: "house-model",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
  });
  const got: string[] = [];
  await rejects(
    (async () => {
      for await (const part of it) got.push(part.message.content);
    })(),
    /connection reset/,
  );
  deepStrictEqual(got, ["Hel"]);
});

Deno.test("ollama client: non-stream generate and embed", async () => {
  const face = faceFor("ollama", { now: () => FIXED_NOW });
  const ollama = new Ollama({
    host: "http://127.0.0.1:9",
    fetch: faceFetch("ollama", [], (req) => {
      const answer: JsonObject = req.path === "/embeddings"
        ? {
          object: "list",
          model: "served-embed",
          data: [{ index: 1, embedding: [0.3, 0.4] }, { index: 0, embedding: [0.1, 0.2] }],
          usage: { prompt_tokens: 4, total_tokens: 4 },
        }
        : {
          id: "x",
          model: "served-model",
          choices: [{
            index: 0,
            message: { role: "assistant", content: "42" },
            finish_reason: "stop",
          }],
          usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
        };
      const endpoint = req.path === "/embeddings" ? "/api/embed" : "/api/generate";
      return Response.json(
        face.fromUpstream(endpoint, answer, req.requestedModel, req.context, { totalMs: 12 }),
      );
    }),
  });
  const g = await ollama.generate({ model: "house-model", prompt: "6*7?", stream: false });
  strictEqual(g.response, "42");
  strictEqual(g.done, true);
  strictEqual(g.eval_count, 1);
  strictEqual(g.total_duration, 12_000_000);
  const e = await ollama.embed({ model: "house-embed", input: ["a", "b"] });
  deepStrictEqual(e.embeddings, [[0.1, 0.2], [0.3, 0.4]]);
  strictEqual(e.prompt_eval_count, 4);
});
