/**
 * What a client connection has sent and the server has not used yet: one buffer per connection,
 * read into by one read at a time. An idle connection holds only a small buffer
 * ({@link IDLE_BUFFER_BYTES}: what 10,000 idle keep-alive connections cost is mostly this), a
 * request head grows it up to the head bound, and a body being read uses a larger one, given
 * back once the request is over (ADR 0053).
 *
 * @module
 */

/** The buffer an idle connection reads its next request into. */
export const IDLE_BUFFER_BYTES = 1024;
/** The largest buffer a connection keeps between requests. */
const KEPT_BUFFER_BYTES = 16 * 1024;
/** The buffer a request body is read through. */
export const BODY_BUFFER_BYTES = 64 * 1024;

/** Told how a read it waits for ended (see {@link ConnInput.fillFor}). */
export interface FillWaiter {
  /** More bytes are buffered (true), or the peer closed its side or the socket failed. */
  filled(more: boolean): void;
}

/** A client connection's unread bytes, and more on demand. */
export class ConnInput {
  #buf: Uint8Array<ArrayBuffer>;
  /** Unused bytes are `buf[start, end)`. */
  start = 0;
  end = 0;
  /** The read in flight, so two callers never read at once. */
  #reading: Promise<boolean> | undefined;
  /** The peer closed its side (or the socket failed): nothing more will come. */
  ended = false;
  /** Who {@link fillFor} tells when the read in flight ends. */
  #waiter: FillWaiter | undefined;

  constructor(readonly conn: Deno.Conn) {
    this.#buf = new Uint8Array(IDLE_BUFFER_BYTES);
  }

  /** The buffer (valid between `start` and `end`). */
  get buf(): Uint8Array<ArrayBuffer> {
    return this.#buf;
  }

  /** Bytes received and not used yet. */
  get available(): number {
    return this.end - this.start;
  }

  /** Whether a read is in flight. */
  get reading(): boolean {
    return this.#reading !== undefined;
  }

  /**
   * Reads more bytes into the buffer; `maxBuffer` bounds how far it grows to make room. Resolves
   * false once the peer closed its side or the socket failed; a read already in flight is
   * shared. Rejects only when the buffer is full at `maxBuffer` (a caller's bound not checked).
   */
  fill(maxBuffer: number): Promise<boolean> {
    if (this.#reading !== undefined) return this.#reading;
    if (this.ended) return Promise.resolve(false);
    try {
      this.#room(maxBuffer);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#read();
  }

  /**
   * As {@link fill}, the outcome told to `waiter` rather than through a promise of its own: an
   * idle connection waits here, and 10,000 of them would each keep a promise, its reaction and
   * two closures otherwise. Throws (synchronously) where `fill` rejects.
   */
  fillFor(maxBuffer: number, waiter: FillWaiter): void {
    if (this.#reading !== undefined) {
      this.#reading.then((more) => waiter.filled(more));
      return;
    }
    if (this.ended) return waiter.filled(false);
    this.#room(maxBuffer);
    this.#waiter = waiter;
    this.#read();
  }

  /**
   * The one read in flight, into the room after `end`: a promise chain, not an async function,
   * so a connection waiting on it keeps no suspended frame.
   */
  #read(): Promise<boolean> {
    return this.#reading = this.conn.read(this.#buf.subarray(this.end)).then(
      this.#onRead,
      this.#onFail,
    );
  }

  #onRead = (n: number | null): boolean => {
    this.#reading = undefined;
    if (n === null) this.ended = true;
    else this.end += n;
    return this.#tell(n !== null);
  };

  #onFail = (): boolean => {
    this.#reading = undefined;
    this.ended = true;
    return this.#tell(false);
  };

  /** The outcome of a read, told to a waiter first. */
  #tell(more: boolean): boolean {
    const waiter = this.#waiter;
    if (waiter !== undefined) {
      this.#waiter = undefined;
      waiter.filled(more);
    }
    return more;
  }

  /**
   * Makes room after `end`: moves the unused bytes to the front, or grows the buffer up to
   * `maxBuffer`. A buffer full of unused bytes at its bound is the caller's to refuse (a head
   * over its bound); reading into no room would spin, so it throws.
   */
  #room(maxBuffer: number): void {
    if (this.start === this.end) this.start = this.end = 0;
    if (this.end < this.#buf.length) return;
    const used = this.end - this.start;
    const size = Math.max(this.#buf.length, Math.min(maxBuffer, this.#buf.length * 4));
    if (size > this.#buf.length && used >= this.#buf.length / 2) {
      const next = new Uint8Array(size);
      next.set(this.#buf.subarray(this.start, this.end));
      this.#buf = next;
    } else if (this.start > 0) {
      this.#buf.copyWithin(0, this.start, this.end);
    } else {
      throw new RangeError(`the connection's buffer is full at ${this.#buf.length} bytes`);
    }
    this.end = used;
    this.start = 0;
  }

  /** Grows the buffer to at least `size` bytes (a body is about to be read through it). */
  reserve(size: number): void {
    if (this.#buf.length >= size || this.reading) return;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(this.start, this.end));
    this.end -= this.start;
    this.start = 0;
    this.#buf = next;
  }

  /**
   * Gives a body's large buffer back while nothing is buffered and no read is in flight (idle);
   * one a head grew to is kept (the next request is likely the same size).
   */
  shrink(): void {
    if (this.#buf.length <= KEPT_BUFFER_BYTES || this.reading || this.start !== this.end) return;
    this.#buf = new Uint8Array(IDLE_BUFFER_BYTES);
    this.start = this.end = 0;
  }

  /** A copy of the next `n` unused bytes (n ≤ available), consumed. */
  take(n: number): Uint8Array<ArrayBuffer> {
    const out = this.#buf.slice(this.start, this.start + n);
    this.start += n;
    return out;
  }

  /** Drops the next `n` unused bytes (n ≤ available). */
  skip(n: number): void {
    this.start += n;
  }
}
