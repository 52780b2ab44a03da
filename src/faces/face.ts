/**
 * The contract between the proxy and a client API format ("face"). Every upstream call is one
 * OpenAI-compatible request; a face translates the client's request into it and the answer
 * back. The OpenAI face is the identity (bytes relayed unchanged). Translation lives in
 * `src/faces/` and nowhere else; relay, routing, admission and accounting are the proxy's.
 * Whatever differs per face (the upstream body, how a stream is relayed, whether answers pass
 * through, the error shapes) is a member of `Face`: the proxy knows no face by name.
 *
 * @module
 */

/** The client API formats. */
export type FaceName = "openai" | "anthropic" | "ollama" | "responses";

import type { JsonObject } from "../core/json.ts";

export type { JsonObject } from "../core/json.ts";

/** The statuses a face refuses a client body with. */
export type FaceErrorStatus = 400 | 404 | 413;

/** A request the face refuses before routing (bad shape, unsupported content). */
export class FaceError extends Error {
  /**
   * A refusal of the client's body, answered in the face's error shape.
   *
   * @param status the HTTP status the client gets (400 bad body, 404 a route the face does not
   * proxy, 413 too large)
   * @param message what was wrong with the body, naming the field
   * @param type the error type in the face's error body
   */
  constructor(
    readonly status: FaceErrorStatus,
    message: string,
    readonly type = "invalid_request_error",
  ) {
    super(message);
    this.name = "FaceError";
  }
}

/** A 400 for a field the body must have (`model: Field required`). */
export function fieldRequired(field: string): FaceError {
  return new FaceError(400, `${field}: Field required`);
}

/** A 400 for a field of the wrong kind (`messages: must be an array`). */
export function fieldMustBe(field: string, what: string): FaceError {
  return new FaceError(400, `${field}: must be ${what}`);
}

/** The client's `model`: a non-empty string, else a 400 naming it. */
export function requireModel(body: JsonObject): string {
  if (body.model === undefined || body.model === null) throw fieldRequired("model");
  if (typeof body.model !== "string" || body.model === "") {
    throw fieldMustBe("model", "a non-empty string");
  }
  return body.model;
}

/**
 * The client's `stream` flag: a JSON boolean, or absent / null for `absent`. Anything else
 * (`"true"`, `1`) is refused with a 400 naming `stream`: a lenient upstream would stream what
 * Skeid relays as a whole answer, and bill nothing (ADR 0017).
 */
export function streamFlag(body: JsonObject, absent: boolean): boolean {
  const v = body.stream;
  if (v === undefined || v === null) return absent;
  if (typeof v !== "boolean") {
    throw new FaceError(400, "stream: must be a JSON boolean (true or false)");
  }
  return v;
}

/** The upstream request a face made of the client's. */
export interface UpstreamRequest {
  /** Upstream path below the node's `/v1`: `/chat/completions`, `/completions`, `/embeddings`. */
  path: string;
  /** OpenAI-shaped body; `Face.upstreamBody` sets `model` to the served model before sending. */
  body: JsonObject;
  /** Whether the client asked for a stream. */
  stream: boolean;
  /** The model the client asked for (an alias, or a node model). */
  requestedModel: string;
  /**
   * What the face needs back when it translates the answer (e.g. the Anthropic request's
   * `stop_sequences`). The proxy hands it unchanged to `fromUpstream` / `streamTranslator`.
   */
  context?: JsonObject;
}

/** The request a face's own intake step (`Face.intake`) is for (an Exchange is one). */
export interface FaceRequest {
  /** The client-facing route. */
  readonly endpoint: string;
  /** The customer key id the request runs under. */
  readonly apiKeyId: string;
}

/** Keeps a face's finished answer before the client gets its end (a Responses `KeepTicket`). */
export interface ResponseTicket {
  /** Keeps the response; settles once it is written (never rejects). */
  keep(response: JsonObject | undefined): Promise<void>;
}

/** What a face's own intake step (`Face.intake`) made of a client body. */
export interface FaceIntake {
  /** The body to translate: the client's, or the step's rewrite of it. */
  readonly body: JsonObject;
  /**
   * Fields the face's answers echo back that `body` no longer shows (the Responses face's
   * `store` and `previous_response_id`); the proxy hands them unchanged to `toUpstream`.
   */
  readonly echo?: JsonObject;
  /** Keeps the finished answer before the client gets its end; absent: nothing is kept. */
  readonly ticket?: ResponseTicket;
}

/** How long an answer took, as the proxy measured it (Ollama reports it in nanoseconds). */
export interface AnswerTimings {
  /** Milliseconds from routing start to the end of the answer. */
  totalMs: number;
  /** Milliseconds from routing start to the first content byte (streams); absent when unknown. */
  ttftMs?: number;
}

/**
 * Turns an upstream OpenAI stream into the client's stream format, one parsed upstream chunk
 * at a time. Returns the text to send (possibly empty — then nothing is written).
 */
