/**
 * One client request from arrival to its usage event, read top to bottom: the intake
 * (`intake.ts`), the key step (`key_step.ts`), the route plan and the walk (`walk.ts`), upstream
 * attempts with failover before the first byte (`call.ts`), the answer (`answer.ts`) or the relay
 * (`relay.ts`), and the conclusion of each attempt: the release of its admission slot and the
 * usage event.
 *
 * One `Exchange` object per client request carries the state; its methods are the steps, so the
 * hot path allocates one object instead of a closure per step. Each step returns what it decided
 * (the key step its pass, an attempt its `AttemptResult`, the answer its `Answered` record, the
 * relay its `RelayOutcome`, a face's own intake step its `FaceIntake`), and only the Exchange
 * writes its fields. Other modules read the request through the read-only
 * views they name (`AnswerTarget`, `RelayRequest`, `UsageRequest`, `LoggedRequest`). An attempt's
 * result is concluded in one place (`#conclude`; `relayEnded` for a stream): every release's
 * outcome comes from one mapping (`finishOutcome`), every usage event from `#record`.
 *
 * @module
 */
import type { InboundRequest } from "../edge/inbound_request.ts";
import { errorMessage } from "../error_message.ts";
import { clientLeft, streamEnd, watchClient } from "./abort_billing.ts";
import { estimateInputTokens } from "./estimate.ts";
import type { FinishOutcome, PickedNode } from "../core/types.ts";
import type { Face, FaceName, ResponseTicket, UpstreamRequest } from "../faces/face.ts";
import type { JsonObject } from "../core/json.ts";
import {
  type Answered,
  answerResponse,
  type AnswerTarget,
  parseAnswer,
  transportFailureResponse,
  upstreamErrorResponse,
} from "./answer.ts";
import {
  type CallStop,
  callStop,
  callUpstream,
  FAILOVER_STATUSES,
  transportOutcome,
} from "./call.ts";
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
import { type TraceContext, traceContextOf } from "./trace_context.ts";
import type { RequestTelemetry } from "../telemetry/telemetry.ts";
import { type Abortable, readWhole, type UpstreamAnswer } from "./upstream_answer.ts";
import { recordUsage, type UsageOutcome } from "./usage_facts.ts";
import { logRequest } from "./request_log.ts";
import { type NodeFaces, nodeFaces } from "./native.ts";
import { RouteWalk } from "./walk.ts";
import type { ProxyContext } from "./context.ts";

/** An attempt that failed before the first byte: the request fails over on it. */
interface Failure {
  readonly kind: "failure";
  /** The node the attempt went to. */
  readonly node: PickedNode;
  /** What the node's transport did (its release): no answer, or an answer to fail over on. */
  readonly transport: "failure" | "answered";
  /** Set when the upstream answered (429/5xx): passed on when it is the last failure. */
  readonly answer?: UpstreamAnswer;
  /** The body of that answer. */
  readonly body?: Uint8Array<ArrayBuffer>;
  /** Why it failed (connection refused, `upstream answered 503`, ...). */
  readonly reason: string;
}

/** A whole (non-streamed) upstream answer, read: the answer step makes the client's of it. */
interface Whole {
  readonly kind: "whole";
  /** The upstream's answer (its status and headers). */
  readonly answer: UpstreamAnswer;
  /** Its body. */
  readonly bytes: Uint8Array<ArrayBuffer>;
  /** Arrival to the answer read, ms (the release's and the usage event's duration). */
  readonly durationMs: number;
}

/** The client left during the call, or the call was stopped here: 499, with the event's facts. */
interface Gone {
  readonly kind: "gone";
  /** The usage event's facts. */
  readonly facts: UsageOutcome;
}

/** The node names its own key source and has no key (ADR 0013): nothing was sent. */
const NO_KEY = { kind: "no_key" } as const;

/**
 * What an attempt came to: a failure to fail over on, a whole answer, the client gone, no upstream
 * key, or a stream (the client's `Response`; its relay owns the rest of the request's life).
 */
type AttemptResult = Failure | Whole | Gone | typeof NO_KEY | Response;

/** What concluding an attempt leaves the walk with: the client's answer, gone, or go on. */
type Concluded = Response | "gone" | Failure | typeof NO_KEY;

/** How an attempt's hold on its node ended, as its release counts it (`finishOutcome`). */
type SlotEnd = "not_counted" | Failure["transport"] | "whole" | RelayOutcome["end"];

