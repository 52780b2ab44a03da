/**
 * The upstream call: the node URL, the header rules, the node's own key, and one fetch with a
 * timeout before the headers and an inactivity timeout on the body.
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";
import { errorMessage } from "../error_message.ts";
import type { Node } from "../core/types.ts";
import { CAPACITY_HEADER_NAMES } from "../core/ratelimit.ts";
import type { BodySource, Http1Abort, Http1Answer, Http1Client } from "./http1.ts";
import { type Linked, LinkedList } from "./inflight.ts";

/**
 * The upstream URL of a path below `/v1`: the node URL without trailing `/`; when it ends in `/v1`
 * the path is appended, else `/v1` + path (`http://a:1` → `http://a:1/v1/chat/completions`).
 */
export function upstreamUrl(nodeUrl: string, path: string): string {
  let base = nodeUrl;
  while (base.endsWith("/")) base = base.slice(0, -1);
  return base.endsWith("/v1") ? base + path : base + "/v1" + path;
}

/** Client request headers never forwarded upstream: hop-by-hop plus what the fetch sets itself. */
export const DROPPED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "accept-encoding",
]);

/** Upstream response headers never relayed to the client (the body is re-framed and decoded). */
export const DROPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
  "content-encoding",
]);

/**
 * Headers for the upstream call. With `nodeKey` the node's key replaces the client's credentials:
 * `Authorization: Bearer <nodeKey>` is set and the client's `Authorization` is dropped; without
 * one the client's headers go through (minus the dropped set), an `x-api-key` (Anthropic
 * clients) as `Authorization: Bearer` when the client sent no `Authorization`. `x-api-key` and
 * `anthropic-*` headers are never forwarded. `hops` is this request's hop count
 * (`x-skeid-hops`), one more than it arrived with.
 */
export function upstreamHeaders(
  client: Headers,
  nodeKey: string | undefined,
  hops = 1,
): [string, string][] {
  // Pairs, not a Headers object: fetch builds its own from them, and a Headers handed over would
  // be iterated (sorted) a second time. `forEach` walks the same sorted, combined list as
  // `for…of`, at an eighth of the cost (no iterator objects).
  const out: [string, string][] = [];
  client.forEach((value, name) => {
    // Headers iteration yields lowercase names.
    if (DROPPED_REQUEST_HEADERS.has(name) || name === "content-type" || name === HOPS_HEADER) {
      return;
    }
    if (nodeKey !== undefined && name === "authorization") return;
    // Anthropic-only headers mean nothing to an OpenAI-compatible node (ADR 0003); a client's
    // x-api-key travels as the Bearer token the node reads (below), never as itself.
    if (name === "x-api-key" || name.startsWith("anthropic-")) return;
    out.push([name, value]);
  });
  if (nodeKey !== undefined) out.push(["authorization", `Bearer ${nodeKey}`]);
  else if (!client.has("authorization") && client.has("x-api-key")) {
    out.push(["authorization", `Bearer ${client.get("x-api-key")}`]);
  }
  out.push(["content-type", "application/json"], [HOPS_HEADER, String(hops)]);
  return out;
}

/** Counts the Skeid gateways a request passed through, so a node that points back at the
 * gateway (a config mistake) ends in a refusal instead of a request loop. */
export const HOPS_HEADER = "x-skeid-hops";

/** Most gateways a request may pass (chained Skeids are fine; a loop is not). */
export const MAX_HOPS = 8;

