import { deepStrictEqual, match, strictEqual, throws } from "node:assert/strict";
import { AnthropicFace, countTokens } from "../../src/faces/anthropic.ts";
import { FaceError, type JsonObject } from "../../src/faces/face.ts";
import { FIXED_NOW } from "./helpers.ts";

const face = new AnthropicFace({ now: () => FIXED_NOW });
const up = (body: JsonObject) => face.toUpstream("/v1/messages", body);
const base = { model: "house-model", max_tokens: 64 };

function faceError(status: number, pattern: RegExp) {
  return (e: unknown) => {
    strictEqual(e instanceof FaceError, true);
    strictEqual((e as FaceError).status, status);
    strictEqual((e as FaceError).type, "invalid_request_error");
    match((e as Error).message, pattern);
    return true;
  };
}

Deno.test("anthropic request: the proxy-mapping case (system, user, tool_use, tool_result, tools, tool_choice)", () => {
  const req = up({
    ...base,
    system: "You add numbers.",
    messages: [
      { role: "user", content: "What is 2+3?" },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "tu_1", name: "add", input: { a: 2, b: 3 } }],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "tu_1", content: "5" }] },
    ],
    tools: [{
      name: "add",
      description: "Adds",
      input_schema: { type: "object", properties: { a: { type: "number" } } },
    }],
    tool_choice: { type: "tool", name: "add" },
  });
  strictEqual(req.path, "/chat/completions");
  strictEqual(req.stream, false);
  strictEqual(req.requestedModel, "house-model");
  strictEqual(req.context, undefined);
  deepStrictEqual(req.body, {
    model: "house-model",
    messages: [
      { role: "system", content: "You add numbers." },
      { role: "user", content: "What is 2+3?" },
      {
        role: "assistant",
        tool_calls: [{
          id: "tu_1",
          type: "function",
          function: { name: "add", arguments: '{"a":2,"b":3}' },
        }],
      },
      { role: "tool", tool_call_id: "tu_1", content: "5" },
    ],
    max_tokens: 64,
    tools: [{
      type: "function",
      function: {
        name: "add",
        description: "Adds",
        parameters: { type: "object", properties: { a: { type: "number" } } },
      },
    }],
    tool_choice: { type: "function", function: { name: "add" } },
  });
});

Deno.test("anthropic request: agent flow history maps to user, assistant text, tool_calls, tool", () => {
  const req = up({
    ...base,
    messages: [
      { role: "user", content: "Weather in Boston?" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me check." },
          { type: "tool_use", id: "toolu_prior", name: "get_weather", input: { city: "Boston" } },
        ],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_prior", content: "72F" }],
      },
    ],
  });
  deepStrictEqual(req.body.messages, [
    { role: "user", content: "Weather in Boston?" },
    {
      role: "assistant",
      content: "Let me check.",
      tool_calls: [{
        id: "toolu_prior",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Boston"}' },
      }],
    },
    { role: "tool", tool_call_id: "toolu_prior", content: "72F" },
  ]);
});

Deno.test("anthropic request: sampling fields, stop_sequences, metadata, thinking budget → effort, output_config.format → response_format; top_k dropped", () => {
  const req = up({
    ...base,
    temperature: 0.2,
    top_p: 0.9,
    top_k: 40,
    stop_sequences: ["END", "###"],
    metadata: { user_id: "u-77" },
    thinking: { type: "enabled", budget_tokens: 1000 },
    output_config: { format: { type: "json_schema", schema: { type: "object" } } },
    service_tier: "auto",
    messages: [{ role: "user", content: "hi" }],
  });
  deepStrictEqual(req.body, {
    model: "house-model",
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 64,
    temperature: 0.2,
    top_p: 0.9,
    stop: ["END", "###"],
    user: "u-77",
    reasoning_effort: "low",
    response_format: {
      type: "json_schema",
      json_schema: { name: "output", schema: { type: "object" }, strict: true },
    },
  });
  deepStrictEqual(req.context, { stop_sequences: ["END", "###"] });
});

