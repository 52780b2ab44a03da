/**
 * The tokens a request is expected to cost, before it is sent: what fair share charges a key at
 * dispatch (ADR 0024) until the usage event brings the real count. Input is estimated like the
 * `count_tokens` answer (about 4 characters a token over the text the model reads: message
 * contents, tool calls, tool definitions; the prompt; embedding inputs); output is the request's
 * own limit, else a default. Only a request that has to share a tier pays for this.
 *
 * @module
 */
import type { JsonObject } from "../core/json.ts";

/** Characters of text in a message content, a prompt or an input (strings and text parts). */
function textChars(v: unknown): number {
  if (typeof v === "string") return v.length;
  if (Array.isArray(v)) {
    let n = 0;
    for (const x of v) n += textChars(x);
    return n;
  }
  if (typeof v !== "object" || v === null) return 0;
  const o = v as Record<string, unknown>;
  let n = textChars(o.content) + textChars(o.text);
  if (Array.isArray(o.tool_calls)) n += JSON.stringify(o.tool_calls).length;
  return n;
}

/** Input + output tokens estimated from an OpenAI-shaped upstream body. */
export function requestTokensEstimate(body: JsonObject, defaultOutput: number): number {
  let chars = textChars(body.messages) + textChars(body.prompt) + textChars(body.input);
  if (Array.isArray(body.tools)) chars += JSON.stringify(body.tools).length;
  const input = Math.ceil(chars / 4);
  if (body.input !== undefined && body.messages === undefined && body.prompt === undefined) {
    return input; // embeddings: nothing generated
  }
  const limit = body.max_completion_tokens ?? body.max_tokens;
  const output = typeof limit === "number" && limit >= 0 ? limit : defaultOutput;
  return input + output;
}
