/**
 * The `@anthropic-ai/sdk` client against the gateway's Anthropic face (`baseURL` = gateway root):
 * messages, the SDK's stream helpers, a tool_use round trip, typed errors, the `x-api-key`
 * identity in the usage event, and `count_tokens`.
 */
import { deepStrictEqual, ok, rejects, strictEqual } from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
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

const CUSTOMER_KEY = "sk-ant-e2e";
/** A customer key whose policy grants no model the gateway serves. */
const DENIED_CUSTOMER_KEY = "sk-ant-denied";

function client(e: E2E, apiKey = CUSTOMER_KEY): Anthropic {
  return new Anthropic({ apiKey, baseURL: e.base, maxRetries: 0 });
}

/**
 * A client that presents its customer key as `x-api-key` only. This SDK release sends `apiKey`
 * as `Authorization: Bearer`; a client (or a proxy in front) that speaks the older Messages
 * header sends `x-api-key`, and the gateway must bill that the same way.
 */
function xApiKeyClient(e: E2E, apiKey = CUSTOMER_KEY): Anthropic {
  return new Anthropic({
    apiKey,
    baseURL: e.base,
    maxRetries: 0,
    defaultHeaders: { "x-api-key": apiKey, authorization: null },
  });
}

const WEATHER_TOOL: Anthropic.Tool = {
  name: "get_weather",
  description: "Current weather",
  input_schema: { ...WEATHER_SCHEMA, type: "object" },
};

Deno.test("anthropic SDK: messages.create, usage equals the event, x-api-key identity", async () => {
  await withGateway(async (e) => {
    const msg = await xApiKeyClient(e).messages.create({
      model: CHAT_MODEL,
      max_tokens: 64,
      system: "Be brief.",
      messages: [{ role: "user", content: "hello there gateway" }],
    });
    strictEqual(msg.type, "message");
    strictEqual(msg.role, "assistant");
    strictEqual(msg.model, CHAT_MODEL);
    deepStrictEqual(msg.content, [{ type: "text", text: fakeWords(8) }]);
    strictEqual(msg.stop_reason, "end_turn");
    // "Be brief." + "hello there gateway": 5 words.
    strictEqual(msg.usage.input_tokens, 5);
    strictEqual(msg.usage.output_tokens, 8);

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "anthropic", endpoint: "/v1/messages", stream: false });
    strictEqual(ev.input_tokens, msg.usage.input_tokens);
    strictEqual(ev.output_tokens, msg.usage.output_tokens);
    strictEqual(ev.api_key_id, customerKeyIdOf(CUSTOMER_KEY));
    strictEqual(ev.requested_model, CHAT_MODEL);
    // The key went as x-api-key only; the node got it as the Bearer token it reads, and no
    // Anthropic-only header.
    const up = e.fake.requests.at(-1)!;
    strictEqual(up.headers["x-api-key"], undefined);
    strictEqual(up.headers["authorization"], `Bearer ${CUSTOMER_KEY}`);
    strictEqual(up.headers["anthropic-version"], undefined);
    strictEqual(up.path, "/v1/chat/completions");

    // The SDK's own Bearer form is billed to the same customer key id.
    await client(e).messages.create({
      model: CHAT_MODEL,
      max_tokens: 64,
      messages: [{ role: "user", content: "again" }],
    });
    strictEqual(e.fake.requests.at(-1)!.headers["authorization"], `Bearer ${CUSTOMER_KEY}`);
    strictEqual((await nthEvent(e, 2)).api_key_id, customerKeyIdOf(CUSTOMER_KEY));
  });
});

Deno.test("anthropic SDK: output_config.format reaches the node as response_format, streamed or not", async () => {
  await withGateway(async (e) => {
    const schema = {
      type: "object" as const,
      properties: { answer: { type: "string" as const } },
      required: ["answer"],
      additionalProperties: false,
    };
    const want = { type: "json_schema", json_schema: { name: "output", schema, strict: true } };
    const msg = await client(e).messages.create({
      model: CHAT_MODEL,
      max_tokens: 20,
      messages: [{ role: "user", content: "Answer as JSON" }],
      output_config: { format: { type: "json_schema", schema } },
    });
    strictEqual(msg.type, "message");
    deepStrictEqual(
      (e.fake.requests.at(-1)!.body as Record<string, unknown>).response_format,
      want,
    );
    const stream = client(e).messages.stream({
      model: CHAT_MODEL,
      max_tokens: 20,
      messages: [{ role: "user", content: "Answer as JSON" }],
      output_config: { format: { type: "json_schema", schema } },
    });
    await stream.finalMessage();
    deepStrictEqual(
      (e.fake.requests.at(-1)!.body as Record<string, unknown>).response_format,
      want,
    );
  });
});

