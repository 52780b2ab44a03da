/**
 * The Anthropic face: `POST /v1/messages` translated to one OpenAI chat call and back
 * (streaming in `anthropic_stream.ts`), and the local `POST /v1/messages/count_tokens` estimate.
 *
 * @module
 */
import type { AnswerTimings, Face, JsonObject, StreamTranslator, UpstreamRequest } from "./face.ts";
import { FaceError, streamFlag } from "./face.ts";
import { TranslatingFace } from "./translating_face.ts";
import {
  requestContext,
  systemText,
  toChatBody,
  toolResultText,
  validateMessagesBody,
} from "./anthropic_request.ts";
import { anthropicStop } from "./anthropic_stop.ts";
import { AnthropicStreamTranslator } from "./anthropic_stream.ts";
import { anthropicErrorBody, readUpstreamError } from "./errors.ts";
import { extractHermesToolCalls } from "./hermes.ts";
import {
  argumentsObject,
  firstChoice,
  isJsonObject,
  messageText,
  obj,
  str,
} from "./json_narrow.ts";
import { reasoningText } from "./reasoning.ts";
import { anthropicUsage, readChatTokens } from "./chat_tokens.ts";

/** The routes this face serves. */
export const ANTHROPIC_ENDPOINTS = ["/v1/messages", "/v1/messages/count_tokens"] as const;

/**
 * A rough `count_tokens` answer, without a tokenizer: about 4 characters a token over the
 * system prompt, the messages' text, tool calls and results, and the tool definitions' JSON.
 * Throws FaceError 400 when `model` or `messages` is missing.
 */
export function countTokens(body: JsonObject): { input_tokens: number } {
  validateMessagesBody(body, false);
  let chars = systemText(body.system).length;
  for (const m of body.messages as unknown[]) {
    const content = isJsonObject(m) ? m.content : undefined;
    if (typeof content === "string") chars += content.length;
    else if (Array.isArray(content)) {
      for (const b of content) {
        if (!isJsonObject(b)) continue;
        if (b.type === "text") chars += (str(b.text) ?? "").length;
        else if (b.type === "document") chars += (str(obj(b.source)?.data) ?? "").length;
        else if (b.type === "tool_use") {
          chars += (str(b.name) ?? "").length + JSON.stringify(b.input ?? {}).length;
        } else if (b.type === "tool_result") chars += toolResultText(b.content).length;
      }
    }
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) {
    chars += JSON.stringify(body.tools).length;
  }
  return { input_tokens: Math.ceil(chars / 4) };
}

/** The Anthropic face. */
export class AnthropicFace extends TranslatingFace implements Face {
  /** The face's name. */
  readonly name = "anthropic" as const;

  /** A Messages body → the OpenAI chat request (path `/chat/completions`). */
  toUpstream(endpoint: string, body: JsonObject): UpstreamRequest {
    if (endpoint !== "/v1/messages") {
      throw new FaceError(
        404,
        `${endpoint} is not proxied by the anthropic face`,
        "not_found_error",
      );
    }
    validateMessagesBody(body, true);
    const chat = toChatBody(body, () => `toolu_${crypto.randomUUID().replaceAll("-", "")}`);
    const req: UpstreamRequest = {
      path: "/chat/completions",
      body: chat,
      stream: streamFlag(body, false),
      requestedModel: body.model as string,
    };
    // message_start of a stream carries the prompt count before the node reports it (when it
    // does not at the first chunk): the count_tokens estimate, corrected in message_delta.
    const context = requestContext(body) ?? {};
    if (req.stream) context.input_estimate = countTokens(body).input_tokens;
    if (Object.keys(context).length > 0) req.context = context;
    return req;
  }

  /** An OpenAI chat answer → an Anthropic message (model = the requested model). */
  fromUpstream(
    _endpoint: string,
    answer: JsonObject,
    requestedModel: string,
    context?: JsonObject,
    _timings?: AnswerTimings,
  ): JsonObject {
    const { choice, message } = firstChoice(answer);
    // A node refusing under structured output puts its reason in `refusal`, not in content.
    const refusal = str(message.refusal) ?? "";
    let text = messageText(message.content) || refusal;
    const content: JsonObject[] = [];
    const toolUses: JsonObject[] = [];
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    calls.forEach((raw, i) => {
      const tc = obj(raw) ?? {};
      const fn = obj(tc.function) ?? {};
      toolUses.push({
        type: "tool_use",
        id: str(tc.id) || `toolu_skeid_${i + 1}`,
        name: str(fn.name) || "tool",
        input: argumentsObject(fn.arguments),
      });
    });
    if (toolUses.length === 0) {
      const found = extractHermesToolCalls(text);
      text = found.text;
      found.calls.forEach((c, i) => {
        toolUses.push({
          type: "tool_use",
          id: `toolu_skeid_${i + 1}`,
          name: c.name,
          input: c.arguments,
        });
      });
    }
    const thinking = reasoningText(message);
    if (thinking !== "") content.push({ type: "thinking", thinking, signature: "" });
    if (text !== "") content.push({ type: "text", text });
    content.push(...toolUses);
    const matched = str(choice.stop_reason) ?? str(choice.matched_stop);
    const finish = refusal !== "" ? "content_filter" : str(choice.finish_reason);
    const stop = anthropicStop(finish, matched, context, toolUses.length > 0);
    const id = str(answer.id);
    return {
      id: `msg_${id || this.now()}`,
      type: "message",
      role: "assistant",
      model: requestedModel,
      content,
      stop_reason: stop.stop_reason,
      stop_sequence: stop.stop_sequence,
      usage: anthropicUsage(readChatTokens(answer.usage)),
    };
  }

  /** A translator to Anthropic stream events. */
  streamTranslator(
    _endpoint: string,
    requestedModel: string,
    context?: JsonObject,
  ): StreamTranslator {
    return new AnthropicStreamTranslator(requestedModel, context, this.now);
  }

  /** `{"type":"error","error":{"type","message"}}`, type from the status table. */
  errorBody(status: number, type: string, message: string): unknown {
    return anthropicErrorBody(status, type, message);
  }

  /** The upstream's status and message in the Anthropic error shape. */
  upstreamErrorBody(status: number, body: unknown): unknown {
    const info = readUpstreamError(status, body);
    return anthropicErrorBody(status, info.type, info.message);
  }
}
