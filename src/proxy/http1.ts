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

const CR = 13;
const LF = 10;
const encoder = new TextEncoder();
const asciiDecoder = new TextDecoder();

/**
 * Header bytes → text, one character per byte (ISO-8859-1), the way `Headers` holds them: a
 * header byte >= 0x80 stays that one character (UTF-8 would turn 0xFC into U+FFFD). ASCII, the
 * usual case, is decoded natively.
 */
function latin1Text(bytes: Uint8Array): string {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] > 0x7f) {
      let out = "";
      for (let j = 0; j < bytes.length; j += 4096) {
        out += String.fromCharCode.apply(null, bytes.subarray(j, j + 4096) as unknown as number[]);
      }
      return out;
    }
  }
  return asciiDecoder.decode(bytes);
}

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

/** Options of an Http1Client. */
export interface Http1ClientOptions {
  /** Idle connections kept per origin (default 100). */
  maxIdlePerHost?: number;
  /** An idle connection older than this is not reused, ms (default 30000). */
  maxIdleMs?: number;
  /** Epoch-ms clock. */
  now?: () => number;
}

/** The response head. */
interface Head {
  status: number;
  /** Lowercase names, values trimmed, in the order received. */
  headers: [string, string][];
  close: boolean;
  chunked: boolean;
  /** -1 when the body runs to the end of the connection. */
  length: number;
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
  /** Bytes received for the current response (a stale reused connection answers none). */
  received = 0;
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

  /** Reads more into the buffer; false at end of stream. */
  async fill(): Promise<boolean> {
    const n = await this.conn.read(this.room());
    if (n === null) return false;
    this.took(n);
    return true;
  }

  /** One CRLF-terminated line (without it) from what is buffered, or undefined (read more). */
  takeLine(): string | undefined {
    const buf = this.buf;
    for (let i = this.r; i + 1 < this.w; i++) {
      if (buf[i] === CR && buf[i + 1] === LF) {
        const text = latin1Text(buf.subarray(this.r, i));
        this.r = i + 2;
        return text;
      }
    }
    return undefined;
  }

  /** Reads the response head (the text up to the blank line). */
  async head(): Promise<string> {
    let from = this.r;
    for (;;) {
      const end = headEnd(this.buf, from, this.w);
      if (end >= 0) {
        const text = latin1Text(this.buf.subarray(this.r, end));
        this.r = end + 4;
        return text;
      }
      const seen = this.w - this.r;
      if (!(await this.fill())) {
        throw new StaleConnection(
          this.received === 0 ? "closed before answering" : "closed mid-head",
        );
      }
      from = this.r + Math.max(0, seen - 3);
    }
  }
}

/** Index of the CRLFCRLF ending a head in `buf[from, to)`, or -1. */
function headEnd(buf: Uint8Array, from: number, to: number): number {
  for (let i = from; i + 3 < to; i++) {
    if (buf[i + 3] !== LF) continue;
    if (buf[i] === CR && buf[i + 1] === LF && buf[i + 2] === CR) return i;
  }
  return -1;
}

/** The connection ended before a response head (a reused one may just have been stale). */
class StaleConnection extends Error {
  constructor(message: string) {
    super(`upstream connection ${message}`);
    this.name = "StaleConnection";
  }
}

