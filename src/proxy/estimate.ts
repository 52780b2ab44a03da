/**
 * The tokens a request is expected to cost, before the node says: by the `count_tokens` rule,
 * about 4 characters a token over the text the model reads (message contents and text parts,
 * tool calls, tool definitions, the prompt, embedding inputs), one token a token id (a prompt or
 * an input given as tokens), and what the request asks to generate: the largest output limit the
 * node honours times its completions (`n`, `best_of`), at most `routing.max_reserve_tokens`.
 * One estimate for everything that needs one before the usage event: a key's reservation and tpm
 * window (ADR 0023), fair share's charge at dispatch (ADR 0024), and the bill of a client that
 * left without a usage report (ADR 0027).
 *
 * The fields are checked before anything reads them (`checkOutputFields`): an output limit or a
 * completion count a node might read differently from Skeid (`"900"`, `1.5`, `-3`) is refused.
 *
 * @module
 */
import { type OutputAsk, outputCharge } from "../core/budget.ts";
import { isJsonObject, type JsonObject } from "../core/json.ts";
import { FaceError } from "../faces/face.ts";

/** Characters per token of the estimate (the `count_tokens` rule). */
export const CHARS_PER_TOKEN = 4;

/** What the estimate reads of an upstream request: its path (embeddings generate nothing) and body. */
export interface EstimatedRequest {
  /** Upstream path below the node's `/v1`. */
  readonly path: string;
  /** The upstream body. */
  readonly body: JsonObject;
}

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
  return Math.ceil(chars / CHARS_PER_TOKEN) + tokenIds(body.prompt) + tokenIds(body.input);
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
 * Token ids in a prompt or input given as tokens: a list of ids, or a list of such lists (one per
 * prompt or input). Each inner list counts by its length: the work is one step per prompt, not
 * per token.
 */
function tokenIds(v: unknown): number {
  if (!Array.isArray(v)) return 0;
  let n = 0;
  for (const part of v) {
    if (typeof part === "number") n++;
    else if (Array.isArray(part)) n += part.length;
  }
  return n;
}

/** The output limit fields a node honours, top level (Anthropic's and OpenAI's names). */
const LIMIT_FIELDS = ["max_completion_tokens", "max_tokens", "max_output_tokens"] as const;
/** The fields that multiply what is generated (one completion each). */
const CHOICE_FIELDS = ["n", "best_of"] as const;

/**
 * What an upstream request asks to generate: the largest output limit its body sets (the node
 * honours one of them: `max_completion_tokens` over `max_tokens` for vLLM and OpenAI, so the
 * charge takes the larger), its completions, and the cap. Embeddings generate nothing.
 */
export function outputAskOf(upstream: EstimatedRequest, maxOutput: number): OutputAsk {
  if (upstream.path === "/embeddings") return { outputLimit: 0, choices: 1, maxOutput };
  const body = upstream.body;
  let limit: number | null = null;
  for (const field of LIMIT_FIELDS) limit = larger(limit, body[field], 0);
  const options = body.options;
  if (isJsonObject(options)) limit = larger(limit, options.num_predict, 0);
  let choices = 1;
  for (const field of CHOICE_FIELDS) choices = larger(choices, body[field], 1) ?? 1;
  return { outputLimit: limit, choices, maxOutput };
}

/** The larger of `current` and `v` when `v` is a number of at least `min`, else `current`. */
function larger(current: number | null, v: unknown, min: number): number | null {
  if (typeof v !== "number" || !(v >= min) || !Number.isFinite(v)) return current;
  return current === null || v > current ? v : current;
}

/**
 * Input + output tokens estimated from an upstream request: the input estimate and its output
 * charge (`defaultOutput` per completion when it states no limit; at most `maxOutput`).
 */
export function requestTokensEstimate(
  upstream: EstimatedRequest,
  defaultOutput: number,
  maxOutput: number,
): number {
  return estimateInputTokens(upstream.body) +
    outputCharge(outputAskOf(upstream, maxOutput), defaultOutput);
}

/**
 * Refuses (400, naming the field) a client body whose output limit or completion count is not
 * what every node reads the same way: an output limit must be a non-negative integer (Ollama's
 * `options.num_predict` may also be -1, no limit, or -2, fill the context), `n` and `best_of`
 * a positive integer. JSON `null` counts as absent. Called before anything is reserved or
 * forwarded; a few property reads, whatever the body's size.
 */
export function checkOutputFields(body: JsonObject): void {
  for (const field of LIMIT_FIELDS) checkCount(field, body[field], 0);
  const options = body.options;
  if (isJsonObject(options)) checkCount("options.num_predict", options.num_predict, -2);
  for (const field of CHOICE_FIELDS) checkCount(field, body[field], 1);
}

/** Longest excerpt of a refused value the error message quotes. */
const MAX_QUOTED = 40;

function checkCount(field: string, v: unknown, min: number): void {
  if (v === undefined || v === null) return;
  if (typeof v === "number" && Number.isInteger(v) && v >= min) return;
  const what = min === 1
    ? "a positive integer"
    : min === 0
    ? "a non-negative integer"
    : `an integer of at least ${min}`;
  let quoted = JSON.stringify(v) ?? String(v);
  if (quoted.length > MAX_QUOTED) quoted = `${quoted.slice(0, MAX_QUOTED)}…`;
  throw new FaceError(400, `${field}: must be ${what}, got ${quoted}`);
}