Deno.test("anthropic request: the beta's top-level output_format is carried too; a bad format is a 400 naming it", () => {
  const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
  const req = up({
    ...base,
    output_format: { type: "json_schema", schema },
    messages: [{ role: "user", content: "hi" }],
  });
  deepStrictEqual(req.body.response_format, {
    type: "json_schema",
    json_schema: { name: "output", schema, strict: true },
  });
  const bad: [JsonObject, RegExp][] = [
    [{ output_config: { format: "json" } }, /^output_config\.format: must be an object/],
    [
      { output_config: { format: { type: "json_object", schema } } },
      /^output_config\.format\.type: must be 'json_schema'/,
    ],
    [
      { output_config: { format: { type: "json_schema" } } },
      /^output_config\.format\.schema: must be a JSON Schema object/,
    ],
    [{ output_format: { type: "text" } }, /^output_format\.type: /],
  ];
  for (const [extra, pattern] of bad) {
    throws(
      () => up({ ...base, ...extra, messages: [{ role: "user", content: "hi" }] }),
      faceError(400, pattern),
    );
  }
  // output_config with only an effort asks for no format.
  const effortOnly = up({
    ...base,
    output_config: { effort: "high" },
    messages: [{ role: "user", content: "hi" }],
  });
  strictEqual(effortOnly.body.response_format, undefined);
});

