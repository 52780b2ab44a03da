/**
 * The `ollama` npm client against the gateway's Ollama face (`host` = gateway root): chat
 * streamed and not, generate, embed, list, tool calls in chat and an agent loop — and the usage
 * event of each, read from the gateway's ledger.
 */
import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert/strict";
import { Ollama } from "ollama";
import type { ChatResponse, Message, Tool } from "ollama";
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

const CUSTOMER_KEY = "sk-ollama-e2e";

/** A client; `headers` ride on every request it makes (the library has no per-call headers). */
function client(e: E2E, headers: Record<string, string> = {}): Ollama {
  return new Ollama({
    host: e.base,
    headers: { authorization: `Bearer ${CUSTOMER_KEY}`, ...headers },
  });
}

const WEATHER_TOOL: Tool = {
  type: "function",
  function: { name: "get_weather", description: "Current weather", parameters: WEATHER_SCHEMA },
};

/**
 * Reads a streamed answer to its `done` line. The library stops at that line without reading
 * the body to its end, so the stream is aborted afterwards (a no-op when the body had ended): the
 * connection is released even when an assertion fails mid-stream.
 */
async function drain<T extends object>(
  stream: AsyncIterable<T> & { abort(): void },
): Promise<T[]> {
  const parts: T[] = [];
  try {
    for await (const part of stream) parts.push(part);
  } finally {
    stream.abort();
  }
  return parts;
}

Deno.test("ollama SDK: chat not streamed, counts equal the usage event", async () => {
  await withGateway(async (e) => {
    const res = await client(e).chat({
      model: CHAT_MODEL,
      messages: [{ role: "user", content: "hello there gateway" }],
      stream: false,
    });
    strictEqual(res.model, CHAT_MODEL);
    strictEqual(res.message.role, "assistant");
    strictEqual(res.message.content, fakeWords(8));
    strictEqual(res.done, true);
    strictEqual(res.done_reason, "stop");
    strictEqual(res.prompt_eval_count, 3);
    strictEqual(res.eval_count, 8);
    ok(res.total_duration > 0, "total_duration in nanoseconds");
    ok(!Number.isNaN(Date.parse(String(res.created_at))), "created_at is a date");

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "ollama", endpoint: "/api/chat", stream: false });
    strictEqual(ev.input_tokens, res.prompt_eval_count);
    strictEqual(ev.output_tokens, res.eval_count);
    strictEqual(ev.api_key_id, customerKeyIdOf(CUSTOMER_KEY));
    // The upstream got a plain (not streamed) OpenAI chat request.
    const up = e.fake.requests.at(-1)!.body as Record<string, unknown>;
    strictEqual(up.stream, undefined);
  });
});

Deno.test("ollama SDK: chat streamed — parts reassemble, done line carries the counts", async () => {
  await withGateway(async (e) => {
    const stream = await client(e).chat({
      model: CHAT_MODEL,
      messages: [{ role: "user", content: "stream to me please" }],
      stream: true,
    });
    const parts = await drain(stream);
    const last = parts.at(-1)!;
    strictEqual(last.done, true);
    strictEqual(last.done_reason, "stop");
    ok(parts.slice(0, -1).every((p) => !p.done), "only the last part is done");
    strictEqual(parts.length, 8 + 1, "one part per word, then done");
    const text = parts.map((p) => p.message.content).join("");
    strictEqual(text, fakeWords(8));
    strictEqual(last.prompt_eval_count, 4);
    strictEqual(last.eval_count, 8);

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "ollama", endpoint: "/api/chat", stream: true });
    strictEqual(ev.input_tokens, last.prompt_eval_count);
    strictEqual(ev.output_tokens, last.eval_count);
    strictEqual(ev.content_bytes, utf8Bytes(text));
  });
});

Deno.test("ollama SDK: generate, streamed and not", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const res = await sdk.generate({
      model: CHAT_MODEL,
      prompt: "write three words",
      system: "Be brief.",
      stream: false,
    });
    strictEqual(res.response, fakeWords(8));
    strictEqual(res.done, true);
    strictEqual(res.prompt_eval_count, 5);
    strictEqual(res.eval_count, 8);
    const up = e.fake.requests.at(-1)!.body as { messages: unknown[] };
    deepStrictEqual(up.messages, [
      { role: "system", content: "Be brief." },
      { role: "user", content: "write three words" },
    ]);

    const parts = await drain(
      await sdk.generate({ model: CHAT_MODEL, prompt: "write more", stream: true }),
    );
    const text = parts.map((p) => p.response).join("");
    strictEqual(text, fakeWords(8));
    const last = parts.at(-1)!;
    strictEqual(last.done, true);

    const [ev1, ev2] = await e.t.sink.waitFor(2);
    assertEventBasics(ev1, { apiFormat: "ollama", endpoint: "/api/generate", stream: false });
    strictEqual(ev1.input_tokens, res.prompt_eval_count);
    strictEqual(ev1.output_tokens, res.eval_count);
    assertEventBasics(ev2, { apiFormat: "ollama", endpoint: "/api/generate", stream: true });
    strictEqual(ev2.input_tokens, last.prompt_eval_count);
    strictEqual(ev2.output_tokens, last.eval_count);
    strictEqual(ev2.content_bytes, utf8Bytes(text));
  });
});

