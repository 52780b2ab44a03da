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
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";
import { type JsonScan, MAX_JSON_DEPTH, scanJson } from "../json_scan.ts";
import type { BufferBudget } from "./buffer_budget.ts";
import { Refusal } from "./errors.ts";
import { ANONYMOUS, type KeyIdCache, requestKeyId } from "./identity.ts";
import { hopsOf, MAX_HOPS } from "./upstream.ts";
import type { IdentityJudge } from "../customer_keys/identity_judge.ts";

/** What the intake needs of the gateway (a `ProxyContext` satisfies it). */
export interface IntakeContext {
  /** The routing settings and the known customer key ids. */
  readonly skeid: {
    readonly routing: Readonly<RoutingSettings>;
    isKnownKey(apiKeyId: string): boolean;
  };
  /** Customer key → customer key id. */
  readonly keyIds: KeyIdCache;
  /** The cap on request-body bytes buffered at once (`SKEID_MAX_BUFFERED_BYTES`); none when absent. */
  readonly buffered?: BufferBudget;
  /** Issued keys and JWTs (ADR 0029): judged before the customer key id path; absent: none. */
  readonly identities?: IdentityJudge;
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
  // An issued key or a JWT authenticates: known by that, never an opaque key (ADR 0029).
  const judged = ctx.identities?.judge(headers, routing.trust_key_id_header);
  if (judged !== undefined) return judged;
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
 * once (413), a chunked body as soon as it passes it. With a `budget` the bytes are reserved in it
 * before they are read (a declared length whole, a chunked body as it arrives) and refused (503,
 * `Retry-After`) past it; the caller gives back `byteLength` of the answer once it lets the body
 * go. A large declared body is read into one buffer of its size (no second copy).
 */
export async function readBody(
  req: Request,
  limit: number,
  budget?: BufferBudget,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  const n = declared === null ? NaN : Number(declared);
  if (Number.isFinite(n) && n > limit) throw bodyTooLarge(limit);
  if (req.body === null) return new Uint8Array(0);
  if (!Number.isSafeInteger(n) || n < 0) return await readLimited(req.body, limit, budget);
  reserve(budget, n);
  try {
    return n <= WHOLE_READ_BYTES ? await readWhole(req, n) : await readDeclared(req.body, n);
  } catch (err) {
    budget?.release(n);
    throw err;
  }
}

/** Reserves `n` bytes in `budget`, or refuses: 413 when `n` alone passes it, else 503. */
function reserve(budget: BufferBudget | undefined, n: number): void {
  if (budget === undefined || budget.reserve(n)) return;
  if (n > budget.limit) {
    throw new Refusal(
      413,
      "invalid_request_error",
      `Request body too large (SKEID_MAX_BUFFERED_BYTES is ${budget.limit} bytes)`,
      "body_too_large",
    );
  }
  throw new Refusal(
    503,
    "overloaded_error",
    `Too many request bytes buffered at once (SKEID_MAX_BUFFERED_BYTES is ${budget.limit} bytes); retry shortly`,
    "buffered_bytes_full",
    undefined,
    { "retry-after": String(BUSY_RETRY_AFTER_S) },
  );
}

/** Seconds a client refused for the buffered-bytes cap is told to wait. */
const BUSY_RETRY_AFTER_S = 1;

/**
 * Declared bodies up to this size are read with `Request.bytes()`: the runtime hands over a body
 * that came with the head in one step, where a stream reader costs a `ReadableStream`, a reader
 * and two reads (about 5 µs of CPU a request). Larger ones keep the one-buffer read (`bytes()`
 * would hold the chunks and their copy at once).
 */
const WHOLE_READ_BYTES = 64 * 1024;

/** Reads a small body of a declared `n` bytes at once; the same checks as `readDeclared`. */
async function readWhole(req: Request, n: number): Promise<Uint8Array<ArrayBuffer>> {
  const out = await req.bytes();
  if (out.byteLength !== n) throw contentLengthMismatch(out.byteLength > n);
  return out;
}

/** A body that does not match its `Content-Length` (400 `bad_body`). */
function contentLengthMismatch(longer: boolean): Refusal {
  return new Refusal(
    400,
    "invalid_request_error",
    `Request body ${longer ? "longer" : "shorter"} than its Content-Length`,
    "bad_body",
  );
}

/** Reads a body of a declared `n` bytes into one buffer of that size. */
async function readDeclared(
  body: ReadableStream<Uint8Array>,
  n: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const out = new Uint8Array(n);
  const reader = body.getReader();
  let total = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (total + value.byteLength > n) {
      await reader.cancel().catch(() => {});
      throw contentLengthMismatch(true);
    }
    out.set(value, total);
    total += value.byteLength;
  }
  if (total !== n) throw contentLengthMismatch(false);
  return out;
}

const decoder = new TextDecoder();

/**
 * The body as a JSON object; a refusal (400) for anything else, and before any parsing for a body
 * nested deeper than `MAX_JSON_DEPTH` (parsing and serializing such a body would hold the event
 * loop for seconds). `scan` is the pass over the bytes when the caller made it already.
 */
export function jsonBody(bytes: Uint8Array, scan: JsonScan = scanJson(bytes)): JsonObject {
  if (scan.depth > MAX_JSON_DEPTH) {
    throw new Refusal(
      400,
      "invalid_request_error",
      `JSON body nested deeper than ${MAX_JSON_DEPTH} levels (limit ${MAX_JSON_DEPTH})`,
      "json_too_deep",
    );
  }
  const parsed = parseJson(decoder.decode(bytes));
  if (!isJsonObject(parsed)) {
    // Said apart, so a client sees which of the three it sent.
    const message = bytes.length === 0
      ? "Empty request body: expected a JSON object"
      : parsed === undefined
      ? "Invalid JSON body"
      : `Request body must be a JSON object, got ${
        Array.isArray(parsed) ? "an array" : parsed === null ? "null" : `a ${typeof parsed}`
      }`;
    throw new Refusal(400, "invalid_request_error", message, "invalid_json");
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

/**
 * Reads a chunked body, refusing it (413) as soon as it passes `limit`; each chunk is reserved in
 * `budget` as it arrives (all of it given back when the read fails).
 */
async function readLimited(
  body: ReadableStream<Uint8Array>,
  limit: number,
  budget: BufferBudget | undefined,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (total + value.byteLength > limit) throw bodyTooLarge(limit);
      reserve(budget, value.byteLength);
      total += value.byteLength;
      parts.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => {});
    budget?.release(total);
    throw err;
  }
  return concatBytes(parts, total);
}