Deno.test("anthropic answer: a node's structured-output refusal is a refusal with its reason", () => {
  const msg = face.fromUpstream("/v1/messages", {
    id: "c1",
    choices: [{
      index: 0,
      message: { role: "assistant", content: null, refusal: "I can't help with that." },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 3, completion_tokens: 5 },
  }, "house-model");
  deepStrictEqual(msg.content, [{ type: "text", text: "I can't help with that." }]);
  strictEqual(msg.stop_reason, "refusal");
});

Deno.test("anthropic request: stream asks the upstream for usage on every chunk", () => {
  const req = up({ ...base, stream: true, messages: [{ role: "user", content: "hi" }] });
  strictEqual(req.stream, true);
  strictEqual(req.body.stream, true);
  deepStrictEqual(req.body.stream_options, { include_usage: true, continuous_usage_stats: true });
  deepStrictEqual(req.context, { input_estimate: 1 }, "the count_tokens estimate rides along");
});

Deno.test("anthropic request: system blocks and text blocks join without separator; thinking dropped", () => {
  const req = up({
    ...base,
    system: [{ type: "text", text: "A." }, {
      type: "text",
      text: "B.",
      cache_control: { type: "ephemeral" },
    }],
    messages: [
      { role: "user", content: [{ type: "text", text: "one " }, { type: "text", text: "two" }] },
      {
        role: "assistant",
        content: [{ type: "thinking", thinking: "hmm", signature: "s" }, {
          type: "text",
          text: "ok",
        }],
      },
      { role: "assistant", content: [] },
    ],
  });
  deepStrictEqual(req.body.messages, [
    { role: "system", content: "A.B." },
    { role: "user", content: "one two" },
    { role: "assistant", content: "ok" },
    { role: "assistant", content: "" },
  ]);
  // An empty system prompt is omitted.
  const none = up({ ...base, system: [], messages: [{ role: "user", content: "x" }] });
  deepStrictEqual(none.body.messages, [{ role: "user", content: "x" }]);
});

Deno.test("anthropic request: tool results come first, in block order, before the user's text", () => {
  const req = up({
    ...base,
    messages: [{
      role: "user",
      content: [
        { type: "text", text: "Thanks. " },
        {
          type: "tool_result",
          tool_use_id: "a",
          content: [{ type: "text", text: "x" }, { type: "text", text: "y" }],
        },
        { type: "tool_result", tool_use_id: "b", content: { temp: 72 }, is_error: true },
        { type: "tool_result", id: "c", content: [{ type: "json", value: 1 }] },
        { type: "tool_result" },
        { type: "text", text: "Next?" },
      ],
    }],
  });
  deepStrictEqual(req.body.messages, [
    { role: "tool", tool_call_id: "a", content: "xy" },
    { role: "tool", tool_call_id: "b", content: '{"temp":72}' },
    { role: "tool", tool_call_id: "c", content: '[{"type":"json","value":1}]' },
    { role: "tool", tool_call_id: "", content: "" },
    { role: "user", content: "Thanks. Next?" },
  ]);
});

Deno.test("anthropic request: tool_use without id or name or input gets defaults", () => {
  const req = up({
    ...base,
    messages: [{ role: "assistant", content: [{ type: "tool_use" }] }],
  });
  const calls = (req.body.messages as JsonObject[])[0].tool_calls as JsonObject[];
  match(calls[0].id as string, /^toolu_[0-9a-f]{32}$/);
  deepStrictEqual(calls[0].function, { name: "tool", arguments: "{}" });
});

Deno.test("anthropic request: image blocks become an OpenAI content array in client order", () => {
  const req = up({
    ...base,
    messages: [{
      role: "user",
      content: [
        { type: "text", text: "Compare " },
        { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/AAAA" } },
        { type: "text", text: "with" },
        { type: "image", source: { type: "url", url: "https://example.com/cat.png" } },
      ],
    }],
  });
  deepStrictEqual(req.body.messages, [{
    role: "user",
    content: [
      { type: "text", text: "Compare " },
      { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/AAAA" } },
      { type: "text", text: "with" },
      { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
    ],
  }]);
});

Deno.test("anthropic request: an image source other than base64/url is a 400 naming the block", () => {
  throws(
    () =>
      up({
        ...base,
        messages: [{
          role: "user",
          content: [{ type: "image", source: { type: "file", file_id: "f1" } }],
        }],
      }),
    faceError(400, /^messages\[0\]\.content\[0\]\.source\.type: image source type 'file'/),
  );
});

Deno.test("anthropic request: an image in an assistant message is a 400", () => {
  throws(
    () =>
      up({
        ...base,
        messages: [{
          role: "assistant",
          content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }],
        }],
      }),
    faceError(400, /^messages\[0\]\.content\[0\]: image blocks are only accepted in user messages/),
  );
});

Deno.test("anthropic request: an unsupported content block type is a 400 naming it", () => {
  throws(
    () =>
      up({
        ...base,
        messages: [{ role: "user", content: [{ type: "container_upload", file_id: "f" }] }],
      }),
    faceError(
      400,
      /^messages\[0\]\.content\[0\]\.type: content block type 'container_upload' is not supported/,
    ),
  );
});

Deno.test("anthropic request: tools in every accepted shape", () => {
  const openaiShaped = {
    type: "function",
    function: { name: "o", description: "d", parameters: { type: "object" } },
  };
  const req = up({
    ...base,
    messages: [{ role: "user", content: "hi" }],
    tools: [
      { name: "plain" },
      {
        name: "mcp",
        description: "from MCP",
        inputSchema: { type: "object", properties: { q: {} } },
      },
      openaiShaped,
    ],
  });
  deepStrictEqual(req.body.tools, [
    {
      type: "function",
      function: { name: "plain", description: "", parameters: { type: "object", properties: {} } },
    },
    {
      type: "function",
      function: {
        name: "mcp",
        description: "from MCP",
        parameters: { type: "object", properties: { q: {} } },
      },
    },
    openaiShaped,
  ]);
  throws(
    () => up({ ...base, messages: [], tools: [{ description: "no name" }] }),
    faceError(400, /^tools\[0\]\.name: Field required/),
  );
});

Deno.test("anthropic request: tool_choice auto/any/none/tool/unknown and disable_parallel_tool_use", () => {
  const tools = [{ name: "f", input_schema: { type: "object" } }];
  const choice = (tc: unknown) =>
    up({ ...base, messages: [{ role: "user", content: "x" }], tools, tool_choice: tc }).body;
  strictEqual(choice({ type: "auto" }).tool_choice, "auto");
  strictEqual(choice({ type: "any" }).tool_choice, "required");
  strictEqual(choice({ type: "none" }).tool_choice, "none");
  deepStrictEqual(choice({ type: "tool", name: "f" }).tool_choice, {
    type: "function",
    function: { name: "f" },
  });
  strictEqual(choice({ type: "tool" }).tool_choice, "auto");
  strictEqual("tool_choice" in choice({ type: "bogus" }), false);
  strictEqual(choice({ type: "auto", disable_parallel_tool_use: true }).parallel_tool_calls, false);
  // Without tools, neither is sent (OpenAI-compatible servers refuse them).
  const bare =
    up({ ...base, messages: [{ role: "user", content: "x" }], tool_choice: { type: "auto" } }).body;
  strictEqual("tool_choice" in bare, false);
});

Deno.test("anthropic request: validation names the field", () => {
  throws(() => up({ max_tokens: 1, messages: [] }), faceError(400, /^model: Field required$/));
  throws(
    () => up({ model: 3, max_tokens: 1, messages: [] }),
    faceError(400, /^model: must be a non-empty string$/),
  );
  throws(() => up({ model: "m", max_tokens: 1 }), faceError(400, /^messages: Field required$/));
  throws(
    () => up({ model: "m", max_tokens: 1, messages: {} }),
    faceError(400, /^messages: must be an array$/),
  );
  throws(() => up({ model: "m", messages: [] }), faceError(400, /^max_tokens: Field required$/));
  throws(
    () => up({ model: "m", max_tokens: "9", messages: [] }),
    faceError(400, /^max_tokens: must be a number$/),
  );
  throws(
    () => up({ ...base, temperature: "hot", messages: [] }),
    faceError(400, /^temperature: must be a number$/),
  );
  throws(
    () => up({ ...base, messages: [{ role: "developer", content: "x" }] }),
    faceError(400, /^messages\[0\]\.role: must be 'user', 'assistant' or 'system'$/),
  );
  throws(
    () => up({ ...base, messages: [{ role: "user", content: 5 }] }),
    faceError(400, /^messages\[0\]\.content: /),
  );
  throws(
    () => up({ ...base, stop_sequences: "END", messages: [] }),
    faceError(400, /^stop_sequences: /),
  );
});

Deno.test("anthropic response: the proxy-mapping case (text + tool_use, stop_reason tool_use, usage)", () => {
  const msg = face.fromUpstream("/v1/messages", {
    id: "chatcmpl-abc",
    model: "served-model",
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: "Adding.",
        tool_calls: [{
          id: "call_9",
          type: "function",
          function: { name: "add", arguments: '{"a":2,"b":3}' },
        }],
      },
      finish_reason: "tool_calls",
    }],
    usage: { prompt_tokens: 10, completion_tokens: 6, total_tokens: 16 },
  }, "house-model");
  deepStrictEqual(msg, {
    id: "msg_chatcmpl-abc",
    type: "message",
    role: "assistant",
    model: "house-model",
    content: [
      { type: "text", text: "Adding." },
      { type: "tool_use", id: "call_9", name: "add", input: { a: 2, b: 3 } },
    ],
    stop_reason: "tool_use",
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 6 },
  });
});

