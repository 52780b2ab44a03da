/**
 * Upstream OpenAI chat stream → Anthropic Messages stream events.
 *
 * `message_start` comes first (on the first upstream chunk, or at the end), its
 * `usage.input_tokens` the node's prompt count when the first chunk carries one (vLLM and SGLang
 * with `continuous_usage_stats`), else the request's `count_tokens` estimate (context
 * `input_estimate`); `message_delta` carries the exact counts. Content blocks open lazily and
 * are numbered by first appearance: a `thinking` block on the first upstream reasoning
 * (`reasoning_content`, sent as `thinking_delta`, signature empty: an OpenAI-compatible node
 * signs nothing), the text block on the first non-empty text, one
 * `tool_use` block per upstream `tool_calls[].index`; argument fragments go out verbatim as
 * `input_json_delta` of their call's block. Role-only and usage-only chunks add nothing. At the
 * end every open block closes in opening order, then `message_delta` (stop reason, usage) and
 * `message_stop`. A failure ends with `event: error` and no `message_stop`.
 *
 * @module
 */
import type { AnswerTimings, JsonObject, StreamTranslator } from "./face.ts";
import { anthropicStop } from "./anthropic_stop.ts";
import { anthropicErrorBody } from "./errors.ts";
import { sseFrame } from "./sse_frame.ts";
import { StreamAccounting, StreamState, type ToolCallState } from "./stream_state.ts";
import { anthropicUsage, readChatTokens } from "./chat_tokens.ts";
import { chunkReasoning } from "./reasoning.ts";
import { isJsonObject } from "./json_narrow.ts";

const PING = sseFrame("ping", { type: "ping" });

/** One Anthropic stream; `now` stamps the message id when the upstream sends none. */
export class AnthropicStreamTranslator extends StreamAccounting implements StreamTranslator {
  /** Content type of the translated stream. */
  readonly contentType = "text/event-stream";
  readonly #open: number[] = [];
  #blocks = 0;
  readonly #toolBlock = new Map<ToolCallState, number>();
  #textBlock: number | undefined;
  #thinkingBlock: number | undefined;
  #started = false;
  #closed = false;
  /** The node refused under structured output (`delta.refusal`): the stop reason says so. */
  #refused = false;

  /**
   * A translator that has sent nothing yet; `message_start` goes out with the first chunk.
   *
   * @param requestedModel the model named in `message_start` (the client's, not the served model)
   * @param context the face's request context (`stop_sequences`) for the stop reason
   * @param now epoch-ms clock for the message id when the upstream sends none
   */
  constructor(
    readonly requestedModel: string,
    readonly context: JsonObject | undefined,
    readonly now: () => number,
  ) {
    super(new StreamState("toolu_skeid_"));
  }

  /** One parsed upstream chunk → the events it makes (maybe none). */
  chunk(chunk: JsonObject): string {
    if (this.#closed) return "";
    const parts = this.state.read(chunk);
    // A refusal under structured output comes as `delta.refusal`, not content: the client reads
    // it as the answer's text.
    const refusal = deltaRefusal(chunk);
    if (refusal !== "") this.#refused = true;
    const text = parts.text + refusal;
    let out = this.#start();
    const thinking = chunkReasoning(chunk);
    if (thinking !== "") {
      if (this.#thinkingBlock === undefined) {
        this.#thinkingBlock = this.#openBlock();
        out += sseFrame("content_block_start", {
          type: "content_block_start",
          index: this.#thinkingBlock,
          content_block: { type: "thinking", thinking: "", signature: "" },
        });
      }
      out += sseFrame("content_block_delta", {
        type: "content_block_delta",
        index: this.#thinkingBlock,
        delta: { type: "thinking_delta", thinking },
      });
    }
    if (text !== "") {
      if (this.#textBlock === undefined) {
        out += this.#closeThinking();
        this.#textBlock = this.#openBlock();
        out += sseFrame("content_block_start", {
          type: "content_block_start",
          index: this.#textBlock,
          content_block: { type: "text", text: "" },
        });
      }
      out += sseFrame("content_block_delta", {
        type: "content_block_delta",
        index: this.#textBlock,
        delta: { type: "text_delta", text },
      });
    }
    for (const { call, opened, fragment } of parts.tools) {
      let index = this.#toolBlock.get(call);
      if (opened || index === undefined) {
        out += this.#closeThinking();
        index = this.#openBlock();
        this.#toolBlock.set(call, index);
        out += sseFrame("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: call.id, name: call.name || "tool", input: {} },
        });
      }
      if (fragment !== "") {
        out += sseFrame("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: fragment },
        });
      }
    }
    return out;
  }

  /** `event: ping` while the upstream is silent. */
  keepalive(): string {
    return this.#closed ? "" : PING;
  }

  /** Closes open blocks, then `message_delta` and `message_stop`. */
  end(_timings?: AnswerTimings): string {
    if (this.#closed) return "";
    let out = this.#start();
    this.#closed = true;
    for (const index of this.#open) {
      out += sseFrame("content_block_stop", { type: "content_block_stop", index });
    }
    const s = this.state;
    const finish = this.#refused ? "content_filter" : s.finishReason;
    const stop = anthropicStop(finish, s.matchedStop, this.context, s.calls.length > 0);
    const usage = anthropicUsage(readChatTokens(s.usage));
    out += sseFrame("message_delta", { type: "message_delta", delta: stop, usage });
    out += sseFrame("message_stop", { type: "message_stop" });
    return out;
  }

  /** `event: error` with the Anthropic error body; no `message_stop` follows. */
  fail(status: number, message: string): string {
    if (this.#closed) return "";
    this.#closed = true;
    return sseFrame("error", anthropicErrorBody(status, undefined, message));
  }

  #openBlock(): number {
    const index = this.#blocks++;
    this.#open.push(index);
    return index;
  }

  /**
   * Closes the thinking block before another block opens, as Anthropic streams do (thinking
   * comes first and ends before the answer); reasoning after that opens a new one.
   */
  #closeThinking(): string {
    const index = this.#thinkingBlock;
    if (index === undefined) return "";
    this.#thinkingBlock = undefined;
    this.#open.splice(this.#open.indexOf(index), 1);
    return sseFrame("content_block_stop", { type: "content_block_stop", index });
  }

  #start(): string {
    if (this.#started) return "";
    this.#started = true;
    const reported = this.state.usage === undefined
      ? undefined
      : anthropicUsage(readChatTokens(this.state.usage));
    const estimate = typeof this.context?.input_estimate === "number"
      ? this.context.input_estimate
      : 0;
    const usage = reported !== undefined && reported.input_tokens > 0
      ? { ...reported, output_tokens: 0 }
      : { input_tokens: estimate, output_tokens: 0 };
    return sseFrame("message_start", {
      type: "message_start",
      message: {
        id: `msg_${this.state.upstreamId ?? this.now()}`,
        type: "message",
        role: "assistant",
        model: this.requestedModel,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage,
      },
    });
  }
}

/** The first choice's `delta.refusal` of a chat chunk; '' when none. */
function deltaRefusal(chunk: JsonObject): string {
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  const first = choices[0];
  if (!isJsonObject(first) || !isJsonObject(first.delta)) return "";
  const refusal = first.delta.refusal;
  return typeof refusal === "string" ? refusal : "";
}
