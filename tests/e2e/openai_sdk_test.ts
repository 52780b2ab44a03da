/**
 * The `openai` npm client against the gateway's OpenAI face (`baseURL` = gateway `/v1`): chat,
 * streams with and without usage, embeddings, tool calls (JSON and streamed deltas), and an agent
 * loop — and the usage event of each, read from the gateway's ledger.
 */
import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import OpenAI from "openai";
import { embeddingVector } from "../../src/fake/content.ts";
import {
  assertEventBasics,
  CHAT_MODEL,
  customerKeyIdOf,
  type E2E,
  EMBED_MODEL,
  fakeOptions,
  fakeWords,
  getWeather,
  nthEvent,
  utf8Bytes,
  WEATHER_CALL,
  WEATHER_SCHEMA,
  withGateway,
} from "./helpers.ts";

const CUSTOMER_KEY = "sk-openai-e2e";

function client(e: E2E): OpenAI {
  return new OpenAI({ apiKey: CUSTOMER_KEY, baseURL: `${e.base}/v1`, maxRetries: 0 });
}

const USER: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: "user", content: "hello there gateway" },
];

const WEATHER_TOOL: OpenAI.Chat.ChatCompletionTool = {
  type: "function",
  function: { name: "get_weather", description: "Current weather", parameters: WEATHER_SCHEMA },
};

Deno.test("openai SDK: chat completion, usage equals the usage event", async () => {
  await withGateway(async (e) => {
    const res = await client(e).chat.completions.create({ model: CHAT_MODEL, messages: USER });
    strictEqual(res.object, "chat.completion");
    strictEqual(res.model, CHAT_MODEL);
    strictEqual(res.choices[0].message.role, "assistant");
    strictEqual(res.choices[0].message.content, fakeWords(8));
    strictEqual(res.choices[0].finish_reason, "stop");
    deepStrictEqual(
      res.usage && {
        prompt: res.usage.prompt_tokens,
        completion: res.usage.completion_tokens,
        total: res.usage.total_tokens,
      },
      { prompt: 3, completion: 8, total: 11 },
    );

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "openai", endpoint: "/v1/chat/completions", stream: false });
    strictEqual(ev.input_tokens, res.usage?.prompt_tokens);
    strictEqual(ev.output_tokens, res.usage?.completion_tokens);
    strictEqual(ev.model, CHAT_MODEL);
    strictEqual(ev.requested_model, CHAT_MODEL);
    strictEqual(ev.node_id, "chat-1");
    // The SDK's Bearer key is the customer key the event is billed to.
    strictEqual(ev.api_key_id, customerKeyIdOf(CUSTOMER_KEY));
  });
});

Deno.test("openai SDK: streamed chat reassembles; no usage chunk unless include_usage", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const stream = await sdk.chat.completions.create({
      model: CHAT_MODEL,
      messages: USER,
      stream: true,
    });
    let text = "";
    let chunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      chunks++;
      strictEqual(chunk.object, "chat.completion.chunk");
      strictEqual(chunk.usage ?? undefined, undefined, "no usage without include_usage");
      ok(chunk.choices.length === 1, "every chunk the client gets has its choice");
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    strictEqual(text, fakeWords(8));
    strictEqual(finish, "stop");
    strictEqual(chunks, 1 + 8 + 1, "role, 8 words, finish");
    // The gateway asked the upstream for usage anyway, and billed it.
    const first = await nthEvent(e, 1);
    assertEventBasics(first, {
      apiFormat: "openai",
      endpoint: "/v1/chat/completions",
      stream: true,
    });
    strictEqual(first.input_tokens, 3);
    strictEqual(first.output_tokens, 8);
    strictEqual(first.content_bytes, utf8Bytes(text));

    const withUsage = await sdk.chat.completions.create({
      model: CHAT_MODEL,
      messages: USER,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    let usageChunks = 0;
    text = "";
    for await (const chunk of withUsage) {
      if (chunk.usage) {
        usageChunks++;
        usage = chunk.usage;
        deepStrictEqual(chunk.choices, [], "usage rides on the last, choice-less chunk");
      } else text += chunk.choices[0]?.delta.content ?? "";
    }
    strictEqual(text, fakeWords(8));
    strictEqual(usageChunks, 1);
    const second = await nthEvent(e, 2);
    assertEventBasics(second, {
      apiFormat: "openai",
      endpoint: "/v1/chat/completions",
      stream: true,
    });
    strictEqual(second.input_tokens, usage?.prompt_tokens);
    strictEqual(second.output_tokens, usage?.completion_tokens);
    strictEqual(second.total_tokens, usage?.total_tokens);
  });
});

