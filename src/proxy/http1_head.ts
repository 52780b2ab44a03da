/**
 * Response heads of the HTTP/1.1 upstream client (ADR 0008): where a head ends in a connection's
 * buffer, and what it says (status, header lines, framing, keep-alive). A head is bounded
 * ({@link MAX_HEAD_BYTES}); lines may end in CRLF or a bare LF (RFC 9112 §2.2); a header line
 * continued on the next one (obs-fold) is refused, which RFC 9112 §5.2 lets a gateway answer
 * with a 502.
 *
 * @module
 */

const CR = 13;
const LF = 10;
const asciiDecoder = new TextDecoder();

/** The largest response head read (a bigger one fails the request, nothing of it is kept). */
export const MAX_HEAD_BYTES = 64 * 1024;

/** The response head. */
export interface Head {
  /** The status code. */
  status: number;
  /** Lowercase names, values trimmed, in the order received. */
  headers: [string, string][];
  /** The connection ends after this response (HTTP/1.0, `Connection: close`). */
  close: boolean;
  /** `Transfer-Encoding: chunked`. */
  chunked: boolean;
  /** -1 when the body runs to the end of the connection (or is chunked). */
  length: number;
  /** `Keep-Alive: timeout=N` in ms, when the server said how long it keeps an idle connection. */
  keepAliveMs: number | undefined;
}

/**
 * Header bytes → text, one character per byte (ISO-8859-1), the way `Headers` holds them: a
 * header byte >= 0x80 stays that one character (UTF-8 would turn 0xFC into U+FFFD). ASCII, the
 * usual case, is decoded natively.
 */
export function latin1Text(bytes: Uint8Array): string {
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

/**
 * Where the head in `buf[from, to)` ends: `[end of its text, start of the body]`, or undefined
 * (more bytes needed). The blank line ending it may be CRLF or a bare LF, after a line ending
 * either way.
 */
export function headEnd(buf: Uint8Array, from: number, to: number): [number, number] | undefined {
  for (let i = buf.indexOf(LF, from); i >= 0 && i < to; i = buf.indexOf(LF, i + 1)) {
    if (i + 1 >= to) return undefined;
    if (buf[i + 1] === LF) return [i + 1, i + 2];
    if (buf[i + 1] === CR) {
      if (i + 2 >= to) return undefined;
      if (buf[i + 2] === LF) return [i + 1, i + 3];
    }
  }
  return undefined;
}

/** A response head Skeid does not relay (the request fails with this reason: a 502). */
export class BadHead extends Error {
  /** @param message what is wrong with the head, naming no header value */
  constructor(message: string) {
    super(`upstream response head ${message}`);
    this.name = "BadHead";
  }
}

/** Parses a head's text (status line and header lines, without the blank line). */
export function parseHead(text: string): Head {
  const lines = text.split("\n");
  const statusLine = stripCr(lines[0]);
  const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(statusLine);
  if (!m) throw new BadHead(`has a bad status line '${statusLine.slice(0, 80)}'`);
  const head: Head = {
    status: Number(m[2]),
    headers: [],
    close: m[1] === "0",
    chunked: false,
    length: -1,
    keepAliveMs: undefined,
  };
  for (let i = 1; i < lines.length; i++) {
    const line = stripCr(lines[i]);
    if (line.length === 0) continue;
    const first = line.charCodeAt(0);
    if (first === 0x20 || first === 0x09) {
      throw new BadHead("continues a header line on the next one (obs-fold), which is refused");
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    head.headers.push([name, value]);
    if (name === "content-length") head.length = contentLength(value, head.length);
    else if (name === "transfer-encoding") head.chunked = /chunked/i.test(value);
    else if (name === "connection") {
      const v = value.toLowerCase();
      if (v.includes("close")) head.close = true;
      else if (v.includes("keep-alive")) head.close = false;
    } else if (name === "keep-alive") {
      const t = /(?:^|[,;\s])timeout\s*=\s*"?(\d+)/i.exec(value);
      if (t) head.keepAliveMs = Number(t[1]) * 1000;
    }
  }
  if (head.chunked) head.length = -1;
  return head;
}

/** A Content-Length value: one or more decimal digits (RFC 9110 §8.6). */
const DIGITS = /^[0-9]+$/;

/**
 * The body length a `Content-Length` line gives, with what earlier lines gave (`-1`: none yet).
 * RFC 9112 §6.3: a value that is not digits, or lines or list members that disagree, make the
 * framing unknowable — the message is refused and its connection closed, as a body of the wrong
 * length would leave the connection out of step. Identical repeats (`5, 5`) are one length. Shared
 * by the upstream client and the client-facing server (`src/edge/request_head.ts`).
 */
export function contentLengthValue(
  value: string,
  before: number,
): number | "invalid" | "conflicting" {
  let length = before;
  for (const part of value.split(",")) {
    const digits = part.trim();
    const n = Number(digits);
    if (!DIGITS.test(digits) || !Number.isSafeInteger(n)) return "invalid";
    if (length !== -1 && n !== length) return "conflicting";
    length = n;
  }
  return length;
}

function contentLength(value: string, before: number): number {
  const length = contentLengthValue(value, before);
  if (length === "invalid") {
    throw new BadHead("has an invalid content-length (decimal digits only)");
  }
  if (length === "conflicting") throw new BadHead("has conflicting content-length values");
  return length;
}

/** A line without its trailing CR (a head split on LF). */
export function stripCr(line: string): string {
  return line.endsWith("\r") ? line.slice(0, -1) : line;
}
