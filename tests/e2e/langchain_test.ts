/**
 * LangChain JS against the gateway: `ChatOpenAI`, `ChatAnthropic` and `ChatOllama` generate,
 * stream (streamed `usage_metadata` input tokens > 0: ChatAnthropic reads them from
 * `message_start`), and make a tool round trip.
 */
import { ChatOpenAI } from "@langchain/openai";
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOllama } from "@langchain/ollama";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import {
  type AIMessage,
  type AIMessageChunk,
  type BaseMessage,
  HumanMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { assert, assertEquals } from "../_assert.ts";
import {
  CHAT_MODEL,
  type E2E,
  fakeOptions,
  fakeWords,
  getWeather,
  WEATHER_CALL,
  WEATHER_SCHEMA,
  withGateway,
} from "./helpers.ts";

const KEY = "sk-langchain-e2e";
const WEATHER_TOOL = {
  type: "function" as const,
  function: { name: "get_weather", description: "Current weather", parameters: WEATHER_SCHEMA },
};

interface Client {
  /** The chat model; `headers` ride on its requests. */
  make(e: E2E, headers?: Record<string, string>): BaseChatModel;
  /** How this client makes the fake model call the tool: a forced choice, or the header. */
  forceTool: "choice" | "header";
}

const clients: Record<string, Client> = {
  ChatOpenAI: {
    make: (e, headers = {}) =>
      new ChatOpenAI({
        model: CHAT_MODEL,
        apiKey: KEY,
        maxRetries: 0,
        configuration: { baseURL: `${e.base}/v1`, defaultHeaders: headers },
      }),
    forceTool: "choice",
  },
  ChatAnthropic: {
    make: (e, headers = {}) =>
      new ChatAnthropic({
        model: CHAT_MODEL,
        apiKey: KEY,
        maxRetries: 0,
        anthropicApiUrl: e.base,
        clientOptions: { defaultHeaders: headers },
      }),
    forceTool: "choice",
  },
  ChatOllama: {
    make: (e, headers = {}) => new ChatOllama({ model: CHAT_MODEL, baseUrl: e.base, headers }),
    forceTool: "header",
  },
};

function text(m: BaseMessage): string {
  return typeof m.content === "string"
    ? m.content
    : m.content.map((p) => ("text" in p && typeof p.text === "string" ? p.text : "")).join("");
}

for (const [name, c] of Object.entries(clients)) {
  Deno.test(`LangChain ${name}: invoke, stream, tool round trip, usage`, async () => {
    await withGateway(async (e) => {
      const model = c.make(e);
      const answer = await model.invoke("say hello") as AIMessage;
      assertEquals(text(answer), fakeWords(8));
      assert((answer.usage_metadata?.input_tokens ?? 0) > 0, `${name} invoke input tokens`);
      assert((answer.usage_metadata?.output_tokens ?? 0) > 0, `${name} invoke output tokens`);

      let whole: AIMessageChunk | undefined;
      let firstUsage: number | undefined;
      for await (const part of await model.stream("say hello")) {
        whole = whole === undefined ? part : whole.concat(part);
        firstUsage ??= part.usage_metadata?.input_tokens;
      }
      // ChatAnthropic takes the input tokens from message_start (as Anthropic's format has it).
      assert((firstUsage ?? 0) > 0, `${name}: the first usage seen has input tokens`);
      assert(whole !== undefined, "streamed something");
      assertEquals(text(whole), fakeWords(8));
      assert((whole.usage_metadata?.input_tokens ?? 0) > 0, `${name} streamed input tokens`);
      assert((whole.usage_metadata?.output_tokens ?? 0) > 0, `${name} streamed output tokens`);

      const question = new HumanMessage("weather in Boston?");
      const caller = c.forceTool === "choice"
        ? model.bindTools!([WEATHER_TOOL], { tool_choice: "get_weather" })
        : c.make(e, fakeOptions(WEATHER_CALL)).bindTools!([WEATHER_TOOL]);
      const call = await caller.invoke([question]) as AIMessage;
      assertEquals(call.tool_calls?.map((t) => t.name), ["get_weather"]);
      const tc = call.tool_calls![0];
      const result = new ToolMessage({ content: getWeather(tc.args), tool_call_id: tc.id ?? "" });
      const final = await model.bindTools!([WEATHER_TOOL]).invoke([question, call, result]);
      assertEquals(text(final), `The tool said: ${getWeather(tc.args)}`);
    });
  });
}
