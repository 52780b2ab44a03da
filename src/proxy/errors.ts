/**
 * Face-shaped error answers of the gateway itself (refusals before forwarding, failover that ran
 * out). Every one carries the request id; none carries a secret.
 *
 * @module
 */
import type { Face } from "../faces/face.ts";
import { isJsonObject } from "../json.ts";

/** A JSON answer with the request id (and the node, when one served it). */
export function jsonResponse(
  status: number,
  body: unknown,
  requestId: string,
  nodeId?: string,
): Response {
  const headers = new Headers({ "content-type": "application/json", "x-request-id": requestId });
  if (nodeId !== undefined) headers.set("x-skeid-node", nodeId);
  return new Response(JSON.stringify(body), { status, headers });
}

/** The face's error body for `status`/`type`/`message`, as a response. */
export function errorResponse(
  face: Face,
  status: number,
  type: string,
  message: string,
  requestId: string,
  nodeId?: string,
): Response {
  return jsonResponse(status, face.errorBody(status, type, message), requestId, nodeId);
}

/**
 * Every status a request can be refused with before it is forwarded (no usage event is written
 * for any of them, ADR 0016): 400 bad body, 401 unknown key, 403 not permitted, 404 route the face
 * does not proxy, 413 body too large, 429 no capacity, 503 no eligible node (or no upstream key),
 * 508 loop detected.
 */
export type RefusalStatus = 400 | 401 | 403 | 404 | 413 | 429 | 503 | 508;

/** The refusal as the face's error response, with the request id (and its `code`, if any). */
export function refusalResponse(face: Face, refusal: Refusal, requestId: string): Response {
  const body = face.errorBody(refusal.status, refusal.type, refusal.message);
  if (refusal.code !== undefined && isJsonObject(body) && isJsonObject(body.error)) {
    body.error.code = refusal.code;
  }
  return jsonResponse(refusal.status, body, requestId);
}

/** A request the gateway refuses before routing or forwarding. */
export class Refusal extends Error {
  /**
   * A refusal the client gets as the face's error body.
   *
   * @param status the HTTP status the client gets
   * @param type the error type in the face's error body (`invalid_request_error`,
   * `permission_error`, ...)
   * @param message what was wrong, shown to the client (never a secret)
   */
  constructor(
    readonly status: RefusalStatus,
    readonly type: string,
    message: string,
    /** Short reason for metrics and logs (`body_too_large`, `no_capacity`, ...). */
    readonly reason: string,
    /** The error body's `code`, when the face's shape has one (OpenAI's). */
    readonly code?: string,
  ) {
    super(message);
    this.name = "Refusal";
  }
}
