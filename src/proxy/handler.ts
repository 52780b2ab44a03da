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
import type { Skeid } from "../core/skeid.ts";
import type { FinishOutcome, Node, PickedNode } from "../core/types.ts";
import type { Face, UpstreamRequest } from "../faces/face.ts";
import { FaceError } from "../faces/face.ts";
import type { JsonObject } from "../json.ts";
import type { Logger } from "../log.ts";
import type { UsageRecorder } from "../usage/types.ts";
import {
  answerResponse,
  type AnswerTarget,
  parseAnswer,
  toolCallsOf,
  transportFailureResponse,
  upstreamErrorResponse,
} from "./answer.ts";
import { callUpstream, type UpstreamClients, UpstreamTransportError } from "./call.ts";
import { errorResponse, Refusal, refusalResponse, type RefusalStatus } from "./errors.ts";
import type { IdleWatch } from "./idle_watch.ts";
import { ANONYMOUS, type KeyIdCache } from "./identity.ts";
import {
  customerKeyId,
  type IntakeContext,
  jsonBody,
  nextHop,
  readBody,
  requestIdOf,
} from "./intake.ts";
import type { Linked } from "./linked_list.ts";
import { type RelayOutcome, type RelayOwner, StreamRelay } from "./relay.ts";
import { relayedResponse, upstreamHeaders, upstreamUrl } from "./upstream.ts";
import type { Abortable, UpstreamAnswer } from "./upstream_answer.ts";
import { usageEvent, type UsageOutcome } from "./usage.ts";
import { RouteWalk } from "./walk.ts";
import type { WaiterQueue } from "./wait.ts";

/** The counters the proxy feeds (the admin plane's GatewayMetrics satisfies it). */
export interface ProxyMetrics {
  /** A request refused before forwarding with `status` (no usage event is written for it). */
  refusal(model: string, status: RefusalStatus, reason: string): void;
  /** One upstream attempt on a node failed for `reason` (failed over, or ending the request). */
  attemptFailed(nodeId: string, reason: string): void;
  /**
   * A forwarded request ended on a node with `status` after `durationMs` (capacity wait included).
   */
  requestDone(nodeId: string, status: number, durationMs: number): void;
}

/** Everything a request needs from the gateway that runs it. */
export interface ProxyContext extends IntakeContext, UpstreamClients {
  /** The core: routing, admission, inflight, pricing and the injected clock. */
  readonly skeid: Skeid;
  /** Where the usage event of every forwarded request goes (the ledger). */
  readonly recorder: UsageRecorder;
  /** The gateway's volatile counters (refusals, failed attempts, durations). */
  readonly metrics: ProxyMetrics;
  /** The gateway's logger; never given a customer key or an upstream key. */
  readonly logger: Logger;
  /** Whether one debug line per request is wanted (checked before building it). */
  readonly logRequests: boolean;
  /** The gateway's FIFO of requests waiting for a tier's capacity. */
  readonly waiters: WaiterQueue;
  /** Customer key → customer key id, so the SHA-1 is not redone on every request. */
  readonly keyIds: KeyIdCache;
  /** The one shared deadline watch over upstream header waits, body inactivity and keepalives. */
  readonly idle: IdleWatch;
  /**
   * A translated stream whose upstream is silent this long gets the face's keepalive (Anthropic
   * `ping`), ms; 0 or absent = never. Driven by `idle`'s sweep.
   */
  readonly keepaliveMs?: number;
  /**
   * The node's own key: undefined = none configured (client headers go through), null = one is
   * configured but resolved nothing (the node must not be called), else the key.
   */
  nodeKey(node: Node): string | null | undefined | Promise<string | null | undefined>;
  /** The `created_at` stamp of an event recorded at epoch-ms `ms`. */
  createdAt(ms: number): string;
  /** In-flight bookkeeping for a graceful drain. */
  exchangeStarted(ex: Exchange): void;
  /** Pairs `exchangeStarted`: called exactly once, when the response (or its stream) has ended. */
  exchangeEnded(ex: Exchange): void;
}

