/**
 * The raw relay's hold on an incomplete SSE frame: bytes go out up to the end of the last complete
 * frame and the rest waits for the next read, so that an error frame written after an upstream
 * cut stands on its own instead of being glued to half an event (ADR 0027).
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";

/** Bytes of an incomplete frame held back between reads. */
export class FrameHold {
  #held: Uint8Array | undefined;

  /**
   * What of the bytes read so far goes out now (`atBoundary`: the chunk ends a frame); the rest
   * is held. Undefined when nothing can go yet.
   */
  out(chunk: Uint8Array, atBoundary: boolean): Uint8Array | undefined {
    const held = this.#held;
    if (atBoundary) {
      this.#held = undefined;
      return held === undefined ? chunk : join(held, chunk);
    }
    const end = lastFrameEnd(chunk);
    if (end < 0) {
      this.#held = held === undefined ? chunk : join(held, chunk);
      return undefined;
    }
    this.#held = chunk.subarray(end);
    const head = chunk.subarray(0, end);
    return held === undefined ? head : join(held, head);
  }

  /** The bytes still held (the upstream ended cleanly mid-frame), and nothing after. */
  take(): Uint8Array | undefined {
    const held = this.#held;
    this.#held = undefined;
    return held;
  }

  /** Drops what is held: half a frame never reaches the client after a break. */
  drop(): void {
    this.#held = undefined;
  }
}

/** Where the last SSE frame of `bytes` ends (after its blank line: LF LF, CRLF CRLF), or -1. */
export function lastFrameEnd(bytes: Uint8Array): number {
  for (let i = bytes.byteLength - 1; i >= 1; i--) {
    if (bytes[i] !== 10) continue;
    if (bytes[i - 1] === 10) return i + 1;
    if (i >= 3 && bytes[i - 1] === 13 && bytes[i - 2] === 10 && bytes[i - 3] === 13) return i + 1;
  }
  return -1;
}

function join(a: Uint8Array, b: Uint8Array): Uint8Array {
  return concatBytes([a, b], a.byteLength + b.byteLength);
}
