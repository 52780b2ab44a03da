/**
 * The reasoning an upstream sends beside the answer: vLLM and SGLang reasoning parsers put it in
 * `reasoning_content` (newer vLLM also in `reasoning`), in the message of a JSON answer and in
 * the delta of a stream chunk. The Anthropic face turns it into `thinking`, the Ollama face
 * into `thinking` of the message.
 *
 * @module
 */
import type { JsonObject } from "./face.ts";
import { isJsonObject, obj, str } from "./json_narrow.ts";

/** The reasoning text of a message or a delta; '' when none. */
export function reasoningText(message: JsonObject | undefined): string {
  if (message === undefined) return "";
  return str(message.reasoning_content) ?? str(message.reasoning) ?? "";
}

/** The reasoning text of a stream chunk's first choice delta; '' when none. */
export function chunkReasoning(chunk: JsonObject): string {
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  const choice = obj(choices.find((c) => isJsonObject(c) && (c.index ?? 0) === 0)) ??
    obj(choices[0]);
  return reasoningText(obj(choice?.delta));
}
