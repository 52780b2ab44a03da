/**
 * An incremental Server-Sent Events frame parser. Upstream streams arrive in reads that split
 * frames anywhere (mid-line, mid-CRLF, mid-UTF-8 sequence); the parser reassembles them and hands
 * each complete frame to a sink. It never copies the bytes it is given beyond decoding them, so the
 * relay can forward the original chunk unchanged while the parser reads along.
 *
 * Line endings are CRLF, LF or CR (the SSE spec allows all three, mixed). A frame ends at a blank
 * line; `data` lines join with `\n`; comment lines (`:`) and unknown fields are ignored; one leading
 * space after the colon is stripped. An incomplete frame at the end of the stream is discarded,
 * as the spec says.
 *
 * @module
 */

/** One dispatched SSE frame. */
export interface SseFrame {
  /** The `event:` field, `''` when the frame named none. */
  event: string;
  /** The `data:` lines joined with `\n`; `''` when there were none. */
  data: string;
  /** The frame's text exactly as received, terminators included (only with `keepRaw`). */
  raw: string;
}

/** Receives each complete frame. */
export type SseSink = (frame: SseFrame) => void;

const LF = 10;
const CR = 13;

/**
 * How many leading bytes of `bytes` end on a UTF-8 sequence boundary: `length`, or the index of
 * a lead byte whose sequence the end cuts short (its bytes wait for the next read). Decoding
 * the rest later, together, gives exactly what one streaming decode would.
 */
function completeUtf8(bytes: Uint8Array): number {
  const n = bytes.byteLength;
  // Walk back over at most three continuation bytes (10xxxxxx) to a lead byte.
  for (let i = n - 1, back = 0; i >= 0 && back < 4; i--, back++) {
    const b = bytes[i];
    if (b < 0x80) return n; // ASCII: nothing is cut
    if (b >= 0xc0) {
      const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
      return n - i < need ? i : n;
    }
  }
  return n;
}

/** Incremental SSE parser: `push` reads, `end` at end of stream. */
export class SseParser {
  readonly #sink: SseSink;
  readonly #keepRaw: boolean;
  /**
   * UTF-8 is decoded per read with a one-shot decode (a third of the cost of a streaming one):
   * an incomplete sequence at the end of a read is carried into the next. The first decode
   * drops a leading BOM, as a streaming decoder does once; the later ones keep U+FEFF.
   */
  #decoder = new TextDecoder();
  #started = false;
  /** Bytes of an incomplete UTF-8 sequence at the end of the last read. */
  #carry: Uint8Array | undefined;
  /** Text of the current, unterminated line. */
  #pending = "";
  /** The previous read ended in CR: a LF at the start of the next one belongs to it. */
  #skipLf = false;
  #event = "";
  #data: string | undefined;
  #raw = "";
  #frames = 0;

  /**
   * An empty parser; text is pushed to it as it arrives.
   *
   * @param sink called once per complete frame, in order
   * @param keepRaw whether frames carry their raw text (needed only to re-frame a stream)
   */
  constructor(sink: SseSink, keepRaw = false) {
    this.#sink = sink;
    this.#keepRaw = keepRaw;
  }

  /**
   * Whether everything pushed so far ended exactly at a frame boundary: no partial line, no
   * partial frame, no carried bytes. (The decoder may still hold a partial character; the caller
   * checks the last byte it pushed.)
   */
  get atBoundary(): boolean {
    return this.#pending.length === 0 && this.#data === undefined && this.#event === "" &&
      this.#raw.length === 0 && !this.#skipLf && this.#carry === undefined;
  }

  /** How many frames were dispatched so far. */
  get frames(): number {
    return this.#frames;
  }

  /** Feeds one read of the stream (any length, empty included). */
  push(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    let bytes = chunk;
    const carry = this.#carry;
    if (carry !== undefined) {
      bytes = new Uint8Array(carry.byteLength + chunk.byteLength);
      bytes.set(carry);
      bytes.set(chunk, carry.byteLength);
      this.#carry = undefined;
    }
    const cut = completeUtf8(bytes);
    if (cut < bytes.byteLength) {
      this.#carry = bytes.slice(cut);
      if (cut === 0) return;
      bytes = bytes.subarray(0, cut);
    }
    const text = this.#decode(bytes);
    if (text.length === 0) return;
    this.#feed(text);
  }

