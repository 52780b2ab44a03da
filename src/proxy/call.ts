/**
 * The upstream call: one request to a node, sent by the HTTP/1.1 client (plain `http:`) or by
 * `fetch` (everything else), bounded by the idle watch until its headers arrive. A call that gets
 * no HTTP answer throws `UpstreamTransportError`, mapped from the client's error in one place.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { Http1Abort, type Http1Client } from "./http1.ts";
import { UnknownCoding } from "./http1_decode.ts";
import { BadHead } from "./http1_head.ts";
import type { IdleWatch, Watched } from "./idle_watch.ts";
import {
  type Abortable,
  answerOfHttp1,
  answerOfResponse,
  type UpstreamAnswer,
} from "./upstream_answer.ts";

/** The upstream clients and bounds of a gateway (a `ProxyContext` satisfies it). */
export interface UpstreamClients {
  /** The HTTP/1.1 client for `http:` upstreams; without one every call goes through fetch. */
  readonly http1?: Http1Client;
  /** The shared HTTP client (connection pool) of `fetch`. */
  readonly httpClient?: Deno.HttpClient;
  /** The fetch used upstream (tests may wrap it). */
  readonly fetch?: typeof fetch;
  /** The shared deadline watch over the wait for headers. */
  readonly idle: IdleWatch;
  /** Bound on the wait for response headers, ms. */
  readonly upstreamTimeoutMs: number;
}

/** Upstream statuses that fail over to the next node (before the first byte). */
export const FAILOVER_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** A call's stop handle: the HTTP/1.1 client's, or fetch's controller. */
export type CallStop = Http1Abort | AbortController;

/**
 * The stop handle for a call to `url`, made before the call is sent so that its caller holds it
 * while the call runs (shutdown and the client watch stop the call through it): the HTTP/1.1
 * client's when the URL is plain `http:` and there is one, else an `AbortController` for fetch.
 */
export function callStop(clients: UpstreamClients, url: string): CallStop {
  return clients.http1 !== undefined && isPlainHttp(url) ? new Http1Abort() : new AbortController();
}

const encoder = new TextEncoder();

/**
 * Sends one upstream request and waits for its headers: through the HTTP/1.1 client when `stop`
 * is its handle (`callStop`: no `Request`, `Response`, `Headers` or `AbortController` on the way),
 * else through `fetch`. Throws
 * `UpstreamTransportError` (connect / timeout / aborted).
 */
export function callUpstream(
  clients: UpstreamClients,
  url: string,
  headers: [string, string][],
  body: Uint8Array<ArrayBuffer> | string,
  stop: CallStop,
): Promise<UpstreamAnswer> {
  if (stop instanceof AbortController) return fetchAnswer(clients, url, headers, body, stop);
  const http1 = clients.http1;
  if (http1 === undefined) {
    return Promise.reject(new Error("an HTTP/1.1 stop handle needs the HTTP/1.1 client"));
  }
  return sendUpstream({
    client: http1,
    url,
    headers,
    body: typeof body === "string" ? encoder.encode(body) : body,
    abort: stop,
    timeoutMs: clients.upstreamTimeoutMs,
    watch: clients.idle,
  });
}

async function fetchAnswer(
  clients: UpstreamClients,
  url: string,
  headers: [string, string][],
  body: Uint8Array<ArrayBuffer> | string,
  controller: AbortController,
): Promise<UpstreamAnswer> {
  const call = await fetchUpstream({
    controller,
    url,
    headers,
    body,
    timeoutMs: clients.upstreamTimeoutMs,
    watch: clients.idle,
    client: clients.httpClient,
    fetch: clients.fetch,
  });
  return answerOfResponse(call.response);
}

/** Whether an upstream URL is plain `http:` (the HTTP/1.1 client's). */
function isPlainHttp(url: string): boolean {
  return url.length > 5 && url.slice(0, 5).toLowerCase() === "http:";
}

/** Options of `sendUpstream`. */
export interface SendUpstreamOptions {
  /** The HTTP/1.1 client (connection pool) that sends the call. */
  client: Http1Client;
  /** An `http:` URL. */
  url: string;
  /** Request header pairs as sent upstream (the upstream key already in place). */
  headers: Iterable<readonly [string, string]>;
  /** The upstream request's JSON body, encoded. */
  body: Uint8Array;
  /** Stops the call (shutdown) and, after the head, its body. */
  abort: Http1Abort;
  /** Bound on the wait for response headers, ms. */
  timeoutMs: number;
  /** The shared deadline watch. */
  watch: IdleWatch;
}

/**
 * `fetchUpstream` over the HTTP/1.1 client: no `Request`, `Response`, `Headers` or
 * `AbortController` on the way. Throws `UpstreamTransportError` (connect / timeout / aborted).
 */
export async function sendUpstream(opts: SendUpstreamOptions): Promise<UpstreamAnswer> {
  const abort = opts.abort;
  const watch = opts.watch;
  const pending = new PendingAttempt(abort, watch.now());
  watch.add(pending);
  try {
    const answer = await opts.client.send(opts.url, "POST", opts.headers, opts.body, abort);
    return answerOfHttp1(answer);
  } catch (err) {
    throw transportError(err, pending, abort.aborted, opts.timeoutMs);
  } finally {
    watch.delete(pending);
  }
}

/** Why an attempt failed before the first byte, when it did not get an HTTP answer. */
export type TransportFailure = "connect" | "timeout" | "aborted";

