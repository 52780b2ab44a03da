/**
 * One client request from arrival to its usage event, read top to bottom: the intake
 * (`intake.ts`), the route plan and the walk (`walk.ts`), upstream attempts with failover before
 * the first byte (`call.ts`), the answer (`answer.ts`) or the relay (`relay.ts`), the release of
 * the admission slot and the usage event.
 *
 * One `Exchange` object per client request carries the state; its methods are the steps, so the
 * hot path allocates one object instead of a closure per step.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { clientLeft, streamEnd, watchClient } from "./abort_billing.ts";
import { estimateInputTokens } from "./estimate.ts";
import type { FinishOutcome, PickedNode } from "../core/types.ts";
import type { Face, FaceName, ResponseTicket, UpstreamRequest } from "../faces/face.ts";
import type { JsonObject } from "../core/json.ts";
import {
  answerResponse,
  type AnswerTarget,
  parseAnswer,
  toolCallsOf,
  transportFailureResponse,
  upstreamErrorResponse,
} from "./answer.ts";
import { callUpstream, FAILOVER_STATUSES, type Failure, transportOutcome } from "./call.ts";
import { errorResponse, keyUnavailable, notPermitted, Refusal, refusalResponse } from "./errors.ts";
import { forwardableBody } from "./body_model.ts";
import { scanJson } from "../json_scan.ts";
import { ANONYMOUS } from "./identity.ts";
import {
  customerKeyId,
  jsonBody,
  nextHop,
  readBody,
  requestIdOf,
  upstreamRequest,
} from "./intake.ts";
import { admitKey, type KeyPass } from "./key_step.ts";
import type { Linked } from "../core/linked_list.ts";
import { type RelayOutcome, type RelayRequest, streamResponse } from "./relay.ts";
import { nodeHeaders, upstreamUrl } from "./upstream.ts";
import { type Abortable, readWhole, type UpstreamAnswer } from "./upstream_answer.ts";
import { recordUsage, type UsageOutcome } from "./usage_facts.ts";
import { logRequest } from "./request_log.ts";
import { type NodeFaces, nodeFaces } from "./native.ts";
import { RouteWalk } from "./walk.ts";
import { routeHint } from "../core/route_hint.ts";
import type { ProxyContext } from "./context.ts";

/** What an attempt came to: the client's answer, the client gone, or a failure to fail over on. */
type AttemptResult = Response | "gone" | Failure;

/** Proxies one client request on `endpoint` through `face`. Never throws. */
export function handleProxy(
  ctx: ProxyContext,
  face: Face,
  endpoint: string,
  req: Request,
): Promise<Response> {
  return new Exchange(ctx, face, endpoint, req).run();
}

