/**
 * The OpenAI face: the identity. Bodies go upstream as the client's bytes when nothing changes
 * (else with the served model and, for streams, `stream_options`), answers and upstream errors
 * come back as the upstream sent them, and streams are relayed raw or with the usage-only chunk
 * stripped (ADR 0014). Its stream translator does the accounting of those streams (`pass`), so
 * the proxy counts every face alike.
 *
 * @module
 */
import type {
  AnswerTimings,
  Face,
  JsonObject,
  RelayMode,
  StreamTranslator,
  UpstreamRequest,
} from "./face.ts";
import { FaceError, fieldMustBe, fieldRequired, requireModel, streamFlag } from "./face.ts";
import { openaiErrorBody, readUpstreamError } from "./errors.ts";
import { isJsonObject, jsonKind, parseJson } from "../core/json.ts";
import { replaceString, topLevelModelSpan } from "../json_scan.ts";
import { StreamAccounting, StreamState } from "./stream_state.ts";
import type { ListedModel } from "../core/types.ts";

/** Client route → upstream path below the node's `/v1`. */
const PATHS: Readonly<Record<string, string>> = {
  "/v1/chat/completions": "/chat/completions",
  "/v1/completions": "/completions",
  "/v1/embeddings": "/embeddings",
};

/**
 * Refuses (400, naming the place) a chat body whose `messages` no model server would take: absent,
 * not an array, or with an entry that is not an object with a string `role`. Checked here
 * rather than left to the node, so a malformed request takes no slot, is not billed as the
 * node's error, and gets the same answer from every node (the fake model and some engines
 * answer such a body as if it were empty). One pass over the entries, no deeper.
 */
function checkMessages(messages: unknown): void {
  if (messages === undefined || messages === null) throw fieldRequired("messages");
  if (!Array.isArray(messages)) {
    throw fieldMustBe("messages", `an array of message objects, got ${jsonKind(messages)}`);
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isJsonObject(m)) {
      throw fieldMustBe(`messages[${i}]`, `a message object, got ${jsonKind(m)}`);
    }
    if (typeof m.role !== "string" || m.role === "") {
      throw fieldMustBe(`messages[${i}].role`, "a non-empty string");
    }
  }
}

/** The routes this face proxies. */
export const OPENAI_ENDPOINTS = Object.keys(PATHS);

/** The `/v1/models` answer: every model once, in the order given, `created` in epoch seconds. */
export function modelsBody(models: readonly ListedModel[], nowMs: number): JsonObject {
  const created = Math.floor(nowMs / 1000);
  return {
    object: "list",
    data: models.map((m) => ({ id: m.model, object: "model", created, owned_by: "skeid" })),
  };
}

/**
 * Whether Skeid asks the upstream for stream usage the client did not ask for (ADR 0014): a
 * streamed chat or completions request without `stream_options.include_usage: true`. The
 * usage-only chunk is then stripped again (relay mode `strip`).
 */
function stripsUsage(upstream: UpstreamRequest): boolean {
  return upstream.stream && upstream.path !== "/embeddings" &&
    upstream.context?.include_usage !== true;
}

/**
 * Accounting over an OpenAI stream. `pass()` reads a chunk and refuses only the usage-only chunk
 * (`choices: []`) of a client that did not ask for usage (ADR 0014): the relay sends the frames
 * it passes as the upstream wrote them. `chunk()` re-frames a passed chunk as
 * `data: <JSON>\n\n`; `end()` writes `data: [DONE]`.
 */
export class OpenAIStreamTranslator extends StreamAccounting implements StreamTranslator {
  /** Content type of the stream. */
  readonly contentType = "text/event-stream";
  #closed = false;

  /** `clientAsksUsage`: the client's own `stream_options.include_usage`. */
  constructor(readonly clientAsksUsage: boolean) {
    super(new StreamState("call_skeid_"));
  }

  /** Reads one chunk; false for the usage-only chunk when the client did not ask for usage. */
  pass(chunk: JsonObject): boolean {
    this.state.read(chunk);
    if (this.clientAsksUsage) return true;
    const choices = chunk.choices;
    return !(Array.isArray(choices) && choices.length === 0 && isJsonObject(chunk.usage));
  }

