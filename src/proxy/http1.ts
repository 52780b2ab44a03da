/**
 * A small HTTP/1.1 keep-alive client over `Deno.connect`, for plain-HTTP upstreams (the GPU hosts
 * next door, where the gateway's own latency is what a client notices). On this path it costs
 * a fraction of what `fetch` costs per request: one write per request (TCP_NODELAY), the
 * response head parsed from the connection's buffer, a whole small body handed over as bytes.
 *
 * Two faces: `send` answers an {@link Http1Answer} (status, header pairs, and the body as bytes
 * or as a pull source) — the proxy's hot path, which never builds a `Response` or a `Headers`
 * for an upstream answer; `fetch` answers a standard `Response` made of the same, for callers
 * that want `fetch` semantics. The body is read from the connection as the caller pulls
 * (Content-Length, chunked, or to the end of the connection); cancelling it or aborting closes
 * the connection. Connections go back to a per-origin idle pool when their response was read to
 * the end.
 *
 * HTTPS upstreams (clouds) keep using `fetch` (TLS, HTTP/2, proxies).
 *
 * @module
 */

import {
  BadHead,
  type Head,
  headEnd,
  latin1Text,
  MAX_HEAD_BYTES,
  parseHead,
} from "./http1_head.ts";
import { type Coding, codingOf, Decoded, decodeWhole } from "./http1_decode.ts";

const CR = 13;
const LF = 10;
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
/**
 * A connection's read buffer to start with: a response head and a few SSE events fit, and
 * 2,000 streams hold 4 MB of it, not 32 (it doubles when a head or a line needs more).
 */
const BUFFER_SIZE = 2 * 1024;
/** Reads straight into a buffer of their own (bodies to the end, long Content-Length ones). */
const READ_SIZE = 16 * 1024;
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
 * earlier without saying is seen by the idle read, and a request it still catches is retried.
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

/** One connection with its read buffer. */
class Conn {
  buf = new Uint8Array(BUFFER_SIZE);
  r = 0;
  w = 0;
  closed = false;
  lastUsed = 0;
  /** How long this connection may stay idle and still be reused, ms (set by each response). */
  idleMs = 0;
  /** Bytes received for the current response (a stale reused connection answers none). */
  received = 0;
  /** In the idle pool. */
  idle = false;
  /**
   * The read pending while the connection is idle: it sees the server close it (EOF, reset)
   * before a request is sent on it. Taken for a request, the next `fill` consumes it.
   */
  #idleRead: Promise<number | null> | undefined;
  constructor(readonly conn: Deno.Conn, readonly key: string) {}

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.conn.close();
    } catch {
      // already closed
    }
  }

  async write(bytes: Uint8Array): Promise<void> {
    for (let off = 0; off < bytes.length;) off += await this.conn.write(bytes.subarray(off));
  }

  /** The free end of the buffer to read into (compacting or growing it when full). */
  room(): Uint8Array {
    if (this.r === this.w) this.r = this.w = 0;
    if (this.w === this.buf.length) {
      if (this.r > 0) {
        this.buf.copyWithin(0, this.r, this.w);
        this.w -= this.r;
        this.r = 0;
      } else {
        const bigger = new Uint8Array(this.buf.length * 2);
        bigger.set(this.buf);
        this.buf = bigger;
      }
    }
    return this.buf.subarray(this.w);
  }

  /** `n` bytes were read into `room()`. */
  took(n: number): void {
    this.w += n;
    this.received += n;
  }

  /**
   * Goes idle: a read is left pending; when it ends while still idle (EOF, a reset, bytes nobody
   * asked for such as a 408 before closing) the connection is not reusable and `dead` is called.
   */
  watchIdle(dead: () => void): void {
    this.idle = true;
    const read = this.#idleRead = this.conn.read(this.room());
    read.then(() => {
      if (this.idle) dead();
    }, () => {
      if (this.idle) dead();
    });
  }

  /** Reads more into the buffer; false at end of stream. */
  async fill(): Promise<boolean> {
    const pending = this.#idleRead;
    this.#idleRead = undefined;
    const n = await (pending ?? this.conn.read(this.room()));
    if (n === null) return false;
    this.took(n);
    return true;
  }

  /**
   * One line (without its CRLF or bare LF) from what is buffered, or undefined (read more).
   * Throws when more than a head's worth is buffered without a line end.
   */
  takeLine(): string | undefined {
    const buf = this.buf;
    for (let i = this.r; i < this.w; i++) {
      if (buf[i] === LF) {
        const text = latin1Text(buf.subarray(this.r, i > this.r && buf[i - 1] === CR ? i - 1 : i));
        this.r = i + 1;
        return text;
      }
    }
    if (this.w - this.r > MAX_HEAD_BYTES) throw new Error("upstream chunk line too long");
    return undefined;
  }

  /** Reads the response head (the text up to the blank line), at most MAX_HEAD_BYTES. */
  async head(): Promise<string> {
    let from = this.r;
    for (;;) {
      const end = headEnd(this.buf, from, this.w);
      if (end !== undefined && end[1] - this.r <= MAX_HEAD_BYTES) {
        const text = latin1Text(this.buf.subarray(this.r, end[0]));
        this.r = end[1];
        return text;
      }
      if (end !== undefined || this.w - this.r > MAX_HEAD_BYTES) {
        throw new BadHead(`is larger than ${MAX_HEAD_BYTES / 1024} KiB`);
      }
      from = Math.max(this.r, this.w - 2);
      if (!(await this.fill())) {
        throw new StaleConnection(
          this.received === 0 ? "closed before answering" : "closed mid-head",
        );
      }
    }
  }
}