/** One client request in flight. */
export class Exchange implements RelayRequest, AnswerTarget, Linked<Exchange> {
  /** The gateway's in-flight list links through these. */
  linkPrev?: Exchange;
  linkNext?: Exchange;
  linkList?: object;
  /** The gateway context this request runs in. */
  readonly ctx: ProxyContext;
  /** The face of the current attempt: the client's, or its native sibling (`native.ts`). */
  face: Face;
  /** The client-facing endpoint path the request was made on (the usage event's `endpoint`). */
  readonly endpoint: string;
  /** The face's name as the usage event's `api_format` (a label only: nothing branches on it). */
  readonly apiFormat: FaceName;
  /** The client's request. */
  readonly req: Request;
  /** Epoch ms the request arrived (the core's clock); durations and ttft count from here. */
  readonly startedAt: number;
  /** The client's `x-request-id` (1–200 chars) or a generated one; sent back in the answer. */
  readonly requestId: string;
  /** The customer key id of the request, or `anonymous` when it presented no customer key. */
  apiKeyId = ANONYMOUS;
  /** The requested model (the client's `model`); empty until the body was read. */
  requestedModel = "";
  /** Upstream attempts actually sent (a node skipped for a missing upstream key is not counted). */
  attempts = 0;
  /** The stop handle of the upstream call in flight (shutdown, the relay and body reads use it). */
  upstreamCall: Abortable | undefined;
  /** AnswerTarget: the face's context of the upstream request. */
  faceContext: JsonObject | undefined;
  /** AnswerTarget: the status the client got for a whole answer. */
  answerStatus = 0;
  /** AnswerTarget: the upstream's JSON answer object. */
  answerBody: JsonObject | undefined;
  /** AnswerTarget: the translated answer the client got. */
  clientBody: JsonObject | undefined;
  /** Keeps the answer in the response store (ADR 0028); undefined when it is not kept. */
  responseTicket: ResponseTicket | undefined;
  /** AnswerTarget: the usage event's error type. */
  errorType: string | undefined;
  /** AnswerTarget: the usage event's error message. */
  errorMessage: string | undefined;
  #upstream: UpstreamRequest | undefined;
  #rawBody: Uint8Array<ArrayBuffer> | undefined;
  #faces: NodeFaces | undefined;
  /** Upstream body per served model (a failover to the same model reuses it). */
  #bodyModel: string | undefined;
  #bodyBytes: Uint8Array<ArrayBuffer> | string | undefined;
  #hops = 1;
  /** Body bytes this request holds in the gateway's buffered-bytes cap, until `run` ends. */
  #held = 0;
  /** The node of the last attempt (the usage event's node). */
  #node: PickedNode | undefined;
  /** The node whose admission slot this request holds, until `release`. */
  #slot: PickedNode | undefined;
  #servedModel = "";
  #upstreamStatus = 0;
  #relaying = false;
  #ended = false;
  /** The usage event was recorded (there is one per forwarded request). */
  #recorded = false;
  /** The walk: its fair share charge is corrected by the usage event. */
  #walk: RouteWalk | undefined;
  /** The customer key's hold on its rate windows and budget (ADR 0023), when it has limits. */
  #key: KeyPass | undefined;
  /** A stream's estimated input tokens, billed when its client leaves unreported (ADR 0027). */
  #inputTokens = 0;
  /** The non-streamed attempt's watch over its client (ADR 0027). */
  #watch: ReturnType<typeof watchClient>;

  /** Stamps the start time and the request id; nothing else happens until `run()`. */
  constructor(ctx: ProxyContext, face: Face, endpoint: string, req: Request) {
    this.ctx = ctx;
    this.face = face;
    ({ name: this.apiFormat } = face);
    this.endpoint = endpoint;
    this.req = req;
    this.startedAt = ctx.skeid.now();
    this.requestId = requestIdOf(req.headers, this.startedAt);
  }