/** The hop count a request arrived with (0 from a client). */
export function hopsOf(headers: Headers): number {
  const raw = headers.get(HOPS_HEADER);
  if (raw === null) return 0;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/** Copies upstream response headers the client may see (minus the dropped set). */
export function relayedResponseHeaders(upstream: Headers): Headers {
  const out = new Headers();
  upstream.forEach((value, name) => {
    if (!DROPPED_RESPONSE_HEADERS.has(name)) out.append(name, value);
  });
  return out;
}

/**
 * The client's answer to a relayed upstream one: `status` and `body`, the upstream's headers
 * (`pairs`, as `Headers` iteration yields them) minus the dropped set, then `x-skeid-node` and
 * `x-request-id` (replacing the upstream's own, in place). Header for header what a `Headers`
 * built by `relayedResponseHeaders` plus two `set`s gives, at a third of the cost: the headers are
 * appended to the response's own list instead of going through a `HeadersInit` conversion.
 */
export function relayedResponse(
  status: number,
  body: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array> | null,
  pairs: readonly (readonly [string, string])[],
  nodeId: string,
  requestId: string,
): Response {
  const res = new Response(body, { status });
  const headers = res.headers;
  let node = false;
  let rid = false;
  for (const [name, value] of pairs) {
    if (DROPPED_RESPONSE_HEADERS.has(name)) continue;
    if (name === "x-skeid-node") {
      if (!node) headers.append(name, nodeId);
      node = true;
    } else if (name === "x-request-id") {
      if (!rid) headers.append(name, requestId);
      rid = true;
    } else {
      headers.append(name, value);
    }
  }
  if (!node) headers.append("x-skeid-node", nodeId);
  if (!rid) headers.append("x-request-id", requestId);
  return res;
}

/**
 * Header pairs as `Headers` iteration yields them: names lowercase, sorted, the values of a
 * repeated name joined with `, ` (`set-cookie` apart, each kept).
 */
export function iteratedPairs(raw: readonly (readonly [string, string])[]): [string, string][] {
  const out: [string, string][] = [];
  let seen: Map<string, number> | undefined;
  let sorted = true;
  for (const [rawName, value] of raw) {
    const name = rawName.toLowerCase();
    if (name !== "set-cookie") {
      seen ??= new Map();
      const at = seen.get(name);
      if (at !== undefined) {
        const prev = out[at][1];
        out[at][1] = prev.length > 0 ? `${prev}, ${value}` : value;
        continue;
      }
      seen.set(name, out.length);
    }
    if (sorted && out.length > 0 && out[out.length - 1][0] > name) sorted = false;
    out.push([name, value]);
  }
  if (!sorted) out.sort((a, b) => (a[0] > b[0] ? 1 : a[0] < b[0] ? -1 : 0));
  return out;
}

/** A source of body pieces: the next one (never empty), null at the end; throws when broken. */
export interface ChunkSource {
  /** The next piece of the body (never empty), or null at its end; throws when the body broke. */
  read(): Promise<Uint8Array | null>;
  /** Stops reading and lets go of the body (client gone, idle timeout). */
  cancel(): void;
}

/** A ReadableStream as a ChunkSource (empty reads skipped). */
export function streamSource(stream: ReadableStream<Uint8Array>): ChunkSource {
  const reader = stream.getReader();
  return {
    async read(): Promise<Uint8Array | null> {
      // Bounded by the stream: every round consumes one read.
      for (;;) {
        const r = await reader.read();
        if (r.done) return null;
        if (r.value.byteLength > 0) return r.value;
      }
    },
    cancel(): void {
      reader.cancel().catch(() => {});
    },
  };
}

/** Something that stops an upstream call (an AbortController, an Http1Abort). */
export interface Abortable {
  /** Stops the call (client gone, idle timeout or shutdown). */
  abort(): void;
}

const CAPACITY_HEADERS: ReadonlySet<string> = new Set(CAPACITY_HEADER_NAMES);

/** Whether header pairs (lower-case names) carry one the passive capacity probe reads. */
function hasCapacityHeader(pairs: readonly (readonly [string, string])[]): boolean {
  for (const [n] of pairs) if (CAPACITY_HEADERS.has(n)) return true;
  return false;
}

/** An upstream answer as the proxy reads it, whichever client fetched it. */
export interface UpstreamAnswer {
  /** The upstream's HTTP status code. */
  readonly status: number;
  /** A header's value as `Headers.get` answers it. */
  header(name: string): string | null;
  /** Whether it carries a header the passive capacity probe reads (rate limits, Retry-After). */
  readonly hasCapacityHeaders: boolean;
  /** The headers as a `Headers` (made on demand). */
  headers(): Headers;
  /** Header pairs as `Headers` iteration yields them (see `iteratedPairs`). */
  pairs(): [string, string][];
  /** Whether there is a body (a `Response` body that is not null). */
  readonly hasBody: boolean;
  /** The whole body when it is here already (reading it would not wait), else undefined. */
  readonly whole: Uint8Array<ArrayBuffer> | undefined;
  /** The whole body; throws when it cannot be read. */
  bytes(): Promise<Uint8Array<ArrayBuffer>>;
  /** The body as pieces (streams). */
  source(): ChunkSource;
  /** Stops reading the body (the connection is not reused). */
  cancel(): void;
}

/** An answer of the HTTP/1.1 client. */
class Http1UpstreamAnswer implements UpstreamAnswer {
  readonly #answer: Http1Answer;
  #headers: Headers | undefined;
  #pairs: [string, string][] | undefined;

  constructor(answer: Http1Answer) {
    this.#answer = answer;
  }

  get status(): number {
    return this.#answer.status;
  }

  header(name: string): string | null {
    let out: string | null = null;
    for (const [n, v] of this.#answer.headers) {
      if (n === name) out = out === null ? v : `${out}, ${v}`;
    }
    return out;
  }

  get hasCapacityHeaders(): boolean {
    return hasCapacityHeader(this.#answer.headers);
  }

  headers(): Headers {
    return this.#headers ??= new Headers(this.#answer.headers);
  }

  pairs(): [string, string][] {
    return this.#pairs ??= iteratedPairs(this.#answer.headers);
  }

  get hasBody(): boolean {
    return this.#answer.body !== null;
  }

  get whole(): Uint8Array<ArrayBuffer> | undefined {
    const body = this.#answer.body;
    if (body === null) return new Uint8Array(0);
    return body instanceof Uint8Array ? body : undefined;
  }

  async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    const body = this.#answer.body;
    if (body === null) return new Uint8Array(0);
    if (body instanceof Uint8Array) return body;
    const parts: Uint8Array[] = [];
    let total = 0;
    // Bounded by the body: every round reads a piece or ends.
    for (;;) {
      const piece = await body.read();
      if (piece === null) break;
      parts.push(piece);
      total += piece.byteLength;
    }
    return concatBytes(parts, total);
  }

  source(): ChunkSource {
    const body = this.#answer.body;
    if (body === null || body instanceof Uint8Array) {
      let done = body === null || body.byteLength === 0;
      return {
        read: () => {
          if (done) return Promise.resolve(null);
          done = true;
          return Promise.resolve(body);
        },
        cancel: () => {},
      };
    }
    return body;
  }

  cancel(): void {
    this.#bodySource()?.cancel();
  }

  #bodySource(): BodySource | undefined {
    const body = this.#answer.body;
    return body === null || body instanceof Uint8Array ? undefined : body;
  }
}

