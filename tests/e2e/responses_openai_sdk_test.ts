/**
 * The `openai` npm client's Responses API (`client.responses`) against the gateway's Responses
 * face: `responses.create`, `responses.stream`, and a function tool round trip — and the usage
 * event of each, read from the gateway's ledger.
 */
import OpenAI from "openai";
import { assert, assertEquals } from "../_assert.ts";
import {
  assertEventBasics,
  CHAT_MODEL,
  customerKeyIdOf,
  type E2E,
  fakeOptions,
  fakeWords,
  getWeather,
  nthEvent,
  utf8Bytes,
  WEATHER_CALL,
  WEATHER_SCHEMA,
  withGateway,
} from "./helpers.ts";

const CUSTOMER_KEY = "sk-responses-e2e";

function client(e: E2E): OpenAI {
  return new OpenAI({ apiKey: CUSTOMER_KEY, baseURL: `${e.base}/v1`, maxRetries: 0 });
}

const WEATHER_TOOL: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Current weather",
  parameters: WEATHER_SCHEMA,
  strict: false,
};

const FACE = { apiFormat: "responses", endpoint: "/v1/responses" };

Deno.test("responses (openai SDK): create — output_text, usage equals the usage event", async () => {
  await withGateway(async (e) => {
    const res = await client(e).responses.create({
      model: CHAT_MODEL,
      instructions: "Answer briefly.",
      input: "hello there gateway",
    });
    assertEquals(res.object, "response");
    assert(res.id.startsWith("resp_"), `id ${res.id}`);
    assertEquals(res.status, "completed");
    assertEquals(res.model, CHAT_MODEL);
    assertEquals(res.output_text, fakeWords(8));
    assertEquals(res.output.length, 1);
    assertEquals(res.output[0].type, "message");
    assertEquals(res.usage?.input_tokens, 5, "instructions (2 words) + input (3 words)");
    assertEquals(res.usage?.output_tokens, 8);

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { ...FACE, stream: false });
    assertEquals(ev.input_tokens, res.usage?.input_tokens);
    assertEquals(ev.output_tokens, res.usage?.output_tokens);
    assertEquals(ev.total_tokens, res.usage?.total_tokens);
    assertEquals(ev.requested_model, CHAT_MODEL);
    assertEquals(ev.api_key_id, customerKeyIdOf(CUSTOMER_KEY));
    // The node got one chat call: messages, no Responses-only field.
    const sent = e.fake.requests.at(-1)?.body as Record<string, unknown>;
    assertEquals(sent.messages, [
      { role: "system", content: "Answer briefly." },
      { role: "user", content: "hello there gateway" },
    ]);
    assertEquals(sent.input, undefined, "no input upstream");
    assertEquals(sent.instructions, undefined, "no instructions upstream");
  });
});

