/**
 * A minimal HTTP/1.1 keep-alive client over `Deno.connect`, for the benchmark's load client:
 * one request at a time per connection, a prebuilt request, `Content-Length` and chunked
 * bodies, and the body handed over as it arrives (so a stream's first byte can be timed).
 * It allocates nothing per response but the header text.
 *
 * @module
 */

/** The parts of a response head the load client reads. */
export interface ResponseHead {
  /** HTTP status. */
  status: number;
  /** The server will close the connection after this response. */
  close: boolean;
}

/** Called with every piece of the (de-chunked) body as it arrives; `view` is reused after. */
export type BodySink = (view: Uint8Array) => void;

const CR = 13;
const LF = 10;
const decoder = new TextDecoder();

/** Builds the bytes of a `POST` request with a JSON body. */
export function buildPost(
  host: string,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Uint8Array {
  const payload = new TextEncoder().encode(body);
  let head = `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${payload.length}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  const headBytes = new TextEncoder().encode(head + "\r\n");
  const out = new Uint8Array(headBytes.length + payload.length);
  out.set(headBytes);
  out.set(payload, headBytes.length);
  return out;
}

/** One keep-alive connection. */
export class RawHttpConnection {
  #conn: Deno.TcpConn;
  #buf = new Uint8Array(64 * 1024);
  #r = 0; // first unread byte
  #w = 0; // end of buffered bytes
  #closed = false;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
    conn.setNoDelay(true);
  }

  /** Opens a connection to `hostname:port`. */
  static async open(hostname: string, port: number): Promise<RawHttpConnection> {
    return new RawHttpConnection(await Deno.connect({ hostname, port }));
  }

  /** Whether the connection was closed (by us, the server, or an error). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Closes the connection; a pending request then fails. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // already gone
    }
  }

  /** Sends `request` and reads the whole response, handing the body to `sink`. */
  async request(request: Uint8Array, sink: BodySink): Promise<ResponseHead> {
    for (let off = 0; off < request.length;) off += await this.#conn.write(request.subarray(off));
    const head = await this.#readHead();
    if (head.chunked) await this.#readChunked(sink);
    else if (head.length >= 0) await this.#readLength(head.length, sink);
    else {
      // No length: the body runs to the end of the connection.
      for (;;) {
        if (this.#w > this.#r) sink(this.#buf.subarray(this.#r, this.#w));
        this.#r = this.#w = 0;
        if (!(await this.#fill())) break;
      }
      head.close = true;
    }
    if (head.close) this.close();
    return { status: head.status, close: head.close };
  }

  /** Reads more bytes into the buffer; false at end of stream. */
  async #fill(): Promise<boolean> {
    if (this.#r > 0 && this.#r === this.#w) this.#r = this.#w = 0;
    if (this.#w === this.#buf.length) {
      if (this.#r > 0) {
        this.#buf.copyWithin(0, this.#r, this.#w);
        this.#w -= this.#r;
        this.#r = 0;
      } else {
        const bigger = new Uint8Array(this.#buf.length * 2);
        bigger.set(this.#buf);
        this.#buf = bigger;
      }
    }
    const n = await this.#conn.read(this.#buf.subarray(this.#w));
    if (n === null) return false;
    this.#w += n;
    return true;
  }

  async #readHead(): Promise<{ status: number; close: boolean; chunked: boolean; length: number }> {
    let scanFrom = this.#r;
    for (;;) {
      for (let i = scanFrom; i + 3 < this.#w; i++) {
        if (
          this.#buf[i] === CR && this.#buf[i + 1] === LF && this.#buf[i + 2] === CR &&
          this.#buf[i + 3] === LF
        ) {
          const text = decoder.decode(this.#buf.subarray(this.#r, i));
          this.#r = i + 4;
          return parseHead(text);
        }
      }
      scanFrom = Math.max(this.#r, this.#w - 3);
      const before = this.#r;
      if (!(await this.#fill())) throw new Error("connection closed before the response head");
      scanFrom -= before - this.#r; // the buffer may have been compacted
    }
  }

  async #readLength(length: number, sink: BodySink): Promise<void> {
    let left = length;
    while (left > 0) {
      if (this.#w === this.#r && !(await this.#fill())) {
        throw new Error(`connection closed with ${left} body bytes missing`);
      }
      const n = Math.min(left, this.#w - this.#r);
      sink(this.#buf.subarray(this.#r, this.#r + n));
      this.#r += n;
      left -= n;
    }
  }

  /** Reads one CRLF-terminated line (chunk size or trailer), without the CRLF. */
  async #readLine(): Promise<string> {
    let scanFrom = this.#r;
    for (;;) {
      for (let i = scanFrom; i + 1 < this.#w; i++) {
        if (this.#buf[i] === CR && this.#buf[i + 1] === LF) {
          const line = decoder.decode(this.#buf.subarray(this.#r, i));
          this.#r = i + 2;
          return line;
        }
      }
      scanFrom = Math.max(this.#r, this.#w - 1);
      const before = this.#r;
      if (!(await this.#fill())) throw new Error("connection closed inside a chunked body");
      scanFrom -= before - this.#r;
    }
  }

  async #readChunked(sink: BodySink): Promise<void> {
    for (;;) {
      const line = await this.#readLine();
      const size = parseInt(line, 16);
      if (!Number.isFinite(size) || size < 0) throw new Error(`bad chunk size '${line}'`);
      if (size === 0) {
        // trailers, then the empty line
        while ((await this.#readLine()) !== "");
        return;
      }
      await this.#readLength(size, sink);
      if ((await this.#readLine()) !== "") throw new Error("chunk not followed by CRLF");
    }
  }
}

function parseHead(
  text: string,
): { status: number; close: boolean; chunked: boolean; length: number } {
  const lines = text.split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`bad status line '${lines[0]}'`);
  let close = lines[0].startsWith("HTTP/1.0");
  let chunked = false;
  let length = -1;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim().toLowerCase();
    if (name === "content-length") length = Number(value);
    else if (name === "transfer-encoding") chunked = value.includes("chunked");
    else if (name === "connection") close = value.includes("close");
  }
  return { status: Number(m[1]), close, chunked, length };
}
