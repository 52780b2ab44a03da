/**
 * The Responses face's stream translator: upstream chat chunks → the documented Responses event
 * sequence, `sequence_number` on every event, exactly one terminal event.
 */
import { assert, assertEquals } from "../_assert.ts";
import type { JsonObject } from "../../src/faces/face.ts";
import { ResponsesFace } from "../../src/responses/responses_face.ts";
import {
  chunk,
  finishChunk,
  FIXED_NOW,
  roleChunk,
  run,
  textChunk,
  toolChunk,
  usageChunk,
} from "../faces/helpers.ts";

const face = new ResponsesFace({ now: () => FIXED_NOW });

function translator(body: JsonObject = {}) {
  const req = face.toUpstream("/v1/responses", { model: "m1", input: "x", stream: true, ...body });
  return face.streamTranslator("/v1/responses", "house-model", req.context);
}

/** Parses the frames; checks every `event:` name equals its data's `type`. */
function events(text: string): JsonObject[] {
  assert(text.endsWith("\n\n"), "the stream ends with a blank line");
  return text.slice(0, -2).split("\n\n").map((frame) => {
    const m = /^event: ([a-z_.]+)\ndata: (.*)$/.exec(frame);
    assert(m !== null, `bad frame: ${frame}`);
    const data = JSON.parse(m[2]) as JsonObject;
    assertEquals(data.type, m[1], "event name = data.type");
    return data;
  });
}

function assertSequence(evs: JsonObject[]): void {
  assertEquals(evs.map((e) => e.sequence_number), evs.map((_, i) => i), "0, 1, 2, …");
  const terminal = evs.filter((e) =>
    ["response.completed", "response.incomplete", "response.failed"].includes(e.type as string)
  );
  assertEquals(terminal.length, 1, "exactly one terminal event");
  assertEquals(evs.at(-1), terminal[0], "the terminal event is last");
}