Deno.test("anthropic SDK: messages.stream — text events and finalMessage()", async () => {
  await withGateway(async (e) => {
    const stream = client(e).messages.stream({
      model: CHAT_MODEL,
      max_tokens: 64,
      messages: [{ role: "user", content: "stream to me please" }],
    });
    const deltas: string[] = [];
    const kinds: string[] = [];
    stream.on("text", (delta) => deltas.push(delta));
    stream.on("streamEvent", (event) => kinds.push(event.type));
    const msg = await stream.finalMessage();
    strictEqual(deltas.join(""), fakeWords(8));
    strictEqual(deltas.length, 8, "one text event per streamed word");
    deepStrictEqual(msg.content, [{ type: "text", text: fakeWords(8) }]);
    strictEqual(msg.stop_reason, "end_turn");
    strictEqual(msg.model, CHAT_MODEL);
    strictEqual(kinds[0], "message_start");
    strictEqual(kinds.at(-1), "message_stop");
    strictEqual(kinds.filter((k) => k === "content_block_start").length, 1);
    strictEqual(msg.usage.input_tokens, 4);
    strictEqual(msg.usage.output_tokens, 8);

    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, { apiFormat: "anthropic", endpoint: "/v1/messages", stream: true });
    strictEqual(ev.input_tokens, msg.usage.input_tokens);
    strictEqual(ev.output_tokens, msg.usage.output_tokens);
    strictEqual(ev.content_bytes, utf8Bytes(fakeWords(8)));
    strictEqual(ev.api_key_id, customerKeyIdOf(CUSTOMER_KEY));
  });
});

Deno.test("anthropic SDK: tool_use round trip — parsed input, tool_result, final text", async () => {
  await withGateway(async (e) => {
    const sdk = client(e);
    const messages: Anthropic.MessageParam[] = [
      { role: "user", content: "What is the weather in Boston?" },
    ];
    // Turn 1, streamed: the SDK assembles input_json_delta pieces into the tool_use input.
    const stream = sdk.messages.stream(
      { model: CHAT_MODEL, max_tokens: 128, messages, tools: [WEATHER_TOOL] },
      { headers: fakeOptions(WEATHER_CALL) },
    );
    const jsonPieces: string[] = [];
    stream.on("inputJson", (piece) => jsonPieces.push(piece));
    const first = await stream.finalMessage();
    strictEqual(first.stop_reason, "tool_use");
    strictEqual(first.content.length, 1);
    const use = first.content[0];
    ok(use.type === "tool_use", `a tool_use block, got ${use.type}`);
    strictEqual(use.name, "get_weather");
    strictEqual(use.id, "call_fake_0");
    deepStrictEqual(use.input, { city: "Boston" });
    ok(jsonPieces.length > 1, `input arrived in pieces (${jsonPieces.length})`);
    strictEqual(jsonPieces.join(""), '{"city":"Boston"}');

    // Turn 2, not streamed: the tool result goes back; the answer quotes it.
    messages.push({ role: "assistant", content: first.content });
    messages.push({
      role: "user",
      content: [{ type: "tool_result", tool_use_id: use.id, content: getWeather(use.input) }],
    });
    const second = await sdk.messages.create({
      model: CHAT_MODEL,
      max_tokens: 128,
      messages,
      tools: [WEATHER_TOOL],
    });
    strictEqual(second.stop_reason, "end_turn");
    deepStrictEqual(second.content, [{
      type: "text",
      text: "The tool said: 72F and sunny in Boston",
    }]);

    // Upstream, the conversation became user / assistant tool_calls / tool.
    const up = e.fake.requests.at(-1)!.body as { messages: Record<string, unknown>[] };
    deepStrictEqual(up.messages.map((m) => m.role), ["user", "assistant", "tool"]);
    strictEqual(up.messages[2].tool_call_id, "call_fake_0");
    strictEqual(up.messages[2].content, "72F and sunny in Boston");

    const [ev1, ev2] = await e.t.sink.waitFor(2);
    assertEventBasics(ev1, { apiFormat: "anthropic", endpoint: "/v1/messages", stream: true });
    strictEqual(ev1.tool_calls, 1);
    strictEqual(ev1.output_tokens, first.usage.output_tokens);
    strictEqual(ev1.content_bytes, utf8Bytes('{"city":"Boston"}'));
    assertEventBasics(ev2, { apiFormat: "anthropic", endpoint: "/v1/messages", stream: false });
    strictEqual(ev2.tool_calls, 0);
    strictEqual(ev2.input_tokens, second.usage.input_tokens);
    strictEqual(ev2.output_tokens, second.usage.output_tokens);
  });
});

