/**
 * A client request's body, read off its connection as the handler pulls it (ADR 0053): a
 * `Content-Length` body, or a chunked one decoded (chunk extensions ignored, trailers read and
 * dropped). Nothing is read before the handler asks — the intake's own limits and its body
 * timeout rule what it takes — and a client that waits for `100 Continue` is sent it on the
 * first pull. A body that ends early, or chunked framing that is not, errors the stream; the
 * connection is then closed after the answer.
 *
 * @module
 */
import { writeAll } from "../bytes.ts";
import { BODY_BUFFER_BYTES, type ConnInput } from "./conn_input.ts";
import type { BodyFraming } from "./request_head.ts";

/** The longest chunk-size line (size and extensions) read. */
const MAX_CHUNK_LINE_BYTES = 4096;
/** The most trailer bytes read after the last chunk. */
const MAX_TRAILER_BYTES = 16 * 1024;

const CONTINUE = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");

/** A body that could not be read to its end. */
export class BodyReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BodyReadError";
  }
}

/** Reads one request's body off the connection's input. */
export class RequestBody {
  /** Bytes of the current chunk (or the whole length-framed body) still to come. */
  #left: number;
  #chunked: boolean;
  /** The chunked body's last chunk and trailers were read. */
  #done = false;
  /** Sent 100 Continue, or the client did not ask for one. */
  #continued: boolean;
  /** The stream handed to the handler (at most one). */
  #stream: ReadableStream<Uint8Array<ArrayBuffer>> | undefined;

  constructor(
    readonly input: ConnInput,
    framing: BodyFraming,
    expectContinue: boolean,
    /** Called once the whole body was read through the stream. */
    readonly onComplete: () => void = () => {},
  ) {
    this.#chunked = framing.kind === "chunked";
    this.#left = framing.kind === "length" ? framing.length : 0;
    this.#done = framing.kind === "none";
    this.#continued = !expectContinue;
  }

  /** Whether the whole body was read (the next request may follow on the connection). */
  get complete(): boolean {
    return this.#done;
  }

  /**
   * The whole body when it already arrived with the head (a small JSON body: no stream per
   * request), taken off the input; undefined otherwise.
   */
  takeBuffered(): Uint8Array<ArrayBuffer> | undefined {
    if (this.#chunked || this.#done || this.input.available < this.#left) return undefined;
    const bytes = this.input.take(this.#left);
    this.#left = 0;
    this.#done = true;
    return bytes;
  }

  /** The body as a stream the handler pulls. */
  stream(): ReadableStream<Uint8Array<ArrayBuffer>> {
    this.#stream ??= new ReadableStream<Uint8Array<ArrayBuffer>>({
      pull: async (controller) => {
        try {
          const piece = await this.#next();
          if (piece !== null) controller.enqueue(piece);
          if (this.#done) {
            controller.close();
            this.onComplete();
          }
        } catch (err) {
          controller.error(err);
        }
      },
    }, { highWaterMark: 0 });
    return this.#stream;
  }

  /** The next piece of the body (never empty), or null at its end. */
  async #next(): Promise<Uint8Array<ArrayBuffer> | null> {
    if (this.#done) return null;
    if (!this.#continued) {
      this.#continued = true;
      if (this.input.available === 0) await writeAll(this.input.conn, CONTINUE);
    }
    this.input.reserve(BODY_BUFFER_BYTES);
    if (this.#chunked) {
      if (this.#left === 0) {
        await this.#chunkHead();
        if (this.#done) return null;
      }
    }
    if (this.input.available === 0) await this.#more();
    const n = Math.min(this.#left, this.input.available);
    const piece = this.input.take(n);
    this.#left -= n;
    if (this.#left === 0) {
      if (this.#chunked) await this.#crlf();
      else this.#done = true;
    }
    return piece;
  }

  async #more(): Promise<void> {
    if (!await this.input.fill(BODY_BUFFER_BYTES)) {
      throw new BodyReadError("the client closed the connection before the body's end");
    }
  }

  /** Index of the next LF in the unused input, reading more until one comes (bounded). */
  async #line(max: number, what: string): Promise<number> {
    for (let from = this.input.start;;) {
      const at = this.input.buf.indexOf(10, from);
      if (at >= 0 && at < this.input.end) return at;
      if (this.input.available > max) {
        throw new BodyReadError(`the chunked body's ${what} is too long`);
      }
      from = this.input.end;
      const before = this.input.start;
      await this.#more();
      from += this.input.start - before;
    }
  }

  /** Reads a chunk-size line; a zero size reads the trailers and ends the body. */
  async #chunkHead(): Promise<void> {
    const at = await this.#line(MAX_CHUNK_LINE_BYTES, "chunk-size line");
    const buf = this.input.buf;
    let size = 0;
    let i = this.input.start;
    let digits = 0;
    for (; i < at; i++) {
      const c = buf[i];
      const v = c >= 48 && c <= 57
        ? c - 48
        : (c | 32) >= 97 && (c | 32) <= 102
        ? (c | 32) - 87
        : -1;
      if (v < 0) break;
      size = size * 16 + v;
      if (++digits > 12) throw new BodyReadError("a chunk size of the body is too large");
    }
    const rest = buf[i];
    if (digits === 0 || (i < at && rest !== 59 && rest !== 13 && rest !== 32 && rest !== 9)) {
      throw new BodyReadError("the chunked body has a bad chunk-size line");
    }
    this.input.skip(at + 1 - this.input.start);
    if (size > 0) {
      this.#left = size;
      return;
    }
    // The last chunk: trailer lines up to a blank one, dropped.
    for (let read = 0;;) {
      const end = await this.#line(MAX_TRAILER_BYTES, "trailer");
      const len = end - this.input.start;
      read += len + 1;
      if (read > MAX_TRAILER_BYTES) {
        throw new BodyReadError("the chunked body's trailer is too long");
      }
      const blank = len === 0 || (len === 1 && this.input.buf[this.input.start] === 13);
      this.input.skip(len + 1);
      if (blank) break;
    }
    this.#done = true;
  }

  /** The CRLF after a chunk's data. */
  async #crlf(): Promise<void> {
    const at = await this.#line(2, "chunk end");
    const len = at - this.input.start;
    if (len > 1 || (len === 1 && this.input.buf[this.input.start] !== 13)) {
      throw new BodyReadError("a chunk of the body does not end in CRLF");
    }
    this.input.skip(len + 1);
  }
}