Deno.test("openai SDK: embeddings (the SDK's base64 default decodes to the vectors)", async () => {
  await withGateway(async (e) => {
    const inputs = ["one two three", "four"];
    const res = await client(e).embeddings.create({ model: EMBED_MODEL, input: inputs });
    strictEqual(res.data.length, 2);
    res.data.forEach((d, i) => {
      strictEqual(d.index, i);
      const want = embeddingVector(inputs[i]);
      strictEqual(d.embedding.length, want.length);
      // float32 on the wire: equal to about 7 significant digits.
      d.embedding.forEach((x, j) => ok(Math.abs(x - want[j]) < 1e-6, `vector ${i}[${j}]`));
    });
    strictEqual(res.usage.prompt_tokens, 4);
    // The SDK asked for base64 and decoded it: the gateway relayed that answer unchanged.
    const sent = e.fake.requests.at(-1)?.body as Record<string, unknown>;
    strictEqual(sent.encoding_format, "base64");
    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "openai", endpoint: "/v1/embeddings", stream: false });
    strictEqual(ev.model, EMBED_MODEL);
    strictEqual(ev.node_id, "embed-1");
    strictEqual(ev.input_tokens, res.usage.prompt_tokens);
    strictEqual(ev.output_tokens, 0);
  });
});

Deno.test("openai SDK: tool call, JSON and streamed deltas reassembled by the stream helper", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const res = await sdk.chat.completions.create(
      { model: CHAT_MODEL, messages: USER, tools: [WEATHER_TOOL] },
      { headers: fakeOptions(WEATHER_CALL) },
    );
    const msg = res.choices[0].message;
    strictEqual(res.choices[0].finish_reason, "tool_calls");
    strictEqual(msg.content, null);
    strictEqual(msg.tool_calls?.length, 1);
    const call = msg.tool_calls![0];
    ok(call.type === "function");
    strictEqual(call.function.name, "get_weather");
    deepStrictEqual(JSON.parse(call.function.arguments), { city: "Boston" });
    const first = await nthEvent(e, 1);
    strictEqual(first.tool_calls, 1);
    strictEqual(first.output_tokens, res.usage?.completion_tokens);

    // Two parallel calls, their argument pieces interleaved: the helper reassembles per index.
    const two = {
      fake_tool_calls: [
        { name: "get_weather", arguments: { city: "Boston" } },
        { name: "get_weather", arguments: { city: "Zürich" } },
      ],
    };
    const runner = sdk.chat.completions.stream(
      {
        model: CHAT_MODEL,
        messages: USER,
        tools: [WEATHER_TOOL],
        stream_options: { include_usage: true },
      },
      { headers: fakeOptions(two) },
    );
    let argDeltas = 0;
    runner.on("chunk", (chunk) => {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        if (tc.function?.arguments) argDeltas++;
      }
    });
    const done = await runner.finalChatCompletion();
    const calls = done.choices[0].message.tool_calls ?? [];
    strictEqual(done.choices[0].finish_reason, "tool_calls");
    deepStrictEqual(
      calls.map((c) => c.type === "function" ? JSON.parse(c.function.arguments) : null),
      [{ city: "Boston" }, { city: "Zürich" }],
    );
    deepStrictEqual(calls.map((c) => c.id), ["call_fake_0", "call_fake_1"]);
    ok(argDeltas > 2, `arguments came in pieces (${argDeltas} deltas)`);
    const second = await nthEvent(e, 2);
    assertEventBasics(second, {
      apiFormat: "openai",
      endpoint: "/v1/chat/completions",
      stream: true,
    });
    strictEqual(second.tool_calls, 2);
    strictEqual(second.output_tokens, done.usage?.completion_tokens);
    const args = calls.map((c) => c.type === "function" ? c.function.arguments : "").join("");
    strictEqual(second.content_bytes, utf8Bytes(args));
  });
});

Deno.test("openai SDK: agent loop — tool call, tool result sent back, final answer quotes it", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "user", content: "What is the weather in Boston?" },
    ];
    const first = await sdk.chat.completions.create(
      { model: CHAT_MODEL, messages, tools: [WEATHER_TOOL] },
      { headers: fakeOptions(WEATHER_CALL) },
    );
    const assistant = first.choices[0].message;
    messages.push(assistant);
    for (const call of assistant.tool_calls ?? []) {
      if (call.type !== "function") continue;
      const result = getWeather(JSON.parse(call.function.arguments));
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
    strictEqual(messages.length, 3);

    // Second turn without steering: the model answers from the tool result.
    const stream = await sdk.chat.completions.create({
      model: CHAT_MODEL,
      messages,
      tools: [WEATHER_TOOL],
      stream: true,
    });
    let answer = "";
    for await (const chunk of stream) answer += chunk.choices[0]?.delta.content ?? "";
    strictEqual(answer, "The tool said: 72F and sunny in Boston");

    // What the model got on the second turn: the whole conversation, tool result included.
    const upstream = e.fake.requests.at(-1)?.body as { messages: Record<string, unknown>[] };
    deepStrictEqual(upstream.messages.map((m) => m.role), ["user", "assistant", "tool"]);
    strictEqual(upstream.messages[2].tool_call_id, "call_fake_0");
    const events = await e.t.sink.waitFor(2);
    deepStrictEqual(events.map((ev) => ev.tool_calls), [1, 0]);
    strictEqual(events[1].content_bytes, utf8Bytes(answer));
  });
});