Deno.test("anthropic response: fallbacks (no id, unparsable arguments, no text) and length", () => {
  const msg = face.fromUpstream("/v1/messages", {
    choices: [{
      message: { content: null, tool_calls: [{ function: { name: "f", arguments: "{not json" } }] },
      finish_reason: "length",
    }],
  }, "m");
  strictEqual(msg.id, `msg_${FIXED_NOW}`);
  deepStrictEqual(msg.content, [{ type: "tool_use", id: "toolu_skeid_1", name: "f", input: {} }]);
  strictEqual(msg.stop_reason, "max_tokens");
  deepStrictEqual(msg.usage, { input_tokens: 0, output_tokens: 0 });
  const empty = face.fromUpstream("/v1/messages", { choices: [] }, "m");
  deepStrictEqual(empty.content, []);
  strictEqual(empty.stop_reason, "end_turn");
});

Deno.test("anthropic response: Hermes text calls become tool_use blocks", () => {
  const msg = face.fromUpstream("/v1/messages", {
    id: "x",
    choices: [{
      message: {
        content: 'I will look.\n<tool_call>\n{"name":"lookup","arguments":{"id":7}}\n</tool_call>',
      },
      finish_reason: "stop",
    }],
  }, "m");
  deepStrictEqual(msg.content, [
    { type: "text", text: "I will look." },
    { type: "tool_use", id: "toolu_skeid_1", name: "lookup", input: { id: 7 } },
  ]);
  strictEqual(msg.stop_reason, "tool_use");
});

