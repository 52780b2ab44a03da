/**
 * The request lifecycle of a proxied call: identity, body, plan, walk, upstream attempts with
 * failover before the first byte, the answer (relayed or translated), the usage event.
 *
 * One `Exchange` object per client request carries the state; its methods are the steps, so the
 * hot path allocates one object instead of a closure per step.
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";
import { errorMessage } from "../error_message.ts";
import type { Skeid } from "../core/skeid.ts";
import type { Node, PickedNode } from "../core/types.ts";
import type { Face, JsonObject, UpstreamRequest } from "../faces/face.ts";
import { FaceError } from "../faces/face.ts";
import { readUpstreamError } from "../faces/errors.ts";
import { StreamState } from "../faces/stream_state.ts";
import type { Logger } from "../log.ts";
import type { UsageRecorder } from "../usage/types.ts";
import { errorResponse, jsonResponse, Refusal } from "./errors.ts";
import { ANONYMOUS, type KeyIdCache, requestKeyId } from "./identity.ts";
import { type RelayMode, type RelayOutcome, type RelayOwner, StreamRelay } from "./relay.ts";
import { Http1Abort, type Http1Client } from "./http1.ts";
import type { Linked } from "./inflight.ts";
import {
  type Abortable,
  answerOfResponse,
  fetchUpstream,
  hopsOf,
  type IdleWatch,
  MAX_HOPS,
  relayedResponse,
  sendUpstream,
  type UpstreamAnswer,
  upstreamHeaders,
  UpstreamTransportError,
  upstreamUrl,
} from "./upstream.ts";
import { usageEvent, type UsageOutcome } from "./usage.ts";
import { RouteWalk } from "./walk.ts";
import type { WaiterQueue } from "./wait.ts";

/** The counters the proxy feeds (the admin plane's GatewayMetrics satisfies it). */
export interface ProxyMetrics {
  /** A request refused before forwarding with `status` (no usage event is written for it). */
  refusal(model: string, status: number, reason: string): void;
  /** 503: no eligible node for the requested model at all. */
  noNode(model: string): void;
  /** 429: eligible nodes existed but none was admitted within the waits. */
  saturation(model: string): void;
  /** One upstream attempt on a node failed for `reason` (failed over, or ending the request). */
  attemptFailed(nodeId: string, reason: string): void;
  /**
   * A forwarded request ended on a node with `status` after `durationMs` (capacity wait included).
   */
  requestDone(nodeId: string, status: number, durationMs: number): void;
}

/** Everything a request needs from the gateway that runs it. */
export interface ProxyContext {
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
  /** Bound on an upstream attempt's wait for headers, and on body inactivity, ms. */
  readonly upstreamTimeoutMs: number;
  /**
   * A translated stream whose upstream is silent this long gets the face's keepalive (Anthropic
   * `ping`), ms; 0 or absent = never. Driven by `idle`'s sweep.
   */
  readonly keepaliveMs?: number;
  /** The shared upstream HTTP client (connection pool). */
  readonly httpClient?: Deno.HttpClient;
  /** The fetch used upstream (tests may wrap it). */
  readonly fetch?: typeof fetch;
  /** The HTTP/1.1 client for `http:` upstreams; without one every call goes through fetch. */
  readonly http1?: Http1Client;
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

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** An attempt that failed before the first byte. */
interface Failure {
  node: PickedNode;
  /** Set when the upstream answered (429/5xx): passed through when it is the last failure. */
  status?: number;
  answer?: UpstreamAnswer;
  body?: Uint8Array<ArrayBuffer>;
  reason: string;
}

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
export class Exchange implements RelayOwner, Linked<Exchange> {
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
  /**
   * The client's `x-request-id` (1–200 chars) or a generated `req_<ms>_<n>`; sent back in the
   * answer.
   */
  readonly requestId: string;
  /** The customer key id of the request, or `anonymous` when it presented no customer key. */
  apiKeyId = ANONYMOUS;
  /** The requested model (the client's `model`); empty until the body was read. */
  requestedModel = "";
  #upstream: UpstreamRequest | undefined;
  #rawBody: Uint8Array<ArrayBuffer> | undefined;
  /** Upstream body bytes per served model (a failover to the same model reuses them). */
  #bodyModel: string | undefined;
  #bodyBytes: BodyInit | undefined;
  #stripUsage = false;
  #hops = 1;
  /** Upstream attempts actually sent (a node skipped for a missing upstream key is not counted). */
  attempts = 0;
  #node: PickedNode | undefined;
  #servedModel = "";
  #upstreamStatus = 0;
  #controller: Abortable | undefined;
  #ended = false;

