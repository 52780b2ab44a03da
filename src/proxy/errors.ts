/**
 * Face-shaped error answers of the gateway itself (refusals before forwarding, failover that ran
 * out). Every one carries the request id; none carries a secret.
 *
 * @module
 */
import type { Face } from "../faces/face.ts";

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

/** A request the gateway refuses before routing or forwarding. */
export class Refusal extends Error {
  /**
   * A refusal the client gets as the face's error body; `counted` avoids counting it twice.
   *
   * @param status the HTTP status the client gets
   * @param type the error type in the face's error body (`invalid_request_error`,
   * `permission_error`, ...)
   * @param message what was wrong, shown to the client (never a secret)
   */
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    /** Short reason for metrics (`body_too_large`, `invalid_json`, ...). */
    readonly reason: string,
    /** Already counted by a more specific metric (saturation, no node). */
    readonly counted = false,
  ) {
    super(message);
    this.name = "Refusal";
  }
}
