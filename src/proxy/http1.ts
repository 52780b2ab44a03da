/**
 * A small HTTP/1.1 keep-alive client over `Deno.connect`, for plain-HTTP upstreams (the GPU hosts
 * next door, where the gateway's own latency is what a client notices). On this path it costs
 * a fraction of what `fetch` costs per request: one write per request (TCP_NODELAY), the
 * response head parsed from the connection's buffer, a whole small body handed over as bytes.
 *
 * `send` answers an {@link Http1Answer} (status, header pairs, and the body as bytes or as a pull
 * source) — the proxy's hot path never builds a `Response` or a `Headers` for an upstream answer.
 * The body is read from the connection as the caller pulls (Content-Length, chunked, or to the end
 * of the connection); cancelling it or aborting closes the connection. Connections go back to a
 * per-origin idle pool when their response was read to the end, and are reused only while the
 * server still keeps them (ADR 0008): within its `Keep-Alive: timeout`, never after it closed
 * them. A request is sent again, on a new connection, only when writing it on a reused one failed
 * (the server had closed it and cannot have read it); never once it may have been read.
 *
 * HTTPS upstreams (clouds) keep using `fetch` (TLS, HTTP/2, proxies).
 *
 * @module
 */

import { BodySource, Http1Answer } from "./http1_body.ts";
import { Conn } from "./http1_conn.ts";
import { type Coding, codingOf, decodeWhole } from "./http1_decode.ts";
import { type Head, parseHead } from "./http1_head.ts";

export { BodySource, Http1Answer };

const encoder = new TextEncoder();

/** Text of byte characters (U+0000–U+00FF) → bytes; a wider character is refused. */
function latin1Bytes(text: string, into: Uint8Array, at: number): void {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0xff) throw new TypeError("header value is not a byte string");
    into[at + i] = c;
  }
}

/** Request headers this client writes itself. */
const OWN_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
]);
/** Statuses whose response has no body. */
const NULL_BODY = new Set([204, 205, 304]);
/** Header names `Headers` accepts (RFC 9110 token); anything else is checked by `Headers`. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Header value characters `Headers` refuses. */
const BAD_VALUE = /[\0\r\n]/;
/** Parsed upstream URLs kept per client (node URLs × a few paths). */
const MAX_TARGETS = 256;

/**
 * How long an idle connection is reused when the server did not say how long it keeps one: below
 * the keep-alive timeouts common servers ship with (Go and Node 2–5 s, uvicorn 5 s). A server set
 * shorter (Node at 1 s) says so in `Keep-Alive: timeout=N`, which is honoured; one that closes
 * earlier without saying is seen by the idle read. A close that crosses a request on the wire
 * fails it (it may have been read): retiring connections early keeps that rare.
 * Reconnecting to a node next door costs far less than a request failed over.
 */
export const DEFAULT_IDLE_MS = 1500;
/**
 * What is taken off a server's `Keep-Alive: timeout=N` so that this side retires the connection
 * first (the server's clock started when it sent the last byte, ours when we read it).
 */
const KEEP_ALIVE_MARGIN_MS = 500;
/** Bound on opening a connection (a host that drops packets answers nothing for minutes). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 3000;

/** Options of an Http1Client. */
export interface Http1ClientOptions {
  /** Idle connections kept per origin (default 100). */
  maxIdlePerHost?: number;
  /**
   * How long an idle connection is reused when the server did not say (`Keep-Alive: timeout=N`),
   * ms (default {@link DEFAULT_IDLE_MS}).
   */
  idleMs?: number;
  /** The longest an idle connection is reused whatever the server said, ms (default 30000). */
  maxIdleMs?: number;
  /** Bound on opening a connection, ms (default {@link DEFAULT_CONNECT_TIMEOUT_MS}). */
  connectTimeoutMs?: number;
  /** Epoch-ms clock. */
  now?: () => number;
}

/** Where a URL's requests go, parsed once. */
interface Target {
  /** `host[:port]`: the pool key and the Host header. */
  host: string;
  hostname: string;
  port: number;
  /** Path and query. */
  path: string;
}