  /** Stamps the start time and the request id; nothing else happens until `run()`. */
  constructor(ctx: ProxyContext, face: Face, endpoint: string, req: Request) {
    this.ctx = ctx;
    this.face = face;
    this.endpoint = endpoint;
    this.req = req;
    this.startedAt = ctx.skeid.now();
    const given = req.headers.get("x-request-id");
    this.requestId = given !== null && given.length > 0 && given.length <= 200
      ? given
      : `req_${this.startedAt}_${Math.floor(Math.random() * 1_000_000)}`;
  }

  /** The node serving the request, once admitted. */
  get nodeId(): string | undefined {
    return this.#node?.id;
  }

  /** Runs the whole lifecycle. */
  async run(): Promise<Response> {
    this.ctx.exchangeStarted(this);
    let streaming = false;
    try {
      const res = await this.#run();
      streaming = this.#relaying;
      return res;
    } catch (err) {
      if (err instanceof Refusal) {
        if (!err.counted) this.ctx.metrics.refusal(this.requestedModel, err.status, err.reason);
        this.#log(err.status, err.reason);
        return errorResponse(this.face, err.status, err.type, err.message, this.requestId);
      }
      this.ctx.logger.error("proxy_error", {
        request_id: this.requestId,
        endpoint: this.endpoint,
        error: errorMessage(err),
      });
      return errorResponse(this.face, 500, "api_error", "Internal gateway error", this.requestId);
    } finally {
      if (!streaming) this.#end();
    }
  }

  /** Stops the upstream at once (shutdown grace ran out). */
  forceClose(): void {
    this.#controller?.abort();
  }

  #relaying = false;