  /** Runs the whole lifecycle. */
  async run(): Promise<Response> {
    this.ctx.exchangeStarted(this);
    try {
      return await this.#run();
    } catch (err) {
      if (err instanceof Refusal) {
        this.ctx.metrics.refusal(this.requestedModel, err.status, err.reason);
        this.#log(err.status, err.reason);
        return refusalResponse(this.face, err, this.requestId);
      }
      const message = errorMessage(err);
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: message,
      });
      // A forwarded request that failed in the gateway still gets its one usage event.
      this.#record(500, false, { errorType: "api_error", errorMessage: message });
      return errorResponse(this.face, 500, "api_error", "Internal gateway error", this.requestId);
    } finally {
      // A slot still held here was left by an error thrown mid-attempt (not the node's failure:
      // released as not counted); a stream holds its slot until the relay ends.
      if (!this.#relaying) {
        this.release({ aborted: true });
        this.#end();
      }
      this.ctx.buffered?.release(this.#held);
    }
  }

  /**
   * Releases the admission slot this request holds: the one `finishRequest` that pairs the
   * walk's `startRequest`. Every end of an attempt comes here; a call that finds no slot held
   * changes nothing and answers false (so a double release is a no-op a test can see).
   */
  release(outcome: FinishOutcome): boolean {
    const slot = this.#slot;
    if (slot === undefined) return false;
    this.#slot = undefined;
    this.ctx.skeid.finishRequest(slot.id, outcome);
    return true;
  }

  /** Stops the upstream at once (shutdown grace ran out). */
  forceClose(): void {
    this.upstreamCall?.abort();
  }

  async #run(): Promise<Response> {
    const ctx = this.ctx;
    const skeid = ctx.skeid;
    const routing = skeid.routing;
    this.#hops = nextHop(this.req.headers);
    // The customer key id is usually cached: no await (and no microtask) then.
    let id = customerKeyId(ctx, this.req.headers);
    if (id instanceof Promise) id = await id;
    this.apiKeyId = id;
    const raw = await readBody(this.req, routing.max_body_bytes, ctx);
    this.#held = raw.byteLength;
    const scan = scanJson(raw);
    this.#rawBody = forwardableBody(raw, scan);
    let body = jsonBody(raw, scan);
    let echo: JsonObject | undefined;
    if (this.face.intake !== undefined) {
      // The face's own step (the Responses face continues a kept conversation, ADR 0028).
      let taken = this.face.intake(this, body);
      if (taken instanceof Promise) taken = await taken;
      ({ body, echo } = taken);
      this.responseTicket = taken.ticket;
    }
    const upstream = upstreamRequest(this.face, this.endpoint, body, echo);
    this.#faces = nodeFaces(this.face, this.endpoint, body, upstream);
    this.#upstream = upstream;
    this.faceContext = upstream.context;
    this.requestedModel = upstream.requestedModel;
    if (typeof this.requestedModel !== "string" || this.requestedModel === "") {
      throw new Refusal(400, "invalid_request_error", "model: Field required", "model_missing");
    }

    const plan = skeid.routePlan({ model: this.requestedModel, api_key_id: this.apiKeyId });
    if (!plan.permitted) throw notPermitted(this.requestedModel, plan.reason);
    // A worker of a group asks the supervisor (ADR 0025): a promise then, only for limited keys.
    const pass = admitKey(ctx, this.apiKeyId, upstream, plan.tiers);
    this.#key = pass instanceof Promise ? await pass : pass;

    const walk = new RouteWalk(skeid, ctx.waiters, plan.tiers, this.requestedModel);
    const client = body;
    this.#walk = walk.sharing(id, upstream, routing.max_reserve_tokens)
      .hinting(() => routeHint(client, this.req.headers, upstream.body));
    const maxAttempts = Math.max(1, routing.max_attempts);
    let last: Failure | undefined;
    let keyMissing = 0;
    let tries = 0;
    while (tries < maxAttempts) {
      let step = walk.next(this.req);
      if (step instanceof Promise) step = await step;
      if (step.kind === "aborted") return this.#gone();
      if (step.kind === "refused") {
        if (last || keyMissing > 0) break;
        const headers = step.retryAfterS === undefined
          ? undefined
          : { "retry-after": String(step.retryAfterS) };
        throw new Refusal(step.status, step.type, step.message, step.reason, undefined, headers);
      }
      tries++;
      const node = step.node;
      this.#slot = node;
      let key = ctx.nodeKey(node);
      if (key instanceof Promise) key = await key;
      if (key === null) {
        // ADR 0013: never send the client's credentials to a node that names its own key
        // source. Not the node's failure either: the slot is released as not counted.
        this.release({ aborted: true });
        ctx.metrics.attemptFailed(node.id, "upstream_key_unavailable");
        walk.exclude(node.id);
        keyMissing++;
        continue;
      }
      this.attempts++;
      this.#node = node;
      this.#servedModel = step.tier.model || this.requestedModel;
      const result = await this.#attempt(node, key);
      if (result instanceof Response) {
        // The answer is committed: what only a retry would need is let go (a stream holds its
        // Exchange for minutes; a chat body can be large).
        this.#upstream = undefined;
        this.#rawBody = undefined;
        this.#bodyBytes = undefined;
        this.#key?.stamp(result);
        this.#faces = undefined;
        return result;
      }
      if (result === "gone") return this.#gone();
      ctx.metrics.attemptFailed(node.id, result.reason);
      walk.exclude(node.id);
      last = result;
    }
    if (!last) throw keyUnavailable(this.requestedModel);
    return this.#failed(last);
  }

  /** One upstream attempt; a non-streamed one stops its call when the client leaves (ADR 0027). */
  async #attempt(node: PickedNode, key: string | undefined): Promise<AttemptResult> {
    this.#watch = watchClient(this.req, this, this.#upstream!.stream);
    try {
      return await this.#call(node, key);
    } finally {
      this.#watch?.stop();
    }
  }

  /** One upstream attempt on an admitted node; every outcome releases the slot. */
  async #call(node: PickedNode, key: string | undefined): Promise<AttemptResult> {
    const ctx = this.ctx;
    if (this.#faces?.to(node)) {
      ({ face: this.face, upstream: this.#upstream } = this.#faces);
      this.faceContext = this.#upstream.context;
      this.#bodyModel = undefined;
    }
    const upstream = this.#upstream!;
    const url = upstreamUrl(node.url, upstream.path);
    const headers = nodeHeaders(this.req.headers, node, key, this.#hops, this.apiKeyId);
    let res: UpstreamAnswer;
    try {
      res = await callUpstream(ctx, url, headers, this.#bodyFor(this.#servedModel), this);
    } catch (err) {
      if (this.#watch?.gone) return this.#left();
      const transport = transportOutcome(err);
      const reason = errorMessage(err);
      if (transport === "aborted") {
        // Stopped from here (shutdown grace ran out): not the node's failure.
        this.release({ aborted: true });
        this.#record(499, false, { errorType: "aborted", errorMessage: reason });
        return "gone";
      }
      this.release({ ok: false, transport });
      return { node, reason };
    }
    const status = res.status;
    this.#upstreamStatus = status;
    // The passive probe: rate-limit headers and Retry-After off every upstream answer (the core
    // reads nothing from an answer without them, unless it is a 429).
    if (status === 429 || res.hasCapacityHeaders) {
      ctx.skeid.observeResponseHeaders(node.id, res.headers(), status);
    }

    if (FAILOVER_STATUSES.has(status)) {
      let body = readWhole(res, this.upstreamCall!, this.ctx.idle);
      if (body instanceof Promise) body = await body;
      if (this.#watch?.gone) return this.#left();
      this.release({ ok: false, transport: "answered" });
      return {
        node,
        answer: res,
        body: body ?? new Uint8Array(0),
        reason: `upstream answered ${status}`,
      };
    }

    const type = res.header("content-type") ?? "";
    if (upstream.stream && status < 400 && res.hasBody && type.includes("text/event-stream")) {
      this.#inputTokens = estimateInputTokens(upstream.body);
      let response: Response;
      try {
        response = streamResponse(ctx, this, upstream, res, this.upstreamCall!, node.id);
      } catch (err) {
        // No relay owns the body: it is let go here (the slot, the key and the event in `run`).
        res.cancel();
        throw err;
      }
      // The relay owns the rest of the request's life, the slot included.
      this.#relaying = true;
      return response;
    }

    let bytes = readWhole(res, this.upstreamCall!, this.ctx.idle);
    if (bytes instanceof Promise) bytes = await bytes;
    if (bytes === undefined) {
      if (this.#watch?.gone) return this.#left();
      this.release({ ok: false, transport: "answered" });
      return { node, reason: "upstream body could not be read" };
    }
    const durationMs = ctx.skeid.now() - this.startedAt;
    this.release({ ok: status < 500, duration_ms: durationMs, transport: "answered" });
    const response = answerResponse(this, res, bytes, node.id, durationMs);
    const ok = this.answerStatus < 400;
    if (ok && this.responseTicket) {
      await this.responseTicket.keep(this.clientBody ?? this.answerBody);
    }
    this.#done(node, this.answerStatus, ok, {
      response: this.answerBody,
      toolCalls: ok ? toolCallsOf(this.answerBody) : undefined,
      errorType: this.errorType,
      errorMessage: this.errorMessage,
      durationMs,
    });
    return response;
  }

  /** The upstream body for a served model (the face's: raw client bytes when unchanged). */
  #bodyFor(served: string): Uint8Array<ArrayBuffer> | string {
    if (this.#bodyModel === served && this.#bodyBytes !== undefined) return this.#bodyBytes;
    const bytes = this.face.upstreamBody(this.#upstream!, served, this.#rawBody);
    this.#bodyModel = served;
    this.#bodyBytes = bytes;
    return bytes;
  }

  /**
   * RelayOwner: the stream ended (done, broke, client gone, relay failed); the relay held the
   * slot till now. The slot goes first and the key's place last, whatever the event's steps throw.
   */
  relayEnded(outcome: RelayOutcome): void {
    const end = outcome.end;
    try {
      const node = this.#node!;
      const durationMs = this.ctx.skeid.now() - this.startedAt;
      // A relay that failed in the gateway is not the node's failure: released as not counted.
      const aborted = end === "aborted" || end === "failed";
      this.release({ aborted, ok: end === "done", duration_ms: durationMs, transport: "answered" });
      if (end === "broken") this.ctx.metrics.attemptFailed(node.id, "stream_broken");
      const facts = streamEnd(outcome, this.#upstreamStatus, this.#inputTokens);
      this.#done(node, facts.status, end === "done", {
        usage: facts.usage,
        usageSource: facts.usageSource,
        toolCalls: outcome.toolCalls,
        errorType: facts.errorType,
        errorMessage: facts.errorMessage,
        contentBytes: outcome.contentBytes,
        ttftMs: outcome.ttftMs,
        durationMs,
      }, end);
    } catch (err) {
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: errorMessage(err),
      });
      this.release({ aborted: true });
      this.#record(500, false, { errorType: "api_error", errorMessage: errorMessage(err) });
    } finally {
      this.#end();
    }
  }

  /** Every attempt failed before the first byte: the last upstream answer passed on, or 502. */
  #failed(last: Failure): Response {
    const node = last.node;
    const durationMs = this.ctx.skeid.now() - this.startedAt;
    // The client learns what the upstream said (e.g. its own 429 and Retry-After).
    const answer = last.answer;
    const body = last.body;
    const response = answer !== undefined && body !== undefined
      ? upstreamErrorResponse(this, answer, body, parseAnswer(body), node.id)
      : transportFailureResponse(this, last.reason, node.id);
    this.#node = node;
    this.#done(node, this.answerStatus, false, {
      errorType: this.errorType,
      errorMessage: this.errorMessage,
      durationMs,
    }, "upstream_failed");
    return response;
  }

  /** A forwarded request ended with a whole answer: its usage event, metrics and log line. */
  #done(
    node: PickedNode,
    status: number,
    ok: boolean,
    extra: UsageOutcome & { durationMs: number },
    outcome = ok ? "ok" : "upstream_error",
  ): void {
    this.#record(status, ok, extra);
    this.ctx.metrics.requestDone(node.id, status, extra.durationMs);
    this.#log(status, outcome);
  }

  /** A non-streamed request's client left during the call: 499, tokens estimated (ADR 0027). */
  #left(): "gone" {
    this.release({ aborted: true });
    this.#record(499, false, clientLeft(this.#upstream!.body));
    return "gone";
  }

  /** The client went away: nobody reads this answer. */
  #gone(): Response {
    this.#log(499, "client_closed");
    return new Response(null, { status: 499, headers: { "x-request-id": this.requestId } });
  }

  /** The usage event of this request (only once a node was attempted). */
  #record(status: number, ok: boolean, extra: UsageOutcome & { durationMs?: number }): void {
    const node = this.#node;
    if (!node || this.#recorded) return;
    this.#recorded = true;
    const event = recordUsage(this.ctx, this, node, this.#servedModel, status, ok, extra);
    this.ctx.waiters.served(this.#walk, event);
    this.#key?.settle(event);
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#key?.finish();
    this.ctx.exchangeEnded(this);
  }

  #log(status: number, outcome: string): void {
    logRequest(this, this.#servedModel, this.#node?.id, status, outcome);
  }
}