Deno.test("anthropic response: stop_sequence when the upstream names a requested stop string", () => {
  const answer = (extra: JsonObject) => ({
    id: "x",
    choices: [{ message: { content: "a" }, finish_reason: "stop", ...extra }],
  });
  const ctx = { stop_sequences: ["END"] };
  const vllm = face.fromUpstream("/v1/messages", answer({ stop_reason: "END" }), "m", ctx);
  deepStrictEqual([vllm.stop_reason, vllm.stop_sequence], ["stop_sequence", "END"]);
  const sglang = face.fromUpstream("/v1/messages", answer({ matched_stop: "END" }), "m", ctx);
  deepStrictEqual([sglang.stop_reason, sglang.stop_sequence], ["stop_sequence", "END"]);
  const eos = face.fromUpstream("/v1/messages", answer({ stop_reason: 151645 }), "m", ctx);
  deepStrictEqual([eos.stop_reason, eos.stop_sequence], ["end_turn", null]);
  const noCtx = face.fromUpstream("/v1/messages", answer({ stop_reason: "END" }), "m");
  deepStrictEqual([noCtx.stop_reason, noCtx.stop_sequence], ["end_turn", null]);
});

Deno.test("anthropic response: cache tokens are reported beside input (sums stay the prompt)", () => {
  const msg = face.fromUpstream("/v1/messages", {
    id: "x",
    choices: [{ message: { content: "a" }, finish_reason: "stop" }],
    usage: {
      prompt_tokens: 100,
      completion_tokens: 5,
      prompt_tokens_details: { cached_tokens: 60, cache_write_tokens: 30 },
    },
  }, "m");
  deepStrictEqual(msg.usage, {
    input_tokens: 10,
    output_tokens: 5,
    cache_creation_input_tokens: 30,
    cache_read_input_tokens: 60,
  });
});

Deno.test("anthropic count_tokens: ~4 characters a token over system, messages and tools", () => {
  const body = {
    model: "m",
    system: "12345678", // 8
    messages: [
      { role: "user", content: "abcd" }, // 4
      {
        role: "assistant",
        content: [{ type: "text", text: "efgh" }, { type: "tool_use", name: "f", input: { a: 1 } }], // 4 + 1 + 7
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "ok" }] }, // 2
    ],
    tools: [{ name: "f" }], // [{"name":"f"}] = 14
  };
  deepStrictEqual(countTokens(body), { input_tokens: Math.ceil((8 + 4 + 4 + 1 + 7 + 2 + 14) / 4) });
  deepStrictEqual(countTokens({ model: "m", messages: [] }), { input_tokens: 0 });
  throws(() => countTokens({ messages: [] }), faceError(400, /^model: Field required$/));
});

Deno.test("anthropic face: only /v1/messages is proxied", () => {
  throws(
    () => face.toUpstream("/v1/messages/count_tokens", { ...base, messages: [] }),
    (e: unknown) => {
      strictEqual((e as FaceError).status, 404);
      return true;
    },
  );
});
