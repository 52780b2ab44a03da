/**
 * One client connection served by Skeid's own HTTP/1.1 server (ADR 0053): request heads read
 * into the connection's small buffer, each handed to the handler as an inbound request (ADR
 * 0056), its `Response` written back, then the next request on the same connection, one at a
 * time (a pipelined request waits for the answer before it). What the runtime's server kept per
 * connection (a native server, read and write buffers, a channel per stream) is here a socket,
 * one buffer and a few objects.
 *
 * - While a request is with the handler, one read stays open on the socket: the client closing
 *   its connection aborts the request's `signal` and stops a streamed answer (its source is
 *   cancelled), as the runtime's server did.
 * - A head that cannot be framed is answered (400, 431, 501, …) and the connection closed; so is
 *   one whose body was not read to its end, or whose answer said `connection: close`.
 * - A closing connection first half-closes and reads what the client still sends for a moment,
 *   so the answer is not lost to a reset.
 *
 * @module
 */
import { errorMessage } from "../error_message.ts";
import { headEnd, latin1Text } from "../proxy/http1_head.ts";
import { type AnswerWrite, writeAnswer } from "./answer_write.ts";
import { InboundHeaders } from "./inbound_headers.ts";
import { BODY_BUFFER_BYTES, ConnInput, type FillWaiter } from "./conn_input.ts";
import { ClientRequest, type InboundBody, type InboundRequest } from "./inbound_request.ts";
import { RequestBody } from "./request_body.ts";
import {
  MAX_REQUEST_HEAD_BYTES,
  parseRequestHead,
  type RequestHead,
  RequestHeadError,
} from "./request_head.ts";