/**
 * Throws what `new Response(…, {status, headers})` would throw for this head (a header name or
 * value `Headers` refuses, a status out of range), so an answer that `fetch` could not have
 * produced fails here too, before anything reads it.
 */
function assertResponseHead(head: Head): void {
  for (const [name, value] of head.headers) {
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) {
      new Headers(head.headers); // throws the runtime's own TypeError
      break;
    }
  }
  if (head.status > 599) new Response(null, { status: head.status }); // throws its RangeError
}

/**
 * Stops one request: before its head arrived (the connection closes and `send` rejects with an
 * AbortError) or while its body is read (the connection closes and the read fails).
 */
export class Http1Abort {
  #aborted = false;
  #hook: (() => void) | undefined;

  /** Whether `abort` was called. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Stops the request (idempotent). */
  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    const hook = this.#hook;
    this.#hook = undefined;
    hook?.();
  }

  /** What aborting does now (the client sets it as the request goes on); undefined = nothing. */
  set onAbort(hook: (() => void) | undefined) {
    this.#hook = hook;
  }
}

/** A keep-alive HTTP/1.1 client with a per-origin idle pool. */
export class Http1Client {
  readonly #idle = new Map<string, Conn[]>();
  readonly #open = new Set<Conn>();
  readonly #targets = new Map<string, Target>();
  readonly #maxIdle: number;
  readonly #idleMs: number;
  readonly #maxIdleMs: number;
  readonly #connectTimeoutMs: number;
  readonly #now: () => number;
  #closed = false;

  /**
   * Pool limits: `maxIdlePerHost` idle connections per origin (default 100), each reused while
   * idle for less than the server's `Keep-Alive: timeout` (minus a margin) or else `idleMs`
   * (default {@link DEFAULT_IDLE_MS}), never longer than `maxIdleMs` (default 30000 ms); opening a
   * connection waits at most `connectTimeoutMs` (default {@link DEFAULT_CONNECT_TIMEOUT_MS}).
   */
  constructor(opts: Http1ClientOptions = {}) {
    this.#maxIdle = Math.max(0, opts.maxIdlePerHost ?? 100);
    this.#idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
    this.#maxIdleMs = opts.maxIdleMs ?? 30_000;
    this.#connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#now = opts.now ?? Date.now;
  }

  /** Open connections (idle and busy). */
  get openConnections(): number {
    return this.#open.size;
  }

