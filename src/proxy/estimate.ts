/**
 * The tokens a request is expected to cost, before it is sent: what fair share charges a key at
 * dispatch (ADR 0024) until the usage event brings the real count. Input is estimated like the
 * `count_tokens` answer (about 4 characters a token) over what the model reads; output is the
 * request's own limit, else a default.
 *
 * @module
 */
import type { JsonObject } from "../json.ts";

/** Input + output tokens estimated from an OpenAI-shaped upstream body. */
export function requestTokensEstimate(body: JsonObject, defaultOutput: number): number {
  const read = body.messages ?? body.prompt ?? body.input ?? "";
  const chars = typeof read === "string" ? read.length : JSON.stringify(read).length;
  const tools = Array.isArray(body.tools) ? JSON.stringify(body.tools).length : 0;
  const input = Math.ceil((chars + tools) / 4);
  if (body.input !== undefined && body.messages === undefined && body.prompt === undefined) {
    return input; // embeddings: nothing generated
  }
  const limit = body.max_completion_tokens ?? body.max_tokens;
  const output = typeof limit === "number" && limit >= 0 ? limit : defaultOutput;
  return input + output;
}
