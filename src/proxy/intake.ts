/**
 * The intake: what the gateway checks of a client request before it is routed — the request id,
 * the hop count (loop guard), the customer key id and the known-key rule, the body limit, the
 * JSON body and the face's upstream request of it. Each check refuses with a `Refusal` the client gets in its face's error shape.
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";
import type { RoutingSettings } from "../core/types.ts";
import { type Face, FaceError, type UpstreamRequest } from "../faces/face.ts";
import { isJsonObject, type JsonObject, parseJson } from "../json.ts";
import { jsonDepth, MAX_JSON_DEPTH } from "../json_scan.ts";
import { Refusal } from "./errors.ts";
import { ANONYMOUS, type KeyIdCache, requestKeyId } from "./identity.ts";
import { hopsOf, MAX_HOPS } from "./upstream.ts";

/** What the intake needs of the gateway (a `ProxyContext` satisfies it). */
export interface IntakeContext {
  /** The routing settings and the known customer key ids. */
  readonly skeid: {
    readonly routing: Readonly<RoutingSettings>;
    isKnownKey(apiKeyId: string): boolean;
  };
  /** Customer key → customer key id. */
  readonly keyIds: KeyIdCache;
}

/** Longest `x-request-id` a client may give (a longer one is replaced). */
const MAX_REQUEST_ID = 200;

/**
 * The request id (ADR 0016): the client's `x-request-id` when it has 1–200 characters, else a
 * generated `req_<ms>_<n>` (`nowMs`: the arrival time).
 */
export function requestIdOf(headers: Headers, nowMs: number): string {
  const given = headers.get("x-request-id");
  return given !== null && given.length > 0 && given.length <= MAX_REQUEST_ID
    ? given
    : `req_${nowMs}_${Math.floor(Math.random() * 1_000_000)}`;
}

/**
 * The hop count this request goes upstream with (one more than it arrived with); a refusal (508)
 * when it passed `MAX_HOPS` gateways already: a node points back at a gateway.
 */
export function nextHop(headers: Headers): number {
  const hops = hopsOf(headers);
  if (hops >= MAX_HOPS) {
    throw new Refusal(
      508,
      "loop_detected",
      `Request passed ${hops} Skeid gateways: a node points back at a gateway`,
      "loop_detected",
    );
  }
  return hops + 1;
}

/**
 * The customer key id a request is billed and routed as (`anonymous` without a customer key),
 * under the known-key rule (ADR 0005): with `routing.require_known_keys` a request without a
 * customer key, or with one no config names, is refused (401). Synchronous when the key's id is
 * cached; a promise only while a new key's id is derived.
 */
export function customerKeyId(ctx: IntakeContext, headers: Headers): string | Promise<string> {
  const routing = ctx.skeid.routing;
  const required = routing.require_known_keys;
  const id = requestKeyId(headers, routing.trust_key_id_header, ctx.keyIds);
  if (id instanceof Promise) return id.then((derived) => knownKey(ctx, derived, required));
  return knownKey(ctx, id, required);
}

/** The known-key rule on a customer key id (undefined: none presented). */
function knownKey(ctx: IntakeContext, id: string | undefined, required: boolean): string {
  if (required && (id === undefined || !ctx.skeid.isKnownKey(id))) {
    throw new Refusal(
      401,
      "authentication_error",
      id === undefined ? "An API key is required" : "Unknown API key",
      "unknown_key",
    );
  }
  return id ?? ANONYMOUS;
}

/**
 * The request body's bytes, at most `limit`: a declared `Content-Length` over it is refused at
 * once (413), a chunked body as soon as it passes it.
 */
export async function readBody(req: Request, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  if (declared !== null) {
    const n = Number(declared);
    if (Number.isFinite(n) && n > limit) throw bodyTooLarge(limit);
  }
  if (declared === null && req.body !== null) return await readLimited(req.body, limit);
  const bytes = new Uint8Array(await req.arrayBuffer());
  if (bytes.byteLength > limit) throw bodyTooLarge(limit);
  return bytes;
}

const decoder = new TextDecoder();

/**
 * The body as a JSON object; a refusal (400) for anything else, and before any parsing for a body
 * nested deeper than `MAX_JSON_DEPTH` (parsing and serializing such a body would hold the event
 * loop for seconds).
 */
export function jsonBody(bytes: Uint8Array): JsonObject {
  if (jsonDepth(bytes) > MAX_JSON_DEPTH) {
    throw new Refusal(
      400,
      "invalid_request_error",
      `JSON body nested deeper than ${MAX_JSON_DEPTH} levels (limit ${MAX_JSON_DEPTH})`,
      "json_too_deep",
    );
  }
  const parsed = parseJson(decoder.decode(bytes));
  if (!isJsonObject(parsed)) {
    throw new Refusal(400, "invalid_request_error", "Invalid JSON body", "invalid_json");
  }
  return parsed;
}

/** The face's upstream request of the body; a body the face cannot carry is refused in its shape. */
export function upstreamRequest(face: Face, endpoint: string, body: JsonObject): UpstreamRequest {
  try {
    return face.toUpstream(endpoint, body);
  } catch (err) {
    if (err instanceof FaceError) {
      throw new Refusal(err.status, err.type, err.message, "bad_request");
    }
    throw err;
  }
}

function bodyTooLarge(limit: number): Refusal {
  return new Refusal(
    413,
    "invalid_request_error",
    `Request body too large (limit ${limit} bytes)`,
    "body_too_large",
  );
}

/** Reads a chunked body, refusing it (413) as soon as it passes `limit`. */
async function readLimited(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw bodyTooLarge(limit);
    }
    parts.push(value);
  }
  return concatBytes(parts, total);
}