Deno.test("responses (openai SDK): stream — events in sequence, final response with usage", async () => {
  await withGateway(async (e) => {
    const stream = client(e).responses.stream({ model: CHAT_MODEL, input: "hello there gateway" });
    const types: string[] = [];
    const seqs: number[] = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      seqs.push(event.sequence_number);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    const final = await stream.finalResponse();
    assertEquals(text, fakeWords(8));
    assertEquals(final.output_text, fakeWords(8));
    assertEquals(seqs, seqs.map((_, i) => i), "sequence_number 0, 1, 2, …");
    assertEquals(types.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assertEquals(types.slice(-4), [
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    assertEquals(types.filter((t) => t === "response.output_text.delta").length, 8);

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { ...FACE, stream: true });
    assertEquals(ev.input_tokens, final.usage?.input_tokens);
    assertEquals(ev.output_tokens, final.usage?.output_tokens);
    assertEquals(ev.total_tokens, final.usage?.total_tokens);
    assertEquals(ev.content_bytes, utf8Bytes(text));
    const sent = e.fake.requests.at(-1)?.body as Record<string, unknown>;
    assertEquals(sent.stream_options, { include_usage: true }, "the upstream was asked for usage");
  });
});

Deno.test("responses (openai SDK): function tool round trip — call, output sent back, answer", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const input: OpenAI.Responses.ResponseInput = [
      { role: "user", content: "What is the weather in Boston?" },
    ];
    const first = await sdk.responses.create(
      { model: CHAT_MODEL, input, tools: [WEATHER_TOOL] },
      { headers: fakeOptions(WEATHER_CALL) },
    );
    const calls = first.output.filter((o) => o.type === "function_call");
    assertEquals(calls.length, 1);
    const call = calls[0];
    assert(call.type === "function_call");
    assertEquals(call.name, "get_weather");
    assertEquals(JSON.parse(call.arguments), { city: "Boston" });
    assert(call.id?.startsWith("fc_"), `item id ${call.id}`);
    input.push(...first.output as OpenAI.Responses.ResponseInputItem[]);
    input.push({
      type: "function_call_output",
      call_id: call.call_id,
      output: getWeather(JSON.parse(call.arguments)),
    });

    // Second turn streamed, without steering: the model answers from the tool result.
    const stream = sdk.responses.stream({ model: CHAT_MODEL, input, tools: [WEATHER_TOOL] });
    const final = await stream.finalResponse();
    assertEquals(final.output_text, "The tool said: 72F and sunny in Boston");

    const upstream = e.fake.requests.at(-1)?.body as { messages: Record<string, unknown>[] };
    assertEquals(upstream.messages.map((m) => m.role), ["user", "assistant", "tool"]);
    assertEquals(upstream.messages[2].tool_call_id, call.call_id);
    const events = await e.t.sink.waitFor(2);
    assertEquals(events.map((ev) => ev.tool_calls), [1, 0]);
    assertEquals(events.map((ev) => ev.api_format), ["responses", "responses"]);
    assertEquals(events[0].output_tokens, first.usage?.output_tokens);
    assertEquals(events[1].output_tokens, final.usage?.output_tokens);
  });
});

Deno.test("responses (openai SDK): refusals in OpenAI's error shape", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const err = await sdk.responses.create({
      model: CHAT_MODEL,
      input: "x",
      previous_response_id: "resp_123",
    }).then(() => undefined, (x: unknown) => x);
    assert(err instanceof OpenAI.BadRequestError, `a 400, got ${err}`);
    assertEquals(err.type, "invalid_request_error");
    assert(err.message.includes("previous_response_id"), err.message);
    const res = await fetch(`${e.base}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${CUSTOMER_KEY}` },
      body: JSON.stringify({ model: CHAT_MODEL, input: "x", stream: "yes" }),
    });
    assertEquals(res.status, 400);
    const body = await res.json();
    assertEquals(body.error.type, "invalid_request_error");
    assert(String(body.error.message).startsWith("stream:"), body.error.message);
    assertEquals(e.fake.requests.length, 0, "nothing forwarded");
  });
});

Deno.test("responses (openai SDK): a broken upstream ends the stream with response.failed", async () => {
  await withGateway(async (e) => {
    const stream = await client(e).responses.create(
      { model: CHAT_MODEL, input: "hello there gateway", stream: true },
      { headers: fakeOptions({ fake_cut_after: 3 }) },
    );
    const types: string[] = [];
    let failed: OpenAI.Responses.ResponseFailedEvent | undefined;
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.failed") failed = event;
    }
    assertEquals(types.at(-1), "response.failed", "the stream does not just stop");
    assertEquals(types.filter((t) => t === "response.output_text.delta").length, 3);
    assertEquals(failed?.response.status, "failed");
    assertEquals(failed?.response.error?.code, "server_error");
    const ev = await nthEvent(e, 1);
    assertEquals(ev.api_format, "responses");
    assertEquals(ev.status_code, 502);
    assertEquals(ev.ok, false);
    assertEquals(ev.content_bytes, utf8Bytes(text), "billed for what the client got");
  });
});