/** A `fetch` answer. */
class FetchUpstreamAnswer implements UpstreamAnswer {
  readonly #res: Response;
  #pairs: [string, string][] | undefined;

  constructor(res: Response) {
    this.#res = res;
  }

  get status(): number {
    return this.#res.status;
  }

  header(name: string): string | null {
    return this.#res.headers.get(name);
  }

  get hasCapacityHeaders(): boolean {
    return hasCapacityHeader(this.pairs());
  }

  headers(): Headers {
    return this.#res.headers;
  }

  pairs(): [string, string][] {
    if (this.#pairs === undefined) {
      const pairs: [string, string][] = [];
      this.#res.headers.forEach((value, name) => pairs.push([name, value]));
      this.#pairs = pairs;
    }
    return this.#pairs;
  }

  get hasBody(): boolean {
    return this.#res.body !== null;
  }

  readonly whole = undefined;

  async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return new Uint8Array(await this.#res.arrayBuffer());
  }

  source(): ChunkSource {
    const body = this.#res.body;
    if (body === null) return { read: () => Promise.resolve(null), cancel: () => {} };
    return streamSource(body);
  }

  cancel(): void {
    this.#res.body?.cancel().catch(() => {});
  }
}

/** A `fetch` Response as an UpstreamAnswer. */
export function answerOfResponse(res: Response): UpstreamAnswer {
  return new FetchUpstreamAnswer(res);
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
    return new Http1UpstreamAnswer(answer);
  } catch (err) {
    if (pending.timedOut) {
      throw new UpstreamTransportError(
        "timeout",
        `timed out after ${opts.timeoutMs} ms waiting for response headers`,
      );
    }
    if (abort.aborted) throw new UpstreamTransportError("aborted", "the request was stopped");
    throw new UpstreamTransportError("connect", describeFetchError(err));
  } finally {
    watch.delete(pending);
  }
}

/**
 * The node's own key: undefined when the node names no key source (the client's credentials go
 * through), `null` when it names one that resolved nothing (the node must not be called, DESIGN
 * decision 1), else the key. The environment is the gateway's in-memory view; a key broker (when
 * one is configured) is asked first for `api_key_ref`.
 */
export function nodeKeyFromEnv(
  node: Pick<Node, "api_key_env" | "api_key_ref">,
  env: (name: string) => string | undefined,
  brokerKey?: string,
): string | null | undefined {
  if (brokerKey !== undefined && brokerKey.length > 0) return brokerKey;
  if (node.api_key_env) {
    const value = env(node.api_key_env);
    if (value !== undefined && value.length > 0) return value;
    return null;
  }
  return node.api_key_ref ? null : undefined;
}

