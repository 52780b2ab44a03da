/**
 * The upstream answer as the proxy reads it, whichever client fetched it (the HTTP/1.1 client or
 * `fetch`): status, headers, the whole body or its pieces.
 *
 * @module
 */
import { concatBytes } from "../bytes.ts";
import { CAPACITY_HEADER_NAMES } from "../core/rate_limit_headers.ts";
import type { BodySource, Http1Answer } from "./http1.ts";
import type { IdleWatch } from "./idle_watch.ts";
import { iteratedPairs } from "./upstream.ts";

/** A source of body pieces: the next one (never empty), null at the end; throws when broken. */
export interface ChunkSource {
  /** The next piece of the body (never empty), or null at its end; throws when the body broke. */
  read(): Promise<Uint8Array | null>;
  /** Stops reading and lets go of the body (client gone, idle timeout). */
  cancel(): void;
}

/** A ReadableStream as a ChunkSource (empty reads skipped). */
export function streamSource(stream: ReadableStream<Uint8Array>): ChunkSource {
  const reader = stream.getReader();
  return {
    async read(): Promise<Uint8Array | null> {
      // Bounded by the stream: every round consumes one read.
      for (;;) {
        const r = await reader.read();
        if (r.done) return null;
        if (r.value.byteLength > 0) return r.value;
      }
    },
    cancel(): void {
      reader.cancel().catch(() => {});
    },
  };
}

/** Something that stops an upstream call (an AbortController, an Http1Abort). */
export interface Abortable {
  /** Stops the call (client gone, idle timeout or shutdown). */
  abort(): void;
}

const CAPACITY_HEADERS: ReadonlySet<string> = new Set(CAPACITY_HEADER_NAMES);

/** Whether header pairs (lower-case names) carry one the passive capacity probe reads. */
function hasCapacityHeader(pairs: readonly (readonly [string, string])[]): boolean {
  for (const [n] of pairs) if (CAPACITY_HEADERS.has(n)) return true;
  return false;
}

/** An upstream answer as the proxy reads it, whichever client fetched it. */
export interface UpstreamAnswer {
  /** The upstream's HTTP status code. */
  readonly status: number;
  /** A header's value as `Headers.get` answers it. */
  header(name: string): string | null;
  /** Whether it carries a header the passive capacity probe reads (rate limits, Retry-After). */
  readonly hasCapacityHeaders: boolean;
  /** The headers as a `Headers` (made on demand). */
  headers(): Headers;
  /** Header pairs as `Headers` iteration yields them (see `iteratedPairs`). */
  pairs(): [string, string][];
  /** Whether there is a body (a `Response` body that is not null). */
  readonly hasBody: boolean;
  /** The whole body when it is here already (reading it would not wait), else undefined. */
  readonly whole: Uint8Array<ArrayBuffer> | undefined;
  /** The whole body; throws when it cannot be read. */
  bytes(): Promise<Uint8Array<ArrayBuffer>>;
  /** The body as pieces (streams). */
  source(): ChunkSource;
  /** Stops reading the body (the connection is not reused). */
  cancel(): void;
}

/** An answer of the HTTP/1.1 client. */
class Http1UpstreamAnswer implements UpstreamAnswer {
  readonly #answer: Http1Answer;
  #headers: Headers | undefined;
  #pairs: [string, string][] | undefined;

  constructor(answer: Http1Answer) {
    this.#answer = answer;
  }

  get status(): number {
    return this.#answer.status;
  }

  header(name: string): string | null {
    let out: string | null = null;
    for (const [n, v] of this.#answer.headers) {
      if (n === name) out = out === null ? v : `${out}, ${v}`;
    }
    return out;
  }

