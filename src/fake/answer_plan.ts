/**
 * What the fake model answers to a chat or completions request: the plan (text, tool calls,
 * timing, faults) read from the body and the server's defaults, and its two renderings — one
 * JSON answer, or the SSE steps of a stream.
 *
 * @module
 */
import {
  argumentPieces,
  chatPromptTokens,
  contentText,
  generatedText,
  inputTokens,
  textPieces,
} from "./content.ts";
import type { TimedStep } from "./stream.ts";
import { isJsonObject } from "../core/json.ts";

/** The server-wide defaults a request's `fake_*` fields override. */
export interface FakeDefaults {
  /** Milliseconds before the first token. */
  ttftMs: number;
  /** Words in a generated answer. */
  tokens: number;
  /** Milliseconds between tokens. */
  itlMs: number;
  /** `model` of answers to requests that name none. */
  modelName: string;
}

/** A tool call the fake model makes. */
export interface FakeToolCall {
  /** `call_fake_<i>` unless the request gave one. */
  id: string;
  /** Function name. */
  name: string;
  /** Arguments as JSON text. */
  arguments: string;
}

/** Everything the answer to one chat or completions request is made of. */
export interface AnswerPlan {
  /** `chat` (`/v1/chat/completions`) or `completion` (`/v1/completions`). */
  kind: "chat" | "completion";
  /** Answer id. */
  id: string;
  /** Epoch seconds. */
  created: number;
  /** The requested model (or the server's model name). */
  model: string;
  /** Answer as SSE. */
  stream: boolean;
  /** Send the usage-only final chunk (`stream_options.include_usage`). */
  includeUsage: boolean;
  /** Answer text; `null` when the answer is tool calls only. */
  text: string | null;
  /** The text split into streamed pieces (joined, they are `text`). */
  pieces: string[];
  /** Tool calls, possibly none. */
  toolCalls: FakeToolCall[];
  /** Reasoning sent as `reasoning_content` before the answer; `null` when none. */
  reasoning: string | null;
  /** The reasoning split into streamed pieces. */
  reasoningPieces: string[];
  /** Every stream chunk carries the usage so far (`stream_options.continuous_usage_stats`). */
  continuousUsage: boolean;
  /** `finish_reason` of the final choice. */
  finishReason: string;
  /** vLLM-style `stop_reason` on the final choice, when the request asked for one. */
  stopReason?: unknown;
  /** Word count of the prompt. */
  promptTokens: number;
  /**
   * Reasoning pieces + content pieces + tool-call headers + tool argument pieces: the chunks
   * the stream carries.
   */
  completionTokens: number;
  /** Milliseconds before the first token. */
  ttftMs: number;
  /** Milliseconds between tokens. */
  itlMs: number;
  /** Cut the stream after this many content chunks; `null`: never. */
  cutAfter: number | null;
  /** Split every SSE frame across two writes. */
  splitFrames: boolean;
  /** Prompt tokens the simulated engine found cached (`prompt_tokens_details.cached_tokens`). */
  cachedTokens?: number;
}

/** A request the fake model refuses (its `fake_*` fields are malformed). */
export class FakeRequestError extends Error {
  /**
   * A refusal of a request's `fake_*` fields.
   *
   * @param message which `fake_*` field was malformed, and how
   */
  constructor(message: string) {
    super(message);
    this.name = "FakeRequestError";
  }
}

/** Reads a non-negative number field; `undefined` when absent. */
export function numberField(body: Record<string, unknown>, name: string): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new FakeRequestError(`${name} must be a non-negative number`);
  }
  return v;
}

function toolCallsField(body: Record<string, unknown>): FakeToolCall[] {
  const v = body.fake_tool_calls;
  if (v === undefined || v === null) return [];
  // `fake_tool_calls_once`: an agent (e.g. a CLI that sends one fixed header on every request)
  // gets its calls until it sends a tool result, then the answer that ends its loop.
  if (body.fake_tool_calls_once === true && lastIsToolResult(body)) return [];
  if (!Array.isArray(v)) throw new FakeRequestError("fake_tool_calls must be an array");
  return v.map((call, i) => {
    if (!isJsonObject(call) || typeof call.name !== "string") {
      throw new FakeRequestError(`fake_tool_calls[${i}] needs a string name`);
    }
    const args = call.arguments === undefined
      ? "{}"
      : typeof call.arguments === "string"
      ? call.arguments
      : JSON.stringify(call.arguments);
    const id = typeof call.id === "string" ? call.id : `call_fake_${i}`;
    return { id, name: call.name, arguments: args };
  });
}

