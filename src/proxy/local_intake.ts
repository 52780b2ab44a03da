/**
 * The intake of the data-plane routes Skeid answers itself (listings, `/api/show`,
 * `count_tokens`, Ollama load/unload): the same known-key rule, body limit, buffered-bytes cap and
 * JSON depth check as a proxied request (`intake.ts`), each refusal in the route's face shape and
 * counted like any other.
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import type { Face } from "../faces/face.ts";
import type { JsonObject } from "../core/json.ts";
import type { ProxyMetrics } from "./context.ts";
import { Refusal, refusalResponse } from "./errors.ts";
import { customerKeyId, type IntakeContext, jsonBody, readBody, requestIdOf } from "./intake.ts";

/** What a local route's intake needs of the gateway (a `Gateway` satisfies it). */
export interface LocalIntakeContext extends IntakeContext {
  /** Where refusals are counted. */
  readonly metrics: Pick<ProxyMetrics, "refusal">;
}

/** A local route's request that passed the intake. */
export interface LocalRequest {
  /** The customer key id (`anonymous` without a key, when keys are not required). */
  id: string;
  /** The JSON body, when the route reads one. */
  body: JsonObject;
}

/** The customer key id of a local route's request, or the refusal to answer (401). */
export async function localKeyId(
  ctx: LocalIntakeContext,
  face: Face,
  req: InboundRequest,
): Promise<string | Response> {
  try {
    return await customerKeyId(ctx, req.headers);
  } catch (err) {
    return refused(ctx, face, req, err);
  }
}

/**
 * The key id and JSON body of a local route's request, or the refusal to answer (401, 413, 400,
 * 408, 503). `answer` runs while the body's bytes are held in the buffered-bytes cap.
 */
export async function withLocalBody(
  ctx: LocalIntakeContext,
  face: Face,
  req: InboundRequest,
  answer: (intake: LocalRequest) => Response | Promise<Response>,
): Promise<Response> {
  let held = 0;
  try {
    const id = await customerKeyId(ctx, req.headers);
    const raw = await readBody(req, ctx.skeid.routing.max_body_bytes, ctx);
    held = raw.byteLength;
    return await answer({ id, body: jsonBody(raw) });
  } catch (err) {
    return refused(ctx, face, req, err);
  } finally {
    ctx.buffered?.release(held);
  }
}

function refused(ctx: LocalIntakeContext, face: Face, req: InboundRequest, err: unknown): Response {
  if (!(err instanceof Refusal)) throw err;
  ctx.metrics.refusal("", err.status, err.reason);
  return refusalResponse(face, err, requestIdOf(req.headers, Date.now()));
}