/** Upstream statuses that fail over to the next node (before the first byte). */
const FAILOVER_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** An attempt that failed before the first byte. */
interface Failure {
  node: PickedNode;
  /** Set when the upstream answered (429/5xx): passed on when it is the last failure. */
  answer?: UpstreamAnswer;
  body?: Uint8Array<ArrayBuffer>;
  reason: string;
}

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
export class Exchange implements RelayOwner, AnswerTarget, Linked<Exchange> {
  /** The gateway's in-flight list links through these. */
  linkPrev?: Exchange;
  linkNext?: Exchange;
  linkList?: object;
  /** The gateway context this request runs in. */
  readonly ctx: ProxyContext;
  /** The client API format the request came in; its answer goes out in the same one. */
  readonly face: Face;
  /** The client-facing endpoint path the request was made on (the usage event's `endpoint`). */
  readonly endpoint: string;
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
  /** AnswerTarget: the usage event's error type. */
  errorType: string | undefined;
  /** AnswerTarget: the usage event's error message. */
  errorMessage: string | undefined;
  #upstream: UpstreamRequest | undefined;
  #rawBody: Uint8Array<ArrayBuffer> | undefined;
  /** Upstream body per served model (a failover to the same model reuses it). */
  #bodyModel: string | undefined;
  #bodyBytes: Uint8Array<ArrayBuffer> | string | undefined;
  #hops = 1;
  /** The node of the last attempt (the usage event's node). */
  #node: PickedNode | undefined;
  /** The node whose admission slot this request holds, until `release`. */
  #slot: PickedNode | undefined;
  #servedModel = "";
  #upstreamStatus = 0;
  #relaying = false;
  #ended = false;

  /** Stamps the start time and the request id; nothing else happens until `run()`. */
  constructor(ctx: ProxyContext, face: Face, endpoint: string, req: Request) {
    this.ctx = ctx;
    this.face = face;
    this.endpoint = endpoint;
    this.req = req;
    this.startedAt = ctx.skeid.now();
    this.requestId = requestIdOf(req.headers, this.startedAt);
  }

