/**
 * The Responses face toward a node that speaks the Responses API itself (`responses: native` on
 * the node, ADR 0028): the client's request goes to the node's `/v1/responses` as it came (the
 * served model written in), the answer and its stream come back unchanged, and the usage is read
 * from the answer's `usage` or the stream's terminal event.
 *
 * @module
 */
import type {
  Face,
  JsonObject,
  RelayMode,
  StreamTranslator,
  UpstreamRequest,
} from "../faces/face.ts";
import { servedBody } from "../faces/face.ts";
import { openaiErrorBody } from "../faces/errors.ts";
import { obj, str } from "../faces/json_narrow.ts";
import { sseFrame } from "../faces/sse_frame.ts";
import { utf8Length } from "../faces/utf8.ts";

/** The Responses face for native nodes: everything passes through. */
export class NativeResponsesFace implements Face {
  /** The usage event's `api_format` stays `responses`. */
  readonly name = "responses" as const;
  /** The node's answers and errors reach the client unchanged. */
  readonly passesThrough = true;

  /** The client's body (a copy: the served model is written into it) for `/responses`. */
  toUpstream(_endpoint: string, body: JsonObject): UpstreamRequest {
    return {
      path: "/responses",
      body: { ...body },
      stream: body.stream === true,
      requestedModel: body.model as string,
    };
  }

  /** The body with the served model. */
  upstreamBody(upstream: UpstreamRequest, served: string): string {
    return servedBody(upstream, served);
  }

  /** The node's stream goes out as it came. */
  relayMode(): RelayMode {
    return "raw";
  }

  /** Not called (answers pass through); the answer itself. */
  fromUpstream(_endpoint: string, answer: JsonObject): JsonObject {
    return answer;
  }

  /** Reads the node's events for the accounting. */
  streamTranslator(): StreamTranslator {
    return new NativeResponsesAccounting();
  }

  /** The OpenAI error shape. */
  errorBody(_status: number, type: string, message: string): unknown {
    return openaiErrorBody(type, message);
  }

  /** Not called (errors pass through); the body itself. */
  upstreamErrorBody(_status: number, body: unknown): unknown {
    return body;
  }
}

/** Reads a native Responses stream: content bytes, tool calls, and the terminal event's usage. */
class NativeResponsesAccounting implements StreamTranslator {
  readonly contentType = "text/event-stream";
  contentBytes = 0;
  usage: JsonObject | undefined;
  toolCalls: JsonObject[] = [];
  final: JsonObject | undefined;
  #seq = -1;
  #id = "";

  pass(event: JsonObject): boolean {
    if (typeof event.sequence_number === "number") this.#seq = event.sequence_number;
    const type = event.type;
    if (
      type === "response.output_text.delta" || type === "response.function_call_arguments.delta"
    ) {
      this.contentBytes += utf8Length(str(event.delta) ?? "");
    }
    const response = obj(event.response);
    if (response === undefined) return true;
    this.#id = str(response.id) ?? this.#id;
    if (type === "response.completed" || type === "response.incomplete") {
      this.final = response;
      this.usage = obj(response.usage);
      const output = Array.isArray(response.output) ? response.output : [];
      this.toolCalls = output.map(obj).filter((o) => o?.type === "function_call").map((o) => ({
        id: str(o!.call_id) ?? "",
        function: { name: str(o!.name) ?? "", arguments: str(o!.arguments) ?? "" },
      }));
    }
    return true;
  }

  chunk(): string {
    return "";
  }

  keepalive(): string {
    return "";
  }

  end(): string {
    return "";
  }

  /** The node's stream broke: `response.failed`, so the client never sees a stream just stop. */
  fail(_status: number, message: string): string {
    const type = "response.failed";
    return sseFrame(type, {
      type,
      sequence_number: this.#seq + 1,
      response: {
        id: this.#id,
        object: "response",
        status: "failed",
        error: { code: "server_error", message },
        output: [],
        usage: this.usage ?? null,
      },
    });
  }
}
