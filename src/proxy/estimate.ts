/**
 * The tokens a request is expected to cost, before the node says: by the `count_tokens` rule,
 * about 4 characters a token over the text the model reads (message contents and text parts,
 * tool calls, tool definitions, the prompt, embedding inputs), and the request's own output limit.
 * One estimate for everything that needs one before the usage event: a key's reservation (ADR
 * 0023), fair share's charge at dispatch (ADR 0024), and the bill of a client that left without a
 * usage report (ADR 0027).
 *
 * @module
 */
import { isJsonObject, type JsonObject } from "../core/json.ts";

/** Characters per token of the estimate (the `count_tokens` rule). */
export const CHARS_PER_TOKEN = 4;

/** Estimated input tokens of an upstream (OpenAI-shaped) body. */
export function estimateInputTokens(body: JsonObject): number {
  let chars = textChars(body.prompt) + textChars(body.input);
  const messages = body.messages;
  if (Array.isArray(messages)) {
    for (const m of messages) {
      if (!isJsonObject(m)) continue;
      chars += textChars(m.content);
      if (Array.isArray(m.tool_calls)) chars += JSON.stringify(m.tool_calls).length;
    }
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) {
    chars += JSON.stringify(body.tools).length;
  }
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

/** Characters of text in a string, a list of strings, or content parts with `text`. */
function textChars(v: unknown): number {
  if (typeof v === "string") return v.length;
  if (!Array.isArray(v)) return 0;
  let n = 0;
  for (const part of v) {
    if (typeof part === "string") n += part.length;
    else if (isJsonObject(part) && typeof part.text === "string") n += part.text.length;
  }
  return n;
}

/**
 * The output limit a body asks for (`max_tokens`, `max_completion_tokens`, `max_output_tokens`,
 * `num_predict`, Ollama's `options.num_predict`), or null when it sets none.
 */
export function outputLimitOf(body: JsonObject): number | null {
  const options = body.options;
  for (
    const v of [
      body.max_tokens,
      body.max_completion_tokens,
      body.max_output_tokens,
      body.num_predict,
      isJsonObject(options) ? options.num_predict : undefined,
    ]
  ) {
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) return v;
  }
  return null;
}

/** Input + output tokens estimated from an OpenAI-shaped upstream body. */
export function requestTokensEstimate(body: JsonObject, defaultOutput: number): number {
  const input = estimateInputTokens(body);
  if (body.input !== undefined && body.messages === undefined && body.prompt === undefined) {
    return input; // embeddings: nothing generated
  }
  return input + (outputLimitOf(body) ?? defaultOutput);
}