  /** Feeds already-decoded text (tests, translated sources). */
  pushText(text: string): void {
    if (text.length > 0) this.#feed(text);
  }

  /** The stream ended: an unterminated last frame is dropped (SSE spec); resets the state. */
  end(): void {
    const carry = this.#carry;
    this.#carry = undefined;
    // An incomplete sequence left at the end decodes to U+FFFD, as a streaming decoder's flush.
    const tail = carry === undefined ? "" : this.#decode(carry);
    if (tail.length > 0) this.#feed(tail);
    this.#pending = "";
    this.#event = "";
    this.#data = undefined;
    this.#raw = "";
    this.#skipLf = false;
  }

  #decode(bytes: Uint8Array): string {
    const text = this.#decoder.decode(bytes);
    if (!this.#started) {
      this.#started = true;
      this.#decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    }
    return text;
  }

  #feed(chunk: string): void {
    let pos = 0;
    const len = chunk.length;
    if (this.#skipLf) {
      this.#skipLf = false;
      if (chunk.charCodeAt(0) === LF) {
        if (this.#keepRaw) this.#raw += "\n";
        pos = 1;
      }
    }
    // Next LF / CR positions, each recomputed only once passed, so a stream without CR does not
    // rescan the rest of the chunk for every line.
    let nextLf = chunk.indexOf("\n", pos);
    let nextCr = chunk.indexOf("\r", pos);
    while (pos < len) {
      if (nextLf !== -1 && nextLf < pos) nextLf = chunk.indexOf("\n", pos);
      if (nextCr !== -1 && nextCr < pos) nextCr = chunk.indexOf("\r", pos);
      let end: number;
      if (nextLf === -1) end = nextCr;
      else if (nextCr === -1) end = nextLf;
      else end = nextLf < nextCr ? nextLf : nextCr;
      if (end === -1) break;
      // Fast path, the usual upstream frame: `data: <json>` LF LF with nothing carried over —
      // dispatched straight from the chunk, one slice for the data and one for the raw text.
      if (
        end === nextLf && chunk.charCodeAt(end + 1) === LF && this.#pending.length === 0 &&
        this.#data === undefined && this.#event === "" && this.#raw.length === 0 &&
        chunk.startsWith("data:", pos)
      ) {
        const from = chunk.charCodeAt(pos + 5) === 32 ? pos + 6 : pos + 5;
        const data = from <= end ? chunk.slice(from, end) : "";
        const raw = this.#keepRaw ? chunk.slice(pos, end + 2) : "";
        pos = end + 2;
        this.#frames++;
        this.#sink({ event: "", data, raw });
        continue;
      }
      let line = chunk.slice(pos, end);
      if (this.#pending.length > 0) {
        line = this.#pending + line;
        this.#pending = "";
      }
      let next = end + 1;
      if (chunk.charCodeAt(end) === CR) {
        if (next < len) {
          if (chunk.charCodeAt(next) === LF) next++;
        } else {
          this.#skipLf = true;
        }
      }
      if (this.#keepRaw) this.#raw += chunk.slice(pos, next);
      pos = next;
      this.#line(line);
    }
    if (pos < len) {
      const rest = chunk.slice(pos);
      this.#pending = this.#pending.length > 0 ? this.#pending + rest : rest;
      if (this.#keepRaw) this.#raw += rest;
    }
  }

  #line(line: string): void {
    if (line.length === 0) {
      this.#dispatch();
      return;
    }
    const first = line.charCodeAt(0);
    if (first === 58 /* ':' */) return;
    const colon = line.indexOf(":");
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = "";
    } else {
      field = line.slice(0, colon);
      value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
    }
    if (field === "data") {
      this.#data = this.#data === undefined ? value : this.#data + "\n" + value;
    } else if (field === "event") {
      this.#event = value;
    }
  }

  #dispatch(): void {
    const raw = this.#raw;
    this.#raw = "";
    if (this.#data === undefined && this.#event === "") {
      // A blank line with nothing before it dispatches nothing, but its bytes still belong to the
      // stream: carry them into the next frame's raw text so re-framing loses no byte.
      this.#raw = raw;
      return;
    }
    const frame: SseFrame = { event: this.#event, data: this.#data ?? "", raw };
    this.#event = "";
    this.#data = undefined;
    this.#frames++;
    this.#sink(frame);
  }
}
