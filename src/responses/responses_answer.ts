/**
 * The Responses API `response` object and its output items, built from what an upstream chat
 * answer (or stream) said: shared by the JSON answer and the stream translator so both give the
 * client the same object.
 *
 * @module
 */
import type { JsonObject } from "../faces/face.ts";
import { isJsonObject, num, obj, parseJsonObject, str } from "../faces/json_narrow.ts";
import { readUsage } from "../core/usage_reading.ts";

/** A new output item or response id: `<prefix>_` and 32 hex digits. */
export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;
}

/**
 * The Responses `usage` of an upstream usage object, read by the core's reader (the one the usage
 * event is priced from), so every number equals the usage event's.
 */
export function responsesUsage(usage: unknown): JsonObject {
  const u = readUsage(usage ?? {});
  const input = u.input_tokens ?? 0;
  const output = u.output_tokens ?? 0;
  const details = obj(obj(usage)?.completion_tokens_details) ??
    obj(obj(usage)?.output_tokens_details);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: num(details?.reasoning_tokens) ?? 0 },
    total_tokens: u.total_tokens ?? input + output,
  };
}

/** A `message` output item with one `output_text` part. */
export function messageItem(id: string, text: string, status: string): JsonObject {
  return {
    id,
    type: "message",
    status,
    role: "assistant",
    content: [outputTextPart(text)],
  };
}

/** An `output_text` content part. */
export function outputTextPart(text: string): JsonObject {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

/** A `reasoning` output item carrying the upstream's `reasoning_content` as `reasoning_text`. */
export function reasoningItem(id: string, text: string, status: string): JsonObject {
  return {
    id,
    type: "reasoning",
    status,
    summary: [],
    content: [{ type: "reasoning_text", text }],
  };
}

/**
 * A tool call as its output item: `custom_tool_call` (input = the one string argument) when the
 * name is one of the request's custom tools, else `function_call`.
 */
export function toolCallItem(
  id: string,
  call: { id: string; name: string; arguments: string },
  custom: readonly string[],
  status: string,
): JsonObject {
  if (custom.includes(call.name)) {
    return {
      id,
      type: "custom_tool_call",
      status,
      call_id: call.id,
      name: call.name,
      input: customInput(call.arguments),
    };
  }
  return {
    id,
    type: "function_call",
    status,
    call_id: call.id,
    name: call.name,
    arguments: call.arguments,
  };
}

/** The free-form input of a custom tool call: its `input` argument (the whole text otherwise). */
export function customInput(args: string): string {
  const parsed = parseJsonObject(args);
  return typeof parsed?.input === "string" ? parsed.input : args;
}

/** The custom tool names a request context carries. */
export function customTools(context: JsonObject | undefined): string[] {
  const c = context?.custom_tools;
  return Array.isArray(c) ? c.filter((n): n is string => typeof n === "string") : [];
}

/** What a response object is made of. */
export interface ResponseParts {
  /** `resp_…` */
  id: string;
  /** Epoch seconds. */
  createdAt: number;
  /** `in_progress`, `completed`, `incomplete` or `failed`. */
  status: string;
  /** The model the client asked for. */
  model: string;
  /** Output items. */
  output: JsonObject[];
  /** The Responses usage, or null while streaming. */
  usage: JsonObject | null;
  /** The error of a failed response. */
  error?: JsonObject;
}

/** The full `response` object; the request's own fields are echoed from the context. */
export function responseObject(parts: ResponseParts, context: JsonObject | undefined): JsonObject {
  const echo = obj(context?.echo) ?? {};
  const reasoning = obj(echo.reasoning);
  return {
    id: parts.id,
    object: "response",
    created_at: parts.createdAt,
    status: parts.status,
    background: false,
    error: parts.error ?? null,
    incomplete_details: parts.status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: echo.instructions ?? null,
    max_output_tokens: echo.max_output_tokens ?? null,
    metadata: isJsonObject(echo.metadata) ? echo.metadata : {},
    model: parts.model,
    output: parts.output,
    parallel_tool_calls: echo.parallel_tool_calls ?? true,
    previous_response_id: echo.previous_response_id ?? null,
    reasoning: { effort: str(reasoning?.effort) ?? null, summary: null },
    store: echo.store === true,
    temperature: echo.temperature ?? 1,
    text: obj(echo.text) ?? { format: { type: "text" } },
    tool_choice: echo.tool_choice ?? "auto",
    tools: Array.isArray(echo.tools) ? echo.tools : [],
    top_p: echo.top_p ?? 1,
    truncation: "disabled",
    usage: parts.usage,
    user: echo.user ?? null,
  };
}

/** The response status for an upstream finish reason: `length` → `incomplete`. */
export function statusFor(finishReason: string | undefined): string {
  return finishReason === "length" ? "incomplete" : "completed";
}
