/**
 * The Responses face's request translation: one test per mapping rule of `POST /v1/responses`
 * → the OpenAI chat call (ADR 0028).
 */
import { assert, assertEquals, assertStringIncludes, assertThrows } from "../_assert.ts";
import { FaceError, type JsonObject } from "../../src/faces/face.ts";
import { ResponsesFace } from "../../src/responses/responses_face.ts";
import { keptEcho } from "../../src/responses/responses_request.ts";

const face = new ResponsesFace();

function upstream(body: JsonObject): JsonObject {
  return face.toUpstream("/v1/responses", { model: "m1", input: "hi", ...body }).body;
}

function refusal(body: JsonObject): FaceError {
  return assertThrows(() => face.toUpstream("/v1/responses", body), FaceError);
}

Deno.test("responses request: a string input is one user message; the path is the chat call", () => {
  const req = face.toUpstream("/v1/responses", { model: "m1", input: "hello" });
  assertEquals(req.path, "/chat/completions");
  assertEquals(req.requestedModel, "m1");
  assertEquals(req.stream, false);
  assertEquals(req.body, { model: "m1", messages: [{ role: "user", content: "hello" }] });
});

Deno.test("responses request: instructions become a leading system message", () => {
  assertEquals(upstream({ instructions: "Be brief." }).messages, [
    { role: "system", content: "Be brief." },
    { role: "user", content: "hi" },
  ]);
});

Deno.test("responses request: message items keep user/assistant/system; developer → system", () => {
  const messages = upstream({
    input: [
      { role: "developer", content: "dev rules" },
      { type: "message", role: "system", content: "sys" },
      { role: "user", content: [{ type: "input_text", text: "q" }] },
      { role: "assistant", content: [{ type: "output_text", text: "a", annotations: [] }] },
    ],
  }).messages;
  assertEquals(messages, [
    { role: "system", content: "dev rules" },
    { role: "system", content: "sys" },
    { role: "user", content: "q" },
    { role: "assistant", content: "a" },
  ]);
});

Deno.test("responses request: an unknown role is refused naming the item", () => {
  const e = refusal({ model: "m1", input: [{ role: "tool", content: "x" }] });
  assertEquals(e.status, 400);
  assertStringIncludes(e.message, "input[0].role");
});

Deno.test("responses request: input_image (URL and data URL) and input_file become chat parts", () => {
  const messages = upstream({
    input: [{
      role: "user",
      content: [
        { type: "input_text", text: "look" },
        { type: "input_image", image_url: "https://example.com/a.png", detail: "low" },
        { type: "input_image", image_url: "data:image/png;base64,AAAA" },
        { type: "input_file", filename: "a.pdf", file_data: "data:application/pdf;base64,QQ==" },
        { type: "input_file", file_id: "file-1" },
      ],
    }],
  }).messages;
  assertEquals(messages, [{
    role: "user",
    content: [
      { type: "text", text: "look" },
      { type: "image_url", image_url: { url: "https://example.com/a.png", detail: "low" } },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      { type: "file", file: { file_data: "data:application/pdf;base64,QQ==", filename: "a.pdf" } },
      { type: "file", file: { file_id: "file-1" } },
    ],
  }]);
});

Deno.test("responses request: parts a chat call cannot carry are refused naming the part", () => {
  const image = refusal({
    model: "m1",
    input: [{ role: "user", content: [{ type: "input_image", file_id: "file-1" }] }],
  });
  assertStringIncludes(image.message, "input[0].content[0].image_url");
  const file = refusal({
    model: "m1",
    input: [{ role: "user", content: [{ type: "input_file", file_url: "https://x/a.pdf" }] }],
  });
  assertStringIncludes(file.message, "input[0].content[0]");
  const audio = refusal({
    model: "m1",
    input: [{ role: "user", content: [{ type: "input_audio" }] }],
  });
  assertStringIncludes(audio.message, "input[0].content[0].type");
});