  /** Reads one chunk; returns its frame ('' for a usage-only chunk the client did not ask for). */
  chunk(chunk: JsonObject): string {
    if (this.#closed) return "";
    return this.pass(chunk) ? `data: ${JSON.stringify(chunk)}\n\n` : "";
  }

  /** Nothing: OpenAI clients get the upstream's bytes only. */
  keepalive(): string {
    return "";
  }

  /** `data: [DONE]`. */
  end(_timings?: AnswerTimings): string {
    if (this.#closed) return "";
    this.#closed = true;
    return "data: [DONE]\n\n";
  }

  /** A last `data:` frame with the OpenAI error body. */
  fail(_status: number, message: string): string {
    if (this.#closed) return "";
    this.#closed = true;
    return `data: ${JSON.stringify(openaiErrorBody("upstream_error", message))}\n\n`;
  }
}

const utf8 = new TextDecoder();

/** `raw` with its top-level `model` (`asked`) set to `served`, or undefined when not found as such. */
function withModel(
  raw: Uint8Array<ArrayBuffer>,
  asked: string,
  served: string,
): Uint8Array<ArrayBuffer> | undefined {
  const span = topLevelModelSpan(raw);
  if (span === undefined) return undefined;
  if (parseJson(utf8.decode(raw.subarray(span.start, span.end))) !== asked) return undefined;
  return replaceString(raw, span, served);
}

/** The OpenAI face. */
export class OpenAIFace implements Face {
  /** The face's name. */
  readonly name = "openai" as const;
  /** Answers and upstream errors go to the client as the upstream sent them (ADR 0012). */
  readonly passesThrough = true;

  /** The body as is, to the matching upstream path; `stream` = `body.stream === true`. */
  toUpstream(endpoint: string, body: JsonObject): UpstreamRequest {
    const path = PATHS[endpoint];
    if (!path) {
      throw new FaceError(404, `${endpoint} is not proxied by the openai face`, "not_found_error");
    }
    const model = requireModel(body);
    const stream = streamFlag(body, false);
    if (path === "/chat/completions") checkMessages(body.messages);
    else if (path === "/embeddings" && (body.input === undefined || body.input === null)) {
      throw fieldRequired("input");
    }
    const req: UpstreamRequest = { path, body, stream, requestedModel: model };
    if (stream) {
      const options = body.stream_options;
      req.context = { include_usage: isJsonObject(options) && options.include_usage === true };
    }
    return req;
  }

  /**
   * The client's bytes when nothing changes (the served model is the one asked for, no usage to
   * ask for); else the body with the served model and, when the client did not ask for stream
   * usage, `stream_options.include_usage: true` (ADR 0014).
   */
  upstreamBody(
    upstream: UpstreamRequest,
    served: string,
    raw: Uint8Array<ArrayBuffer> | undefined,
  ): Uint8Array<ArrayBuffer> | string {
    const body = upstream.body;
    const strip = stripsUsage(upstream);
    if (body.model === served && !strip && raw !== undefined) return raw;
    if (!strip && raw !== undefined) {
      // Only the model changes (an alias tier): set it in the client's bytes instead of
      // serializing the whole body again (seconds for a large, deep body).
      const spliced = withModel(raw, upstream.requestedModel, served);
      if (spliced !== undefined) {
        body.model = served;
        return spliced;
      }
    }
    body.model = served;
    if (strip) {
      const options = body.stream_options;
      body.stream_options = isJsonObject(options)
        ? { ...options, include_usage: true }
        : { include_usage: true };
    }
    return JSON.stringify(body);
  }

  /** `strip` when Skeid asked for usage the client did not (ADR 0014), else `raw`. */
  relayMode(upstream: UpstreamRequest): RelayMode {
    return stripsUsage(upstream) ? "strip" : "raw";
  }

  /** The answer as is. */
  fromUpstream(_endpoint: string, answer: JsonObject, _requestedModel: string): JsonObject {
    return answer;
  }

  /** Accounting translator (see OpenAIStreamTranslator). */
  streamTranslator(
    _endpoint: string,
    _requestedModel: string,
    context?: JsonObject,
  ): StreamTranslator {
    return new OpenAIStreamTranslator(context?.include_usage === true);
  }

  /** `{"error":{"message","type"}}`. */
  errorBody(_status: number, type: string, message: string, code?: string): unknown {
    return openaiErrorBody(type, message, code);
  }

  /** Passed through unchanged (ADR 0012); a body that is not JSON gets the OpenAI shape. */
  upstreamErrorBody(status: number, body: unknown): unknown {
    if (isJsonObject(body)) return body;
    return openaiErrorBody("upstream_error", readUpstreamError(status, body).message);
  }
}
