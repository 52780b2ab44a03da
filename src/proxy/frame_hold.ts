/**
 * The raw relay's hold on an incomplete SSE frame: bytes go out up to the end of the last complete
 * frame and the rest waits for the next read, so that an error frame written after an upstream
 * cut stands on its own instead of being glued to half an event (ADR 0027).
 *
 * The held bytes are a list of the reads' pieces, joined once when the frame's end arrives: a
 * frame that comes in many reads costs its bytes once, not once per read (the hold used to copy
 * itself on every read, so one 16 MB event took tens of seconds of CPU).
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";

/** Bytes of an incomplete frame held back between reads. */
export class FrameHold {
  #parts: Uint8Array[] = [];
  #bytes = 0;

  /** Bytes held now (the incomplete frame's so far). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * What of the bytes read so far goes out now (`atBoundary`: the chunk ends a frame); the rest
   * is held. Undefined when nothing can go yet. Only the new chunk is scanned for a frame end.
   */
  out(chunk: Uint8Array, atBoundary: boolean): Uint8Array | undefined {
    if (atBoundary) return this.#release(chunk, undefined);
    const end = lastFrameEnd(chunk);
    if (end < 0) {
      this.#parts.push(chunk);
      this.#bytes += chunk.byteLength;
      return undefined;
    }
    return this.#release(chunk.subarray(0, end), chunk.subarray(end));
  }

  /** The bytes still held (the upstream ended cleanly mid-frame), and nothing after. */
  take(): Uint8Array | undefined {
    if (this.#parts.length === 0) return undefined;
    const held = concatBytes(this.#parts, this.#bytes);
    this.drop();
    return held;
  }

  /** Drops what is held: half a frame never reaches the client after a break. */
  drop(): void {
    this.#parts = [];
    this.#bytes = 0;
  }

  /** What is held followed by `head` goes out; `rest` (the next frame's start) is held. */
  #release(head: Uint8Array, rest: Uint8Array | undefined): Uint8Array {
    let out = head;
    if (this.#parts.length > 0) {
      this.#parts.push(head);
      out = concatBytes(this.#parts, this.#bytes + head.byteLength);
    }
    this.drop();
    if (rest !== undefined && rest.byteLength > 0) {
      this.#parts.push(rest);
      this.#bytes = rest.byteLength;
    }
    return out;
  }
}

/**
 * Where the last SSE frame of `bytes` ends (after its blank line), or -1. Line ends are CRLF, LF
 * or CR, mixed (as the parser reads them): a frame ends where a line end follows a line end. A
 * CR last may be the first half of a CRLF in the next read; cutting there splits no frame.
 */
export function lastFrameEnd(bytes: Uint8Array): number {
  for (let i = bytes.byteLength - 1; i >= 1; i--) {
    const b = bytes[i];
    if (b !== LF && b !== CR) continue;
    // The blank line's own line end starts at `start` (CRLF is one line end).
    const start = b === LF && bytes[i - 1] === CR ? i - 1 : i;
    if (start >= 1 && (bytes[start - 1] === LF || bytes[start - 1] === CR)) return i + 1;
  }
  return -1;
}

const LF = 10;
const CR = 13;