/** Released as not counted: not the node's doing (stopped here, client gone, no key, a fault). */
const NOT_COUNTED: FinishOutcome = Object.freeze({ aborted: true });
/** The node gave no HTTP answer (connect error, timeout, reset before the first byte). */
const TRANSPORT_FAILED: FinishOutcome = Object.freeze({ ok: false, transport: "failure" });
/** The node answered, with a status to fail over on or a body that could not be read. */
const REFUSED: FinishOutcome = Object.freeze({ ok: false, transport: "answered" });

/**
 * The one mapping from how an attempt ended to its release: a failure's transport, a whole
 * answer (`status` the upstream's: below 500 counts as ok), a relay's end, or not counted;
 * `durationMs` is arrival to the end. A stream that ended as aborted
 * or failed (the gateway's failure, not the node's) is not counted, its duration is.
 */
function finishOutcome(
  end: SlotEnd,
  status: number,
  durationMs: number,
  ttftMs?: number,
): FinishOutcome {
  switch (end) {
    case "not_counted":
      return NOT_COUNTED;
    case "failure":
      return TRANSPORT_FAILED;
    case "answered":
      return REFUSED;
    case "whole":
      // A whole answer's first token arrives with it.
      return {
        ok: status < 500,
        duration_ms: durationMs,
        transport: "answered",
        ttft_ms: durationMs,
      };
    case "done":
    case "broken":
      return {
        ok: end === "done",
        duration_ms: durationMs,
        transport: "answered",
        ttft_ms: ttftMs,
      };
    case "aborted":
    case "failed":
      return { aborted: true, ok: false, duration_ms: durationMs, transport: "answered" };
  }
}

