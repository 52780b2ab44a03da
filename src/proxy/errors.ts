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
  code?: string,
): Response {
  return jsonResponse(status, face.errorBody(status, type, message, code), requestId, nodeId);
}

/**
 * Every status a request can be refused with before it is forwarded (no usage event is written
 * for any of them, ADR 0016): 400 bad body, 401 unknown key, 403 not permitted, 404 route the face
 * does not proxy, 408 body stalled past the body timeout, 413 body too large, 429 no capacity, 503
 * no eligible node (or no upstream key), 508 loop detected.
 */
export type RefusalStatus = 400 | 401 | 403 | 404 | 408 | 413 | 429 | 503 | 508;

/** Refusal reasons an OpenAI-shaped error also names as `error.code`, for clients to branch on. */
const CODED_REASONS: ReadonlySet<string> = new Set(["key_queue_full"]);

/** The refusal as the face's error response, with the request id. */
export function refusalResponse(face: Face, refusal: Refusal, requestId: string): Response {
  const { status, type, message, headers } = refusal;
  const code = refusal.code ?? (CODED_REASONS.has(refusal.reason) ? refusal.reason : undefined);
  const res = errorResponse(face, status, type, message, requestId, undefined, code);
  if (headers) { for (const name in headers) res.headers.set(name, headers[name]); }
  return res;
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
    /** The error body's `code` where the face has one (OpenAI: `key_rate_limited`). */
    readonly code?: string,
    /** Headers of the refusal (`Retry-After`, `x-ratelimit-*`). */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
    this.name = "Refusal";
  }
}

/** 403: the customer key's policy does not permit the requested model. */
export function notPermitted(model: string, reason: string): Refusal {
  return new Refusal(
    403,
    "permission_error",
    `Model '${model}' is not available for this key`,
    reason || "model_not_permitted",
  );
}

/** 503: every candidate named a key source that resolved nothing (ADR 0013); nothing was sent. */
export function keyUnavailable(model: string): Refusal {
  return new Refusal(
    503,
    "upstream_key_unavailable",
    `No upstream key available for model '${model}'`,
    "upstream_key_unavailable",
  );
}