/** Why an attempt failed before the first byte, when it did not get an HTTP answer. */
export type TransportFailure = "connect" | "timeout" | "aborted" | "key_unavailable";

/** An attempt that got no HTTP answer. */
export class UpstreamTransportError extends Error {
  /**
   * A failed attempt, for the proxy to fail over on.
   *
   * @param kind why the attempt got no HTTP answer
   * @param message what went wrong, naming no secret
   */
  constructor(readonly kind: TransportFailure, message: string) {
    super(message);
    this.name = "UpstreamTransportError";
  }
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
    if (pending.timedOut) {
      throw new UpstreamTransportError(
        "timeout",
        `timed out after ${opts.timeoutMs} ms waiting for response headers`,
      );
    }
    if (outer?.aborted || controller.signal.aborted) {
      throw new UpstreamTransportError("aborted", "the request was stopped");
    }
    throw new UpstreamTransportError("connect", describeFetchError(err));
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

/** Something a body inactivity watch can stop. */
export interface Watched extends Linked<Watched> {
  /** Epoch ms of the last byte seen. */
  lastActivity: number;
  /** Called once when the body was silent for too long. */
  idleTimeout(): void;
  /**
   * Called at every sweep while watched, with the watch's clock (a stream's keepalive checks
   * its own silence here: no timer of its own).
   */
  tick?(now: number): void;
}

/** Options of an IdleWatch. */
export interface IdleWatchOptions {
  /**
   * The shortest keepalive interval a watched stream uses, ms: the sweep runs at least twice
   * per interval, so a keepalive goes out between one and one and a half intervals of silence.
   */
  keepaliveMs?: number;
}

/**
 * One timer for every upstream wait in flight (headers, a whole non-streamed body, a stream's
 * silence): one silent for longer than `timeoutMs` is stopped. A timer per attempt (or a reset per
 * stream read) costs timer ops on every request; a sweep at a quarter of the timeout costs one
 * timer for all of them, at the price of stopping up to a quarter of the timeout late. The same
 * sweep drives the streams' keepalives (`Watched.tick`).
 */
export class IdleWatch {
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #period: number;
  /** An intrusive list, not a Set: one add and delete per request (see proxy/inflight.ts). */
  readonly #watched = new LinkedList<Watched>();
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * An empty watch; its sweep timer runs only while something is watched.
   *
   * @param timeoutMs how long a watched wait may stay silent before it is stopped, ms
   * @param now the epoch-ms clock
   * @param opts the shortest keepalive interval, which may shorten the sweep period
   */
  constructor(timeoutMs: number, now: () => number = Date.now, opts: IdleWatchOptions = {}) {
    this.#timeoutMs = timeoutMs;
    this.#now = now;
    let period = Math.max(50, Math.min(5000, Math.floor(timeoutMs / 4)));
    const keepalive = opts.keepaliveMs;
    if (keepalive !== undefined && keepalive > 0) {
      period = Math.min(period, Math.max(1, Math.floor(keepalive / 2)));
    }
    this.#period = period;
  }

  /** The watch's clock, epoch ms. */
  now(): number {
    return this.#now();
  }

  /** How many bodies are watched. */
  get size(): number {
    return this.#watched.size;
  }

  /** Starts watching a body. */
  add(w: Watched): void {
    this.#watched.add(w);
    if (this.#timer === undefined) this.#timer = setInterval(() => this.sweep(), this.#period);
  }

  /** Stops watching a body (it ended). */
  delete(w: Watched): void {
    // The timer is not stopped here but at the next sweep that finds nothing to watch, so a
    // trickle of requests does not start and stop an interval for each one.
    this.#watched.delete(w);
  }

  /** Stops every body that was silent too long (the timer's work; tests call it directly). */
  sweep(): void {
    const now = this.#now();
    const cutoff = now - this.#timeoutMs;
    for (const w of this.#watched) {
      if (w.lastActivity <= cutoff) {
        this.#watched.delete(w);
        try {
          w.idleTimeout();
        } catch {
          // A body that cannot be stopped is already gone.
        }
      } else if (w.tick !== undefined) {
        try {
          w.tick(now);
        } catch {
          // A stream that cannot take a keepalive ends on its own.
        }
      }
    }
    if (this.#watched.size === 0) this.#stop();
  }

  /** Stops the timer and forgets every body. */
  close(): void {
    this.#watched.clear();
    this.#stop();
  }

  #stop(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
