/**
 * Answers of the HTTP/1.1 upstream client (ADR 0008): the status, the header lines and the body,
 * read from the connection as the caller pulls (Content-Length, chunked, or to the end of the
 * connection) and decoded from a content coding when it has one.
 *
 * @module
 */
import type { Conn, ConnPool } from "./http1_conn.ts";
import { type Coding, Decoded } from "./http1_decode.ts";
import type { Head } from "./http1_head.ts";

/** Reads straight into a buffer of their own (bodies to the end, long Content-Length ones). */
const READ_SIZE = 16 * 1024;

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
    readonly client: ConnPool,
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
