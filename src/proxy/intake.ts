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
import { isJsonObject, jsonKind, type JsonObject, jsonValue } from "../core/json.ts";
import { type JsonScan, MAX_JSON_DEPTH, scanJson } from "../json_scan.ts";
import type { BufferBudget } from "./buffer_budget.ts";
import type { IdleWatch, Watched } from "./idle_watch.ts";
import { heldRequestBody, type InboundRequest } from "../edge/inbound_request.ts";
import { Refusal } from "./errors.ts";
import { checkOutputFields } from "./estimate.ts";
import { ANONYMOUS, type KeyIdCache, requestKeyId } from "./identity.ts";
import { hopsOf, MAX_HOPS } from "./upstream.ts";
import type { IdentityJudge } from "../customer_keys/identity_judge.ts";

/** What a body read is held to, besides the body limit (a `ProxyContext` has both). */
export interface BodyIntake {
  /** The cap on request-body bytes buffered at once (`SKEID_MAX_BUFFERED_BYTES`); none when absent. */
  readonly buffered?: BufferBudget;
  /** The body timeout between reads of a client body (`SKEID_BODY_TIMEOUT_MS`); none when absent. */
  readonly bodyWatch?: IdleWatch;
}

/** What the intake needs of the gateway (a `ProxyContext` satisfies it). */
export interface IntakeContext extends BodyIntake {
  /** The routing settings and the known customer key ids. */
  readonly skeid: {
    readonly routing: Readonly<RoutingSettings>;
    isKnownKey(apiKeyId: string): boolean;
  };
  /** Customer key → customer key id. */
  readonly keyIds: KeyIdCache;
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
 * The request body's bytes, at most `limit`: a declared `Content-Length` over it (or over the
 * whole buffered-bytes cap) is refused at once (413), a chunked body as soon as it passes it.
 * Bytes count against the cap as they arrive, never before (a declared length reserves nothing
 * up front): past it the body is refused (503, `Retry-After`); the caller gives back
 * `byteLength` of the answer once it lets the body go. A body that sends nothing for the body
 * timeout is refused (408). A large declared body ends in one buffer of its size (no second copy).
 */
export async function readBody(
  req: InboundRequest,
  limit: number,
  intake: BodyIntake = {},
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  const n = declared === null ? NaN : Number(declared);
  if (Number.isFinite(n) && n > limit) throw closing(bodyTooLarge(limit));
  const budget = intake.buffered;
  // A body the whole cap cannot hold is refused before a byte is read.
  if (budget !== undefined && Number.isFinite(n) && n > budget.limit) {
    throw closing(overCap(budget));
  }
  const held = heldRequestBody(req);
  if (held !== undefined) {
    // Framed by its declared length with the head: no stall to watch, nothing more to come.
    try {
      reserve(budget, held.byteLength);
    } catch (err) {
      throw err instanceof Refusal ? closing(err) : err;
    }
    return held;
  }
  if (req.body === null) return new Uint8Array(0);
  const read = new BodyRead(intake.bodyWatch);
  try {
    if (!Number.isSafeInteger(n) || n < 0) return await readLimited(req.body, limit, budget, read);
    if (n > WHOLE_READ_BYTES) return await readDeclared(req.body, n, budget, read);
    const out = await read.whole(req);
    if (out.byteLength !== n) throw contentLengthMismatch(out.byteLength > n);
    // Counted once it arrived: a small body stalled half-way holds nothing in the cap.
    reserve(budget, out.byteLength);
    return out;
  } catch (err) {
    throw err instanceof Refusal ? closing(err) : err;
  } finally {
    read.end();
  }
}

/**
 * A refusal of a body left unread, as an answer that closes its connection: the rest of the body
 * is still on the wire, so the connection cannot carry another request, and Deno would keep it
 * open until the idle timeout (the listener closes a connection whose answer says so).
 */
function closing(refusal: Refusal): Refusal {
  return new Refusal(
    refusal.status,
    refusal.type,
    refusal.message,
    refusal.reason,
    refusal.code,
    { ...refusal.headers, connection: "close" },
  );
}

/** Reserves `n` bytes in `budget`, or refuses (503 `buffered_bytes_full`). */
function reserve(budget: BufferBudget | undefined, n: number): void {
  if (budget === undefined || budget.reserve(n)) return;
  throw new Refusal(
    503,
    "overloaded_error",
    `Too many request bytes buffered at once (SKEID_MAX_BUFFERED_BYTES is ${budget.limit} bytes); retry shortly`,
    "buffered_bytes_full",
    undefined,
    { "retry-after": String(BUSY_RETRY_AFTER_S) },
  );
}

/** A declared body larger than the whole buffered-bytes cap (413). */
function overCap(budget: BufferBudget): Refusal {
  return new Refusal(
    413,
    "invalid_request_error",
    `Request body too large (SKEID_MAX_BUFFERED_BYTES is ${budget.limit} bytes)`,
    "body_too_large",
  );
}

/** Seconds a client refused for the buffered-bytes cap is told to wait. */
const BUSY_RETRY_AFTER_S = 1;

/**
 * Declared bodies up to this size are read with `Request.bytes()`: the runtime hands over a body
 * that came with the head in one step, where a stream reader costs a `ReadableStream`, a reader
 * and two reads (about 5 µs of CPU a request). Larger ones are read chunk by chunk, counted as
 * they arrive.
 */