Deno.test("anthropic SDK: errors are the SDK's typed errors with the right status", async () => {
  const policies = {
    policies: { narrow: { models: ["some-other-model"] } },
    keys: { [customerKeyIdOf(DENIED_CUSTOMER_KEY)]: "narrow" },
  };
  await withGateway(async (e) => {
    const params = {
      model: CHAT_MODEL,
      max_tokens: 16,
      messages: [{ role: "user" as const, content: "hi" }],
    };
    // 403: the key's policy does not grant the model.
    await rejects(client(e, DENIED_CUSTOMER_KEY).messages.create(params), (err: unknown) => {
      ok(err instanceof Anthropic.PermissionDeniedError, `PermissionDeniedError: ${err}`);
      strictEqual(err.status, 403);
      deepStrictEqual(err.error, {
        type: "error",
        error: {
          type: "permission_error",
          message: `Model '${CHAT_MODEL}' is not available for this key`,
        },
      });
      ok(err.requestID !== undefined || err.headers?.get("x-request-id"), "a request id");
      return true;
    });
    // 400: a body the gateway refuses (max_tokens must be a non-negative integer).
    const bad = { ...params, max_tokens: "lots" as unknown as number };
    await rejects(client(e).messages.create(bad), (err: unknown) => {
      ok(err instanceof Anthropic.BadRequestError, `BadRequestError: ${err}`);
      strictEqual(err.status, 400);
      deepStrictEqual(err.error, {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: 'max_tokens: must be a non-negative integer, got "lots"',
        },
      });
      return true;
    });
    // 503: nobody serves the model.
    await rejects(
      client(e).messages.create({ ...params, model: "ghost-model" }),
      (err: unknown) => {
        ok(err instanceof Anthropic.InternalServerError, `InternalServerError: ${err}`);
        strictEqual(err.status, 503);
        const body = err.error as { type: string; error: { type: string; message: string } };
        strictEqual(body.type, "error");
        strictEqual(body.error.type, "api_error");
        ok(body.error.message.includes("ghost-model"), body.error.message);
        return true;
      },
    );
    // Streams refuse the same way, before any event.
    await rejects(
      client(e, DENIED_CUSTOMER_KEY).messages.stream(params).finalMessage(),
      (err: unknown) => err instanceof Anthropic.PermissionDeniedError && err.status === 403,
    );
    // Refused before forwarding: nothing reached the model, no usage event was written.
    strictEqual(e.fake.requests.length, 0);

    // An upstream error answer keeps its status, in the Anthropic shape, and is billed.
    await rejects(
      client(e).messages.create(params, { headers: fakeOptions({ fake_status: 400 }) }),
      (err: unknown) => {
        ok(err instanceof Anthropic.BadRequestError, `BadRequestError: ${err}`);
        deepStrictEqual(err.error, {
          type: "error",
          error: { type: "invalid_request_error", message: "fake error: status 400" },
        });
        return true;
      },
    );
    const ev = await nthEvent(e, 1);
    assertEventBasics(ev, {
      apiFormat: "anthropic",
      endpoint: "/v1/messages",
      stream: false,
      status: 400,
    });
    strictEqual(ev.error_type, "upstream_error");
    await e.t.gw.ledger.flush();
    strictEqual(e.t.sink.events.length, 1, "only the forwarded request wrote an event");
  }, policies);
});

Deno.test("anthropic SDK: messages.countTokens answers locally, writes no usage event", async () => {
  await withGateway(async (e) => {
    const count = await client(e).messages.countTokens({
      model: CHAT_MODEL,
      system: "Be brief.",
      messages: [{ role: "user", content: "hello there friend" }],
    });
    // About 4 characters a token: "Be brief." (9) + "hello there friend" (18) → 27 → 7.
    deepStrictEqual(count, { input_tokens: 7 });
    await rejects(
      client(e).messages.countTokens({ model: CHAT_MODEL } as Anthropic.MessageCountTokensParams),
      (err: unknown) => err instanceof Anthropic.BadRequestError && err.status === 400,
    );
    strictEqual(e.fake.requests.length, 0);
    await e.t.gw.ledger.flush();
    strictEqual(e.t.sink.events.length, 0);
  });
});
