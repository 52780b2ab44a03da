/**
 * Builders of upstream OpenAI stream chunks and parsers of translated output, for the face tests.
 *
 * @module
 */
import type { JsonObject, StreamTranslator } from "../../src/faces/face.ts";

/** A chat.completion.chunk with one choice. */
export function chunk(
  delta: JsonObject,
  finish: string | null = null,
  extra: JsonObject = {},
): JsonObject {
  return {
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "served-model",
    choices: [{ index: 0, delta, finish_reason: finish, ...extra }],
  };
}

/** The role-only first chunk. */
export function roleChunk(): JsonObject {
  return chunk({ role: "assistant", content: "" });
}

/** A text delta. */
export function textChunk(text: string): JsonObject {
  return chunk({ content: text });
}

/** A finish chunk (empty delta). */
export function finishChunk(reason: string, extra: JsonObject = {}): JsonObject {
  return chunk({}, reason, extra);
}

/** The usage-only chunk (`choices: []`). */
export function usageChunk(prompt: number, completion: number, more: JsonObject = {}): JsonObject {
  return {
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    model: "served-model",
    choices: [],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      ...more,
    },
  };
}

/** A tool-call delta at upstream `index` (id/name only when given). */
export function toolChunk(
  index: number,
  part: { id?: string; name?: string; args?: string },
): JsonObject {
  const fn: JsonObject = {};
  if (part.name !== undefined) fn.name = part.name;
  if (part.args !== undefined) fn.arguments = part.args;
  const tc: JsonObject = { index, function: fn };
  if (part.id !== undefined) {
    tc.id = part.id;
    tc.type = "function";
  }
  return chunk({ tool_calls: [tc] });
}

/** Runs chunks through a translator and ends it; returns all the text. */
export function run(t: StreamTranslator, chunks: JsonObject[]): string {
  let out = "";
  for (const c of chunks) out += t.chunk(c);
  return out + t.end();
}

/** One parsed SSE frame. */
export interface SseEvent {
  event: string;
  data: JsonObject;
}

/** Parses `event:`/`data:` frames; throws on a malformed frame. */
export function parseSse(text: string): SseEvent[] {
  if (!text.endsWith("\n\n")) throw new Error(`stream does not end with a blank line: ${text}`);
  return text.slice(0, -2).split("\n\n").map((frame) => {
    const m = /^event: ([a-z_]+)\ndata: (.*)$/.exec(frame);
    if (!m) throw new Error(`bad frame: ${JSON.stringify(frame)}`);
    return { event: m[1], data: JSON.parse(m[2]) as JsonObject };
  });
}

/** Parses NDJSON lines; throws unless every line is JSON and the text ends with a newline. */
export function parseNdjson(text: string): JsonObject[] {
  if (!text.endsWith("\n")) throw new Error("ndjson does not end with a newline");
  return text.slice(0, -1).split("\n").map((l) => JSON.parse(l) as JsonObject);
}

/** A fixed clock: 2025-01-02T03:04:05.678Z. */
export const FIXED_NOW = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