/**
 * The tool call a request forces with `tool_choice` (`required`, or a function by name) when
 * no `fake_tool_calls` are given and the last message is not a tool result (the loop then
 * ends with text): the named (or first) tool, its required properties filled (strings
 * `tök`, numbers 1, booleans true). This is what lets a client that cannot send `fake_*`
 * fields make a tool round trip.
 */
function forcedToolCalls(body: Record<string, unknown>): FakeToolCall[] {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isJsonObject) : [];
  if (tools.length === 0 || lastIsToolResult(body)) return [];
  const choice = body.tool_choice;
  let name: string | undefined;
  if (
    isJsonObject(choice) && isJsonObject(choice.function) &&
    typeof choice.function.name === "string"
  ) {
    name = choice.function.name;
  } else if (choice !== "required") return [];
  const fn = (t: Record<string, unknown>) => (isJsonObject(t.function) ? t.function : t);
  const tool = tools.find((t) => name === undefined || fn(t).name === name);
  if (tool === undefined) return [];
  const def = fn(tool);
  return [{
    id: "call_fake_0",
    name: typeof def.name === "string" ? def.name : "tool",
    arguments: JSON.stringify(exampleArguments(def.parameters)),
  }];
}

/** Arguments that satisfy a JSON schema's required properties, by type. */
function exampleArguments(schema: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!isJsonObject(schema)) return out;
  const props = isJsonObject(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : Object.keys(props);
  for (const key of required) {
    if (typeof key !== "string") continue;
    const p = props[key];
    const type = isJsonObject(p) ? p.type : undefined;
    out[key] = type === "number" || type === "integer"
      ? 1
      : type === "boolean"
      ? true
      : type === "object"
      ? {}
      : type === "array"
      ? []
      : "tök";
  }
  return out;
}

/** Whether the conversation's last message is a tool result. */
function lastIsToolResult(body: Record<string, unknown>): boolean {
  const messages = body.messages;
  if (!Array.isArray(messages)) return false;
  const last = messages[messages.length - 1];
  return isJsonObject(last) && last.role === "tool";
}

/**
 * The reasoning of an answer: `fake_reasoning` as given, else `thinking tök0 …` (as many words
 * as the answer) when the request asks for reasoning (`reasoning_effort`); `null` otherwise.
 */
function reasoningOf(body: Record<string, unknown>, tokens: number): string | null {
  const given = body.fake_reasoning;
  if (given !== undefined && given !== null) {
    if (typeof given !== "string") throw new FakeRequestError("fake_reasoning must be a string");
    return given;
  }
  if (typeof body.reasoning_effort === "string" && body.reasoning_effort !== "none") {
    return `thinking ${generatedText(tokens)}`;
  }
  return null;
}

/** The answer text when no `fake_text` is given. */
function defaultText(body: Record<string, unknown>, tokens: number): string {
  const messages = body.messages;
  if (Array.isArray(body.tools) && body.tools.length > 0 && Array.isArray(messages)) {
    // Ends an agent loop: after a tool result, answer with it instead of calling again.
    const last = messages[messages.length - 1];
    if (lastIsToolResult(body) && isJsonObject(last)) {
      return `The tool said: ${contentText(last.content)}`;
    }
  }
  return generatedText(tokens);
}