/** Proxies one client request on `endpoint` through `face`. Never throws. */
export function handleProxy(
  ctx: ProxyContext,
  face: Face,
  endpoint: string,
  req: InboundRequest,
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
  /** The client-facing endpoint path the request was made on (the usage event's `endpoint`). */
  readonly endpoint: string;
  /** The face's name as the usage event's `api_format` (a label only: nothing branches on it). */
  readonly apiFormat: FaceName;
  /** The client's request. */
  readonly req: InboundRequest;
  /** Epoch ms the request arrived (the core's clock); durations and ttft count from here. */
  readonly startedAt: number;
  /** The client's `x-request-id` (1–200 chars) or a generated one; sent back in the answer. */
  readonly requestId: string;
  /** The request's trace (the client's `traceparent` continued, or a new one) and its span. */
  readonly trace: TraceContext;
  /** The request's spans (ADR 0039): a no-op when OpenTelemetry is off. */
  readonly #span: RequestTelemetry;
  /** Keeps the answer in the response store (ADR 0028); undefined when it is not kept. */
  responseTicket: ResponseTicket | undefined;
  #face: Face;
  #apiKeyId = ANONYMOUS;
  #requestedModel = "";
  #attempts = 0;
  #stop: CallStop | undefined;
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

  /** Stamps the start time, the request id and the trace; nothing else happens until `run()`. */
  constructor(ctx: ProxyContext, face: Face, endpoint: string, req: InboundRequest) {
    this.ctx = ctx;
    this.#face = face;
    ({ name: this.apiFormat } = face);
    this.endpoint = endpoint;
    this.req = req;
    this.startedAt = ctx.skeid.now();
    this.requestId = requestIdOf(req.headers, this.startedAt);
    const span = ctx.telemetry.request(req, endpoint, face.name);
    this.#span = span;
    this.trace = span.trace ?? traceContextOf(req.headers);
  }

  /** The face of the current attempt: the client's, or its native sibling (`native.ts`). */
  get face(): Face {
    return this.#face;
  }

  /** The customer key id of the request, or `anonymous` when it presented no customer key. */
  get apiKeyId(): string {
    return this.#apiKeyId;
  }

  /** The requested model (the client's `model`); empty until the body was read. */
  get requestedModel(): string {
    return this.#requestedModel;
  }

  /** Upstream attempts actually sent (a node skipped for a missing upstream key is not counted). */
  get attempts(): number {
    return this.#attempts;
  }

  /** AnswerTarget: the face's context of the current upstream request. */
  get faceContext(): JsonObject | undefined {
    return this.#upstream?.context;
  }

  /** The stop handle of the upstream call in flight (shutdown, the relay and body reads use it). */
  get upstreamCall(): Abortable | undefined {
    return this.#stop;
  }

  /** Runs the whole lifecycle. */
  async run(): Promise<Response> {
    this.ctx.exchangeStarted(this);
    try {
      return await this.#run();
    } catch (err) {
      if (err instanceof Refusal) {
        this.ctx.metrics.refusal(this.#requestedModel, err.status, err.reason);
        this.#log(err.status, err.reason);
        return refusalResponse(this.#face, err, this.requestId);
      }
      const message = errorMessage(err);
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: message,
      });
      // A forwarded request that failed in the gateway still gets its one usage event.
      this.#record(500, false, { errorType: "api_error", errorMessage: message });
      return errorResponse(this.#face, 500, "api_error", "Internal gateway error", this.requestId);
    } finally {
      // A slot still held here was left by an error thrown mid-attempt (not the node's failure:
      // released as not counted); a stream holds its slot until the relay ends.
      if (!this.#relaying) {
        this.#release("not_counted");
        this.#end();
      }
      this.ctx.buffered?.release(this.#held);
    }
  }

  /**
   * Releases the admission slot this request holds: the one `finishRequest` that pairs the
   * walk's `startRequest` (through `#release`, whose outcome `finishOutcome` maps). A call that
   * finds no slot held changes nothing and answers false (so a double release is a no-op a test
   * can see).
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
    this.#stop?.abort();
  }

  async #run(): Promise<Response> {
    const ctx = this.ctx;
    const skeid = ctx.skeid;
    const routing = skeid.routing;
    this.#hops = nextHop(this.req.headers);
    // The customer key id is usually cached: no await (and no microtask) then.
    let id = customerKeyId(ctx, this.req.headers);
    if (id instanceof Promise) id = await id;
    this.#apiKeyId = id;
    const raw = await readBody(this.req, routing.max_body_bytes, ctx);
    this.#held = raw.byteLength;
    const scan = scanJson(raw);
    this.#rawBody = forwardableBody(raw, scan);
    let body = jsonBody(raw, scan);
    let echo: JsonObject | undefined;
    const face = this.#face;
    if (face.intake !== undefined) {
      // The face's own step (the Responses face continues a kept conversation, ADR 0028).
      let taken = face.intake(this, body);
      if (taken instanceof Promise) taken = await taken;
      ({ body, echo } = taken);
      this.responseTicket = taken.ticket;
    }
    const upstream = upstreamRequest(face, this.endpoint, body, echo);
    this.#faces = nodeFaces(face, this.endpoint, body, upstream);
    this.#upstream = upstream;
    const model = upstream.requestedModel;
    this.#requestedModel = model;
    this.#span.model(model);
    if (typeof model !== "string" || model === "") {
      throw new Refusal(400, "invalid_request_error", "model: Field required", "model_missing");
    }

    const plan = skeid.routePlan({ model, api_key_id: id });
    if (!plan.permitted) throw notPermitted(model, plan.reason);
    // A worker of a group asks the supervisor (ADR 0025): a promise then, only for limited keys.
    this.#span.admitting();
    const pass = admitKey(ctx, id, upstream, plan.tiers);
    this.#key = pass instanceof Promise ? await pass : pass;
    this.#span.keyPassed(this.#key !== undefined);

    const walk = new RouteWalk(skeid, ctx.waiters, plan.tiers, model);
    this.#walk = walk.sharing(id, upstream, routing.max_reserve_tokens)
      .hinting(body, this.req.headers, upstream.body);
    const maxAttempts = Math.max(1, routing.max_attempts);
    let last: Failure | undefined;
    let keyMissing = 0;
    let tries = 0;
    while (tries < maxAttempts) {
      let step = walk.next(this.req);
      if (step instanceof Promise) {
        this.#span.queued(ctx.waiters.size);
        step = await step;
      }
      this.#span.walked(step);
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
      let concluded: Concluded | Promise<Response>;
      if (key === null) {
        // ADR 0013: never send the client's credentials to a node that names its own key
        // source. Not the node's failure either: the slot is released as not counted.
        concluded = this.#conclude(NO_KEY);
      } else {
        this.#attempts++;
        this.#node = node;
        this.#servedModel = step.tier.model || model;
        concluded = this.#conclude(await this.#attempt(node, key));
      }
      if (concluded instanceof Promise) concluded = await concluded;
      if (concluded instanceof Response) {
        // The answer is committed: what only a retry would need is let go (a stream holds its
        // Exchange for minutes; a chat body can be large).
        this.#upstream = undefined;
        this.#rawBody = undefined;
        this.#bodyBytes = undefined;
        this.#key?.stamp(concluded);
        this.#faces = undefined;
        return concluded;
      }
      if (concluded === "gone") return this.#gone();
      if (concluded.kind === "no_key") {
        ctx.metrics.attemptFailed(node.id, "upstream_key_unavailable");
        walk.exclude(node.id);
        keyMissing++;
        continue;
      }
      ctx.metrics.attemptFailed(node.id, concluded.reason);
      walk.exclude(node.id);
      last = concluded;
    }
    if (!last) throw keyUnavailable(model);
    return this.#failed(last);
  }

  /**
   * One upstream attempt on an admitted node, on the node's face; a non-streamed one stops its
   * call when the client leaves (ADR 0027). It releases nothing: `#conclude` does, from its result.
   */
  async #attempt(node: PickedNode, key: string | undefined): Promise<AttemptResult> {
    const faces = this.#faces;
    if (faces?.to(node)) {
      this.#face = faces.face;
      this.#upstream = faces.upstream;
      this.#bodyModel = undefined;
    }
    const url = upstreamUrl(node.url, this.#upstream!.path);
    const stop = callStop(this.ctx, url);
    this.#stop = stop;
    this.#watch = watchClient(this.req, stop, this.#upstream!.stream);
    try {
      return await this.#call(node, key, url, stop);
    } finally {
      this.#watch?.stop();
    }
  }

  /** The upstream call of an attempt, and its answer read (whole) or handed to the relay. */
  async #call(
    node: PickedNode,
    key: string | undefined,
    url: string,
    stop: CallStop,
  ): Promise<AttemptResult> {
    const ctx = this.ctx;
    const upstream = this.#upstream!;
    const headers = nodeHeaders(
      this.req.headers,
      node,
      key,
      this.#hops,
      this.#apiKeyId,
      this.trace,
      this.#span.attempt(node, this.#servedModel, this.#attempts, upstream),
    );
    let res: UpstreamAnswer;
    try {
      res = await callUpstream(
        ctx,
        url,
        headers,
        this.#bodyFor(this.#servedModel),
        stop,
      );
    } catch (err) {
      if (this.#watch?.gone) return this.#left();
      const transport = transportOutcome(err);
      const reason = errorMessage(err);
      // Stopped from here (shutdown grace ran out): not the node's failure.
      if (transport === "aborted") {
        return { kind: "gone", facts: { errorType: "aborted", errorMessage: reason } };
      }
      return { kind: "failure", node, transport, reason };
    }
    const status = res.status;
    this.#upstreamStatus = status;
    // The passive probe: rate-limit headers and Retry-After off every upstream answer (the core
    // reads nothing from an answer without them, unless it is a 429).
    if (status === 429 || res.hasCapacityHeaders) {
      ctx.skeid.observeResponseHeaders(node.id, res.headers(), status);
    }

    if (FAILOVER_STATUSES.has(status)) {
      let body = readWhole(res, stop, ctx.idle);
      if (body instanceof Promise) body = await body;
      if (this.#watch?.gone) return this.#left();
      return {
        kind: "failure",
        node,
        transport: "answered",
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
        response = streamResponse(ctx, this, upstream, res, stop, node.id);
      } catch (err) {
        // No relay owns the body: it is let go here (the slot, the key and the event in `run`).
        res.cancel();
        throw err;
      }
      // The relay owns the rest of the request's life, the slot included.
      this.#relaying = true;
      return response;
    }

    let bytes = readWhole(res, stop, ctx.idle);
    if (bytes instanceof Promise) bytes = await bytes;
    if (bytes === undefined) {
      if (this.#watch?.gone) return this.#left();
      return {
        kind: "failure",
        node,
        transport: "answered",
        reason: "upstream body could not be read",
      };
    }
    return { kind: "whole", answer: res, bytes, durationMs: ctx.skeid.now() - this.startedAt };
  }

  /** A non-streamed request's client left during the call: 499, tokens estimated (ADR 0027). */
  #left(): Gone {
    return { kind: "gone", facts: clientLeft(this.#upstream!.body) };
  }

  /**
   * Concludes an attempt's result, in one place: its release (`finishOutcome`), and for a result
   * that ends the request its answer and usage event. A stream is concluded when its relay ends
   * (`relayEnded`). A whole answer is released before it is answered; kept (response store)
   * before its usage event, which makes a promise only when there is a ticket.
   */
  #conclude(result: AttemptResult): Concluded | Promise<Response> {
    if (result instanceof Response) return result;
    switch (result.kind) {
      case "failure":
        this.#release(result.transport);
        this.#span.attemptFailed(result.reason, result.answer?.status ?? 0);
        return result;
      case "no_key":
        this.#release("not_counted");
        return result;
      case "gone":
        this.#release("not_counted");
        this.#record(499, false, result.facts);
        return "gone";
      case "whole":
        // Released before it is answered: the node's part is over, the answer is the gateway's.
        this.#release("whole", result.answer.status, result.durationMs);
        return this.#answer(result);
    }
  }

  /** The answer step of a whole upstream answer, after its release: kept, then its event. */
  #answer(whole: Whole): Response | Promise<Response> {
    const answered = answerResponse(
      this,
      whole.answer,
      whole.bytes,
      this.#node!.id,
      whole.durationMs,
    );
    const ticket = this.responseTicket;
    const durationMs = whole.durationMs;
    if (answered.status < 400 && ticket !== undefined) {
      return this.#kept(ticket, answered, durationMs);
    }
    return this.#answered(answered, durationMs);
  }

  /** Keeps the answer (ADR 0028), then its usage event. */
  async #kept(ticket: ResponseTicket, answered: Answered, durationMs: number): Promise<Response> {
    await ticket.keep(answered.clientBody ?? answered.response);
    return this.#answered(answered, durationMs);
  }

  /** A whole answer's usage event (the record is its facts), metrics and log line. */
  #answered(answered: Answered, durationMs: number): Response {
    this.#done(this.#node!, answered.status, answered.status < 400, durationMs, answered);
    return answered.reply;
  }

  /** Releases the slot held, with the outcome `end` maps to (`finishOutcome`). */
  #release(end: SlotEnd, status = 0, durationMs = 0, ttftMs?: number): void {
    if (this.#slot !== undefined) this.release(finishOutcome(end, status, durationMs, ttftMs));
  }

  /** The upstream body for a served model (the face's: raw client bytes when unchanged). */
  #bodyFor(served: string): Uint8Array<ArrayBuffer> | string {
    if (this.#bodyModel === served && this.#bodyBytes !== undefined) return this.#bodyBytes;
    const bytes = this.#face.upstreamBody(this.#upstream!, served, this.#rawBody);
    this.#bodyModel = served;
    this.#bodyBytes = bytes;
    return bytes;
  }

  /**
   * RelayOwner: the stream ended (done, broke, client gone, relay failed); the relay held the
   * slot till now. The stream's conclusion: the slot goes first and the key's place last, whatever
   * the event's steps throw.
   */
  relayEnded(outcome: RelayOutcome): void {
    const end = outcome.end;
    try {
      const node = this.#node!;
      const durationMs = this.ctx.skeid.now() - this.startedAt;
      this.#release(end, this.#upstreamStatus, durationMs, outcome.ttftMs);
      if (end === "broken") this.ctx.metrics.attemptFailed(node.id, "stream_broken");
      const facts = streamEnd(outcome, this.#upstreamStatus, this.#inputTokens);
      this.#done(node, facts.status, end === "done", durationMs, {
        usage: facts.usage,
        usageSource: facts.usageSource,
        toolCalls: outcome.toolCalls,
        errorType: facts.errorType,
        errorMessage: facts.errorMessage,
        contentBytes: outcome.contentBytes,
        ttftMs: outcome.ttftMs,
        facts: outcome.facts,
        durationMs,
      }, end);
    } catch (err) {
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: errorMessage(err),
      });
      this.#release("not_counted");
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
    const answered = answer !== undefined && body !== undefined
      ? upstreamErrorResponse(this, answer, body, parseAnswer(body), node.id)
      : transportFailureResponse(this, last.reason, node.id);
    this.#node = node;
    // Not the record itself: a failure's event reads no usage off the upstream's error body.
    this.#done(node, answered.status, false, durationMs, {
      errorType: answered.errorType,
      errorMessage: answered.errorMessage,
      durationMs,
    }, "upstream_failed");
    return answered.reply;
  }

  /** A forwarded request ended with a whole answer: its usage event, metrics and log line. */
  #done(
    node: PickedNode,
    status: number,
    ok: boolean,
    durationMs: number,
    extra: UsageOutcome & { durationMs?: number },
    outcome = ok ? "ok" : "upstream_error",
  ): void {
    this.#record(status, ok, extra);
    this.ctx.metrics.requestDone(node.id, status, durationMs);
    this.#log(status, outcome);
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
    this.#span.recorded(event, extra);
    this.ctx.waiters.served(this.#walk, event);
    this.#key?.settle(event);
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#key?.finish();
    this.#span.end();
    this.ctx.exchangeEnded(this);
  }

  #log(status: number, outcome: string): void {
    this.#span.outcome(status, outcome);
    logRequest(this, this.#servedModel, this.#node?.id, status, outcome);
  }
}
