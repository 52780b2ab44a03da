/**
 * The Responses face: `POST /v1/responses` translated to one OpenAI chat call and back
 * (streaming in `responses_stream.ts`; ADR 0028). Errors come in the OpenAI error shape.
 *
 * @module
 */
import type {
  AnswerTimings,
  Face,
  FaceIntake,
  FaceOptions,
  FaceRequest,
  JsonObject,
  StreamTranslator,
  UpstreamRequest,
} from "../faces/face.ts";
import { FaceError } from "../faces/face.ts";
import { TranslatingFace } from "../faces/translating_face.ts";
import { openaiErrorBody, readUpstreamError } from "../faces/errors.ts";
import { extractHermesToolCalls } from "../faces/hermes.ts";
import { argumentsText, firstChoice, messageText, obj, str } from "../faces/json_narrow.ts";
import { requestContext, toChatBody, validateResponsesBody } from "./responses_request.ts";
import {
  customTools,
  messageItem,
  newId,
  reasoningItem,
  responseObject,
  responsesUsage,
  statusFor,
  toolCallItem,
} from "./responses_answer.ts";
import { ResponsesStreamTranslator } from "./responses_stream.ts";
import { NativeResponsesFace } from "./responses_native.ts";
import { continueConversation, type ConversationContext } from "./response_keeper.ts";

/** The route this face serves. */
export const RESPONSES_ENDPOINT = "/v1/responses";

/** Construction options of the Responses face. */
export interface ResponsesFaceOptions extends FaceOptions {
  /** The gateway whose response keeper continues conversations; absent: nothing is kept. */
  conversations?: ConversationContext;
}

/** The Responses face. */
export class ResponsesFace extends TranslatingFace implements Face {
  /** The face's name. */
  readonly name = "responses" as const;
  readonly #conversations: ConversationContext | undefined;

  /** `options.conversations`: the gateway that keeps responses (ADR 0028). */
  constructor(options: ResponsesFaceOptions = {}) {
    super(options);
    this.#conversations = options.conversations;
  }

  /** With the response store on: the kept conversation goes before this turn's input. */
  intake(req: FaceRequest, body: JsonObject): FaceIntake | Promise<FaceIntake> {
    const ctx = this.#conversations;
    return ctx === undefined ? { body } : continueConversation(ctx, req, body);
  }

  /** A Responses body → the OpenAI chat request (path `/chat/completions`). */
  toUpstream(endpoint: string, body: JsonObject, echo?: JsonObject): UpstreamRequest {
    if (endpoint !== RESPONSES_ENDPOINT) {
      throw new FaceError(
        404,
        `${endpoint} is not proxied by the responses face`,
        "not_found_error",
      );
    }
    validateResponsesBody(body);
    const { chat, custom } = toChatBody(body);
    return {
      path: "/chat/completions",
      body: chat,
      stream: body.stream === true,
      requestedModel: body.model as string,
      context: requestContext(body, custom, echo),
    };
  }

  /** An OpenAI chat answer → a `response` object (model = the requested model). */
  fromUpstream(
    _endpoint: string,
    answer: JsonObject,
    requestedModel: string,
    context?: JsonObject,
    _timings?: AnswerTimings,
  ): JsonObject {
    const { choice, message } = firstChoice(answer);
    const output: JsonObject[] = [];
    const reasoning = str(message.reasoning_content) ?? str(message.reasoning) ?? "";
    if (reasoning !== "") output.push(reasoningItem(newId("rs"), reasoning, "completed"));
    let text = messageText(message.content);
    const calls: { id: string; name: string; arguments: string }[] = [];
    const raw = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    raw.forEach((r, i) => {
      const tc = obj(r) ?? {};
      const fn = obj(tc.function) ?? {};
      calls.push({
        id: str(tc.id) || `call_skeid_${i + 1}`,
        name: str(fn.name) || "tool",
        arguments: argumentsText(fn.arguments ?? "{}"),
      });
    });
    if (calls.length === 0) {
      const found = extractHermesToolCalls(text);
      text = found.text;
      found.calls.forEach((c, i) => {
        calls.push({
          id: `call_skeid_${i + 1}`,
          name: c.name,
          arguments: argumentsText(c.arguments),
        });
      });
    }
    if (text !== "") output.push(messageItem(newId("msg"), text, "completed"));
    const custom = customTools(context);
    for (const call of calls) output.push(toolCallItem(newId("fc"), call, custom, "completed"));
    return responseObject({
      id: newId("resp"),
      createdAt: Math.floor(this.now() / 1000),
      status: statusFor(str(choice.finish_reason)),
      model: requestedModel,
      output,
      usage: responsesUsage(answer.usage),
    }, context);
  }

  /** A translator to Responses stream events. */
  streamTranslator(
    _endpoint: string,
    requestedModel: string,
    context?: JsonObject,
  ): StreamTranslator {
    return new ResponsesStreamTranslator(requestedModel, context, this.now);
  }

  /** `{"error":{"message","type"}}`, as the OpenAI face. */
  errorBody(_status: number, type: string, message: string, code?: string): unknown {
    return openaiErrorBody(type, message, code);
  }

  /** The upstream's status and message in the OpenAI error shape. */
  upstreamErrorBody(status: number, body: unknown): unknown {
    const info = readUpstreamError(status, body);
    return openaiErrorBody(info.type ?? "upstream_error", info.message);
  }

  /** Toward a node that speaks the Responses API itself (`responses: native`). */
  readonly native = new NativeResponsesFace();
}