Deno.test("responses request: consecutive function_call items are one assistant message", () => {
  const messages = upstream({
    input: [
      { role: "user", content: "weather in two cities" },
      { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "opaque" },
      { type: "function_call", call_id: "c1", name: "w", arguments: '{"city":"A"}' },
      { type: "function_call", call_id: "c2", name: "w", arguments: '{"city":"B"}' },
      { type: "function_call_output", call_id: "c1", output: "sunny" },
      {
        type: "function_call_output",
        call_id: "c2",
        output: [{ type: "input_text", text: "rain" }],
      },
    ],
  }).messages;
  assertEquals(messages, [
    { role: "user", content: "weather in two cities" },
    {
      role: "assistant",
      tool_calls: [
        { id: "c1", type: "function", function: { name: "w", arguments: '{"city":"A"}' } },
        { id: "c2", type: "function", function: { name: "w", arguments: '{"city":"B"}' } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "sunny" },
    { role: "tool", tool_call_id: "c2", content: "rain" },
  ]);
});

Deno.test("responses request: an assistant message and its calls go up as one message", () => {
  const messages = upstream({
    input: [
      { role: "assistant", content: [{ type: "output_text", text: "checking" }] },
      { type: "function_call", call_id: "c1", name: "w", arguments: "{}" },
    ],
  }).messages;
  assertEquals(messages, [{
    role: "assistant",
    content: "checking",
    tool_calls: [{ id: "c1", type: "function", function: { name: "w", arguments: "{}" } }],
  }]);
});

Deno.test("responses request: reasoning items are accepted and not sent upstream", () => {
  const body = upstream({
    input: [
      { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAA" },
      { role: "user", content: "go" },
    ],
  });
  assertEquals(body.messages, [{ role: "user", content: "go" }]);
  assert(!JSON.stringify(body).includes("gAAA"), "encrypted reasoning stays here");
});

Deno.test("responses request: function tools (flat) become chat tools", () => {
  const body = upstream({
    tools: [{
      type: "function",
      name: "get_weather",
      description: "Weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
      strict: true,
    }],
  });
  assertEquals(body.tools, [{
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
      description: "Weather",
      strict: true,
    },
  }]);
});

Deno.test("responses request: custom tools are function tools with one string argument", () => {
  const req = face.toUpstream("/v1/responses", {
    model: "m1",
    input: [
      { type: "custom_tool_call", call_id: "p1", name: "apply_patch", input: "*** Begin Patch" },
      { type: "custom_tool_call_output", call_id: "p1", output: "Done" },
    ],
    tools: [{ type: "custom", name: "apply_patch", description: "Patch files", format: {} }],
  });
  const tools = req.body.tools as JsonObject[];
  const fn = tools[0].function as JsonObject;
  assertEquals(fn.name, "apply_patch");
  assertEquals(fn.description, "Patch files");
  assertEquals((fn.parameters as JsonObject).required, ["input"]);
  assertEquals(req.body.messages, [
    {
      role: "assistant",
      tool_calls: [{
        id: "p1",
        type: "function",
        function: { name: "apply_patch", arguments: '{"input":"*** Begin Patch"}' },
      }],
    },
    { role: "tool", tool_call_id: "p1", content: "Done" },
  ]);
  assertEquals(req.context?.custom_tools, ["apply_patch"]);
});

Deno.test("responses request: hosted tools are left out, never refused", () => {
  const hosted = [
    "web_search",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
    "mcp",
    "namespace",
    "local_shell",
  ].map((type) => ({ type }));
  const alone = upstream({ tools: hosted, tool_choice: "required", parallel_tool_calls: false });
  assertEquals(alone.tools, undefined, "no tool left: no tools field");
  assertEquals(alone.tool_choice, undefined, "tool_choice needs tools upstream");
  assertEquals(alone.parallel_tool_calls, undefined, "parallel_tool_calls needs tools upstream");
  const mixed = upstream({ tools: [...hosted, { type: "function", name: "f" }] });
  assertEquals((mixed.tools as JsonObject[]).length, 1);
  const e = refusal({ model: "m1", input: "x", tools: [{ type: "teleport" }] });
  assertStringIncludes(e.message, "tools[0].type");
});

Deno.test("responses request: tool_choice in every form", () => {
  const tools = [{ type: "function", name: "f" }];
  const choice = (c: unknown) => upstream({ tools, tool_choice: c }).tool_choice;
  assertEquals(choice("auto"), "auto");
  assertEquals(choice("none"), "none");
  assertEquals(choice("required"), "required");
  assertEquals(choice({ type: "function", name: "f" }), {
    type: "function",
    function: { name: "f" },
  });
  assertEquals(choice({ type: "custom", name: "f" }), {
    type: "function",
    function: { name: "f" },
  });
  assertEquals(
    choice({ type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "f" }] }),
    {
      type: "allowed_tools",
      allowed_tools: { mode: "required", tools: [{ type: "function", function: { name: "f" } }] },
    },
  );
  assertEquals(choice({ type: "web_search_preview" }), "auto", "a hosted tool was left out");
  assertEquals(choice(undefined), undefined);
});

Deno.test("responses request: parallel_tool_calls is carried with tools", () => {
  const body = upstream({ tools: [{ type: "function", name: "f" }], parallel_tool_calls: false });
  assertEquals(body.parallel_tool_calls, false);
});

