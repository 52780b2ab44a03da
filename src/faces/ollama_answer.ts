/**
 * Pieces of Ollama answers shared by the JSON and the streamed form: the closing counts and
 * durations, and tool calls in Ollama's shape.
 *
 * @module
 */
import type { AnswerTimings, JsonObject } from "./face.ts";
import { argumentsObject, obj, str } from "./json_narrow.ts";
import { readChatTokens } from "./chat_tokens.ts";

const NS_PER_MS = 1_000_000;

/**
 * The fields that close an Ollama answer, in Ollama's order: token counts from the upstream
 * usage (the event's numbers) and durations in nanoseconds from the proxy's timings
 * (`load_duration` is always 0; the prompt phase is the time to first token; 0 when unknown).
 */
export function closingFields(usage: unknown, timings: AnswerTimings | undefined): JsonObject {
  const t = readChatTokens(usage);
  const total = Math.max(0, Math.round((timings?.totalMs ?? 0) * NS_PER_MS));
  const prompt = timings?.ttftMs === undefined
    ? 0
    : Math.min(total, Math.max(0, Math.round(timings.ttftMs * NS_PER_MS)));
  return {
    total_duration: total,
    load_duration: 0,
    prompt_eval_count: t.prompt,
    prompt_eval_duration: prompt,
    eval_count: t.completion,
    eval_duration: total - prompt,
  };
}

/** OpenAI tool calls → Ollama's `{id, function:{name, arguments:<object>}}`. */
export function ollamaToolCalls(calls: readonly unknown[]): JsonObject[] {
  return calls.map((raw) => {
    const tc = obj(raw) ?? {};
    const fn = obj(tc.function) ?? {};
    const call: JsonObject = {};
    const id = str(tc.id);
    if (id) call.id = id;
    call.function = { name: str(fn.name) ?? "", arguments: argumentsObject(fn.arguments) };
    return call;
  });
}

/** An ISO-8601 UTC stamp for `created_at`. */
export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}
