/**
 * The Responses face's answer translation: an upstream chat answer → the `response` object.
 */
import { assert, assertEquals, assertMatch } from "../_assert.ts";
import type { JsonObject } from "../../src/faces/face.ts";
import { faceFor, faceNameFor } from "../../src/faces/index.ts";
import { ResponsesFace } from "../../src/responses/responses_face.ts";
import { readUsage } from "../../src/core/usage_reading.ts";
import { FIXED_NOW } from "../faces/helpers.ts";

const face = new ResponsesFace({ now: () => FIXED_NOW });

function chatAnswer(message: JsonObject, finish = "stop", usage: JsonObject = {}): JsonObject {
  return {
    id: "chatcmpl-1",
    object: "chat.completion",
    model: "served-model",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, ...usage },
  };
}

function answer(message: JsonObject, finish = "stop", body: JsonObject = {}): JsonObject {
  const req = face.toUpstream("/v1/responses", { model: "house-model", input: "hi", ...body });
  return face.fromUpstream(
    "/v1/responses",
    chatAnswer(message, finish),
    "house-model",
    req.context,
  );
}

Deno.test("responses face: picked by name and by route", () => {
  assertEquals(faceFor("responses").name, "responses");
  assertEquals(faceNameFor("/v1/responses"), "responses");
  assertEquals(faceNameFor("/v1/responsesx"), "openai");
});

Deno.test("responses answer: a text answer is one message item, status completed", () => {
  const r = answer({ content: "Hello" });
  assertMatch(r.id as string, /^resp_[0-9a-f]{32}$/);
  assertEquals(r.object, "response");
  assertEquals(r.created_at, Math.floor(FIXED_NOW / 1000));
  assertEquals(r.status, "completed");
  assertEquals(r.incomplete_details, null);
  assertEquals(r.error, null);
  assertEquals(r.model, "house-model", "the requested model, not the served one");
  const output = r.output as JsonObject[];
  assertEquals(output.length, 1);
  assertMatch(output[0].id as string, /^msg_/);
  assertEquals({ ...output[0], id: "" }, {
    id: "",
    type: "message",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: "Hello", annotations: [], logprobs: [] }],
  });
});

Deno.test("responses answer: usage has the details and equals the core's reading", () => {
  const upstreamUsage = {
    prompt_tokens: 20,
    completion_tokens: 9,
    total_tokens: 29,
    prompt_tokens_details: { cached_tokens: 12 },
    completion_tokens_details: { reasoning_tokens: 4 },
  };
  const r = face.fromUpstream(
    "/v1/responses",
    { ...chatAnswer({ content: "x" }), usage: upstreamUsage },
    "house-model",
  );
  const u = readUsage(upstreamUsage);
  assertEquals(r.usage, {
    input_tokens: u.input_tokens,
    input_tokens_details: { cached_tokens: u.cached_tokens },
    output_tokens: u.output_tokens,
    output_tokens_details: { reasoning_tokens: 4 },
    total_tokens: u.total_tokens,
  });
  assertEquals((r.usage as JsonObject).input_tokens, 20);
  assertEquals((r.usage as JsonObject).total_tokens, 29);
});

Deno.test("responses answer: length → incomplete with reason max_output_tokens", () => {
  const r = answer({ content: "cut" }, "length");
  assertEquals(r.status, "incomplete");
  assertEquals(r.incomplete_details, { reason: "max_output_tokens" });
});

Deno.test("responses answer: tool calls are function_call items with their own ids", () => {
  const r = answer({
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "w", arguments: '{"city":"A"}' } },
      { id: "call_2", type: "function", function: { name: "w", arguments: '{"city":"B"}' } },
    ],
  }, "tool_calls");
  const output = r.output as JsonObject[];
  assertEquals(output.map((o) => o.type), ["function_call", "function_call"]);
  assertEquals(output.map((o) => o.call_id), ["call_1", "call_2"]);
  assertEquals(output[1].arguments, '{"city":"B"}');
  assertEquals(output[0].name, "w");
  assert(output[0].id !== output[1].id, "every item has its own id");
  assertMatch(output[0].id as string, /^fc_/);
  assertEquals(r.status, "completed");
});

Deno.test("responses answer: a custom tool's call comes back as custom_tool_call", () => {
  const r = answer(
    {
      tool_calls: [{
        id: "call_p",
        type: "function",
        function: { name: "apply_patch", arguments: '{"input":"*** Begin Patch\\n"}' },
      }],
    },
    "tool_calls",
    { tools: [{ type: "custom", name: "apply_patch" }] },
  );
  const item = (r.output as JsonObject[])[0];
  assertEquals(item.type, "custom_tool_call");
  assertEquals(item.call_id, "call_p");
  assertEquals(item.name, "apply_patch");
  assertEquals(item.input, "*** Begin Patch\n");
});

Deno.test("responses answer: reasoning_content becomes a reasoning item before the message", () => {
  const r = answer({ content: "42", reasoning_content: "think" });
  const output = r.output as JsonObject[];
  assertEquals(output.map((o) => o.type), ["reasoning", "message"]);
  assertEquals(output[0].content, [{ type: "reasoning_text", text: "think" }]);
  assertEquals(output[0].summary, []);
  assertMatch(output[0].id as string, /^rs_/);
});

Deno.test("responses answer: the request's fields are echoed", () => {
  const r = answer({ content: "x" }, "stop", {
    instructions: "Be brief.",
    max_output_tokens: 50,
    temperature: 0.3,
    tools: [{ type: "function", name: "f" }],
    metadata: { a: "b" },
  });
  assertEquals(r.instructions, "Be brief.");
  assertEquals(r.max_output_tokens, 50);
  assertEquals(r.temperature, 0.3);
  assertEquals(r.tools, [{ type: "function", name: "f" }]);
  assertEquals(r.metadata, { a: "b" });
  assertEquals(r.store, false);
  assertEquals(r.previous_response_id, null);
});

Deno.test("responses errors: OpenAI's error shape, upstream status and message carried", () => {
  assertEquals(face.errorBody(429, "rate_limit_error", "slow down"), {
    error: { message: "slow down", type: "rate_limit_error" },
  });
  assertEquals(
    face.upstreamErrorBody(400, { error: { message: "bad tool", type: "invalid_request_error" } }),
    { error: { message: "bad tool", type: "invalid_request_error" } },
  );
  assertEquals(face.upstreamErrorBody(502, "oops"), {
    error: { message: "oops", type: "upstream_error" },
  });
});
