/**
 * Upstream OpenAI chat stream → Responses API stream events (ADR 0028).
 *
 * `response.created` and `response.in_progress` come first (on the first upstream chunk, or at
 * the end). Reasoning (`reasoning_content`) and text stream live as a `reasoning` and a
 * `message` item, each closed when another item opens; a tool call opens its `function_call`
 * item on first sighting and its argument fragments go out as they come (parallel calls may
 * interleave: every delta names its item), all closed at the end. A custom tool's call is
 * answered whole at the end as a `custom_tool_call` (its free-form input is one JSON string
 * argument upstream, only readable once complete). Every event carries a `sequence_number` from 0
 * up by one; exactly one terminal event ends the stream: `response.completed`,
 * `response.incomplete` (the upstream stopped for length) or `response.failed`.
 *
 * @module
 */
import type { AnswerTimings, JsonObject, StreamTranslator } from "../faces/face.ts";
import { isJsonObject, obj, str } from "../faces/json_narrow.ts";
import { sseFrame } from "../faces/sse_frame.ts";
import { StreamAccounting, StreamState, type ToolCallState } from "../faces/stream_state.ts";
import {
  customTools,
  messageItem,
  newId,
  outputTextPart,
  reasoningItem,
  responseObject,
  responsesUsage,
  statusFor,
  toolCallItem,
} from "./responses_answer.ts";

/** The reasoning or message item being streamed. */
interface LiveItem {
  kind: "reasoning" | "message";
  id: string;
  index: number;
  text: string;
}

/** A tool call's output item. */
interface ToolItem {
  call: ToolCallState;
  id: string;
  index: number;
  custom: boolean;
}

/** The reasoning text of a chat chunk's first choice ('' when none). */
function reasoningDelta(chunk: JsonObject): string {
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  const choice = obj(choices.find((c) => isJsonObject(c) && (c.index ?? 0) === 0)) ??
    obj(choices[0]);
  const delta = obj(choice?.delta);
  return str(delta?.reasoning_content) ?? str(delta?.reasoning) ?? "";
}

/** One Responses stream; `now` stamps `created_at`. */
export class ResponsesStreamTranslator extends StreamAccounting implements StreamTranslator {
  /** Content type of the translated stream. */
  readonly contentType = "text/event-stream";
  readonly #id = newId("resp");
  readonly #createdAt: number;
  readonly #custom: string[];
  /** Output items by output index; an open item holds its `in_progress` shape. */
  readonly #output: JsonObject[] = [];
  readonly #tools: ToolItem[] = [];
  readonly #toolOf = new Map<ToolCallState, ToolItem>();
  #live: LiveItem | undefined;
  /** The whole response once `end` made the terminal event (the response store keeps it). */
  final: JsonObject | undefined;
  #seq = 0;
  #started = false;
  #closed = false;

  /**
   * A translator that has sent nothing yet; `response.created` goes out with the first chunk.
   *
   * @param requestedModel the model the response names (the client's, not the served model)
   * @param context the face's request context (echoed fields, custom tool names)
   * @param now epoch-ms clock for `created_at`
   */
  constructor(
    readonly requestedModel: string,
    readonly context: JsonObject | undefined,
    now: () => number,
  ) {
    super(new StreamState("call_skeid_"));
    this.#createdAt = Math.floor(now() / 1000);
    this.#custom = customTools(context);
  }