const WHOLE_READ_BYTES = 64 * 1024;

/**
 * One client body being read, under the gateway's body timeout: a read that brings nothing for
 * that long fails with a 408. One sweep timer for every body (the watch), not a timer per read.
 */
class BodyRead implements Watched {
  lastActivity = 0;
  linkPrev?: Watched;
  linkNext?: Watched;
  linkList?: object;
  /** Rejects with the 408 once the watch found the body silent too long (none without a watch). */
  readonly #stalled: Promise<never> | undefined;
  #stall: ((err: Refusal) => void) | undefined;

  constructor(readonly watch: IdleWatch | undefined) {
    if (watch === undefined) return;
    this.lastActivity = watch.now();
    this.#stalled = new Promise<never>((_, reject) => this.#stall = reject);
    // Nothing awaits it once the body is read: its rejection is no error then.
    this.#stalled.catch(() => {});
    watch.add(this);
  }

  /** The watch found no byte for its timeout. */
  idleTimeout(): void {
    this.#stall?.(
      new Refusal(
        408,
        "invalid_request_error",
        `Request body timed out: no bytes for ${this.watch?.timeoutMs} ms (SKEID_BODY_TIMEOUT_MS)`,
        "body_timeout",
      ),
    );
  }

  /** The next chunk (or the end); fails with the 408 when the body stalls. */
  async next(reader: ReadableStreamDefaultReader<Uint8Array>) {
    const chunk = this.#stalled === undefined
      ? await reader.read()
      : await Promise.race([reader.read(), this.#stalled]);
    if (this.watch !== undefined) this.lastActivity = this.watch.now();
    return chunk;
  }

  /** A small body at once (`Request.bytes()`); fails with the 408 when it stalls. */
  whole(req: InboundRequest): Promise<Uint8Array<ArrayBuffer>> {
    if (this.#stalled === undefined) return req.bytes();
    const bytes = req.bytes();
    // Left behind by a timeout: it fails once the connection closes.
    bytes.catch(() => {});
    return Promise.race([bytes, this.#stalled]);
  }

  /** The read ended (read whole or refused): no longer watched. */
  end(): void {
    this.watch?.delete(this);
    this.#stall = undefined;
  }
}

/**
 * Stops reading a refused body without cancelling it: a cancel makes Deno drop the body while the
 * client still sends it, and the connection is reset before the client read its refusal. Left
 * unread, the refusal is answered early and the client reads it (a 408's connection is closed by
 * the listener).
 */
function leaveUnread(reader: ReadableStreamDefaultReader<Uint8Array>): void {
  reader.releaseLock();
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

/**
 * Reads a body of a declared `n` bytes into one buffer that grows as the bytes arrive (doubling,
 * up to `n`): what the buffer holds is reserved in `budget` before it grows, so a body holds in
 * the cap about what it sent, never its declared length up front, and ends in one buffer of
 * exactly `n` bytes. All of it is given back when the read fails.
 */
async function readDeclared(
  body: ReadableStream<Uint8Array>,
  n: number,
  budget: BufferBudget | undefined,
  read: BodyRead,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = body.getReader();
  let out = new Uint8Array(0);
  let total = 0;
  try {
    for (;;) {
      const { value, done } = await read.next(reader);
      if (done) break;
      const need = total + value.byteLength;
      if (need > n) throw contentLengthMismatch(true);
      if (need > out.byteLength) {
        const size = Math.min(n, Math.max(need, out.byteLength * 2));
        reserve(budget, size - out.byteLength);
        const grown = new Uint8Array(size);
        grown.set(out.subarray(0, total));
        out = grown;
      }
      out.set(value, total);
      total = need;
    }
    if (total !== n) throw contentLengthMismatch(false);
  } catch (err) {
    leaveUnread(reader);
    budget?.release(out.byteLength);
    throw err;
  }
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
  // Said apart, so a client sees which of the three it sent (and where the JSON is broken).
  if (bytes.length === 0) invalidJson("Empty request body: expected a JSON object");
  let parsed: unknown;
  try {
    parsed = jsonValue(decoder.decode(bytes));
  } catch (err) {
    invalidJson(`Invalid JSON body: ${(err as SyntaxError).message}`);
  }
  if (!isJsonObject(parsed)) {
    invalidJson(`Request body must be a JSON object, got ${jsonKind(parsed)}`);
  }
  return parsed;
}

/** Refuses a body that is not a JSON object (400 `invalid_json`). */
function invalidJson(message: string): never {
  throw new Refusal(400, "invalid_request_error", message, "invalid_json");
}

/**
 * The face's upstream request of the body; a body the face cannot carry, or whose output limit
 * or completion count is not a plain integer (`checkOutputFields`), is refused in its shape.
 */
export function upstreamRequest(
  face: Face,
  endpoint: string,
  body: JsonObject,
  echo?: JsonObject,
): UpstreamRequest {
  try {
    checkOutputFields(body);
    return face.toUpstream(endpoint, body, echo);
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
  read: BodyRead,
): Promise<Uint8Array<ArrayBuffer>> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { value, done } = await read.next(reader);
      if (done) break;
      if (total + value.byteLength > limit) throw bodyTooLarge(limit);
      reserve(budget, value.byteLength);
      total += value.byteLength;
      parts.push(value);
    }
  } catch (err) {
    leaveUnread(reader);
    budget?.release(total);
    throw err;
  }
  return concatBytes(parts, total);
}