  get hasCapacityHeaders(): boolean {
    return hasCapacityHeader(this.#answer.headers);
  }

  headers(): Headers {
    return this.#headers ??= new Headers(this.#answer.headers);
  }

  pairs(): [string, string][] {
    return this.#pairs ??= iteratedPairs(this.#answer.headers);
  }

  get hasBody(): boolean {
    return this.#answer.body !== null;
  }

  get whole(): Uint8Array<ArrayBuffer> | undefined {
    const body = this.#answer.body;
    if (body === null) return new Uint8Array(0);
    return body instanceof Uint8Array ? body : undefined;
  }

  async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    const body = this.#answer.body;
    if (body === null) return new Uint8Array(0);
    if (body instanceof Uint8Array) return body;
    const parts: Uint8Array[] = [];
    let total = 0;
    // Bounded by the body: every round reads a piece or ends.
    for (;;) {
      const piece = await body.read();
      if (piece === null) break;
      parts.push(piece);
      total += piece.byteLength;
    }
    return concatBytes(parts, total);
  }

  source(): ChunkSource {
    const body = this.#answer.body;
    if (body === null || body instanceof Uint8Array) {
      let done = body === null || body.byteLength === 0;
      return {
        read: () => {
          if (done) return Promise.resolve(null);
          done = true;
          return Promise.resolve(body);
        },
        cancel: () => {},
      };
    }
    return body;
  }

  cancel(): void {
    this.#bodySource()?.cancel();
  }

  #bodySource(): BodySource | undefined {
    const body = this.#answer.body;
    return body === null || body instanceof Uint8Array ? undefined : body;
  }
}

/** A `fetch` answer. */
class FetchUpstreamAnswer implements UpstreamAnswer {
  readonly #res: Response;
  #pairs: [string, string][] | undefined;

  constructor(res: Response) {
    this.#res = res;
  }

  get status(): number {
    return this.#res.status;
  }

  header(name: string): string | null {
    return this.#res.headers.get(name);
  }

  get hasCapacityHeaders(): boolean {
    return hasCapacityHeader(this.pairs());
  }

  headers(): Headers {
    return this.#res.headers;
  }

  pairs(): [string, string][] {
    if (this.#pairs === undefined) {
      const pairs: [string, string][] = [];
      this.#res.headers.forEach((value, name) => pairs.push([name, value]));
      this.#pairs = pairs;
    }
    return this.#pairs;
  }

  get hasBody(): boolean {
    return this.#res.body !== null;
  }

  readonly whole = undefined;

  async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return new Uint8Array(await this.#res.arrayBuffer());
  }

  source(): ChunkSource {
    const body = this.#res.body;
    if (body === null) return { read: () => Promise.resolve(null), cancel: () => {} };
    return streamSource(body);
  }

  cancel(): void {
    this.#res.body?.cancel().catch(() => {});
  }
}

/** An answer of the HTTP/1.1 client as an UpstreamAnswer. */
export function answerOfHttp1(answer: Http1Answer): UpstreamAnswer {
  return new Http1UpstreamAnswer(answer);
}

/** A `fetch` Response as an UpstreamAnswer. */
export function answerOfResponse(res: Response): UpstreamAnswer {
  return new FetchUpstreamAnswer(res);
}

/**
 * The whole body of an upstream answer, read within the upstream timeout (the idle watch stops
 * `call` when the body goes silent, no timer of its own); undefined when it could not be read. A
 * body that came with the head is answered synchronously.
 */
export function readWhole(
  res: UpstreamAnswer,
  call: Abortable,
  idle: IdleWatch,
): Uint8Array<ArrayBuffer> | undefined | Promise<Uint8Array<ArrayBuffer> | undefined> {
  const whole = res.whole;
  if (whole !== undefined) return whole;
  return readWholeAsync(res, call, idle);
}

async function readWholeAsync(
  res: UpstreamAnswer,
  call: Abortable,
  idle: IdleWatch,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const guard = { lastActivity: idle.now(), idleTimeout: () => call.abort() };
  idle.add(guard);
  try {
    return await res.bytes();
  } catch {
    return undefined;
  } finally {
    idle.delete(guard);
  }
}