export interface StreamTranslator {
  /** Content type of the translated stream. */
  readonly contentType: string;
  /** One parsed upstream `data:` JSON object (a chat.completion.chunk). */
  chunk(chunk: JsonObject): string;
  /** Text sent while the upstream is silent for long (Anthropic `ping`); '' when none. */
  keepalive(): string;
  /**
   * The upstream ended (with or without `[DONE]`, finish_reason, usage): closing text.
   * `timings` feed the Ollama duration fields; other faces ignore them.
   */
  end(timings?: AnswerTimings): string;
  /** The upstream broke after the stream opened: closing text carrying the error. */
  fail(status: number, message: string): string;
  /** UTF-8 bytes of content translated so far (text and tool arguments). */
  readonly contentBytes: number;
  /** The last usage object the upstream reported, or undefined. */
  readonly usage: JsonObject | undefined;
  /** Tool calls seen so far (OpenAI shape `{id, function:{name, arguments}}`), for accounting. */
  readonly toolCalls: JsonObject[];
  /**
   * Relay modes `raw` and `strip` (the upstream's own frames go out): reads one chunk for the
   * accounting and says whether its frame goes to the client. Only the translators of faces
   * whose `relayMode` can be `raw` or `strip` have it.
   */
  pass?(chunk: JsonObject): boolean;
  /**
   * The whole Responses `response` object once the stream's terminal event is made (the response
   * store keeps it before the event goes out, ADR 0028); undefined for other faces.
   */
  readonly final?: JsonObject;
}

/**
 * How a streamed answer reaches the client: `raw`, the upstream's bytes unchanged; `strip`, the
 * upstream's frames minus those the translator's `pass` refuses (the usage-only chunk Skeid asked
 * for and the client did not, ADR 0014); `translate`, the translator's text.
 */
export type RelayMode = "raw" | "strip" | "translate";

/** A client API format. */
export interface Face {
  /** Which client API format this is (the usage event's `api_format`). */
  readonly name: FaceName;
  /**
   * Whether answers (non-streamed ones and upstream errors) reach the client as the upstream's
   * own status, headers and bytes (OpenAI, ADR 0012) rather than translated or reshaped.
   */
  readonly passesThrough: boolean;
  /**
   * The face toward a node that speaks this face's API itself (`responses: native` on the node,
   * ADR 0028): the request goes as it came, the answer passes through. Absent: none.
   */
  readonly native?: Face;
  /**
   * The face's own step on the parsed client body, before `toUpstream` (the Responses face
   * continues a kept conversation here, ADR 0028); it may refuse (a `Refusal`). Absent: the body
   * goes to `toUpstream` as it came.
   */
  intake?(req: FaceRequest, body: JsonObject): FaceIntake | Promise<FaceIntake>;
  /**
   * Client body → upstream request; `echo` is `FaceIntake.echo`. Throws FaceError for a body
   * the face cannot carry.
   */
  toUpstream(endpoint: string, body: JsonObject, echo?: JsonObject): UpstreamRequest;
  /**
   * The body sent upstream for `served` (the served model): `raw`, the client's bytes, when the
   * face can send them unchanged, else `upstream.body` as JSON with the served model set.
   */
  upstreamBody(
    upstream: UpstreamRequest,
    served: string,
    raw: Uint8Array<ArrayBuffer> | undefined,
  ): Uint8Array<ArrayBuffer> | string;
  /** How a streamed answer to `upstream` reaches the client (see RelayMode). */
  relayMode(upstream: UpstreamRequest): RelayMode;
  /**
   * Upstream JSON answer (status < 400) → client JSON answer. `context` is
   * `UpstreamRequest.context`; `timings` feed the Ollama duration fields.
   */
  fromUpstream(
    endpoint: string,
    answer: JsonObject,
    requestedModel: string,
    context?: JsonObject,
    timings?: AnswerTimings,
  ): JsonObject;
  /** A translator for one streamed answer; `context` is `UpstreamRequest.context`. */
  streamTranslator(
    endpoint: string,
    requestedModel: string,
    context?: JsonObject,
  ): StreamTranslator;
  /**
   * The face's error body for a status (type per the face's own table); `code` is carried where
   * the face's shape has one (OpenAI `error.code`).
   */
  errorBody(status: number, type: string, message: string, code?: string): unknown;
  /**
   * The client's error body for an upstream error answer (status >= 400, parsed body or
   * undefined). OpenAI passes the body through unchanged; the others carry the upstream status
   * and message in their own shape.
   */
  upstreamErrorBody(status: number, body: unknown): unknown;
}

/** The translated upstream body as JSON, `model` set to the served model. */
export function servedBody(upstream: UpstreamRequest, served: string): string {
  upstream.body.model = served;
  return JSON.stringify(upstream.body);
}

/** Construction options of a face. */
export interface FaceOptions {
  /** Clock, epoch ms, for `created_at` stamps and fallback ids (tests inject one). Default `Date.now`. */
  now?: () => number;
}