  /** The node serving the request, once admitted. */
  get nodeId(): string | undefined {
    return this.#node?.id;
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
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: errorMessage(err),
      });
      return errorResponse(this.face, 500, "api_error", "Internal gateway error", this.requestId);
    } finally {
      // A slot still held here was left by an error thrown mid-attempt (not the node's failure:
      // released as not counted); a stream holds its slot until the relay ends.
      if (!this.#relaying) {
        this.release({ aborted: true });
        this.#end();
      }
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
    const raw = await readBody(this.req, routing.max_body_bytes);
    this.#rawBody = raw;
    const upstream = this.#toUpstream(jsonBody(raw));
    this.#upstream = upstream;
    this.faceContext = upstream.context;
    this.requestedModel = upstream.requestedModel;
    if (typeof this.requestedModel !== "string" || this.requestedModel === "") {
      throw new Refusal(400, "invalid_request_error", "model: Field required", "model_missing");
    }

    const plan = skeid.routePlan({ model: this.requestedModel, api_key_id: this.apiKeyId });
    if (!plan.permitted) {
      throw new Refusal(
        403,
        "permission_error",
        `Model '${this.requestedModel}' is not available for this key`,
        plan.reason || "model_not_permitted",
      );
    }

    const walk = new RouteWalk(skeid, ctx.waiters, plan.tiers, this.requestedModel);
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
        throw new Refusal(step.status, step.type, step.message, step.reason);
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
        return result;
      }
      if (result === "gone") return this.#gone();
      ctx.metrics.attemptFailed(node.id, result.reason);
      walk.exclude(node.id);
      last = result;
    }
    if (!last) {
      // Every candidate named a key source that resolved nothing: the request was never sent.
      throw new Refusal(
        503,
        "upstream_key_unavailable",
        `No upstream key available for model '${this.requestedModel}'`,
        "upstream_key_unavailable",
      );
    }
    return this.#failed(last);
  }

  /** The face's upstream request; a body it cannot carry is refused in its own shape. */
  #toUpstream(body: JsonObject): UpstreamRequest {
    try {
      return this.face.toUpstream(this.endpoint, body);
    } catch (err) {
      if (err instanceof FaceError) {
        throw new Refusal(err.status, err.type, err.message, "bad_request");
      }
      throw err;
    }
  }

  /** One upstream attempt on an admitted node; every outcome releases the slot. */
  async #attempt(node: PickedNode, key: string | undefined): Promise<AttemptResult> {
    const ctx = this.ctx;
    const upstream = this.#upstream!;
    const url = upstreamUrl(node.url, upstream.path);
    const headers = upstreamHeaders(this.req.headers, key, this.#hops);
    let res: UpstreamAnswer;
    try {
      res = await callUpstream(ctx, url, headers, this.#bodyFor(this.#servedModel), this);
    } catch (err) {
      const kind = err instanceof UpstreamTransportError ? err.kind : "connect";
      const reason = errorMessage(err);
      if (kind === "aborted") {
        // Stopped from here (shutdown grace ran out): not the node's failure.
        this.release({ aborted: true });
        this.#record(499, false, { errorType: "aborted", errorMessage: reason });
        return "gone";
      }
      this.release({ ok: false });
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
      let body = this.#readAll(res);
      if (body instanceof Promise) body = await body;
      this.release({ ok: false });
      return {
        node,
        answer: res,
        body: body ?? new Uint8Array(0),
        reason: `upstream answered ${status}`,
      };
    }

    const type = res.header("content-type") ?? "";
    if (upstream.stream && status < 400 && res.hasBody && type.includes("text/event-stream")) {
      return this.#stream(node, res);
    }

    let bytes = this.#readAll(res);
    if (bytes instanceof Promise) bytes = await bytes;
    if (bytes === undefined) {
      this.release({ ok: false });
      return { node, reason: "upstream body could not be read" };
    }
    const durationMs = ctx.skeid.now() - this.startedAt;
    this.release({ ok: status < 500, duration_ms: durationMs });
    const response = answerResponse(this, res, bytes, node.id, durationMs);
    const ok = this.answerStatus < 400;
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

  /** A streamed answer: the relay owns the rest of the request's life (and the slot). */
  #stream(node: PickedNode, res: UpstreamAnswer): Response {
    const face = this.face;
    const upstream = this.#upstream!;
    const mode = face.relayMode(upstream);
    const translator = face.streamTranslator(this.endpoint, this.requestedModel, upstream.context);
    const relay = new StreamRelay({
      mode,
      translator,
      body: res.source(),
      upstream: this.upstreamCall!,
      owner: this,
      now: this.ctx.skeid.now,
      startedAt: this.startedAt,
      idle: this.ctx.idle,
      keepaliveMs: mode === "translate" ? this.ctx.keepaliveMs : undefined,
    });
    // Raw and stripped streams keep the upstream's headers; a translated one gets its own.
    const pairs: readonly (readonly [string, string])[] = mode === "translate"
      ? [["content-type", translator.contentType], ["cache-control", "no-cache"]]
      : res.pairs();
    this.#relaying = true;
    const body = new ReadableStream<Uint8Array>(relay);
    return relayedResponse(res.status, body, pairs, node.id, this.requestId);
  }

  /** RelayOwner: the stream ended (done, broke, client gone). */
  relayEnded(outcome: RelayOutcome): void {
    const node = this.#node!;
    const durationMs = this.ctx.skeid.now() - this.startedAt;
    let status = this.#upstreamStatus;
    let ok = true;
    let errorType: string | undefined;
    let errorMessage: string | undefined;
    if (outcome.end === "aborted") {
      this.release({ aborted: true, duration_ms: durationMs });
      status = 499;
      ok = false;
      errorType = "client_closed";
      errorMessage = "client closed the stream";
    } else if (outcome.end === "broken") {
      this.release({ ok: false, duration_ms: durationMs });
      status = 502;
      ok = false;
      errorType = "upstream_error";
      errorMessage = `Upstream error: ${outcome.error ?? "stream broke"}`;
      this.ctx.metrics.attemptFailed(node.id, "stream_broken");
    } else {
      this.release({ ok: true, duration_ms: durationMs });
    }
    this.#record(status, ok, {
      usage: outcome.usage,
      toolCalls: outcome.toolCalls,
      errorType,
      errorMessage,
      contentBytes: outcome.contentBytes,
      ttftMs: outcome.ttftMs,
      durationMs,
    });
    this.ctx.metrics.requestDone(node.id, status, durationMs);
    this.#log(status, outcome.end);
    this.#end();
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

  /** The client went away: nobody reads this answer. */
  #gone(): Response {
    this.#log(499, "client_closed");
    return new Response(null, { status: 499, headers: { "x-request-id": this.requestId } });
  }

  #record(
    status: number,
    ok: boolean,
    extra: UsageOutcome & { durationMs?: number },
  ): void {
    const node = this.#node;
    if (!node) return;
    try {
      const event = usageEvent(this.ctx.skeid, {
        createdAt: this.ctx.createdAt(this.ctx.skeid.now()),
        requestId: this.requestId,
        apiFormat: this.face.name,
        endpoint: this.endpoint,
        apiKeyId: this.apiKeyId,
        node,
        servedModel: this.#servedModel,
        requestedModel: this.requestedModel,
        status,
        ok,
        durationMs: extra.durationMs ?? this.ctx.skeid.now() - this.startedAt,
        attempts: this.attempts,
        response: extra.response,
        usage: extra.usage,
        toolCalls: extra.toolCalls,
        errorType: extra.errorType,
        errorMessage: extra.errorMessage,
        contentBytes: extra.contentBytes,
        ttftMs: extra.ttftMs,
      });
      this.ctx.recorder.record(event);
    } catch (err) {
      this.ctx.logger.error("usage_lost", {
        request_id: this.requestId,
        error: errorMessage(err),
      });
    }
  }

  /**
   * Reads a whole upstream body within the upstream timeout; undefined when it failed. A body
   * that came with the head is answered synchronously.
   */
  #readAll(
    res: UpstreamAnswer,
  ): Uint8Array<ArrayBuffer> | undefined | Promise<Uint8Array<ArrayBuffer> | undefined> {
    const whole = res.whole;
    if (whole !== undefined) return whole;
    return this.#readAllAsync(res, this.upstreamCall!);
  }

  async #readAllAsync(
    res: UpstreamAnswer,
    call: Abortable,
  ): Promise<Uint8Array<ArrayBuffer> | undefined> {
    // The whole body within the upstream timeout (the idle watch, no timer of its own).
    const guard = { lastActivity: this.ctx.idle.now(), idleTimeout: () => call.abort() };
    this.ctx.idle.add(guard);
    try {
      return await res.bytes();
    } catch {
      return undefined;
    } finally {
      this.ctx.idle.delete(guard);
    }
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.ctx.exchangeEnded(this);
  }

  #log(status: number, outcome: string): void {
    if (!this.ctx.logRequests) return;
    this.ctx.logger.debug("request", {
      request_id: this.requestId,
      endpoint: this.endpoint,
      api_format: this.face.name,
      api_key_id: this.apiKeyId,
      model: this.requestedModel,
      served_model: this.#servedModel || undefined,
      node: this.#node?.id,
      status,
      outcome,
      attempts: this.attempts,
      duration_ms: this.ctx.skeid.now() - this.startedAt,
    });
  }
}