  /** One parsed upstream chunk → the events it makes (maybe none). */
  chunk(chunk: JsonObject): string {
    if (this.#closed) return "";
    const parts = this.state.read(chunk);
    let out = this.#start();
    const reasoning = reasoningDelta(chunk);
    if (reasoning !== "") out += this.#liveDelta("reasoning", reasoning);
    if (parts.text !== "") out += this.#liveDelta("message", parts.text);
    for (const { call, opened, fragment } of parts.tools) {
      let item = this.#toolOf.get(call);
      if (opened || item === undefined) {
        out += this.#closeLive();
        item = {
          call,
          id: newId(this.#custom.includes(call.name) ? "ctc" : "fc"),
          index: this.#output.length,
          custom: this.#custom.includes(call.name),
        };
        this.#tools.push(item);
        this.#toolOf.set(call, item);
        const shape = item.custom
          ? { ...this.#toolItem(item, "in_progress"), input: "" }
          : { ...this.#toolItem(item, "in_progress"), arguments: "" };
        this.#output.push(shape);
        out += this.#event("response.output_item.added", { output_index: item.index, item: shape });
      }
      if (fragment !== "" && !item.custom) {
        out += this.#event("response.function_call_arguments.delta", {
          item_id: item.id,
          output_index: item.index,
          delta: fragment,
        });
      }
    }
    return out;
  }

  /** Nothing: the Responses stream has no keepalive event. */
  keepalive(): string {
    return "";
  }

  /** Closes every open item, then `response.completed` or `response.incomplete`. */
  end(_timings?: AnswerTimings): string {
    if (this.#closed) return "";
    let out = this.#start() + this.#closeLive();
    for (const item of this.#tools) out += this.#closeTool(item);
    this.#closed = true;
    const status = statusFor(this.state.finishReason);
    const response = this.#response(status, responsesUsage(this.state.usage));
    this.final = response;
    const type = status === "incomplete" ? "response.incomplete" : "response.completed";
    return out + this.#event(type, { response });
  }

  /** `response.failed` carrying the error; nothing follows. */
  fail(status: number, message: string): string {
    if (this.#closed) return "";
    const out = this.#start();
    this.#closed = true;
    const code = status === 429 ? "rate_limit_exceeded" : "server_error";
    const usage = this.state.usage === undefined ? null : responsesUsage(this.state.usage);
    const response = this.#response("failed", usage, { code, message });
    return out + this.#event("response.failed", { response });
  }

  #response(status: string, usage: JsonObject | null, error?: JsonObject): JsonObject {
    return responseObject({
      id: this.#id,
      createdAt: this.#createdAt,
      status,
      model: this.requestedModel,
      output: [...this.#output],
      usage,
      ...(error ? { error } : {}),
    }, this.context);
  }

  #event(type: string, fields: JsonObject): string {
    return sseFrame(type, { type, sequence_number: this.#seq++, ...fields });
  }

  #start(): string {
    if (this.#started) return "";
    this.#started = true;
    const response = this.#response("in_progress", null);
    return this.#event("response.created", { response }) +
      this.#event("response.in_progress", { response });
  }

  /** A reasoning or text fragment: into the live item of its kind (opened when needed). */
  #liveDelta(kind: LiveItem["kind"], delta: string): string {
    let out = "";
    let live = this.#live;
    if (live?.kind !== kind) {
      out += this.#closeLive();
      live = {
        kind,
        id: newId(kind === "message" ? "msg" : "rs"),
        index: this.#output.length,
        text: "",
      };
      this.#live = live;
      const item = kind === "message"
        ? { ...messageItem(live.id, "", "in_progress"), content: [] }
        : { ...reasoningItem(live.id, "", "in_progress"), content: [] };
      this.#output.push(item);
      out += this.#event("response.output_item.added", { output_index: live.index, item });
      if (kind === "message") {
        out += this.#event("response.content_part.added", {
          item_id: live.id,
          output_index: live.index,
          content_index: 0,
          part: outputTextPart(""),
        });
      }
    }
    live.text += delta;
    const type = kind === "message"
      ? "response.output_text.delta"
      : "response.reasoning_text.delta";
    const extra = kind === "message" ? { logprobs: [] } : {};
    return out + this.#event(type, {
      item_id: live.id,
      output_index: live.index,
      content_index: 0,
      delta,
      ...extra,
    });
  }

  #closeLive(): string {
    const live = this.#live;
    if (!live) return "";
    this.#live = undefined;
    const at = { item_id: live.id, output_index: live.index, content_index: 0 };
    let out: string;
    let item: JsonObject;
    if (live.kind === "message") {
      out = this.#event("response.output_text.done", { ...at, text: live.text, logprobs: [] });
      out += this.#event("response.content_part.done", { ...at, part: outputTextPart(live.text) });
      item = messageItem(live.id, live.text, "completed");
    } else {
      out = this.#event("response.reasoning_text.done", { ...at, text: live.text });
      item = reasoningItem(live.id, live.text, "completed");
    }
    this.#output[live.index] = item;
    return out + this.#event("response.output_item.done", { output_index: live.index, item });
  }

  #toolItem(item: ToolItem, status: string): JsonObject {
    const call = {
      id: item.call.id,
      name: item.call.name || "tool",
      arguments: item.call.arguments,
    };
    return toolCallItem(item.id, call, item.custom ? [call.name] : [], status);
  }

  #closeTool(item: ToolItem): string {
    const done = this.#toolItem(item, "completed");
    const at = { item_id: item.id, output_index: item.index };
    let out: string;
    if (item.custom) {
      const input = str(done.input) ?? "";
      out = this.#event("response.custom_tool_call_input.delta", { ...at, delta: input });
      out += this.#event("response.custom_tool_call_input.done", { ...at, input });
    } else {
      out = this.#event("response.function_call_arguments.done", {
        ...at,
        name: done.name,
        arguments: done.arguments,
      });
    }
    this.#output[item.index] = done;
    return out + this.#event("response.output_item.done", { output_index: item.index, item: done });
  }
}
