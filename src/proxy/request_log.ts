/**
 * The one debug line a request may log (`request`, at `SKEID_LOG_LEVEL=debug`): built only when
 * the gateway wants it, never with a key in it (ids and names only).
 *
 * @module
 */
import type { ProxyContext } from "./context.ts";
import type { TraceContext } from "./trace_context.ts";

/** What the line says about the request. */
export interface LoggedRequest {
  readonly ctx: ProxyContext;
  readonly requestId: string;
  readonly trace: TraceContext;
  readonly endpoint: string;
  readonly apiFormat: string;
  readonly apiKeyId: string;
  readonly requestedModel: string;
  readonly attempts: number;
  readonly startedAt: number;
}

/** Logs the request's outcome (`ok`, `client_closed`, a refusal reason, …) when wanted. */
export function logRequest(
  req: LoggedRequest,
  servedModel: string,
  nodeId: string | undefined,
  status: number,
  outcome: string,
): void {
  const ctx = req.ctx;
  if (!ctx.logRequests) return;
  ctx.logger.debug("request", {
    request_id: req.requestId,
    trace_id: req.trace.traceId,
    span_id: req.trace.spanId,
    endpoint: req.endpoint,
    api_format: req.apiFormat,
    api_key_id: req.apiKeyId,
    model: req.requestedModel,
    served_model: servedModel || undefined,
    node: nodeId,
    status,
    outcome,
    attempts: req.attempts,
    duration_ms: ctx.skeid.now() - req.startedAt,
  });
}
