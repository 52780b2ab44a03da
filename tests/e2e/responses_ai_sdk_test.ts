/**
 * The Vercel AI SDK's default OpenAI provider (`openai(model)` speaks the Responses API) against
 * the gateway's Responses face: generateText, streamText, and a tool call the SDK executes and
 * answers — and the usage event of each.
 */
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { assert, assertEquals } from "../_assert.ts";
import {
  assertEventBasics,
  CHAT_MODEL,
  type E2E,
  fakeOptions,
  fakeWords,
  getWeather,
  nthEvent,
  WEATHER_CALL,
  WEATHER_SCHEMA,
  withGateway,
} from "./helpers.ts";

const FACE = { apiFormat: "responses", endpoint: "/v1/responses" };

/**
 * The provider the way an app makes it, pointed at the gateway. `steer` adds the fake model's
 * tool call to requests that carry no tool output yet, so an agent loop ends after one call.
 */
function provider(e: E2E, steer?: Record<string, unknown>) {
  return createOpenAI({
    apiKey: "sk-ai-sdk-e2e",
    baseURL: `${e.base}/v1`,
    fetch: (input, init) => {
      const body = typeof init?.body === "string" ? init.body : "";
      if (!steer || body.includes("function_call_output")) return fetch(input, init);
      const headers = new Headers(init?.headers);
      for (const [k, v] of Object.entries(fakeOptions(steer))) headers.set(k, v);
      return fetch(input, { ...init, headers });
    },
  });
}

Deno.test("responses (AI SDK): generateText — text and usage equal the usage event", async () => {
  await withGateway(async (e) => {
    const openai = provider(e);
    const result = await generateText({
      model: openai(CHAT_MODEL),
      prompt: "hello there gateway",
    });
    assertEquals(result.text, fakeWords(8));
    assertEquals(result.finishReason, "stop");
    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { ...FACE, stream: false });
    assertEquals(ev.input_tokens, result.usage.inputTokens);
    assertEquals(ev.output_tokens, result.usage.outputTokens);
    assertEquals(ev.total_tokens, result.usage.totalTokens);
  });
});

Deno.test("responses (AI SDK): streamText — deltas reassemble, usage equals the event", async () => {
  await withGateway(async (e) => {
    const openai = provider(e);
    const result = streamText({ model: openai(CHAT_MODEL), prompt: "hello there gateway" });
    let text = "";
    let deltas = 0;
    for await (const delta of result.textStream) {
      text += delta;
      deltas++;
    }
    assertEquals(text, fakeWords(8));
    assert(deltas >= 8, `text came in pieces (${deltas})`);
    const usage = await result.usage;
    assertEquals(await result.finishReason, "stop");
    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { ...FACE, stream: true });
    assertEquals(ev.input_tokens, usage.inputTokens);
    assertEquals(ev.output_tokens, usage.outputTokens);
  });
});

Deno.test("responses (AI SDK): a tool call, executed by the SDK, answered in a second step", async () => {
  await withGateway(async (e) => {
    const openai = provider(e, WEATHER_CALL);
    const result = await generateText({
      model: openai(CHAT_MODEL),
      prompt: "What is the weather in Boston?",
      tools: {
        get_weather: tool({
          description: "Current weather",
          inputSchema: jsonSchema<{ city: string }>(WEATHER_SCHEMA),
          execute: (args: { city: string }) => Promise.resolve(getWeather(args)),
        }),
      },
      stopWhen: stepCountIs(3),
    });
    assertEquals(result.steps.length, 2, "a tool step, then the answer");
    const call = result.steps[0].toolCalls[0];
    assertEquals(call.toolName, "get_weather");
    assertEquals(call.input, { city: "Boston" });
    assertEquals(result.text, "The tool said: 72F and sunny in Boston");
    const events = await e.t.sink.waitFor(2);
    assertEquals(events.map((ev) => ev.tool_calls), [1, 0]);
    assertEquals(events.map((ev) => ev.api_format), ["responses", "responses"]);
    assertEquals(events[0].output_tokens, result.steps[0].usage.outputTokens);
    assertEquals(events[1].output_tokens, result.steps[1].usage.outputTokens);
  });
});