/** Builds the plan for a chat (`kind: "chat"`) or completions request body. */
export function planAnswer(
  kind: "chat" | "completion",
  body: Record<string, unknown>,
  defaults: FakeDefaults,
  seq: number,
  nowMs: number,
): AnswerPlan {
  const tokens = Math.floor(numberField(body, "fake_tokens") ?? defaults.tokens);
  const ttftMs = numberField(body, "fake_ttft_ms") ?? defaults.ttftMs;
  const itlMs = numberField(body, "fake_itl_ms") ?? defaults.itlMs;
  const cut = numberField(body, "fake_cut_after");
  let toolCalls = kind === "chat" ? toolCallsField(body) : [];
  if (kind === "chat" && toolCalls.length === 0) toolCalls = forcedToolCalls(body);
  const fakeText = body.fake_text;
  if (fakeText !== undefined && typeof fakeText !== "string") {
    throw new FakeRequestError("fake_text must be a string");
  }
  const finish = body.fake_finish_reason;
  if (finish !== undefined && typeof finish !== "string") {
    throw new FakeRequestError("fake_finish_reason must be a string");
  }
  let text: string | null;
  if (fakeText !== undefined) text = fakeText;
  else if (toolCalls.length > 0) text = null;
  else if (kind === "chat") text = defaultText(body, tokens);
  else text = generatedText(tokens);
  const pieces = text === null ? [] : textPieces(text);
  const reasoning = kind === "chat" ? reasoningOf(body, tokens) : null;
  const reasoningPieces = reasoning === null ? [] : textPieces(reasoning);
  let toolChunks = 0;
  for (const call of toolCalls) toolChunks += 1 + argumentPieces(call.arguments).length;
  const streamOptions = body.stream_options;
  const plan: AnswerPlan = {
    kind,
    id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-fake-${seq}`,
    created: Math.floor(nowMs / 1000),
    model: typeof body.model === "string" && body.model !== "" ? body.model : defaults.modelName,
    stream: body.stream === true,
    includeUsage: isJsonObject(streamOptions) && streamOptions.include_usage === true,
    text,
    pieces,
    toolCalls,
    reasoning,
    reasoningPieces,
    continuousUsage: isJsonObject(streamOptions) && streamOptions.continuous_usage_stats === true,
    finishReason: finish ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    promptTokens: kind === "chat" ? chatPromptTokens(body.messages) : inputTokens(body.prompt),
    completionTokens: reasoningPieces.length + pieces.length + toolChunks,
    ttftMs,
    itlMs,
    cutAfter: cut === undefined ? null : Math.floor(cut),
    splitFrames: body.fake_split_frames === true,
  };
  if ("fake_stop_reason" in body) plan.stopReason = body.fake_stop_reason;
  return plan;
}

/** Milliseconds a non-streamed answer waits: as long as the stream would take. */
export function answerDelayMs(plan: AnswerPlan): number {
  return plan.ttftMs + plan.itlMs * Math.max(0, plan.completionTokens - 1);
}

function usageOf(plan: AnswerPlan, completion = plan.completionTokens): Record<string, unknown> {
  const usage: Record<string, unknown> = {
    prompt_tokens: plan.promptTokens,
    completion_tokens: completion,
    total_tokens: plan.promptTokens + completion,
  };
  // As vLLM reports its prefix cache (with --enable-prompt-tokens-details).
  if (plan.cachedTokens !== undefined) {
    usage.prompt_tokens_details = { cached_tokens: plan.cachedTokens };
  }
  return usage;
}

/** The non-streamed answer (`chat.completion` or `text_completion`), usage always included. */
export function jsonAnswer(plan: AnswerPlan): Record<string, unknown> {
  const choice: Record<string, unknown> = { index: 0 };
  if (plan.kind === "chat") {
    const message: Record<string, unknown> = { role: "assistant", content: plan.text };
    if (plan.reasoning !== null) message.reasoning_content = plan.reasoning;
    if (plan.toolCalls.length > 0) {
      message.tool_calls = plan.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      }));
    }
    choice.message = message;
  } else {
    choice.text = plan.text ?? "";
  }
  choice.logprobs = null;
  choice.finish_reason = plan.finishReason;
  if ("stopReason" in plan) choice.stop_reason = plan.stopReason;
  return {
    id: plan.id,
    object: plan.kind === "chat" ? "chat.completion" : "text_completion",
    created: plan.created,
    model: plan.model,
    choices: [choice],
    usage: usageOf(plan),
  };
}

/**
 * The SSE answer as timed steps: the first content chunk (with the role chunk before it) after
 * `ttftMs`, each further chunk `itlMs` later, the finish chunk, the usage chunk (when asked
 * for) and `[DONE]` with the last one. With `itlMs` 0 everything is one step. With a cut, the
 * steps stop after `cutAfter` content chunks and nothing final follows.
 */
export function sseSteps(plan: AnswerPlan): TimedStep[] {
  const chat = plan.kind === "chat";
  const head = `data: {"id":${JSON.stringify(plan.id)},"object":"${
    chat ? "chat.completion.chunk" : "text_completion"
  }","created":${plan.created},"model":${JSON.stringify(plan.model)},"choices":`;
  const frame = (choices: unknown, extra = "") => `${head}${JSON.stringify(choices)}${extra}}\n\n`;
  // Content frames are the hot path: built by concatenation, no object per token.
  const contentHead = chat
    ? `${head}[{"index":0,"delta":{"content":`
    : `${head}[{"index":0,"text":`;
  const contentTail = chat
    ? `},"logprobs":null,"finish_reason":null}]}\n\n`
    : `,"logprobs":null,"finish_reason":null}]}\n\n`;

  const before: string[] = [];
  if (chat) {
    before.push(frame([{
      index: 0,
      delta: { role: "assistant", content: "" },
      logprobs: null,
      finish_reason: null,
    }]));
  }
  const content: string[] = [];
  for (const piece of plan.reasoningPieces) {
    content.push(frame([{
      index: 0,
      delta: { reasoning_content: piece },
      logprobs: null,
      finish_reason: null,
    }]));
  }
  for (const piece of plan.pieces) content.push(contentHead + JSON.stringify(piece) + contentTail);
  content.push(...toolCallFrames(plan, frame));
  if (plan.continuousUsage) {
    // vLLM's continuous_usage_stats: every chunk carries the counts so far.
    for (let i = 0; i < before.length; i++) before[i] = withUsage(before[i], usageOf(plan, 0));
    for (let i = 0; i < content.length; i++) {
      content[i] = withUsage(content[i], usageOf(plan, i + 1));
    }
  }

  const last: Record<string, unknown> = chat
    ? { index: 0, delta: {}, logprobs: null, finish_reason: plan.finishReason }
    : { index: 0, text: "", logprobs: null, finish_reason: plan.finishReason };
  if ("stopReason" in plan) last.stop_reason = plan.stopReason;
  const after = [
    plan.continuousUsage ? withUsage(frame([last]), usageOf(plan)) : frame([last]),
  ];
  if (plan.includeUsage) after.push(frame([], `,"usage":${JSON.stringify(usageOf(plan))}`));
  after.push("data: [DONE]\n\n");

  const cut = plan.cutAfter !== null;
  const sent = cut ? content.slice(0, plan.cutAfter ?? 0) : content;
  const steps: TimedStep[] = [{ delayMs: plan.ttftMs, frames: [...before] }];
  sent.forEach((f, i) => {
    if (i === 0) steps[0].frames.push(f);
    else steps.push({ delayMs: plan.itlMs, frames: [f] });
  });
  if (!cut) steps[steps.length - 1].frames.push(...after);
  if (plan.itlMs > 0 || steps.length === 1) return steps;
  return [{ delayMs: plan.ttftMs, frames: steps.flatMap((s) => s.frames) }];
}

/** An SSE chunk frame (`data: {…}\n\n`) with `usage` added as its last field. */
function withUsage(frame: string, usage: Record<string, unknown>): string {
  return `${frame.slice(0, -3)},"usage":${JSON.stringify(usage)}}\n\n`;
}

/**
 * Tool-call delta frames: for every call a header (`id`, `type`, `name`, empty arguments), then
 * its arguments in pieces — parallel calls interleaved round by round, so a reader must
 * reassemble them per `index`.
 */
function toolCallFrames(plan: AnswerPlan, frame: (choices: unknown) => string): string[] {
  const delta = (toolCall: Record<string, unknown>) =>
    frame([{ index: 0, delta: { tool_calls: [toolCall] }, logprobs: null, finish_reason: null }]);
  const out: string[] = [];
  const pieces = plan.toolCalls.map((c) => argumentPieces(c.arguments));
  plan.toolCalls.forEach((c, i) => {
    out.push(delta({
      index: i,
      id: c.id,
      type: "function",
      function: { name: c.name, arguments: "" },
    }));
  });
  const rounds = Math.max(0, ...pieces.map((p) => p.length));
  for (let r = 0; r < rounds; r++) {
    pieces.forEach((p, i) => {
      if (r < p.length) out.push(delta({ index: i, function: { arguments: p[r] } }));
    });
  }
  return out;
}
