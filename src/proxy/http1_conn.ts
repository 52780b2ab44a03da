/**
 * One connection of the HTTP/1.1 upstream client (ADR 0008) with its read buffer: response heads
 * and body lines are parsed from the buffer, and an idle connection keeps a read pending so a
 * server's close is seen before the connection is reused.
 *
 * @module
 */
import { writeAll } from "../bytes.ts";
import { BadHead, headEnd, latin1Text, MAX_HEAD_BYTES } from "./http1_head.ts";

const CR = 13;
const LF = 10;
/**
 * A connection's read buffer to start with: a response head and a few SSE events fit, and
 * 2,000 streams hold 4 MB of it, not 32 (it doubles when a head or a line needs more).
 */
const BUFFER_SIZE = 2 * 1024;

/** Where a connection goes when its response was read (the client's pool). */
export interface ConnPool {
  /** Takes a connection back into the idle pool (its response was read to the end). */
  giveBack(c: Conn): void;
  /** Closes a connection that cannot be reused. */
  discard(c: Conn): void;
}

/** One connection with its read buffer. */
export class Conn {
  buf = new Uint8Array(BUFFER_SIZE);
  r = 0;
  w = 0;
  closed = false;
  lastUsed = 0;
  /** How long this connection may stay idle and still be reused, ms (set by each response). */
  idleMs = 0;
  /** Bytes received for the current response (a failure says whether any came). */
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

  write(bytes: Uint8Array): Promise<void> {
    return writeAll(this.conn, bytes);
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
    // Bytes past `r` already scanned for the blank line: counted from `r`, since a fill may move
    // what is buffered (emptied after an earlier head such as a 103, or compacted to the front).
    let scanned = 0;
    for (;;) {
      const end = headEnd(this.buf, this.r + scanned, this.w);
      if (end !== undefined && end[1] - this.r <= MAX_HEAD_BYTES) {
        const text = latin1Text(this.buf.subarray(this.r, end[0]));
        this.r = end[1];
        return text;
      }
      if (end !== undefined || this.w - this.r > MAX_HEAD_BYTES) {
        throw new BadHead(`is larger than ${MAX_HEAD_BYTES / 1024} KiB`);
      }
      // The blank line may begin in the last two bytes (LF CR, then LF).
      scanned = Math.max(0, this.w - this.r - 2);
      if (!(await this.fill())) {
        throw new StaleConnection(
          this.received === 0 ? "closed before answering" : "closed mid-head",
        );
      }
    }
  }
}

/** The connection ended before a response head (a reused one may just have been stale). */
export class StaleConnection extends Error {
  constructor(message: string) {
    super(`upstream connection ${message}`);
    this.name = "StaleConnection";
  }
}