  /** Idle connections in the pool (all origins). */
  get idleConnections(): number {
    let n = 0;
    for (const list of this.#idle.values()) n += list.length;
    return n;
  }

  /**
   * Sends one request to an `http:` URL; resolves with the answer once its head arrived (the
   * head already checked as a `Response` would check it, the body decoded from a content coding
   * it was sent in). `abort` stops it.
   */
  send(
    url: string,
    method: string,
    headers: Iterable<readonly [string, string]>,
    body: Uint8Array,
    abort?: Http1Abort,
  ): Promise<Http1Answer> {
    if (this.#closed) return Promise.reject(new Error("http client closed"));
    if (abort?.aborted) return Promise.reject(abortError());
    let target = this.#targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      if (parsed.protocol !== "http:") {
        return Promise.reject(new TypeError(`not an http: URL: ${parsed.protocol}`));
      }
      target = targetOf(parsed);
      if (this.#targets.size >= MAX_TARGETS) this.#targets.clear();
      this.#targets.set(url, target);
    }
    return this.#send(target, method, headers, body, abort);
  }

  /** Closes a connection that cannot be reused. */
  discard(c: Conn): void {
    c.close();
    this.#open.delete(c);
  }

  /** Takes a connection back into the idle pool (its response was read to the end). */
  giveBack(c: Conn): void {
    if (c.closed || this.#closed || c.r !== c.w || c.idleMs <= 0) {
      this.discard(c);
      return;
    }
    let list = this.#idle.get(c.key);
    if (!list) this.#idle.set(c.key, list = []);
    if (list.length >= this.#maxIdle) {
      this.discard(c);
      return;
    }
    c.r = c.w = 0;
    c.lastUsed = this.#now();
    list.push(c);
    c.watchIdle(() => {
      const at = list.indexOf(c);
      if (at >= 0) list.splice(at, 1);
      c.idle = false;
      this.discard(c);
    });
  }

  /** Closes every connection, idle or busy. */
  close(): void {
    this.#closed = true;
    for (const c of this.#open) c.close();
    this.#open.clear();
    this.#idle.clear();
  }

  async #send(
    target: Target,
    method: string,
    headers: Iterable<readonly [string, string]>,
    body: Uint8Array,
    abort: Http1Abort | undefined,
  ): Promise<Http1Answer> {
    const pieces = requestBytes(target, method, headers, body);
    // A request the server may have read is never sent twice from here: one that read it and
    // then closed (a crashed engine, a proxy's timeout) may be generating it. It goes once more,
    // on a new connection (another pooled one may be just as stale), only when a reused
    // connection failed while the request was written: the server had already closed it (a
    // reset) and cannot have read it whole. A connection whose close was seen while idle never
    // leaves the pool (`watchIdle`); any other failure is the caller's to judge (failover).
    for (let attempt = 0;; attempt++) {
      let c = attempt === 0 ? this.#pooled(target.host) : undefined;
      const reused = c !== undefined;
      c ??= await this.#connect(target, abort);
      const conn = c;
      if (abort) abort.onAbort = () => conn.close();
      const release = () => {
        if (abort) abort.onAbort = undefined;
      };
      let head: Head;
      let coding: Coding | undefined;
      let written = false;
      try {
        c.received = 0;
        for (const piece of pieces) await c.write(piece);
        written = true;
        for (;;) {
          head = parseHead(await c.head());
          // Informational answers (100 Continue, 103 Early Hints) precede the real one.
          if (head.status >= 200) break;
          if (head.status === 101) throw new Error("upstream switched protocols");
        }
        assertResponseHead(head);
        coding = codingOf(headerValue(head.headers, "content-encoding"));
      } catch (err) {
        release();
        this.discard(c);
        if (abort?.aborted) throw abortError();
        if (reused && !written) continue;
        throw err;
      }
      c.idleMs = this.#idleLimit(head);
      const answer = this.#answer(c, head, method, release);
      return coding === undefined ? answer : await decoded(answer, coding);
    }
  }

  /** How long a connection may idle after this response: what the server said, or the default. */
  #idleLimit(head: Head): number {
    const said = head.keepAliveMs;
    const ms = said === undefined ? this.#idleMs : said - KEEP_ALIVE_MARGIN_MS;
    return Math.min(ms, this.#maxIdleMs);
  }

  /** An idle connection to `key` young enough to reuse, or undefined. */
  #pooled(key: string): Conn | undefined {
    const list = this.#idle.get(key);
    if (list === undefined || list.length === 0) return undefined;
    const now = this.#now();
    while (list.length > 0) {
      const c = list.pop()!;
      c.idle = false;
      if (!c.closed && now - c.lastUsed < c.idleMs) return c;
      this.discard(c);
    }
    return undefined;
  }

