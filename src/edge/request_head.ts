/**
 * Request heads of Skeid's own HTTP/1.1 server (ADR 0053): the request line and header lines of
 * a client request, parsed and judged before any handler sees them. A head Skeid cannot frame
 * safely is refused with the status RFC 9112 gives (400, 414 is folded into the head bound's
 * 431, 501 for a transfer coding other than chunked) and the connection is closed after the
 * answer: a body whose length is unknowable would leave the connection out of step (request
 * smuggling, RFC 9112 §6.3).
 *
 * @module
 */
import { contentLengthValue, stripCr } from "../proxy/http1_head.ts";

/** The largest request head read (request line and headers); a bigger one is answered 431. */
export const MAX_REQUEST_HEAD_BYTES = 64 * 1024;
/** The most header lines a request may have (hyper's limit is 100; a few more for proxies). */
export const MAX_REQUEST_HEADERS = 200;

/** How the body of a request is framed. */
export type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" };

/** A parsed request head. */
export interface RequestHead {
  method: string;
  /** The request target as sent (origin form `/path?q`, absolute form, or `*`). */
  target: string;
  /** `1.0` or `1.1`. */
  version: "1.0" | "1.1";
  /** Header lines in order, names as sent, values trimmed. */
  headers: [string, string][];
  /** The `Host` header's value, when one was sent. */
  host: string | undefined;
  body: BodyFraming;
  /** The client asked to keep the connection (HTTP/1.1 unless `close`; HTTP/1.0 `keep-alive`). */
  keepAlive: boolean;
  /** `Expect: 100-continue`: the client waits for a 100 before sending the body. */
  expectContinue: boolean;
}

/** A head that is refused: the status to answer and why, naming no header value. */
export class RequestHeadError extends Error {
  /**
   * @param status the answer's status
   * @param message what is wrong, for the client and the log
   */
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = "RequestHeadError";
  }
}

/** A method or header name: RFC 9110 token characters only. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A header value: visible characters, spaces and tabs, obs-text; never CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** A request target: visible ASCII only (no spaces, no controls). */
const TARGET = /^[\x21-\x7e]+$/;
/** A `Host` value: a name, an IPv4 or bracketed IPv6 literal, and an optional port. */
const HOST = /^(?:[A-Za-z0-9\-._~%!$&'()*+,;=]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?$/;

/** Parses the text of a request head (lines ending in CRLF or LF, without the blank line). */
export function parseRequestHead(text: string): RequestHead {
  const lines = text.split("\n");
  const requestLine = stripCr(lines[0]);
  const sp1 = requestLine.indexOf(" ");
  const sp2 = requestLine.indexOf(" ", sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || requestLine.indexOf(" ", sp2 + 1) >= 0) {
    throw new RequestHeadError(400, "the request line is not 'METHOD target HTTP/1.x'");
  }
  const method = requestLine.slice(0, sp1);
  const target = requestLine.slice(sp1 + 1, sp2);
  const proto = requestLine.slice(sp2 + 1);
  if (!TOKEN.test(method)) throw new RequestHeadError(400, "the request method is not a token");
  if (proto !== "HTTP/1.1" && proto !== "HTTP/1.0") {
    throw new RequestHeadError(
      proto.startsWith("HTTP/") ? 505 : 400,
      "the request line's protocol is not HTTP/1.1 or HTTP/1.0",
    );
  }
  if (!TARGET.test(target) || !validTarget(method, target)) {
    throw new RequestHeadError(400, "the request target is not a path, an absolute URL or '*'");
  }
  if (lines.length - 1 > MAX_REQUEST_HEADERS) {
    throw new RequestHeadError(431, `the request has more than ${MAX_REQUEST_HEADERS} headers`);
  }
  const version = proto === "HTTP/1.1" ? "1.1" : "1.0";
  const head: RequestHead = {
    method,
    target,
    version,
    headers: [],
    host: undefined,
    body: { kind: "none" },
    keepAlive: version === "1.1",
    expectContinue: false,
  };
  let length = -1;
  let chunked = false;
  let codings = false;
  let hosts = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = stripCr(lines[i]);
    if (line.length === 0) continue;
    const first = line.charCodeAt(0);
    if (first === 0x20 || first === 0x09) {
      throw new RequestHeadError(400, "a header line is continued on the next one (obs-fold)");
    }
    const colon = line.indexOf(":");
    if (colon <= 0) throw new RequestHeadError(400, "a header line has no name and colon");
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) throw new RequestHeadError(400, "a header name is not a token");
    const value = line.slice(colon + 1).trim();
    if (!FIELD_VALUE.test(value)) {
      throw new RequestHeadError(400, `the value of header '${name}' has a control character`);
    }
    head.headers.push([name, value]);
    // Lowercased only for the few names framing depends on.
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === "host") {
          hosts++;
          head.host = value;
        }
        break;
      case 6:
        if (name.toLowerCase() === "expect") {
          if (value.toLowerCase() === "100-continue") head.expectContinue = true;
          else throw new RequestHeadError(417, "the only expectation served is 100-continue");
        }
        break;
      case 10:
        if (name.toLowerCase() === "connection") {
          const v = value.toLowerCase();
          if (v.includes("close")) head.keepAlive = false;
          else if (v.includes("keep-alive")) head.keepAlive = true;
        }
        break;
      case 14:
        if (name.toLowerCase() === "content-length") length = contentLength(value, length);
        break;
      case 17:
        if (name.toLowerCase() === "transfer-encoding") {
          codings = true;
          chunked = lastCodingChunked(value);
        }
        break;
    }
  }
  if (hosts > 1) throw new RequestHeadError(400, "the request has more than one Host header");
  if (head.host !== undefined && head.host !== "" && !HOST.test(head.host)) {
    throw new RequestHeadError(400, "the Host header is not a host name and port");
  }
  if (version === "1.1" && head.host === undefined) {
    throw new RequestHeadError(400, "an HTTP/1.1 request needs a Host header");
  }
  if (codings) {
    // RFC 9112 §6.1: both framings at once is how requests are smuggled; refused outright.
    if (length !== -1) {
      throw new RequestHeadError(400, "the request has both Transfer-Encoding and Content-Length");
    }
    if (version === "1.0") {
      throw new RequestHeadError(400, "an HTTP/1.0 request cannot be sent with Transfer-Encoding");
    }
    if (!chunked) {
      throw new RequestHeadError(501, "the request's transfer coding is not chunked");
    }
    head.body = { kind: "chunked" };
  } else if (length > 0) {
    head.body = { kind: "length", length };
  }
  return head;
}

function validTarget(method: string, target: string): boolean {
  const c = target.charCodeAt(0);
  if (c === 0x2f) return true; // "/": origin form
  if (target === "*") return method === "OPTIONS";
  return /^https?:\/\/[^/?#]+/i.test(target);
}

/** Whether the last of the listed transfer codings is `chunked` (the only framing served). */
function lastCodingChunked(value: string): boolean {
  const parts = value.split(",");
  const last = parts[parts.length - 1].trim().toLowerCase();
  if (last !== "chunked") return false;
  // `chunked` applied twice is no framing anyone sends.
  return parts.filter((p) => p.trim().toLowerCase() === "chunked").length === 1;
}

function contentLength(value: string, before: number): number {
  const length = contentLengthValue(value, before);
  if (length === "invalid") {
    throw new RequestHeadError(400, "the Content-Length is not a decimal number");
  }
  if (length === "conflicting") {
    throw new RequestHeadError(400, "the request has conflicting Content-Length values");
  }
  return length;
}
