import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { AnthropicFace } from "../../src/faces/anthropic.ts";
import {
  chunk,
  finishChunk,
  FIXED_NOW,
  parseSse,
  roleChunk,
  run,
  textChunk,
  toolChunk,
  usageChunk,
} from "./helpers.ts";

const face = new AnthropicFace({ now: () => FIXED_NOW });
const translator = (context?: Record<string, unknown>) =>
  face.streamTranslator("/v1/messages", "house-model", context);

Deno.test("anthropic stream: a text answer is exactly the six standard events", () => {
  const t = translator();
  strictEqual(t.contentType, "text/event-stream");
  const out = run(t, [
    roleChunk(),
    textChunk("Hel"),
    textChunk("lo"),
    finishChunk("stop"),
    usageChunk(7, 3),
  ]);
  strictEqual(
    out,
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_chatcmpl-1",' +
      '"type":"message","role":"assistant","model":"house-model","content":[],"stop_reason":null,' +
      '"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}\n\n' +
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,' +
      '"content_block":{"type":"text","text":""}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,' +
      '"delta":{"type":"text_delta","text":"Hel"}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,' +
      '"delta":{"type":"text_delta","text":"lo"}}\n\n' +
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",' +
      '"stop_sequence":null},"usage":{"input_tokens":7,"output_tokens":3}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  );
  strictEqual(out.includes("[DONE]"), false);
  strictEqual(out.includes('"choices"'), false);
  deepStrictEqual(t.usage, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  strictEqual(t.contentBytes, 5);
});

Deno.test("anthropic stream: role-only and usage-only chunks emit nothing after message_start", () => {
  const t = translator();
  const first = t.chunk(roleChunk());
  deepStrictEqual(parseSse(first).map((e) => e.event), ["message_start"]);
  strictEqual(t.chunk(roleChunk()), "");
  strictEqual(t.chunk(usageChunk(1, 1)), "");
  strictEqual(t.chunk(textChunk("")), "");
});

Deno.test("anthropic stream: message_start takes input_tokens from a usage seen on the first chunk", () => {
  const t = translator();
  const first = textChunk("hi");
  first.usage = { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 };
  const events = parseSse(t.chunk(first));
  deepStrictEqual(events[0].data.message, {
    id: "msg_chatcmpl-1",
    type: "message",
    role: "assistant",
    model: "house-model",
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 0 },
  });
});

Deno.test("anthropic stream: one-chunk tool call", () => {
  const t = translator();
  const events = parseSse(run(t, [
    roleChunk(),
    toolChunk(0, { id: "call_1", name: "get_weather", args: '{"city":"Paris"}' }),
    finishChunk("tool_calls"),
    usageChunk(9, 4),
  ]));
  deepStrictEqual(events.map((e) => e.event), [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  deepStrictEqual(events[1].data, {
    type: "content_block_start",
    index: 0,
    content_block: { type: "tool_use", id: "call_1", name: "get_weather", input: {} },
  });
  deepStrictEqual(events[2].data, {
    type: "content_block_delta",
    index: 0,
    delta: { type: "input_json_delta", partial_json: '{"city":"Paris"}' },
  });
  deepStrictEqual(events[3].data, { type: "content_block_stop", index: 0 });
  deepStrictEqual(events[4].data, {
    type: "message_delta",
    delta: { stop_reason: "tool_use", stop_sequence: null },
    usage: { input_tokens: 9, output_tokens: 4 },
  });
  deepStrictEqual(t.toolCalls, [
    {
      id: "call_1",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Paris"}' },
    },
  ]);
});

Deno.test("anthropic stream: split arguments arrive as verbatim fragments of one block", () => {
  const t = translator();
  const events = parseSse(run(t, [
    roleChunk(),
    toolChunk(0, { id: "call_1", name: "get_weather", args: "" }),
    toolChunk(0, { args: '{"city":' }),
    toolChunk(0, { args: '"Paris"}' }),
    finishChunk("tool_calls"),
  ]));
  const deltas = events.filter((e) => e.event === "content_block_delta");
  deepStrictEqual(deltas.map((e) => e.data.index), [0, 0]);
  const json = deltas.map((e) => (e.data.delta as { partial_json: string }).partial_json).join("");
  deepStrictEqual(JSON.parse(json), { city: "Paris" });
  deepStrictEqual(
    events.filter((e) => e.event === "content_block_stop").map((e) => e.data.index),
    [0],
  );
});

Deno.test("anthropic stream: text then tool opens blocks 0 and 1 and closes both in order", () => {
  const t = translator();
  const events = parseSse(run(t, [
    roleChunk(),
    textChunk("Let me check."),
    toolChunk(0, { id: "toolu_42", name: "get_weather", args: '{"city":"Boston"}' }),
    finishChunk("tool_calls"),
    usageChunk(14, 20),
  ]));
  const starts = events.filter((e) => e.event === "content_block_start").map((e) => e.data);
  deepStrictEqual(starts, [
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    {
      type: "content_block_start",
      index: 1,
      content_block: { type: "tool_use", id: "toolu_42", name: "get_weather", input: {} },
    },
  ]);
  const json = events.filter((e) =>
    e.event === "content_block_delta" &&
    (e.data.delta as { type: string }).type === "input_json_delta"
  );
  deepStrictEqual(
    json.map((e) => [e.data.index, (e.data.delta as { partial_json: string }).partial_json]),
    [
      [1, '{"city":"Boston"}'],
    ],
  );
  deepStrictEqual(
    events.filter((e) => e.event === "content_block_stop").map((e) => e.data.index),
    [0, 1],
  );
  const delta = events.find((e) => e.event === "message_delta")!.data;
  strictEqual((delta.delta as { stop_reason: string }).stop_reason, "tool_use");
  strictEqual((delta.usage as { input_tokens: number }).input_tokens, 14);
});

Deno.test("anthropic stream: parallel calls are separate blocks with deltas routed by index", () => {
  const t = translator();
  const events = parseSse(run(t, [
    roleChunk(),
    toolChunk(0, { id: "call_A", name: "search", args: "" }),
    toolChunk(1, { id: "call_B", name: "lookup", args: "" }),
    toolChunk(0, { args: '{"q":' }),
    toolChunk(1, { args: '{"id":' }),
    toolChunk(0, { args: '"x"}' }),
    toolChunk(1, { args: "7}" }),
    finishChunk("tool_calls"),
  ]));
  const starts = events.filter((e) => e.event === "content_block_start").map((e) => e.data);
  deepStrictEqual(starts.map((s) => [s.index, (s.content_block as { id: string }).id]), [
    [0, "call_A"],
    [1, "call_B"],
  ]);
  const deltas = events.filter((e) => e.event === "content_block_delta").map((e) => [
    e.data.index,
    (e.data.delta as { partial_json: string }).partial_json,
  ]);
  deepStrictEqual(deltas, [[0, '{"q":'], [1, '{"id":'], [0, '"x"}'], [1, "7}"]]);
  deepStrictEqual(
    events.filter((e) => e.event === "content_block_stop").map((e) => e.data.index),
    [0, 1],
  );
  deepStrictEqual(
    t.toolCalls.map((c) => (c.function as { arguments: string }).arguments),
    ['{"q":"x"}', '{"id":7}'],
  );
});

Deno.test("anthropic stream: finish_reason length → max_tokens", () => {
  const events = parseSse(run(translator(), [roleChunk(), textChunk("a"), finishChunk("length")]));
  const delta = events.find((e) => e.event === "message_delta")!.data;
  deepStrictEqual(delta.delta, { stop_reason: "max_tokens", stop_sequence: null });
});

Deno.test("anthropic stream: upstream ends without finish or usage → blocks closed, message_stop", () => {
  const events = parseSse(run(translator(), [roleChunk(), textChunk("partial")]));
  deepStrictEqual(events.map((e) => e.event), [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  deepStrictEqual(events[4].data, {
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { input_tokens: 0, output_tokens: 0 },
  });
});

Deno.test("anthropic stream: end with no chunk at all still sends message_start first", () => {
  const events = parseSse(translator().end());
  deepStrictEqual(events.map((e) => e.event), ["message_start", "message_delta", "message_stop"]);
  strictEqual((events[0].data.message as { id: string }).id, `msg_${FIXED_NOW}`);
});

Deno.test("anthropic stream: a failure ends with event error (api_error) and no message_stop", () => {
  const t = translator();
  const head = t.chunk(roleChunk()) + t.chunk(textChunk("Hel"));
  const tail = t.fail(502, "Upstream error: connection reset");
  strictEqual(
    tail,
    'event: error\ndata: {"type":"error","error":{"type":"api_error",' +
      '"message":"Upstream error: connection reset"}}\n\n',
  );
  strictEqual((head + tail).includes("message_stop"), false);
  strictEqual(t.end(), "");
  strictEqual(t.chunk(textChunk("late")), "");
});

Deno.test("anthropic stream: keepalive is an Anthropic ping, nothing once ended", () => {
  const t = translator();
  strictEqual(t.keepalive(), 'event: ping\ndata: {"type":"ping"}\n\n');
  t.end();
  strictEqual(t.keepalive(), "");
});

Deno.test("anthropic stream: a matched stop string from the request → stop_sequence", () => {
  const t = translator({ stop_sequences: ["END", "###"] });
  const events = parseSse(run(t, [
    roleChunk(),
    textChunk("done"),
    finishChunk("stop", { stop_reason: "###" }),
  ]));
  deepStrictEqual(events.find((e) => e.event === "message_delta")!.data.delta, {
    stop_reason: "stop_sequence",
    stop_sequence: "###",
  });
  // SGLang spells it matched_stop; a string not in the request is ignored.
  const sg = parseSse(run(translator({ stop_sequences: ["END"] }), [
    finishChunk("stop", { matched_stop: "END" }),
  ]));
  deepStrictEqual(sg.find((e) => e.event === "message_delta")!.data.delta, {
    stop_reason: "stop_sequence",
    stop_sequence: "END",
  });
  const other = parseSse(run(translator({ stop_sequences: ["END"] }), [
    finishChunk("stop", { stop_reason: "<|im_end|>" }),
  ]));
  deepStrictEqual(other.find((e) => e.event === "message_delta")!.data.delta, {
    stop_reason: "end_turn",
    stop_sequence: null,
  });
});

Deno.test("anthropic stream: cached prompt tokens are reported beside input", () => {
  const events = parseSse(run(translator(), [
    textChunk("x"),
    finishChunk("stop"),
    usageChunk(100, 5, { prompt_tokens_details: { cached_tokens: 64 } }),
  ]));
  deepStrictEqual(events.find((e) => e.event === "message_delta")!.data.usage, {
    input_tokens: 36,
    output_tokens: 5,
    cache_read_input_tokens: 64,
  });
});

Deno.test("anthropic stream: content_bytes counts UTF-8 bytes of text and argument fragments", () => {
  const t = translator();
  run(t, [
    textChunk("héllo"), // 6 bytes
    textChunk("日本"), // 6 bytes
    textChunk("🙂"), // 4 bytes
    toolChunk(0, { id: "c", name: "f", args: '{"a":"€"}' }), // 11 bytes
  ]);
  strictEqual(t.contentBytes, 6 + 6 + 4 + 11);
});

Deno.test("anthropic stream: a structured-output refusal streams as text and stops as a refusal", () => {
  const events = parseSse(run(translator(), [
    roleChunk(),
    chunk({ refusal: "I can't " }),
    chunk({ refusal: "do that." }),
    finishChunk("stop"),
    usageChunk(4, 3),
  ]));
  const deltas = events.filter((e) => e.event === "content_block_delta")
    .map((e) => (e.data.delta as Record<string, unknown>).text);
  deepStrictEqual(deltas, ["I can't ", "do that."]);
  const stop = events.find((e) => e.event === "message_delta");
  strictEqual((stop?.data.delta as Record<string, unknown>).stop_reason, "refusal");
});