  async #run(): Promise<Response> {
    const ctx = this.ctx;
    const skeid = ctx.skeid;
    const routing = skeid.routing;
    const hops = hopsOf(this.req.headers);
    if (hops >= MAX_HOPS) {
      throw new Refusal(
        508,
        "loop_detected",
        `Request passed ${hops} Skeid gateways: a node points back at a gateway`,
        "loop_detected",
      );
    }
    this.#hops = hops + 1;
    // The customer key id is usually cached: no await (and no microtask) then.
    const identified = this.#identify(routing.trust_key_id_header, routing.require_known_keys);
    if (identified !== undefined) await identified;
    const body = await this.#readBody(routing.max_body_bytes);
    let upstream: UpstreamRequest;
    try {
      upstream = this.face.toUpstream(this.endpoint, body);
    } catch (err) {
      if (err instanceof FaceError) {
        throw new Refusal(err.status, err.type, err.message, "bad_request");
      }
      throw err;
    }
    this.#upstream = upstream;
    this.requestedModel = upstream.requestedModel;
    if (typeof this.requestedModel !== "string" || this.requestedModel === "") {
      throw new Refusal(400, "invalid_request_error", "model: Field required", "model_missing");
    }
    if (upstream.stream && this.face.name === "openai" && upstream.path !== "/embeddings") {
      // DESIGN decision 3: always ask for usage; strip it again when the client did not.
      const so = upstream.body.stream_options;
      const asked = typeof so === "object" && so !== null && !Array.isArray(so) &&
        (so as JsonObject).include_usage === true;
      this.#stripUsage = !asked;
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
        let counted = true;
        if (step.status === 429) ctx.metrics.saturation(this.requestedModel);
        else if (step.status === 503) ctx.metrics.noNode(this.requestedModel);
        else counted = false;
        throw new Refusal(step.status, step.type, step.message, step.reason, counted);
      }
      tries++;
      const node = step.node;
      const served = step.tier.model || this.requestedModel;
      let key = ctx.nodeKey(node);
      if (key instanceof Promise) key = await key;
      if (key === null) {
        // DESIGN decision 1: never send the client's credentials to a node that names its own
        // key source. Not the node's failure either: the slot is released as not counted.
        skeid.finishRequest(node.id, { aborted: true });
        ctx.metrics.attemptFailed(node.id, "upstream_key_unavailable");
        walk.exclude(node.id);
        keyMissing++;
        continue;
      }
      this.attempts++;
      this.#node = node;
      this.#servedModel = served;
      const failure = await this.#attempt(node, served, key);
      if (failure === "answered") {
        // The answer is committed: what only a retry would need is let go (a stream holds its
        // Exchange for minutes; a chat body can be large).
        const response = this.#response!;
        this.#response = undefined;
        this.#upstream = undefined;
        this.#rawBody = undefined;
        this.#bodyBytes = undefined;
        return response;
      }
      if (failure === "gone") return this.#gone();
      ctx.metrics.attemptFailed(node.id, failure.reason);
      walk.exclude(node.id);
      last = failure;
    }
    if (!last) {
      // Every candidate named a key source that resolved nothing: the request was never sent.
      ctx.metrics.refusal(this.requestedModel, 503, "upstream_key_unavailable");
      this.#log(503, "upstream_key_unavailable");
      return errorResponse(
        this.face,
        503,
        "upstream_key_unavailable",
        `No upstream key available for model '${this.requestedModel}'`,
        this.requestId,
      );
    }
    return this.#failed(last);
  }

  #response: Response | undefined;

  /** One upstream attempt on an admitted node: the answer, or why it failed before the first byte. */
  async #attempt(
    node: PickedNode,
    served: string,
    key: string | undefined,
  ): Promise<"answered" | "gone" | Failure> {
    const ctx = this.ctx;
    const skeid = ctx.skeid;
    const upstream = this.#upstream!;
    const url = upstreamUrl(node.url, upstream.path);
    const headers = upstreamHeaders(this.req.headers, key, this.#hops);
    const body = this.#bodyFor(served);
    let res: UpstreamAnswer;
    let controller: Abortable;
    try {
      const http1 = ctx.http1;
      if (http1 !== undefined && isPlainHttp(url)) {
        // The lean path: no Request, Response, Headers or AbortController for the upstream.
        const abort = new Http1Abort();
        this.#controller = controller = abort;
        res = await sendUpstream({
          client: http1,
          url,
          headers,
          body: typeof body === "string" ? encoder.encode(body) : body as Uint8Array,
          abort,
          timeoutMs: ctx.upstreamTimeoutMs,
          watch: ctx.idle,
        });
      } else {
        const abort = new AbortController();
        this.#controller = controller = abort;
        const call = await fetchUpstream({
          controller: abort,
          url,
          headers,
          body,
          timeoutMs: ctx.upstreamTimeoutMs,
          watch: ctx.idle,
          client: ctx.httpClient,
          fetch: ctx.fetch,
        });
        res = answerOfResponse(call.response);
      }
    } catch (err) {
      const kind = err instanceof UpstreamTransportError ? err.kind : "connect";
      const reason = errorMessage(err);
      if (kind === "aborted") {
        // Stopped from here (shutdown grace ran out): not the node's failure.
        skeid.finishRequest(node.id, { aborted: true });
        this.#record(499, false, { errorType: "aborted", errorMessage: reason });
        return "gone";
      }
      skeid.finishRequest(node.id, { ok: false });
      return { node, reason };
    }
    const status = res.status;
    this.#upstreamStatus = status;
    // The passive probe: rate-limit headers and Retry-After off every upstream answer (the core
    // reads nothing from an answer without them, unless it is a 429).
    if (status === 429 || res.hasCapacityHeaders) {
      skeid.observeResponseHeaders(node.id, res.headers(), status);
    }

    if (FAILOVER_STATUSES.has(status)) {
      let body = this.#readAll(res, controller);
      if (body instanceof Promise) body = await body;
      skeid.finishRequest(node.id, { ok: false });
      return {
        node,
        status,
        answer: res,
        body: body ?? new Uint8Array(0),
        reason: `upstream answered ${status}`,
      };
    }

    const type = res.header("content-type") ?? "";
    if (upstream.stream && status < 400 && res.hasBody && type.includes("text/event-stream")) {
      this.#response = this.#stream(node, res, controller);
      return "answered";
    }

    let bytes = this.#readAll(res, controller);
    if (bytes instanceof Promise) bytes = await bytes;
    if (bytes === undefined) {
      skeid.finishRequest(node.id, { ok: false });
      return { node, reason: "upstream body could not be read" };
    }
    this.#response = this.#answer(node, res, bytes);
    return "answered";
  }

  /** The upstream body of this request for a served model (raw client bytes when unchanged). */
  #bodyFor(served: string): BodyInit {
    if (this.#bodyModel === served && this.#bodyBytes !== undefined) return this.#bodyBytes;
    const upstream = this.#upstream!;
    const body = upstream.body;
    let bytes: BodyInit;
    if (
      this.face.name === "openai" && body.model === served && !this.#stripUsage &&
      this.#rawBody !== undefined
    ) {
      bytes = this.#rawBody;
    } else {
      body.model = served;
      if (this.#stripUsage) {
        const so = body.stream_options;
        body.stream_options = typeof so === "object" && so !== null && !Array.isArray(so)
          ? { ...(so as JsonObject), include_usage: true }
          : { include_usage: true };
      }
      bytes = JSON.stringify(body);
    }
    this.#bodyModel = served;
    this.#bodyBytes = bytes;
    return bytes;
  }

  /** A non-streamed answer (any status other than a failover one). */
  #answer(node: PickedNode, res: UpstreamAnswer, bytes: Uint8Array<ArrayBuffer>): Response {
    const ctx = this.ctx;
    const status = res.status;
    const upstream = this.#upstream!;
    const openai = this.face.name === "openai";
    let parsed: unknown;
    if (bytes.byteLength > 0) {
      try {
        parsed = JSON.parse(decoder.decode(bytes));
      } catch {
        parsed = undefined;
      }
    }
    const answer = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? parsed as JsonObject
      : undefined;
    const ok = status < 400;
    const durationMs = ctx.skeid.now() - this.startedAt;
    ctx.skeid.finishRequest(node.id, { ok: status < 500, duration_ms: durationMs });

    let errorType: string | undefined;
    let errorMessage: string | undefined;
    let response: Response;
    if (ok && (answer !== undefined || openai)) {
      if (openai) {
        response = this.#passthrough(res, bytes, node.id);
      } else {
        const client = this.face.fromUpstream(
          this.endpoint,
          answer!,
          this.requestedModel,
          upstream.context,
          { totalMs: durationMs },
        );
        response = jsonResponse(status, client, this.requestId, node.id);
      }
    } else if (ok) {
      // A translated face cannot carry an answer that is not a JSON object.
      errorType = "upstream_error";
      errorMessage = "Upstream answer is not a JSON object";
      response = errorResponse(
        this.face,
        502,
        "upstream_error",
        `Upstream error: ${errorMessage}`,
        this.requestId,
        node.id,
      );
      this.#finishAnswer(node, 502, false, answer, errorType, errorMessage, durationMs);
      return response;
    } else {
      // DESIGN decision 2: OpenAI passes upstream errors through; the others reshape them.
      errorType = "upstream_error";
      errorMessage = readUpstreamError(status, parsed ?? decoder.decode(bytes)).message;
      response = openai ? this.#passthrough(res, bytes, node.id) : jsonResponse(
        status,
        this.face.upstreamErrorBody(status, parsed),
        this.requestId,
        node.id,
      );
    }
    this.#finishAnswer(node, status, ok, answer, errorType, errorMessage, durationMs);
    return response;
  }

  #finishAnswer(
    node: PickedNode,
    status: number,
    ok: boolean,
    answer: JsonObject | undefined,
    errorType: string | undefined,
    errorMessage: string | undefined,
    durationMs: number,
  ): void {
    this.#record(status, ok, {
      response: answer,
      toolCalls: ok ? toolCallsOf(answer) : undefined,
      errorType,
      errorMessage,
      durationMs,
    });
    this.ctx.metrics.requestDone(node.id, status, durationMs);
    this.#log(status, ok ? "ok" : "upstream_error");
  }

  /** The upstream's status, headers and bytes, plus ours. */
  #passthrough(res: UpstreamAnswer, bytes: Uint8Array<ArrayBuffer>, nodeId: string): Response {
    const body = bytes.byteLength > 0 ? bytes : null;
    return relayedResponse(res.status, body, res.pairs(), nodeId, this.requestId);
  }

  /** A streamed answer: the relay owns the rest of the request's life. */
  #stream(node: PickedNode, res: UpstreamAnswer, controller: Abortable): Response {
    const openai = this.face.name === "openai";
    const upstream = this.#upstream!;
    let mode: RelayMode;
    const opts = {
      body: res.source(),
      upstream: controller,
      owner: this,
      now: this.ctx.skeid.now,
      startedAt: this.startedAt,
      idle: this.ctx.idle,
    };
    let relay: StreamRelay;
    let pairs: readonly (readonly [string, string])[];
    if (openai) {
      mode = this.#stripUsage ? "strip" : "raw";
      pairs = res.pairs();
      relay = new StreamRelay({ ...opts, mode, state: new StreamState("call_skeid_") });
    } else {
      mode = "translate";
      const translator = this.face.streamTranslator(
        this.endpoint,
        this.requestedModel,
        upstream.context,
      );
      pairs = [["content-type", translator.contentType], ["cache-control", "no-cache"]];
      relay = new StreamRelay({ ...opts, mode, translator, keepaliveMs: this.ctx.keepaliveMs });
    }
    this.#relaying = true;
    const body = new ReadableStream<Uint8Array>(relay);
    return relayedResponse(res.status, body, pairs, node.id, this.requestId);
  }

  /** RelayOwner: the stream ended (done, broke, client gone). */
  relayEnded(outcome: RelayOutcome): void {
    const node = this.#node!;
    const skeid = this.ctx.skeid;
    const durationMs = skeid.now() - this.startedAt;
    let status = this.#upstreamStatus;
    let ok = true;
    let errorType: string | undefined;
    let errorMessage: string | undefined;
    if (outcome.end === "aborted") {
      skeid.finishRequest(node.id, { aborted: true, duration_ms: durationMs });
      status = 499;
      ok = false;
      errorType = "client_closed";
      errorMessage = "client closed the stream";
    } else if (outcome.end === "broken") {
      skeid.finishRequest(node.id, { ok: false, duration_ms: durationMs });
      status = 502;
      ok = false;
      errorType = "upstream_error";
      errorMessage = `Upstream error: ${outcome.error ?? "stream broke"}`;
      this.ctx.metrics.attemptFailed(node.id, "stream_broken");
    } else {
      skeid.finishRequest(node.id, { ok: true, duration_ms: durationMs });
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

  /** Every attempt failed before the first byte: the last upstream answer, or 502. */
  #failed(last: Failure): Response {
    const ctx = this.ctx;
    const node = last.node;
    const durationMs = ctx.skeid.now() - this.startedAt;
    let response: Response;
    let status: number;
    let errorMessage: string;
    if (last.status !== undefined && last.answer !== undefined && last.body !== undefined) {
      // The last upstream answer passes through (OpenAI) or is reshaped (other faces): the
      // client learns what the upstream said (e.g. its own 429 and Retry-After).
      status = last.status;
      const text = decoder.decode(last.body);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      errorMessage = readUpstreamError(status, parsed ?? text).message;
      if (this.face.name === "openai") {
        const body = last.body.byteLength > 0 ? last.body : null;
        response = relayedResponse(status, body, last.answer.pairs(), node.id, this.requestId);
      } else {
        response = jsonResponse(
          status,
          this.face.upstreamErrorBody(status, parsed),
          this.requestId,
          node.id,
        );
      }
    } else {
      status = 502;
      errorMessage = `Upstream error: ${last.reason}`;
      response = errorResponse(
        this.face,
        502,
        "upstream_error",
        errorMessage,
        this.requestId,
        node.id,
      );
    }
    this.#node = node;
    this.#record(status, false, { errorType: "upstream_error", errorMessage, durationMs });
    ctx.metrics.requestDone(node.id, status, durationMs);
    this.#log(status, "upstream_failed");
    return response;
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
    controller: Abortable,
  ): Uint8Array<ArrayBuffer> | undefined | Promise<Uint8Array<ArrayBuffer> | undefined> {
    const whole = res.whole;
    if (whole !== undefined) return whole;
    return this.#readAllAsync(res, controller);
  }

  async #readAllAsync(
    res: UpstreamAnswer,
    controller: Abortable,
  ): Promise<Uint8Array<ArrayBuffer> | undefined> {
    // The whole body within the upstream timeout (the shared deadline watch, no timer of its own).
    const guard = { lastActivity: this.ctx.idle.now(), idleTimeout: () => controller.abort() };
    this.ctx.idle.add(guard);
    try {
      return await res.bytes();
    } catch {
      return undefined;
    } finally {
      this.ctx.idle.delete(guard);
    }
  }

  /** Sets the customer key id; a promise only while a new key's id is being derived. */
  #identify(trustHeader: boolean, requireKnown: boolean): Promise<void> | undefined {
    const r = requestKeyId(this.req.headers, trustHeader, this.ctx.keyIds);
    if (r instanceof Promise) return r.then((id) => this.#identified(id, requireKnown));
    this.#identified(r, requireKnown);
    return undefined;
  }

  #identified(id: string | undefined, requireKnown: boolean): void {
    if (requireKnown && (id === undefined || !this.ctx.skeid.isKnownKey(id))) {
      throw new Refusal(
        401,
        "authentication_error",
        id === undefined ? "An API key is required" : "Unknown API key",
        "unknown_key",
      );
    }
    this.apiKeyId = id ?? ANONYMOUS;
  }

  async #readBody(limit: number): Promise<JsonObject> {
    const req = this.req;
    const declared = req.headers.get("content-length");
    if (declared !== null) {
      const n = Number(declared);
      if (Number.isFinite(n) && n > limit) {
        throw new Refusal(413, "invalid_request_error", bodyTooLarge(limit), "body_too_large");
      }
    }
    let bytes: Uint8Array<ArrayBuffer>;
    if (declared !== null || req.body === null) {
      bytes = new Uint8Array(await req.arrayBuffer());
      if (bytes.byteLength > limit) {
        throw new Refusal(413, "invalid_request_error", bodyTooLarge(limit), "body_too_large");
      }
    } else {
      bytes = await readLimited(req.body, limit);
    }
    this.#rawBody = bytes;
    let parsed: unknown;
    try {
      parsed = JSON.parse(decoder.decode(bytes));
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new Refusal(400, "invalid_request_error", "Invalid JSON body", "invalid_json");
    }
    return parsed as JsonObject;
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

function bodyTooLarge(limit: number): string {
  return `Request body too large (limit ${limit} bytes)`;
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
      throw new Refusal(413, "invalid_request_error", bodyTooLarge(limit), "body_too_large");
    }
    parts.push(value);
  }
  return concatBytes(parts, total);
}

/** Whether an upstream URL is plain `http:` (the HTTP/1.1 client's). */
function isPlainHttp(url: string): boolean {
  return url.length > 5 && url.slice(0, 5).toLowerCase() === "http:";
}

/** Tool calls of a non-streamed chat answer (`choices[0].message.tool_calls`). */
function toolCallsOf(answer: JsonObject | undefined): unknown[] | undefined {
  const choices = answer?.choices;
  if (!Array.isArray(choices) || choices.length === 0) return undefined;
  const first = choices[0];
  if (typeof first !== "object" || first === null) return undefined;
  const message = (first as JsonObject).message;
  if (typeof message !== "object" || message === null) return undefined;
  const calls = (message as JsonObject).tool_calls;
  return Array.isArray(calls) ? calls : undefined;
}