/** What a connection hands each request to (Deno.serve's handler shape). */
export type ServeHandler = (
  req: InboundRequest,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

/**
 * What connections are served with: one object for all of a listener's connections, each
 * callback told which connection's `owner` it is about (the listener's record of it). Nothing is
 * made per connection for them: 10,000 idle connections would each keep their own closures and
 * a promise otherwise.
 */
export interface ConnectionParts<Owner> {
  handler: ServeHandler;
  /** A handler that threw: the answer. */
  onError: (err: unknown) => Response | Promise<Response>;
  /** A request head arrived: the connection is busy. */
  onBusy: (owner: Owner) => void;
  /** Its answer was written (or the client left): the connection is idle. */
  onIdle: (owner: Owner) => void;
  /** The connection is closed and its last request over, once; `err` is what failed it. */
  onEnd: (owner: Owner, err?: unknown) => void;
}

/**
 * How long a closing connection waits for more of what its client still sends, ms: a client
 * uploading a large body it was refused (413, the buffered-bytes cap's 503) goes on sending
 * until it reads the answer, and a close before it stopped resets the connection under it (its
 * HTTP library then reports a broken pipe, not the answer). The wait ends at the first gap.
 */
const CLOSE_LINGER_GAP_MS = 100;
/** How long it reads in all at most, ms (nginx's `lingering_time` is 30 s). */
const CLOSE_LINGER_MS = 3000;
/** How much it reads and drops in all at most. */
const CLOSE_LINGER_BYTES = 128 * 1024 * 1024;

/** What a handler is told of its request besides the request. */
class RequestInfo {
  #completed: Promise<void> | undefined;
  #resolve: (() => void) | undefined;
  #settled = false;
  constructor(readonly remoteAddr: Deno.NetAddr) {}
  /** Settles once the answer was written or the client left. */
  get completed(): Promise<void> {
    if (this.#completed === undefined) {
      this.#completed = this.#settled
        ? Promise.resolve()
        : new Promise<void>((resolve) => this.#resolve = resolve);
    }
    return this.#completed;
  }
  settle(): void {
    this.#settled = true;
    this.#resolve?.();
  }
}

/** Serves the requests of one accepted client connection. */
export class ClientConnection<Owner> implements FillWaiter {
  readonly input: ConnInput;
  readonly #parts: ConnectionParts<Owner>;
  readonly #owner: Owner;
  readonly #remote: Deno.NetAddr;
  readonly #local: Deno.NetAddr;
  #current: ClientRequest | undefined;
  #writing: AnswerWrite | undefined;
  /** A request is with the handler or its answer is being written. */
  #busy = false;
  #stopping = false;
  #closed = false;
  /** Bytes of a partial head already searched for its end. */
  #scanned = 0;
  /** `onEnd` was called. */
  #ended = false;

  constructor(readonly conn: Deno.Conn, parts: ConnectionParts<Owner>, owner: Owner) {
    this.#parts = parts;
    this.#owner = owner;
    // Answers go out in several writes (a stream's head, then each token's chunk): Nagle's
    // algorithm would hold each small one back for the client's delayed ACK (~40 ms).
    try {
      (conn as Deno.TcpConn).setNoDelay?.(true);
    } catch {
      // not a TCP socket, or already closed
    }
    this.input = new ConnInput(conn);
    this.#remote = conn.remoteAddr as Deno.NetAddr;
    this.#local = conn.localAddr as Deno.NetAddr;
    this.#next();
  }

  /** Closes the connection now: a request in flight sees its client leave. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#left();
    try {
      this.conn.close();
    } catch {
      // closed already
    }
  }

  /** Takes no further request: closes now when idle, else once the answer in flight was written. */
  shutdown(): void {
    this.#stopping = true;
    if (!this.#busy) this.close();
  }

  /** The client is gone: the request in flight and its answer learn it. */
  #left(): void {
    this.#current?.leave();
    this.#writing?.cut();
  }

  /**
   * Serves the next request once its head is in: parsed from what is buffered, else after the
   * next read. Written as callbacks rather than an async loop because an idle connection waits
   * here: 10,000 idle connections would each keep two suspended frames (~800 bytes) otherwise.
   */
  #next(): void {
    if (this.#stopping || this.#closed) return this.#end();
    let head: RequestHead | undefined;
    try {
      head = this.#bufferedHead();
    } catch (err) {
      return this.#end(err);
    }
    if (head !== undefined) {
      this.#serveOne(head).then(
        (keep) => keep ? this.#next() : this.#end(),
        (err) => this.#end(err),
      );
      return;
    }
    try {
      this.input.fillFor(MAX_REQUEST_HEAD_BYTES + 1024, this);
    } catch (err) {
      this.#end(err);
    }
  }

  /** The idle wait's read ended (ConnInput's {@link FillWaiter}): the next head, or the end. */
  filled(more: boolean): void {
    if (more) this.#next();
    else this.#end();
  }

  /** One request served; whether the connection takes another. */
  async #serveOne(head: RequestHead): Promise<boolean> {
    this.#busy = true;
    this.#parts.onBusy(this.#owner);
    let keep = false;
    try {
      keep = await this.#exchange(head);
    } finally {
      this.#busy = false;
      this.#parts.onIdle(this.#owner);
    }
    if (!keep) {
      await this.#lingerClose();
      return false;
    }
    this.input.shrink();
    return true;
  }

  /**
   * The connection is over: a head that cannot be served is answered first; any other error
   * goes to `onEnd` (the listener notes it).
   */
  #end(err?: unknown): void {
    if (err instanceof RequestHeadError) {
      const done = () => this.#ends();
      this.#refuse(err).then(done, done);
      return;
    }
    this.#ends(err);
  }

  /** Closes, and tells the owner once. */
  #ends(err?: unknown): void {
    this.close();
    if (this.#ended) return;
    this.#ended = true;
    this.#parts.onEnd(this.#owner, err);
  }

  /** A whole request head from the buffer, or undefined while more must be read. */
  #bufferedHead(): RequestHead | undefined {
    const input = this.input;
    // Blank lines before a request line are ignored (RFC 9112 §2.2).
    while (
      input.available > 0 && (input.buf[input.start] === 13 || input.buf[input.start] === 10)
    ) {
      input.skip(1);
    }
    if (input.available === 0) return undefined;
    const from = input.start + Math.max(0, this.#scanned - 3);
    const end = headEnd(input.buf, from, input.end);
    if (end !== undefined) {
      this.#scanned = 0;
      const text = latin1Text(input.buf.subarray(input.start, end[0]));
      input.skip(end[1] - input.start);
      return parseRequestHead(text);
    }
    if (input.available >= MAX_REQUEST_HEAD_BYTES) {
      throw new RequestHeadError(
        431,
        `the request head is larger than ${MAX_REQUEST_HEAD_BYTES} bytes`,
      );
    }
    // The next search starts near where this one ended.
    this.#scanned = input.available;
    return undefined;
  }

  /** One request: the handler's answer written. Whether the connection may take another. */
  async #exchange(head: RequestHead): Promise<boolean> {
    const bodyless = head.method === "GET" || head.method === "HEAD";
    const body = new RequestBody(
      this.input,
      head.body,
      head.expectContinue,
      () => this.#watch(),
    );
    let bytes: InboundBody = null;
    if (head.body.kind !== "none") {
      const whole = body.takeBuffered();
      // A GET or HEAD body (a `Request` cannot carry one) is dropped when it came with the head;
      // otherwise the connection closes after the answer.
      if (!bodyless) bytes = whole ?? body.stream();
    }
    let req: ClientRequest;
    try {
      // As `Request` would have them: the URL normalized; the fields the parser checked.
      req = new ClientRequest(
        head.method,
        new URL(this.#url(head)).href,
        new InboundHeaders(head.headers),
        bytes,
      );
    } catch (err) {
      // A URL that is not one.
      throw new RequestHeadError(
        400,
        `the request could not be read: ${errorMessage(err)}`,
      );
    }
    this.#current = req;
    if (body.complete) this.#watch();
    const info = new RequestInfo(this.#remote);
    try {
      let res: Response;
      try {
        res = await this.#parts.handler(
          req,
          info as unknown as Deno.ServeHandlerInfo<Deno.NetAddr>,
        );
      } catch (err) {
        res = await this.#parts.onError(err);
      }
      if (this.#closed || this.input.ended) {
        // The client left while the handler worked: nobody reads the answer.
        res.body?.cancel().catch(() => {});
        return false;
      }
      const close = !head.keepAlive || this.#stopping || !body.complete;
      const write = this.#writing = writeAnswer(res, {
        conn: this.conn,
        head: head.method === "HEAD",
        close,
        keepAlive10: head.version === "1.0",
      });
      const written = await write.done;
      return written && !close && !write.closes && !this.input.ended;
    } finally {
      this.#writing = undefined;
      this.#current = undefined;
      info.settle();
    }
  }

  /**
   * Keeps one read open while the handler works, so a client that closes is seen at once. Bytes
   * that come instead (a pipelined request) stay buffered for the next head; nothing more is
   * read until then.
   */
  #watch(): void {
    const input = this.input;
    if (input.reading || input.ended || input.available > 0 || this.#closed) return;
    input.fill(BODY_BUFFER_BYTES).then((more) => {
      if (!more && this.#busy) this.#left();
    });
  }

  #url(head: RequestHead): string {
    const t = head.target;
    if (t.charCodeAt(0) !== 0x2f && t !== "*") return t; // absolute form
    const host = head.host || `${this.#local.hostname}:${this.#local.port}`;
    return `http://${host}${t === "*" ? "/" : t}`;
  }

  /** Answers a head that cannot be served, then closes. */
  async #refuse(err: RequestHeadError): Promise<void> {
    const answer = Response.json(
      { error: { message: err.message, type: "invalid_request_error", code: "bad_request" } },
      { status: err.status },
    );
    const write = writeAnswer(answer, {
      conn: this.conn,
      head: false,
      close: true,
      keepAlive10: false,
    });
    if (await write.done) await this.#lingerClose();
  }

  /**
   * Half-closes, then reads and drops what the client still sends (a body not read) for a
   * moment: closing with unread bytes would reset the connection and could lose the answer.
   */
  async #lingerClose(): Promise<void> {
    if (this.#closed || this.input.ended) return;
    try {
      await this.conn.closeWrite();
    } catch {
      return;
    }
    const until = Date.now() + CLOSE_LINGER_MS;
    let gap = setTimeout(() => this.close(), CLOSE_LINGER_GAP_MS);
    try {
      let read = 0;
      while (read < CLOSE_LINGER_BYTES && !this.#closed && Date.now() < until) {
        this.input.skip(this.input.available);
        if (!await this.input.fill(BODY_BUFFER_BYTES)) break;
        read += this.input.available;
        clearTimeout(gap);
        gap = setTimeout(() => this.close(), CLOSE_LINGER_GAP_MS);
      }
    } finally {
      clearTimeout(gap);
    }
  }
}
