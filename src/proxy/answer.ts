/**
 * The answer: what the client gets for a whole (non-streamed) upstream answer — passed through or
 * translated by its face — and for an upstream error, passed through or reshaped (ADR 0012). Each
 * returns what it decided as an `Answered` record (the response and what the usage event needs:
 * status, answer body, error); it writes nothing on the request it answers.
 *
 * @module
 */
import type { Face } from "../faces/face.ts";
import { readUpstreamError } from "../faces/errors.ts";
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";
import { errorResponse, jsonResponse } from "./errors.ts";
import { relayedResponse } from "./upstream.ts";
import type { UsageOutcome } from "./usage_facts.ts";

/** The request an answer is for (an Exchange): read only. */
export interface AnswerTarget {
  /** The client's face: it decides between passing through and translating. */
  readonly face: Face;
  /** The client-facing endpoint path. */
  readonly endpoint: string;
  /** The client's model (translated answers name it). */
  readonly requestedModel: string;
  /** Sent back as `x-request-id`. */
  readonly requestId: string;
  /** `UpstreamRequest.context`, handed to the face's `fromUpstream`. */
  readonly faceContext: JsonObject | undefined;
}

/**
 * What an answer step decided: the client's response, and the usage event's facts of it (the
 * record is those facts, so the event is built from it without another object).
 */
export interface Answered extends UsageOutcome {
  /** The client's response. */
  readonly reply: Response;
  /** The status the client got. */
  readonly status: number;
  /** The upstream's answer when it was a JSON object (usage is read off it). */
  readonly response: JsonObject | undefined;
  /** The translated answer the client got (a face that does not pass through). */
  readonly clientBody: JsonObject | undefined;
  /** Tool calls of an answer that is not an error (`choices[0].message.tool_calls`). */
  readonly toolCalls: unknown[] | undefined;
  /** The usage event's `error_type` for an answer that is an error, else undefined. */
  readonly errorType: string | undefined;
  /** The usage event's `error_message` for an answer that is an error, else undefined. */
  readonly errorMessage: string | undefined;
  /** Arrival to the answer, ms (`totalMs`); undefined when the caller did not say. */
  readonly durationMs: number | undefined;
}

/** An upstream answer's status and headers (an `UpstreamAnswer` is one). */
export interface AnsweredHead {
  /** The upstream's status. */
  readonly status: number;
  /** Header pairs as `Headers` iteration yields them. */
  pairs(): readonly (readonly [string, string])[];
}

const decoder = new TextDecoder();

/** An upstream body's JSON value; undefined when empty or not JSON. */
export function parseAnswer(bytes: Uint8Array): unknown {
  return bytes.byteLength > 0 ? parseJson(decoder.decode(bytes)) : undefined;
}

/**
 * The client's answer to a whole upstream answer (any status that does not fail over) from
 * `nodeId`; `totalMs` feeds the face's timing fields. A face that passes through relays the
 * upstream's status, headers and bytes; the others translate a JSON object answer, and answer
 * 502 when it is not one.
 */
export function answerResponse(
  t: AnswerTarget,
  head: AnsweredHead,
  bytes: Uint8Array<ArrayBuffer>,
  nodeId: string,
  totalMs: number,
): Answered {
  const status = head.status;
  const parsed = parseAnswer(bytes);
  if (status >= 400) return upstreamErrorResponse(t, head, bytes, parsed, nodeId, totalMs);
  const answer = isJsonObject(parsed) ? parsed : undefined;
  const face = t.face;
  if (face.passesThrough) {
    const reply = passedThrough(t, head, bytes, nodeId);
    return answered(reply, status, answer, undefined, undefined, totalMs);
  }
  if (answer === undefined) {
    // A translated face cannot carry an answer that is not a JSON object.
    const error = "Upstream answer is not a JSON object";
    const message = `Upstream error: ${error}`;
    const reply = errorResponse(face, 502, "upstream_error", message, t.requestId, nodeId);
    return answered(reply, 502, undefined, undefined, error, totalMs);
  }
  const client = face.fromUpstream(t.endpoint, answer, t.requestedModel, t.faceContext, {
    totalMs,
  });
  const reply = jsonResponse(status, client, t.requestId, nodeId);
  return answered(reply, status, answer, client, undefined, totalMs);
}

/**
 * The client's answer to an upstream error answer (status >= 400, `parsed` its JSON value or
 * undefined): passed through by a face that passes through, else reshaped by the face with the
 * upstream's status and message (ADR 0012), with the error for the usage event.
 */
export function upstreamErrorResponse(
  t: AnswerTarget,
  head: AnsweredHead,
  bytes: Uint8Array<ArrayBuffer>,
  parsed: unknown,
  nodeId: string,
  totalMs?: number,
): Answered {
  const status = head.status;
  const error = readUpstreamError(status, parsed ?? decoder.decode(bytes)).message;
  const reply = t.face.passesThrough
    ? passedThrough(t, head, bytes, nodeId)
    : jsonResponse(status, t.face.upstreamErrorBody(status, parsed), t.requestId, nodeId);
  const answer = isJsonObject(parsed) ? parsed : undefined;
  return answered(reply, status, answer, undefined, error, totalMs);
}

/**
 * The record of an answer: an error (`errorMessage` set) is an `upstream_error`; the tool calls
 * are those of an answer below 400.
 */
function answered(
  reply: Response,
  status: number,
  response: JsonObject | undefined,
  clientBody: JsonObject | undefined,
  errorMessage: string | undefined,
  durationMs: number | undefined,
): Answered {
  return {
    reply,
    status,
    response,
    clientBody,
    toolCalls: status < 400 ? toolCallsOf(response) : undefined,
    errorType: errorMessage === undefined ? undefined : "upstream_error",
    errorMessage,
    durationMs,
  };
}

/** The upstream's status, headers and bytes as they came, plus the node and the request id. */
function passedThrough(
  t: AnswerTarget,
  head: AnsweredHead,
  bytes: Uint8Array<ArrayBuffer>,
  nodeId: string,
): Response {
  const body = bytes.byteLength > 0 ? bytes : null;
  return relayedResponse(head.status, body, head.pairs(), nodeId, t.requestId);
}

/**
 * The client's answer when an attempt failed without an upstream answer to pass on (`reason`:
 * connection refused, timeout, unreadable body): 502 in the face's error shape.
 */
export function transportFailureResponse(
  t: AnswerTarget,
  reason: string,
  nodeId: string,
): Answered {
  const error = `Upstream error: ${reason}`;
  const reply = errorResponse(t.face, 502, "upstream_error", error, t.requestId, nodeId);
  return answered(reply, 502, undefined, undefined, error, undefined);
}

/** Tool calls of a non-streamed chat answer (`choices[0].message.tool_calls`). */
export function toolCallsOf(answer: JsonObject | undefined): unknown[] | undefined {
  const choices = answer?.choices;
  if (!Array.isArray(choices) || choices.length === 0) return undefined;
  const first = choices[0];
  if (!isJsonObject(first)) return undefined;
  const message = first.message;
  if (!isJsonObject(message)) return undefined;
  const calls = message.tool_calls;
  return Array.isArray(calls) ? calls : undefined;
}