  async #connect(target: Target, abort: Http1Abort | undefined): Promise<Conn> {
    const connecting = Deno.connect({ hostname: target.hostname, port: target.port });
    // Deno.connect cannot be cancelled: race it against the timeout (and the abort), and close
    // what arrives too late.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stopped = new Promise<never>((_, reject) => {
      const ms = this.#connectTimeoutMs;
      timer = setTimeout(() => reject(new Error(`connect timed out after ${ms} ms`)), ms);
      if (abort) abort.onAbort = () => reject(abortError());
    });
    let conn: Deno.TcpConn;
    try {
      conn = await Promise.race([connecting, stopped]);
    } catch (err) {
      connecting.then((late) => late.close(), () => {});
      throw err;
    } finally {
      clearTimeout(timer);
      if (abort) abort.onAbort = undefined;
    }
    conn.setNoDelay(true);
    const c = new Conn(conn, target.host);
    if (this.#closed) {
      c.close();
      throw new Error("http client closed");
    }
    this.#open.add(c);
    return c;
  }

  #answer(c: Conn, head: Head, method: string, release: () => void): Http1Answer {
    if (method === "HEAD" || NULL_BODY.has(head.status) || head.length === 0) {
      release();
      if (head.close) this.discard(c);
      else this.giveBack(c);
      return new Http1Answer(head.status, head.headers, null);
    }
    if (head.length > 0 && c.w - c.r >= head.length) {
      // The whole body is here already (a small JSON answer): no stream needed.
      const bytes = c.buf.slice(c.r, c.r + head.length);
      c.r += head.length;
      release();
      if (head.close) this.discard(c);
      else this.giveBack(c);
      return new Http1Answer(head.status, head.headers, bytes);
    }
    return new Http1Answer(head.status, head.headers, new BodySource(this, c, head, release));
  }
}

/** A header's value (repeated lines joined), or undefined. */
function headerValue(headers: [string, string][], name: string): string | undefined {
  let out: string | undefined;
  for (const [n, v] of headers) if (n === name) out = out === undefined ? v : `${out}, ${v}`;
  return out;
}

/**
 * An answer in a content coding, decoded: the body decoded (whole, or as it is read), without
 * `content-encoding`, and `content-length` the decoded length (none for a stream).
 */
async function decoded(answer: Http1Answer, coding: Coding): Promise<Http1Answer> {
  const body = answer.body;
  const headers = answer.headers.filter(([n]) =>
    n !== "content-encoding" && n !== "content-length"
  );
  if (body === null) return new Http1Answer(answer.status, headers, null);
  if (body instanceof Uint8Array) {
    const bytes = await decodeWhole(coding, body);
    headers.push(["content-length", String(bytes.byteLength)]);
    return new Http1Answer(answer.status, headers, bytes);
  }
  body.decode(coding);
  return new Http1Answer(answer.status, headers, body);
}

function targetOf(url: URL): Target {
  return {
    host: url.host,
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : 80,
    path: url.pathname + url.search,
  };
}

/** Bodies larger than this go out in a write of their own instead of being copied behind the head. */
const SEPARATE_BODY_BYTES = 64 * 1024;

/**
 * The request's bytes to write in order: head and body in one buffer (one write), or, for a large
 * body, the head and then the body itself (no copy of a body of many megabytes).
 */
function requestBytes(
  target: Target,
  method: string,
  headers: Iterable<readonly [string, string]>,
  body: Uint8Array,
): Uint8Array[] {
  let head = `${method} ${target.path} HTTP/1.1\r\nhost: ${target.host}\r\n`;
  let encoding = false;
  for (const [name, value] of headers) {
    const n = name.toLowerCase();
    if (OWN_HEADERS.has(n)) continue;
    if (n === "accept-encoding") encoding = true;
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) {
      throw new TypeError(`invalid header '${name}'`);
    }
    head += `${name}: ${value}\r\n`;
  }
  // Bodies are relayed as received, never decoded here: ask for them uncompressed.
  if (!encoding) head += "accept-encoding: identity\r\n";
  head += `content-length: ${body.byteLength}\r\n\r\n`;
  const separate = body.byteLength > SEPARATE_BODY_BYTES;
  const out = new Uint8Array(head.length + (separate ? 0 : body.byteLength));
  // ASCII (the usual case) is encoded natively; a byte character >= 0x80 takes the slow way.
  const done = encoder.encodeInto(head, out.subarray(0, head.length));
  if (done.read !== head.length || done.written !== head.length) latin1Bytes(head, out, 0);
  if (separate) return [out, body];
  out.set(body, head.length);
  return [out];
}

function abortError(): Error {
  return new DOMException("The signal has been aborted", "AbortError");
}