function parseHead(text: string): Head {
  let eol = text.indexOf("\r\n");
  if (eol < 0) eol = text.length;
  const statusLine = text.slice(0, eol);
  const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(statusLine);
  if (!m) throw new Error(`bad upstream status line '${statusLine.slice(0, 80)}'`);
  const head: Head = {
    status: Number(m[2]),
    headers: [],
    close: m[1] === "0",
    chunked: false,
    length: -1,
  };
  let pos = eol + 2;
  while (pos < text.length) {
    let end = text.indexOf("\r\n", pos);
    if (end < 0) end = text.length;
    const colon = text.indexOf(":", pos);
    if (colon > pos && colon < end) {
      const name = text.slice(pos, colon).trim().toLowerCase();
      const value = text.slice(colon + 1, end).trim();
      head.headers.push([name, value]);
      if (name === "content-length") head.length = Number(value);
      else if (name === "transfer-encoding") head.chunked = /chunked/i.test(value);
      else if (name === "connection") {
        const v = value.toLowerCase();
        if (v.includes("close")) head.close = true;
        else if (v.includes("keep-alive")) head.close = false;
      }
    }
    pos = end + 2;
  }
  if (head.chunked) head.length = -1;
  if (!Number.isFinite(head.length) || head.length < -1) {
    throw new Error("bad upstream content-length");
  }
  return head;
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

  /**
   * The next piece of the body (never empty), or null at its end; throws when the body broke.
   * The connection is given back as soon as the last byte was read.
   *
   * One async frame per read: the framing is parsed from the buffer synchronously and the only
   * await is the socket read itself, so a stream waiting for its next token holds one suspended
   * frame, not a chain of them (2,000 idle streams are 2,000 frames the GC keeps visiting).
   */
  async read(): Promise<Uint8Array | null> {
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
    if (this.#ended) controller.close();
  }

  /** The reader went away: the connection is not reusable. */
  cancel(): void {
    this.#end(false);
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

  /** The same answer as a standard `Response`. */
  toResponse(): Response {
    const init = { status: this.status, headers: this.headers };
    const body = this.body;
    if (body === null || body instanceof Uint8Array) return new Response(body, init);
    return new Response(new ReadableStream<Uint8Array>(body), init);
  }
}

/** A keep-alive HTTP/1.1 client with a per-origin idle pool. */
export class Http1Client {
  readonly #idle = new Map<string, Conn[]>();
  readonly #open = new Set<Conn>();
  readonly #targets = new Map<string, Target>();
  readonly #maxIdle: number;
  readonly #maxIdleMs: number;
  readonly #now: () => number;
  #closed = false;

  /**
   * Pool limits: `maxIdlePerHost` idle connections per origin (default 100), each kept at most
   * `maxIdleMs` (default 30000 ms).
   */
  constructor(opts: Http1ClientOptions = {}) {
    this.#maxIdle = Math.max(0, opts.maxIdlePerHost ?? 100);
    this.#maxIdleMs = opts.maxIdleMs ?? 30_000;
    this.#now = opts.now ?? Date.now;
  }

  /** Open connections (idle and busy). */
  get openConnections(): number {
    return this.#open.size;
  }

  /** A `fetch` for `http:` URLs and the init shapes the proxy uses; anything else → `fetch`. */
  fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (typeof input !== "string" && !(input instanceof URL)) return fetch(input, init);
    const url = typeof input === "string" ? new URL(input) : input;
    const body = init?.body;
    const bytes = typeof body === "string"
      ? encoder.encode(body)
      : body instanceof Uint8Array
      ? body
      : body === undefined || body === null
      ? new Uint8Array(0)
      : undefined;
    if (url.protocol !== "http:" || bytes === undefined) return fetch(input, init);
    return this.request(
      url,
      init?.method ?? "GET",
      headerPairs(init?.headers),
      bytes,
      init?.signal,
    );
  };

  /** Sends one request; resolves with the response once its head arrived. */
  async request(
    url: URL,
    method: string,
    headers: [string, string][],
    body: Uint8Array,
    signal?: AbortSignal | null,
  ): Promise<Response> {
    if (this.#closed) throw new Error("http client closed");
    if (signal?.aborted) throw abortError();
    let abort: Http1Abort | undefined;
    let onSignal: (() => void) | undefined;
    if (signal) {
      const a = abort = new Http1Abort();
      onSignal = () => a.abort();
      signal.addEventListener("abort", onSignal, { once: true });
    }
    const unlink = () => {
      if (onSignal) signal!.removeEventListener("abort", onSignal);
      onSignal = undefined;
    };
    let answer: Http1Answer;
    try {
      answer = await this.#send(targetOf(url), method, headers, body, abort, unlink);
    } catch (err) {
      unlink();
      throw err;
    }
    return answer.toResponse();
  }

  /**
   * Sends one request to an `http:` URL; resolves with the answer once its head arrived (the
   * head already checked as a `Response` would check it). `abort` stops it.
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
    return this.#send(target, method, headers, body, abort, undefined);
  }

  /** Closes a connection that cannot be reused. */
  discard(c: Conn): void {
    c.close();
    this.#open.delete(c);
  }

  /** Takes a connection back into the idle pool (its response was read to the end). */
  giveBack(c: Conn): void {
    if (c.closed || this.#closed || c.r !== c.w) {
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
    unlink: (() => void) | undefined,
  ): Promise<Http1Answer> {
    const bytes = requestBytes(target, method, headers, body);
    // A reused connection the server already closed answers nothing: one retry on a new one.
    for (let attempt = 0;; attempt++) {
      let c = this.#pooled(target.host);
      const reused = c !== undefined;
      c ??= await this.#connect(target, abort);
      const conn = c;
      if (abort) abort.onAbort = () => conn.close();
      const release = () => {
        if (abort) abort.onAbort = undefined;
        unlink?.();
      };
      try {
        c.received = 0;
        await c.write(bytes);
        let head: Head;
        for (;;) {
          head = parseHead(await c.head());
          // Informational answers (100 Continue, 103 Early Hints) precede the real one.
          if (head.status >= 200) break;
          if (head.status === 101) throw new Error("upstream switched protocols");
        }
        assertResponseHead(head);
        return this.#answer(c, head, method, release);
      } catch (err) {
        release();
        this.discard(c);
        if (abort?.aborted) throw abortError();
        // A reused connection that failed before a single response byte (EOF, reset, broken
        // pipe) was closed by the server while idle: the request never reached it.
        if (reused && c.received === 0 && attempt === 0) continue;
        throw err;
      }
    }
  }

  /** An idle connection to `key` young enough to reuse, or undefined. */
  #pooled(key: string): Conn | undefined {
    const list = this.#idle.get(key);
    if (list === undefined || list.length === 0) return undefined;
    const now = this.#now();
    while (list.length > 0) {
      const c = list.pop()!;
      if (!c.closed && now - c.lastUsed < this.#maxIdleMs) return c;
      c.close();
      this.#open.delete(c);
    }
    return undefined;
  }

  async #connect(target: Target, abort: Http1Abort | undefined): Promise<Conn> {
    const connecting = Deno.connect({ hostname: target.hostname, port: target.port });
    let conn: Deno.TcpConn;
    if (abort) {
      // Deno.connect cannot be cancelled: race it, and close what arrives too late.
      const aborted = new Promise<never>((_, reject) => {
        abort.onAbort = () => reject(abortError());
      });
      try {
        conn = await Promise.race([connecting, aborted]);
      } catch (err) {
        connecting.then((late) => late.close(), () => {});
        throw err;
      } finally {
        abort.onAbort = undefined;
      }
    } else {
      conn = await connecting;
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

function targetOf(url: URL): Target {
  return {
    host: url.host,
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : 80,
    path: url.pathname + url.search,
  };
}

/** Header pairs of a fetch init's `headers`. */
function headerPairs(init: HeadersInit | undefined): [string, string][] {
  if (init === undefined) return [];
  if (Array.isArray(init)) return init as [string, string][];
  if (init instanceof Headers) return [...init];
  return Object.entries(init);
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
