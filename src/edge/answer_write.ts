/**
 * Writing a handler's `Response` to a client connection (ADR 0053): the status line and headers,
 * then the body — a whole body (what Skeid's JSON answers are) in one write with its
 * `Content-Length`, a streamed one (an SSE relay) chunk by chunk in chunked framing as each
 * piece comes, so a token reaches the client the moment the relay has it. HEAD answers and
 * 1xx/204/304 carry no body. The server owns `connection`, `transfer-encoding` and, for a
 * streamed body, `content-length`; a handler's own are replaced.
 *
 * @module
 */
import { reasonPhrase } from "../reason_phrase.ts";
import { writeAll } from "../bytes.ts";
import { ListedResponse } from "./listed_response.ts";

const encoder = new TextEncoder();

/**
 * Deno keeps a `Response`'s whole body (a string or bytes it was made from) behind this symbol
 * until someone reads `body`; reading it from there spares a stream per answer. On a Deno where
 * the shape differs, every body is read as a stream (slower, the same bytes).
 */
const RESPONSE_INNER = Object.getOwnPropertySymbols(new Response()).find((s) =>
  s.description === "response"
);

/** A body Deno holds whole, or undefined when it is a stream (or unknown). */
function wholeBody(res: Response): string | Uint8Array | null | undefined {
  if (RESPONSE_INNER === undefined) return undefined;
  const inner = (res as unknown as Record<symbol, { body?: unknown } | undefined>)[RESPONSE_INNER];
  if (inner === undefined || typeof inner !== "object") return undefined;
  const body = inner.body as { streamOrStatic?: unknown } | null | undefined;
  if (body === null) return null;
  const s = body?.streamOrStatic as { body?: unknown; consumed?: unknown } | undefined;
  if (s === undefined || s instanceof ReadableStream || s.consumed !== false) return undefined;
  const b = s.body;
  if (typeof b === "string" || b instanceof Uint8Array) {
    s.consumed = true;
    return b;
  }
  return undefined;
}

/** The `Date` header's value, formatted once a second. */
let dateSecond = -1;
let dateValue = "";
function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateValue = new Date(s * 1000).toUTCString();
  }
  return dateValue;
}

/** What the answer is written for. */
export interface AnswerTarget {
  conn: Deno.Conn;
  /** The request was HEAD: the head only. */
  head: boolean;
  /** The connection closes after this answer (`connection: close` is written). */
  close: boolean;
  /** HTTP/1.0 keep-alive: say `connection: keep-alive`. */
  keepAlive10: boolean;
}

/** What happened to an answer being written. */
export interface AnswerWrite {
  /** Resolves true once the whole answer was written, false when the client went first. */
  done: Promise<boolean>;
  /** The client is gone: a streamed body stops (its source is cancelled). */
  cut(): void;
  /** The handler's answer said `connection: close`. */
  closes: boolean;
}

/** Writes `res` to the client; never rejects. */
export function writeAnswer(res: Response, to: AnswerTarget): AnswerWrite {
  const status = res.status;
  const bodiless = to.head || status < 200 || status === 204 || status === 304;
  let closes = false;
  let length = -1;
  let head = `HTTP/1.1 ${status} ${res.statusText || reasonPhrase(status) || "Unknown"}\r\n`;
  const each = (value: string, name: string): void => {
    switch (name) {
      case "connection":
        if (value.toLowerCase().includes("close")) closes = true;
        return;
      case "transfer-encoding":
      case "keep-alive":
        return;
      case "content-length":
        length = Number(value);
        return;
      case "date":
        return;
    }
    head += `${name}: ${value}\r\n`;
  };
  // A listed response's own pairs (ADR 0058); else `forEach`, not `for…of`: the same sorted,
  // combined list without an iterator result and a pair array per header.
  const listed = res instanceof ListedResponse ? res.listed() : undefined;
  if (listed !== undefined) { for (const [name, value] of listed) each(value, name); }
  else res.headers.forEach(each);
  head += `date: ${httpDate()}\r\n`;
  if (to.close || closes) head += "connection: close\r\n";
  else if (to.keepAlive10) head += "connection: keep-alive\r\n";

  const whole = wholeBody(res);
  if (whole !== undefined) {
    // Never read as a stream: a HEAD answer drops it.
    const bytes = whole === null
      ? undefined
      : typeof whole === "string"
      ? encoder.encode(whole)
      : whole;
    const size = bytes?.length ?? 0;
    if (!(status < 200 || status === 204 || status === 304)) head += `content-length: ${size}\r\n`;
    head += "\r\n";
    const out = bodiless || size === 0 ? headBytes(head) : joined(head, bytes!);
    return {
      done: writeAll(to.conn, out).then(() => true, () => false),
      cut() {},
      closes,
    };
  }
  const body = res.body;
  if (body === null || bodiless) {
    if (body !== null) body.cancel().catch(() => {});
    if (!(status < 200 || status === 204 || status === 304)) {
      head += `content-length: ${body === null ? 0 : Math.max(0, length)}\r\n`;
    }
    head += "\r\n";
    return {
      done: writeAll(to.conn, headBytes(head)).then(() => true, () => false),
      cut() {},
      closes,
    };
  }
  // A stream: relayed as it comes. A declared length is kept (the bytes are the handler's to
  // get right); otherwise chunked.
  const chunked = !(Number.isSafeInteger(length) && length >= 0);
  head += chunked ? "transfer-encoding: chunked\r\n\r\n" : `content-length: ${length}\r\n\r\n`;
  const reader = body.getReader();
  let gone = false;
  const done = (async (): Promise<boolean> => {
    try {
      await writeAll(to.conn, headBytes(head));
      for (;;) {
        const r = await reader.read();
        if (gone) return false;
        if (r.done) break;
        const piece = r.value as Uint8Array;
        if (piece.byteLength === 0) continue;
        await writeAll(to.conn, chunked ? chunk(piece) : piece);
      }
      if (chunked) await writeAll(to.conn, LAST_CHUNK);
      return true;
    } catch (err) {
      gone = true;
      reader.cancel(err).catch(() => {});
      return false;
    }
  })();
  return {
    done,
    cut() {
      if (gone) return;
      gone = true;
      reader.cancel(new Error("the client closed the connection")).catch(() => {});
    },
    closes,
  };
}

const LAST_CHUNK = encoder.encode("0\r\n\r\n");

/** A head's bytes: ASCII natively, any other header character as its one Latin-1 byte. */
function headBytes(head: string): Uint8Array {
  if (!NON_ASCII.test(head)) return encoder.encode(head);
  const out = new Uint8Array(head.length);
  for (let i = 0; i < head.length; i++) out[i] = head.charCodeAt(i);
  return out;
}
const NON_ASCII = /[\u0080-\uffff]/;

function joined(head: string, body: Uint8Array): Uint8Array {
  const h = headBytes(head);
  const out = new Uint8Array(h.length + body.length);
  out.set(h);
  out.set(body, h.length);
  return out;
}

/** One chunk of chunked framing around `piece`. */
function chunk(piece: Uint8Array): Uint8Array {
  const size = piece.byteLength.toString(16);
  const out = new Uint8Array(size.length + 2 + piece.byteLength + 2);
  for (let i = 0; i < size.length; i++) out[i] = size.charCodeAt(i);
  out[size.length] = 13;
  out[size.length + 1] = 10;
  out.set(piece, size.length + 2);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}
