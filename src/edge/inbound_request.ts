/**
 * The request a gateway handler is given (ADR 0056): the parts of a `Request` Skeid's handlers
 * read. A `Request` is one; so is the edge's own `ClientRequest`, which is not a `Request`:
 * building one (its inner request, header list, body and signal objects) cost 4–6 µs a request,
 * a twelfth of the gateway's CPU, for parts the proxy path never used. Where a route needs a real
 * `Request` (the admin API, the console: Hono), {@link asRequest} makes one then.
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";

/** What a handler reads of its request. */
export type InboundRequest = Pick<
  Request,
  | "method"
  | "url"
  | "headers"
  | "signal"
  | "body"
  | "bodyUsed"
  | "arrayBuffer"
  | "bytes"
  | "text"
  | "json"
>;

const decoder = new TextDecoder();

/** What a `ClientRequest`'s body is: bytes that came whole, a stream still arriving, or none. */
export type InboundBody = Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array<ArrayBuffer>> | null;

/**
 * A client request as the edge has it: method, the URL as `Request` would spell it, the headers
 * and the body. Its `signal` aborts when the client closes the connection, made on first use
 * (most requests never ask).
 */
export class ClientRequest implements InboundRequest {
  readonly #held: Uint8Array<ArrayBuffer> | undefined;
  #stream: ReadableStream<Uint8Array<ArrayBuffer>> | undefined;
  #used = false;
  /** The held bytes were taken (once) by {@link takeHeld}. */
  #taken = false;
  #controller: AbortController | undefined;
  readonly #given: AbortSignal | undefined;
  #left = false;

  /**
   * @param method the request method
   * @param url the request URL, already normalized (`new URL(…).href`)
   * @param headers the request's headers
   * @param body its body (null for none, as for GET and HEAD)
   * @param signal a signal to use instead of one of its own (a copy of another request)
   */
  constructor(
    readonly method: string,
    readonly url: string,
    readonly headers: Headers,
    body: InboundBody,
    signal?: AbortSignal,
  ) {
    if (body instanceof Uint8Array) this.#held = body;
    else if (body !== null) this.#stream = body;
    this.#given = signal;
  }

  /** The client left: the signal aborts (now, or as soon as someone asks for it). */
  leave(): void {
    this.#left = true;
    this.#controller?.abort(new DOMException("the client closed the connection", "AbortError"));
  }

  get signal(): AbortSignal {
    if (this.#given !== undefined) return this.#given;
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#left) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  /** The body as a stream (one chunk for bytes that came whole), made on first use. */
  get body(): ReadableStream<Uint8Array<ArrayBuffer>> | null {
    if (this.#stream === undefined && this.#held !== undefined) {
      const bytes = this.#held;
      this.#stream = new ReadableStream({
        start(controller) {
          if (bytes.byteLength > 0) controller.enqueue(bytes);
          controller.close();
        },
      });
    }
    return this.#stream ?? null;
  }

  /** A consuming read ran, or a reader took the body's stream (as `Request` counts it). */
  get bodyUsed(): boolean {
    return this.#used || (this.#stream?.locked ?? false);
  }

  /**
   * The bytes that came with the head, once, while nobody read the body (the intake's small JSON
   * body, with no stream made for it), else undefined. The body stays readable.
   */
  takeHeld(): Uint8Array<ArrayBuffer> | undefined {
    if (this.#held === undefined || this.#taken || this.bodyUsed) return undefined;
    this.#taken = true;
    return this.#held;
  }

  async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    if (this.bodyUsed) throw new TypeError("Body already consumed");
    this.#used = true;
    // Held bytes whole, even when a stream was made of them (no reader took it: not used).
    if (this.#held !== undefined) return this.#held;
    const stream = this.#stream;
    return stream === undefined ? new Uint8Array(0) : await readAll(stream);
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes();
    return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? bytes.buffer
      : bytes.slice().buffer;
  }

  async text(): Promise<string> {
    return decoder.decode(await this.bytes());
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }

  /** A `Request` with the same parts; the body goes to it (this one's is then used). */
  toRequest(): Request {
    const init: RequestInit & { duplex?: string } = {
      method: this.method,
      headers: this.headers,
      signal: this.signal,
    };
    if (!this.bodyUsed) {
      if (this.#held !== undefined) init.body = this.#held;
      else if (this.#stream !== undefined) {
        init.body = this.#stream;
        init.duplex = "half";
      }
      this.#used = true;
    }
    return new Request(this.url, init);
  }
}

/** Reads a stream to its end into one buffer. */
async function readAll(
  stream: ReadableStream<Uint8Array<ArrayBuffer>>,
): Promise<Uint8Array<ArrayBuffer>> {
  const pieces: Uint8Array[] = [];
  let size = 0;
  for await (const piece of stream) {
    pieces.push(piece);
    size += piece.byteLength;
  }
  return pieces.length === 1 ? pieces[0] as Uint8Array<ArrayBuffer> : concatBytes(pieces, size);
}

/** `req` as a `Request`: itself when it is one, else one made from its parts. */
export function asRequest(req: InboundRequest): Request {
  if (req instanceof ClientRequest) return req.toRequest();
  if (req instanceof Request) return req;
  throw new TypeError("an inbound request is a Request or the edge's ClientRequest");
}

/**
 * The whole body of a request the edge read with its head, or undefined (a body still arriving,
 * one already read, a `Request` made elsewhere). The bytes are the request's own body too.
 */
export function heldRequestBody(req: InboundRequest): Uint8Array<ArrayBuffer> | undefined {
  return req instanceof ClientRequest ? req.takeHeld() : undefined;
}

/** A copy of `req` with `bytes` (its body, read) as its body, keeping its signal. */
export function withBody(req: InboundRequest, bytes: Uint8Array<ArrayBuffer>): InboundRequest {
  return new ClientRequest(req.method, req.url, req.headers, bytes, req.signal);
}