Deno.test("ollama SDK: embed returns the model's vectors; list shows the served models", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const inputs = ["one two three", "four"];
    const res = await sdk.embed({ model: EMBED_MODEL, input: inputs });
    strictEqual(res.model, EMBED_MODEL);
    deepStrictEqual(res.embeddings, inputs.map(embeddingVector));
    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "ollama", endpoint: "/api/embed", stream: false });
    strictEqual(ev.model, EMBED_MODEL);
    strictEqual(ev.node_id, "embed-1");
    strictEqual(ev.input_tokens, 4);
    strictEqual(ev.input_tokens, (res as { prompt_eval_count?: number }).prompt_eval_count);

    const list = await sdk.list();
    deepStrictEqual(list.models.map((m) => m.name).sort(), [CHAT_MODEL, EMBED_MODEL].sort());
    for (const m of list.models) {
      strictEqual(m.model, m.name);
      ok(!Number.isNaN(Date.parse(String(m.modified_at))), `modified_at of ${m.name}`);
    }
    // Listing is not forwarded: still one usage event.
    await e.t.gw.ledger.flush();
    strictEqual(e.t.sink.events.length, 1);
  });
});

Deno.test("ollama SDK: unknown model and bad body surface as ResponseError with the status", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    await rejects(
      sdk.chat({ model: "ghost-model", messages: [{ role: "user", content: "hi" }] }),
      (err: unknown) => {
        const r = err as { name?: string; status_code?: number; error?: string };
        strictEqual(r.name, "ResponseError");
        strictEqual(r.status_code, 503);
        ok(String(r.error).includes("ghost-model"), String(r.error));
        return true;
      },
    );
    await rejects(
      sdk.embed({ model: EMBED_MODEL, input: 42 as unknown as string }),
      (err: unknown) => {
        const r = err as { status_code?: number; error?: string };
        strictEqual(r.status_code, 400);
        strictEqual(r.error, "input: must be a string or an array of strings");
        return true;
      },
    );
    strictEqual(e.fake.requests.length, 0);
  });
});

Deno.test("ollama SDK: tool calls in chat, streamed and not", async () => {
  await withGateway(async (e) => {
    const steered = client(e, fakeOptions(WEATHER_CALL));
    const messages: Message[] = [{ role: "user", content: "What is the weather in Boston?" }];
    const res = await steered.chat({
      model: CHAT_MODEL,
      messages,
      tools: [WEATHER_TOOL],
      stream: false,
    });
    strictEqual(res.done_reason, "tool_calls");
    deepStrictEqual(
      res.message.tool_calls?.map((c) => c.function),
      [{ name: "get_weather", arguments: { city: "Boston" } }],
    );

    const parts: ChatResponse[] = await drain(
      await steered.chat({ model: CHAT_MODEL, messages, tools: [WEATHER_TOOL], stream: true }),
    );
    const calls = parts.flatMap((p) => p.message.tool_calls ?? []);
    deepStrictEqual(calls.map((c) => c.function), [{
      name: "get_weather",
      arguments: { city: "Boston" },
    }]);
    strictEqual(parts.at(-1)!.done, true);
    strictEqual(parts.at(-1)!.done_reason, "tool_calls");

    const [ev1, ev2] = await e.t.sink.waitFor(2);
    assertEventBasics(ev1, { apiFormat: "ollama", endpoint: "/api/chat", stream: false });
    strictEqual(ev1.tool_calls, 1);
    strictEqual(ev1.output_tokens, res.eval_count);
    assertEventBasics(ev2, { apiFormat: "ollama", endpoint: "/api/chat", stream: true });
    strictEqual(ev2.tool_calls, 1);
    strictEqual(ev2.output_tokens, parts.at(-1)!.eval_count);
    strictEqual(ev2.content_bytes, utf8Bytes('{"city":"Boston"}'));
  });
});

Deno.test("ollama SDK: agent loop — tool call, tool result sent back, final answer quotes it", async () => {
  await withGateway(async (e) => {
    const messages: Message[] = [{ role: "user", content: "What is the weather in Boston?" }];
    const first = await client(e, fakeOptions(WEATHER_CALL)).chat({
      model: CHAT_MODEL,
      messages,
      tools: [WEATHER_TOOL],
      stream: false,
    });
    messages.push(first.message);
    for (const call of first.message.tool_calls ?? []) {
      messages.push({
        role: "tool",
        content: getWeather(call.function.arguments),
        tool_name: call.function.name,
      });
    }
    strictEqual(messages.length, 3);

    // Second turn, streamed and not steered: the model answers from the tool result.
    const parts = await drain(
      await client(e).chat({ model: CHAT_MODEL, messages, tools: [WEATHER_TOOL], stream: true }),
    );
    const answer = parts.map((p) => p.message.content).join("");
    strictEqual(answer, "The tool said: 72F and sunny in Boston");

    // Upstream: the assistant's call and the tool result are paired by the call's id.
    const up = e.fake.requests.at(-1)!.body as { messages: Record<string, unknown>[] };
    deepStrictEqual(up.messages.map((m) => m.role), ["user", "assistant", "tool"]);
    const assistantCalls = up.messages[1].tool_calls as { id: string }[];
    strictEqual(up.messages[2].tool_call_id, assistantCalls[0].id);
    const events = await e.t.sink.waitFor(2);
    deepStrictEqual(events.map((ev) => ev.tool_calls), [1, 0]);
    strictEqual(events[1].content_bytes, utf8Bytes(answer));
  });
});