/** The connection ended before a response head (a reused one may just have been stale). */
class StaleConnection extends Error {
  constructor(message: string) {
    super(`upstream connection ${message}`);
    this.name = "StaleConnection";
  }
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

/** The body of one response, read from its connection as pulled. */
export class BodySource implements UnderlyingDefaultSource<Uint8Array> {
  /** Body bytes left (Content-Length), or in the current chunk (chunked). */
  #left: number;
  /** Chunked: the CRLF after a chunk's data is still to be read (read lazily, so a chunk is
   * handed on as soon as its data arrived). */
  #chunkEnd = false;
  /** Chunked: the last chunk was read; trailer lines up to the blank one remain. */
  #trailers = false;
  #ended = false;
  /** The body decoded from its content coding, when it has one. */
  #decoded: Decoded | undefined;

  /** The framing of the head (kept without the head: a stream lives long, its headers not). */
  readonly #chunked: boolean;
  readonly #length: number;
  readonly #close: boolean;

  /**
   * A body source over the connection the head was read from; nothing is read until pulled.
   *
   * @param client the client the connection goes back to (or is discarded by) at the body's end
   * @param c the connection the body is read from
   * @param head the parsed response head: its framing (chunked, Content-Length, close)
   * @param release called once when the body ended, broke or was cancelled
   */
  constructor(
    readonly client: Http1Client,
    readonly c: Conn,
    head: Head,
    readonly release: () => void,
  ) {
    this.#chunked = head.chunked;
    this.#length = head.length;
    this.#close = head.close;
    this.#left = head.chunked ? 0 : head.length;
  }

