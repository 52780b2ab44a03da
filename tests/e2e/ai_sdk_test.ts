/**
 * The Vercel AI SDK against the gateway, one provider per face: `@ai-sdk/openai` (`openai.chat`),
 * `@ai-sdk/openai-compatible`, `@ai-sdk/anthropic` and `ollama-ai-provider-v2`. Each generates,
 * streams, and makes a tool round trip (the fake model calls the tool when `toolChoice` forces
 * it), with usage > 0 as the SDK reads it.
 */
import { generateText, jsonSchema, type LanguageModel, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOllama } from "ollama-ai-provider-v2";
import { assert, assertEquals } from "../_assert.ts";
import {
  CHAT_MODEL,
  type E2E,
  fakeWords,
  getWeather,
  nthEvent,
  WEATHER_SCHEMA,
  withGateway,
} from "./helpers.ts";

const KEY = "sk-ai-sdk-e2e";

const providers: Record<string, (e: E2E) => LanguageModel> = {
  "openai.chat": (e) => createOpenAI({ baseURL: `${e.base}/v1`, apiKey: KEY }).chat(CHAT_MODEL),
  "openai-compatible": (e) =>
    createOpenAICompatible({
      name: "skeid",
      baseURL: `${e.base}/v1`,
      apiKey: KEY,
      includeUsage: true,
    }).chatModel(CHAT_MODEL),
  "anthropic": (e) => createAnthropic({ baseURL: `${e.base}/v1`, apiKey: KEY })(CHAT_MODEL),
  "ollama-ai-provider-v2": (e) => createOllama({ baseURL: `${e.base}/api` })(CHAT_MODEL),
};

const weather = tool({
  description: "Current weather",
  inputSchema: jsonSchema<{ city: string }>(WEATHER_SCHEMA as never),
  execute: (args: { city: string }) => Promise.resolve(getWeather(args)),
});

for (const [name, make] of Object.entries(providers)) {
  Deno.test(`AI SDK ${name}: generate, stream, tool round trip, usage`, async () => {
    await withGateway(async (e) => {
      const model = make(e);
      const gen = await generateText({ model, prompt: "say hello", maxRetries: 0 });
      assertEquals(gen.text, fakeWords(8));
      assert((gen.usage.inputTokens ?? 0) > 0, `${name} generate input tokens`);
      assert((gen.usage.outputTokens ?? 0) > 0, `${name} generate output tokens`);

      const stream = streamText({ model, prompt: "say hello", maxRetries: 0 });
      let streamed = "";
      for await (const part of stream.textStream) streamed += part;
      assertEquals(streamed, fakeWords(8));
      const usage = await stream.usage;
      assert((usage.inputTokens ?? 0) > 0, `${name} stream input tokens`);
      assert((usage.outputTokens ?? 0) > 0, `${name} stream output tokens`);

      const loop = await generateText({
        model,
        prompt: "weather in Boston?",
        tools: { get_weather: weather },
        // The first step forces the tool (the fake model then calls it); the second answers.
        prepareStep: ({ stepNumber }) => ({
          toolChoice: stepNumber === 0 ? { type: "tool", toolName: "get_weather" } : "auto",
        }),
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      assertEquals(loop.steps.length, 2, `${name}: a tool call, then the answer`);
      assertEquals(loop.steps[0].toolCalls.map((c) => c.toolName), ["get_weather"]);
      assertEquals(loop.text, `The tool said: ${getWeather({ city: "tök" })}`);
      const ev = await nthEvent(e, 4);
      assert(ev.input_tokens > 0, "the usage event of the last call has input tokens");
      // Whatever form the provider sent, the node got the chat API's valid tool_choice.
      const forced = e.fake.requests.find((r) => (r.body as { tools?: unknown }).tools);
      assertEquals((forced?.body as { tool_choice?: unknown }).tool_choice, {
        type: "function",
        function: { name: "get_weather" },
      });
    });
  });
}

Deno.test("AI SDK anthropic: text and PDF file parts reach the node as text and file parts", async () => {
  await withGateway(async (e) => {
    const pdf = btoa("%PDF-1.4 tiny");
    const res = await generateText({
      model: providers.anthropic(e),
      maxRetries: 0,
      messages: [{
        role: "user",
        content: [
          { type: "file", data: new TextEncoder().encode("the notes"), mediaType: "text/plain" },
          { type: "file", data: pdf, mediaType: "application/pdf" },
          { type: "text", text: "Summarize both." },
        ],
      }],
    });
    assertEquals(res.text, fakeWords(8));
    const sent = e.fake.requests.at(-1)?.body as { messages: { content: unknown }[] };
    const parts = sent.messages.at(-1)?.content as { type: string; text?: string }[];
    assertEquals(parts.map((p) => p.type), ["text", "file", "text"]);
    assert((parts[0].text ?? "").endsWith("the notes"), "the text file's content");
    assertEquals(parts[1], {
      type: "file",
      file: { filename: "document.pdf", file_data: `data:application/pdf;base64,${pdf}` },
    });
  });
});

Deno.test("AI SDK anthropic: thinking enabled → the node's reasoning as reasoning text, both ways", async () => {
  await withGateway(async (e) => {
    const providerOptions = { anthropic: { thinking: { type: "enabled", budgetTokens: 2048 } } };
    const res = await generateText({
      model: providers.anthropic(e),
      prompt: "why?",
      maxRetries: 0,
      providerOptions,
    });
    assertEquals(res.reasoningText, `thinking ${fakeWords(8)}`);
    assertEquals(res.text, fakeWords(8));
    assertEquals(
      (e.fake.requests.at(-1)?.body as { reasoning_effort?: string }).reasoning_effort,
      "low",
    );
    const stream = streamText({
      model: providers.anthropic(e),
      prompt: "why?",
      maxRetries: 0,
      providerOptions,
    });
    assertEquals(await stream.reasoningText, `thinking ${fakeWords(8)}`);
    assertEquals(await stream.text, fakeWords(8));
  });
});