Deno.test("responses stream: a text answer is the documented sequence", () => {
  const t = translator();
  assertEquals(t.contentType, "text/event-stream");
  const evs = events(
    run(t, [roleChunk(), textChunk("Hel"), textChunk("lo"), finishChunk("stop"), usageChunk(7, 3)]),
  );
  assertSequence(evs);
  assertEquals(evs.map((e) => e.type), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
  const created = evs[0].response as JsonObject;
  assertEquals(created.status, "in_progress");
  assertEquals(created.model, "house-model");
  assertEquals(created.created_at, Math.floor(FIXED_NOW / 1000));
  assertEquals(evs[4].delta, "Hel");
  assertEquals(evs[6].text, "Hello");
  const item = evs[8].item as JsonObject;
  assertEquals(item.type, "message");
  assertEquals(evs[4].item_id, item.id);
  const done = evs[9].response as JsonObject;
  assertEquals(done.id, created.id, "one response id throughout");
  assertEquals(done.status, "completed");
  assertEquals(done.output, [item]);
  assertEquals(done.usage, {
    input_tokens: 7,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 3,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 10,
  });
  assertEquals(t.usage, usageChunk(7, 3).usage, "the usage the proxy bills");
  assertEquals(t.contentBytes, 5);
});

Deno.test("responses stream: tool calls stream their arguments; interleaved parallel calls", () => {
  const t = translator({ tools: [{ type: "function", name: "w" }] });
  const evs = events(run(t, [
    roleChunk(),
    toolChunk(0, { id: "call_a", name: "w", args: '{"ci' }),
    toolChunk(1, { id: "call_b", name: "w", args: '{"ci' }),
    toolChunk(0, { args: 'ty":"A"}' }),
    toolChunk(1, { args: 'ty":"B"}' }),
    finishChunk("tool_calls"),
    usageChunk(5, 8),
  ]));
  assertSequence(evs);
  assertEquals(evs.map((e) => e.type), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assertEquals(evs[6].output_index, 0);
  assertEquals(evs[7].output_index, 1);
  assertEquals(evs[8].arguments, '{"city":"A"}');
  const output = (evs[12].response as JsonObject).output as JsonObject[];
  assertEquals(output.map((o) => [o.type, o.call_id, o.arguments, o.status]), [
    ["function_call", "call_a", '{"city":"A"}', "completed"],
    ["function_call", "call_b", '{"city":"B"}', "completed"],
  ]);
  assertEquals(t.toolCalls.length, 2, "tool calls counted for the usage event");
});

Deno.test("responses stream: text then a call closes the message before the call opens", () => {
  const evs = events(run(translator({ tools: [{ type: "function", name: "w" }] }), [
    textChunk("Let me check."),
    toolChunk(0, { id: "call_a", name: "w", args: "{}" }),
    finishChunk("tool_calls"),
  ]));
  assertSequence(evs);
  const types = evs.map((e) => e.type);
  assert(
    types.indexOf("response.output_item.done") < types.lastIndexOf("response.output_item.added"),
    "the message item is done before the call's item is added",
  );
  const output = (evs.at(-1)!.response as JsonObject).output as JsonObject[];
  assertEquals(output.map((o) => o.type), ["message", "function_call"]);
});

Deno.test("responses stream: a custom tool's call is a custom_tool_call with its input", () => {
  const t = translator({ tools: [{ type: "custom", name: "apply_patch" }] });
  const evs = events(run(t, [
    toolChunk(0, { id: "call_p", name: "apply_patch", args: '{"input":' }),
    toolChunk(0, { args: '"*** Begin Patch"}' }),
    finishChunk("tool_calls"),
  ]));
  assertSequence(evs);
  assertEquals(evs.map((e) => e.type).slice(2), [
    "response.output_item.added",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assertEquals(evs[4].input, "*** Begin Patch");
  const item = evs[5].item as JsonObject;
  assertEquals([item.type, item.call_id, item.input], [
    "custom_tool_call",
    "call_p",
    "*** Begin Patch",
  ]);
});

Deno.test("responses stream: reasoning_content streams as a reasoning item first", () => {
  const evs = events(run(translator(), [
    chunk({ reasoning_content: "hmm" }),
    textChunk("42"),
    finishChunk("stop"),
  ]));
  assertSequence(evs);
  assertEquals(evs.map((e) => e.type).slice(2, 6), [
    "response.output_item.added",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.output_item.done",
  ]);
  assertEquals(evs[4].text, "hmm");
  const output = (evs.at(-1)!.response as JsonObject).output as JsonObject[];
  assertEquals(output.map((o) => o.type), ["reasoning", "message"]);
});

Deno.test("responses stream: length → response.incomplete", () => {
  const evs = events(
    run(translator(), [textChunk("cut"), finishChunk("length"), usageChunk(2, 1)]),
  );
  assertSequence(evs);
  const last = evs.at(-1)!;
  assertEquals(last.type, "response.incomplete");
  assertEquals((last.response as JsonObject).incomplete_details, { reason: "max_output_tokens" });
  assertEquals(((last.response as JsonObject).usage as JsonObject).output_tokens, 1);
});

Deno.test("responses stream: a broken upstream ends with response.failed, nothing after", () => {
  const t = translator();
  const text = t.chunk(textChunk("par")) + t.fail(502, "upstream reset");
  assertEquals(t.end(), "", "nothing after the terminal event");
  assertEquals(t.chunk(textChunk("more")), "");
  const evs = events(text);
  assertSequence(evs);
  const last = evs.at(-1)!;
  assertEquals(last.type, "response.failed");
  const response = last.response as JsonObject;
  assertEquals(response.status, "failed");
  assertEquals(response.error, { code: "server_error", message: "upstream reset" });
});

Deno.test("responses stream: an empty upstream still gets created … completed", () => {
  const evs = events(translator().end());
  assertSequence(evs);
  assertEquals(evs.map((e) => e.type), [
    "response.created",
    "response.in_progress",
    "response.completed",
  ]);
});