  /** Decodes the body from `coding` as it is read. */
  decode(coding: Coding): void {
    this.#decoded = new Decoded(coding, {
      read: () => this.#raw(),
      cancel: () => this.#end(false),
    });
  }

  /**
   * The next piece of the body (never empty, decoded when it has a content coding), or null at
   * its end; throws when the body broke.
   */
  read(): Promise<Uint8Array | null> {
    return this.#decoded === undefined ? this.#raw() : this.#decoded.read();
  }

  /**
   * The next piece of the body as received. The connection is given back as soon as the last
   * byte was read.
   *
   * One async frame per read: the framing is parsed from the buffer synchronously and the only
   * await is the socket read itself, so a stream waiting for its next token holds one suspended
   * frame, not a chain of them (2,000 idle streams are 2,000 frames the GC keeps visiting).
   */
  async #raw(): Promise<Uint8Array | null> {
    if (this.#ended) return null;
    const c = this.c;
    try {
      // Bounded by the body: every round hands out buffered bytes or reads more (EOF ends it).
      for (;;) {
        if (this.#chunked) {
          const piece = this.#chunkedPiece();
          if (piece === null) {
            this.#end(true);
            return null;
          }
          if (piece !== undefined) return piece;
          const n = await c.conn.read(c.room());
          if (n === null) {
            throw new Error(
              this.#left > 0 ? "connection closed mid-body" : "connection closed mid-response",
            );
          }
          c.took(n);
          continue;
        }
        if (this.#length === -1) {
          // To the end of the connection.
          if (c.r < c.w) {
            const out = c.buf.slice(c.r, c.w);
            c.r = c.w;
            return out;
          }
          const fresh = new Uint8Array(READ_SIZE);
          const n = await c.conn.read(fresh);
          if (n === null) {
            this.#end(true);
            return null;
          }
          if (n > 0) return fresh.subarray(0, n);
          continue;
        }
        if (this.#left === 0) {
          this.#end(true);
          return null;
        }
        let out: Uint8Array;
        if (c.r < c.w) {
          const n = Math.min(this.#left, c.w - c.r);
          out = c.buf.slice(c.r, c.r + n);
          c.r += n;
          this.#left -= n;
        } else {
          // Read straight into a buffer of its own: handed on as is, no copy.
          const fresh = new Uint8Array(Math.min(this.#left, READ_SIZE * 4));
          const n = await c.conn.read(fresh);
          if (n === null) throw new Error("connection closed mid-body");
          if (n === 0) continue;
          this.#left -= n;
          out = fresh.subarray(0, n);
        }
        // Content-Length reached: the connection is free now, not at the next read.
        if (this.#left === 0) this.#end(true);
        return out;
      }
    } catch (err) {
      this.#end(false);
      throw err;
    }
  }

  /**
   * Chunked framing over what is buffered: the next piece of chunk data, null at the body's
   * end (trailers read), undefined when more bytes are needed.
   */
  #chunkedPiece(): Uint8Array | null | undefined {
    const c = this.c;
    // Bounded: every round consumes a line or returns.
    for (;;) {
      if (this.#left > 0) {
        if (c.r === c.w) return undefined;
        const n = Math.min(this.#left, c.w - c.r);
        const out = c.buf.slice(c.r, c.r + n);
        c.r += n;
        this.#left -= n;
        if (this.#left === 0) this.#chunkEnd = true;
        return out;
      }
      const line = c.takeLine();
      if (line === undefined) return undefined;
      if (this.#trailers) {
        if (line === "") return null;
        continue;
      }
      if (this.#chunkEnd) {
        if (line !== "") throw new Error("bad upstream chunk end");
        this.#chunkEnd = false;
        continue;
      }
      const size = parseInt(line, 16);
      if (!Number.isFinite(size) || size < 0) throw new Error("bad upstream chunk size");
      if (size === 0) this.#trailers = true;
      else this.#left = size;
    }
  }

  /** ReadableStream source: one piece per pull. */
  async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    let chunk: Uint8Array | null;
    try {
      chunk = await this.read();
    } catch (err) {
      controller.error(err);
      return;
    }
    if (chunk === null) {
      controller.close();
      return;
    }
    controller.enqueue(chunk);
    if (this.#ended && this.#decoded === undefined) controller.close();
  }

  /** The reader went away: the connection is not reusable. */
  cancel(): void {
    if (this.#decoded === undefined) this.#end(false);
    else this.#decoded.cancel();
  }

  #end(complete: boolean): void {
    if (this.#ended) return;
    this.#ended = true;
    this.release();
    const delimited = this.#chunked || this.#length >= 0;
    if (complete && delimited && !this.#close) this.client.giveBack(this.c);
    else this.client.discard(this.c);
  }
}

/** An upstream answer as received: status, header lines, and the body. */
export class Http1Answer {
  /** Wraps a parsed response; the body is not read here. */
  constructor(
    /** The status code. */
    readonly status: number,
    /** Header lines in the order received: lowercase names, trimmed values. */
    readonly headers: [string, string][],
    /**
     * The body: null when there is none; the whole of it when it came with the head (a small
     * JSON answer); else a source to read it from.
     */
    readonly body: Uint8Array<ArrayBuffer> | BodySource | null,
  ) {}
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
    const bytes = requestBytes(target, method, headers, body);
    // A reused connection the server closed as the request went out answers nothing: the request
    // is sent once more, on a new connection (another pooled one may be just as stale).
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
      try {
        c.received = 0;
        await c.write(bytes);
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
        // A reused connection that failed before a single response byte (EOF, reset, broken
        // pipe) was closed by the server while idle: the request never reached it.
        if (reused && c.received === 0) continue;
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

/** The request's bytes: head and body in one buffer, one write. */
function requestBytes(
  target: Target,
  method: string,
  headers: Iterable<readonly [string, string]>,
  body: Uint8Array,
): Uint8Array {
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
  const out = new Uint8Array(head.length + body.byteLength);
  // ASCII (the usual case) is encoded natively; a byte character >= 0x80 takes the slow way.
  const done = encoder.encodeInto(head, out.subarray(0, head.length));
  if (done.read !== head.length || done.written !== head.length) latin1Bytes(head, out, 0);
  out.set(body, head.length);
  return out;
}

function abortError(): Error {
  return new DOMException("The signal has been aborted", "AbortError");
}
