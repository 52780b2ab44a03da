/**
 * The OpenAI Agents SDK (`@openai/agents`) with its default model provider — the Responses API
 * through the default OpenAI client — against the gateway: an agent run with one tool, and the
 * usage events of its two model calls.
 */
import OpenAI from "openai";
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";
import { assertEquals } from "../_assert.ts";
import {
  assertEventBasics,
  CHAT_MODEL,
  type E2E,
  fakeOptions,
  getWeather,
  WEATHER_CALL,
  withGateway,
} from "./helpers.ts";

/**
 * The default client, pointed at the gateway. The fake model's tool call is asked for only while
 * the conversation has no tool output, so the agent's loop ends after one call.
 */
function defaultClient(e: E2E): OpenAI {
  return new OpenAI({
    apiKey: "sk-agents-e2e",
    baseURL: `${e.base}/v1`,
    maxRetries: 0,
    fetch: (input: string | URL | Request, init?: RequestInit) => {
      const body = typeof init?.body === "string" ? init.body : "";
      if (body.includes("function_call_output")) return fetch(input, init);
      const headers = new Headers(init?.headers);
      for (const [k, v] of Object.entries(fakeOptions(WEATHER_CALL))) headers.set(k, v);
      return fetch(input, { ...init, headers });
    },
  });
}

function weatherAgent(onRun: () => void): Agent {
  const getWeatherTool = tool({
    name: "get_weather",
    description: "Current weather",
    parameters: z.object({ city: z.string() }),
    execute: (args: { city: string }) => {
      onRun();
      return getWeather(args);
    },
  });
  return new Agent({
    name: "Weather agent",
    instructions: "Answer with the weather.",
    model: CHAT_MODEL,
    tools: [getWeatherTool],
  });
}

Deno.test("responses (Agents SDK): an agent run with one tool, plain and streamed", async () => {
  await withGateway(async (e) => {
    // Traces would go to OpenAI's own servers: not from a test.
    setTracingDisabled(true);
    setDefaultOpenAIClient(defaultClient(e));
    let toolRuns = 0;
    const result = await run(weatherAgent(() => toolRuns++), "What is the weather in Boston?");
    assertEquals(toolRuns, 1, "the tool ran once");
    assertEquals(result.finalOutput, "The tool said: 72F and sunny in Boston");

    const events = await e.t.sink.waitFor(2);
    for (const ev of events) {
      assertEventBasics(ev, { apiFormat: "responses", endpoint: "/v1/responses", stream: false });
    }
    assertEquals(events.map((ev) => ev.tool_calls), [1, 0]);
    const usage = result.runContext.usage;
    assertEquals(usage.requests, 2);
    assertEquals(usage.inputTokens, events[0].input_tokens + events[1].input_tokens);
    assertEquals(usage.outputTokens, events[0].output_tokens + events[1].output_tokens);
    // The second call carried the tool's output as a tool message.
    const upstream = e.fake.requests.at(-1)?.body as { messages: Record<string, unknown>[] };
    assertEquals(upstream.messages.map((m) => m.role), ["system", "user", "assistant", "tool"]);

    // Streamed, on the same default client (the default provider keeps the client it made).
    toolRuns = 0;
    const streamed = await run(weatherAgent(() => toolRuns++), "What is the weather in Boston?", {
      stream: true,
    });
    let text = "";
    for await (const chunk of streamed.toTextStream()) text += chunk;
    await streamed.completed;
    assertEquals(toolRuns, 1, "the tool ran once in the streamed run");
    assertEquals(text, "The tool said: 72F and sunny in Boston");
    assertEquals(streamed.finalOutput, text);
    const more = (await e.t.sink.waitFor(4)).slice(2);
    for (const ev of more) {
      assertEventBasics(ev, { apiFormat: "responses", endpoint: "/v1/responses", stream: true });
    }
    assertEquals(more.map((ev) => ev.tool_calls), [1, 0]);
    const streamedUsage = streamed.state.usage;
    assertEquals(streamedUsage.inputTokens, more[0].input_tokens + more[1].input_tokens);
    assertEquals(streamedUsage.outputTokens, more[0].output_tokens + more[1].output_tokens);
  });
});