Deno.test("responses request: sampling, limits, user, metadata, cache key carried", () => {
  const body = upstream({
    max_output_tokens: 64,
    temperature: 0.2,
    top_p: 0.9,
    user: "u-1",
    metadata: { team: "a" },
    prompt_cache_key: "conv-1",
  });
  assertEquals(body.max_tokens, 64);
  assertEquals(body.temperature, 0.2);
  assertEquals(body.top_p, 0.9);
  assertEquals(body.user, "u-1");
  assertEquals(body.metadata, { team: "a" });
  assertEquals(body.prompt_cache_key, "conv-1");
  const e = refusal({ model: "m1", input: "x", max_output_tokens: "64" });
  assertStringIncludes(e.message, "max_output_tokens");
});

Deno.test("responses request: text.format json_schema / json_object → response_format", () => {
  const schema = { type: "object", properties: { a: { type: "string" } } };
  assertEquals(
    upstream({ text: { format: { type: "json_schema", name: "out", schema, strict: true } } })
      .response_format,
    { type: "json_schema", json_schema: { name: "out", schema, strict: true } },
  );
  assertEquals(upstream({ text: { format: { type: "json_object" } } }).response_format, {
    type: "json_object",
  });
  assertEquals(upstream({ text: { format: { type: "text" } } }).response_format, undefined);
});

Deno.test("responses request: reasoning.effort → reasoning_effort", () => {
  const body = upstream({ reasoning: { effort: "low", summary: "auto" } });
  assertEquals(body.reasoning_effort, "low");
  assertEquals(body.reasoning, undefined);
});

Deno.test("responses request: no Responses-only field is sent upstream", () => {
  const body = upstream({
    instructions: "x",
    max_output_tokens: 5,
    text: { format: { type: "text" }, verbosity: "low" },
    store: true,
    include: ["reasoning.encrypted_content"],
    truncation: "auto",
    reasoning: { effort: "high" },
    service_tier: "auto",
    background: false,
    stream: true,
  });
  for (
    const field of [
      "input",
      "instructions",
      "max_output_tokens",
      "text",
      "store",
      "include",
      "truncation",
      "reasoning",
      "background",
      "service_tier",
    ]
  ) assertEquals(body[field], undefined, `${field} stays here`);
});

Deno.test("responses request: a stream asks the upstream for usage", () => {
  const req = face.toUpstream("/v1/responses", { model: "m1", input: "x", stream: true });
  assertEquals(req.stream, true);
  assertEquals(req.body.stream, true);
  assertEquals(req.body.stream_options, { include_usage: true });
});

Deno.test("responses request: stream must be a JSON boolean", () => {
  const e = refusal({ model: "m1", input: "x", stream: "true" });
  assertEquals(e.status, 400);
  assertEquals(e.type, "invalid_request_error");
  assertStringIncludes(e.message, "stream");
});

Deno.test("responses request: previous_response_id is refused naming it, saying what to do", () => {
  const e = refusal({ model: "m1", input: "x", previous_response_id: "resp_1" });
  assertEquals(e.status, 400);
  assertEquals(e.type, "invalid_request_error");
  assertStringIncludes(e.message, "previous_response_id");
  assertStringIncludes(e.message, "send the whole conversation in `input`");
  assertStringIncludes(e.message, "set `responses: {store: true}` with a sqlite or postgresql");
});

Deno.test("responses request: model and input are required", () => {
  assertStringIncludes(refusal({ input: "x" }).message, "model: Field required");
  assertStringIncludes(refusal({ model: "m1" }).message, "input: Field required");
  assertStringIncludes(refusal({ model: "m1", input: 3 }).message, "input: must be");
  assertStringIncludes(
    refusal({ model: "m1", input: [{ type: "item_reference", id: "msg_1" }] }).message,
    "input[0]",
  );
});

Deno.test("responses request: what the intake step kept reaches the answer through toUpstream", async () => {
  // No response keeper: the intake step hands the body on as it came, keeping nothing.
  const body = { model: "m1", input: "hi" };
  const taken = await face.intake({ endpoint: "/v1/responses", apiKeyId: "k1" }, body);
  assertEquals(taken, { body });
  // A kept turn's echo (from the intake step, in the open) is what the response says of it.
  const echo = keptEcho({ store: true, previous: "resp_1" });
  const req = face.toUpstream("/v1/responses", { ...body, instructions: "Be brief." }, echo);
  assertEquals((req.context as JsonObject).echo, {
    store: true,
    previous_response_id: "resp_1",
    instructions: "Be brief.",
  });
  const plain = face.toUpstream("/v1/responses", body);
  assertEquals((plain.context as JsonObject).echo, {});
});