/** An attempt that got no HTTP answer. */
export class UpstreamTransportError extends Error {
  /**
   * A failed attempt, for the proxy to fail over on.
   *
   * @param kind why the attempt got no HTTP answer
   * @param message what went wrong, naming no secret
   */
  constructor(readonly kind: TransportFailure, message: string, readonly answered = false) {
    super(message);
    this.name = "UpstreamTransportError";
  }
}

/**
 * What a failed attempt says about the node's transport (ejection, ADR 0021): `aborted` when the
 * call was stopped from here (not the node's doing); a head Skeid refuses (`BadHead`: too large,
 * obs-fold, a bad status line) or a coding it cannot decode still means the node `answered`;
 * anything else that got no answer (connect error or timeout, the header timeout, a reset before
 * the first byte) is a transport `failure`.
 */
export function transportOutcome(err: unknown): "failure" | "answered" | "aborted" {
  if (!(err instanceof UpstreamTransportError)) return "failure";
  if (err.kind === "aborted") return "aborted";
  return err.answered ? "answered" : "failure";
}

/** One upstream fetch in flight: the response once headers arrived, and a way to stop it. */
export interface UpstreamCall {
  /** The upstream's response; its headers have arrived, its body may still be streaming. */
  response: Response;
  /** Aborts the call, body included (client gone, idle timeout, shutdown). */
  controller: AbortController;
}

/** Options of `fetchUpstream`. */
export interface FetchUpstreamOptions {
  /** The upstream URL (the node's base `url` plus the path). */
  url: string;
  /** Request headers as sent upstream (the upstream key already in place). */
  headers: HeadersInit;
  /** The upstream request's JSON body. */
  body: BodyInit;
  /** Aborts the call (client gone, shutdown). */
  signal?: AbortSignal;
  /** The attempt's controller, when the caller wants to stop it too (default: a new one). */
  controller?: AbortController;
  /** Bound on the wait for response headers, ms (a private timer when no `watch` is given). */
  timeoutMs: number;
  /** The shared deadline watch: bounds the wait without a timer per attempt. */
  watch?: IdleWatch;
  /** The shared HTTP client (connection pool), when the runtime has one. */
  client?: Deno.HttpClient;
  /** The fetch to use (tests may wrap it). */
  fetch?: typeof fetch;
}

/** One attempt waiting for its headers, as the deadline watch sees it. */
class PendingAttempt implements Watched {
  lastActivity: number;
  timedOut = false;
  constructor(readonly controller: Abortable, now: number) {
    this.lastActivity = now;
  }
  idleTimeout(): void {
    this.timedOut = true;
    this.controller.abort();
  }
}

/**
 * Sends one upstream request and waits for its headers, at most `timeoutMs`. Throws
 * `UpstreamTransportError` (connect / timeout / aborted); the returned controller aborts the body.
 */
export async function fetchUpstream(opts: FetchUpstreamOptions): Promise<UpstreamCall> {
  const controller = opts.controller ?? new AbortController();
  const outer = opts.signal;
  let onOuterAbort: (() => void) | undefined;
  if (outer) {
    if (outer.aborted) throw new UpstreamTransportError("aborted", "client went away");
    onOuterAbort = () => controller.abort();
    outer.addEventListener("abort", onOuterAbort, { once: true });
  }
  const watch = opts.watch;
  const pending = new PendingAttempt(controller, watch ? watch.now() : 0);
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (watch) watch.add(pending);
  else timer = setTimeout(() => pending.idleTimeout(), opts.timeoutMs);
  try {
    const init: RequestInit & { client?: Deno.HttpClient } = {
      method: "POST",
      headers: opts.headers,
      body: opts.body,
      signal: controller.signal,
      redirect: "manual",
    };
    if (opts.client) init.client = opts.client;
    const response = await (opts.fetch ?? fetch)(opts.url, init);
    return { response, controller };
  } catch (err) {
    const stopped = outer?.aborted === true || controller.signal.aborted;
    throw transportError(err, pending, stopped, opts.timeoutMs);
  } finally {
    if (watch) watch.delete(pending);
    else clearTimeout(timer);
    // After the headers the caller owns the body's lifetime (the relay aborts `controller` when
    // the client goes away), so the link to the outer signal ends here.
    if (outer && onOuterAbort) outer.removeEventListener("abort", onOuterAbort);
  }
}

/** A short, key-free reason for a failed fetch (`connection refused`, ...). */
export function describeFetchError(err: unknown): string {
  const msg = errorMessage(err);
  if (/connection refused|ECONNREFUSED/i.test(msg)) return "connection refused";
  if (/reset|ECONNRESET/i.test(msg)) return "connection reset";
  if (/dns|lookup|name or service/i.test(msg)) return "name resolution failed";
  if (/certificate|tls|ssl/i.test(msg)) return "TLS error";
  // Error messages of fetch name the URL, never a header; keep the first line only.
  return msg.split("\n")[0].slice(0, 200);
}

/** Why a call got no HTTP answer: its header wait ran out, it was stopped, or it failed. */
function transportError(
  err: unknown,
  pending: PendingAttempt,
  stopped: boolean,
  timeoutMs: number,
): UpstreamTransportError {
  if (pending.timedOut) {
    return new UpstreamTransportError(
      "timeout",
      `timed out after ${timeoutMs} ms waiting for response headers`,
    );
  }
  if (stopped) return new UpstreamTransportError("aborted", "the request was stopped");
  const answered = err instanceof BadHead || err instanceof UnknownCoding;
  return new UpstreamTransportError("connect", describeFetchError(err), answered);
}
