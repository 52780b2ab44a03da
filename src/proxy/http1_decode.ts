/**
 * Content codings of upstream answers. The HTTP/1.1 client asks for `identity`; an upstream that
 * compresses anyway (a proxy in front of the node, a misconfigured server) is decoded here —
 * gzip, deflate (zlib or raw, as servers send both) and br — because the proxy reads the body
 * (usage, faces) and relays it uncompressed. Any other coding is refused with a reason that
 * names it: relayed, it would be garbage to the client and 0 tokens to the ledger.
 *
 * @module
 */

/** A coding the runtime's `DecompressionStream` decodes. */
export type Coding = "gzip" | "deflate" | "brotli";

/** An upstream answer in a content coding Skeid does not decode. */
export class UnknownCoding extends Error {
  /** @param coding the `Content-Encoding` value as received */
  constructor(coding: string) {
    super(
      `upstream answered in content-encoding '${coding.slice(0, 40)}', which Skeid cannot decode`,
    );
    this.name = "UnknownCoding";
  }
}

/**
 * The coding of a `Content-Encoding` header value: undefined for none or `identity`; throws
 * {@link UnknownCoding} for anything else (several codings stacked included).
 */
export function codingOf(value: string | undefined): Coding | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (v === "" || v === "identity") return undefined;
  if (v === "gzip" || v === "x-gzip") return "gzip";
  if (v === "deflate") return "deflate";
  if (v === "br") return "brotli";
  throw new UnknownCoding(value);
}

/**
 * The stream format of a coding's first bytes: `deflate` is meant to be zlib-wrapped (RFC 9110
 * §8.4.1.2), but some servers send raw deflate; the zlib header tells them apart.
 */
function formatOf(coding: Coding, first: Uint8Array): CompressionFormat {
  if (coding !== "deflate") return coding as CompressionFormat;
  const zlib = first.length >= 2 && (first[0] & 0x0f) === 8 &&
    ((first[0] << 8) | first[1]) % 31 === 0;
  return zlib ? "deflate" : "deflate-raw";
}

function decodeError(coding: Coding, err: unknown): Error {
  const why = err instanceof Error ? err.message.split("\n")[0].slice(0, 120) : String(err);
  return new Error(
    `upstream ${coding === "brotli" ? "br" : coding} body could not be decoded: ${why}`,
  );
}

/** Where encoded pieces come from (a body source's raw read and cancel). */
export interface RawPieces {
  /** The next encoded piece (never empty), or null at the end. */
  read(): Promise<Uint8Array | null>;
  /** Lets go of the encoded body. */
  cancel(): void;
}

/** A body decoded as it is pulled: each encoded piece is decoded once it arrived. */
export class Decoded {
  #reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  #first: Uint8Array | null | undefined;

  /**
   * @param coding the body's coding
   * @param raw its encoded pieces
   */
  constructor(readonly coding: Coding, readonly raw: RawPieces) {}

  /** The next decoded piece (never empty), or null at the end; throws when it cannot be decoded. */
  async read(): Promise<Uint8Array | null> {
    let reader = this.#reader;
    if (reader === undefined) {
      // The format of deflate is known from its first bytes.
      const first = this.#first = await this.raw.read();
      if (first === null) return null;
      reader = this.#reader = this.#pipe(formatOf(this.coding, first));
    }
    // Bounded by the body: every round reads a decoded piece or ends.
    for (;;) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (err) {
        throw decodeError(this.coding, err);
      }
      if (r.done) return null;
      if (r.value.byteLength > 0) return r.value;
    }
  }

  /** Stops decoding and lets go of the encoded body. */
  cancel(): void {
    if (this.#reader) this.#reader.cancel().catch(() => {});
    else this.raw.cancel();
  }

  #pipe(format: CompressionFormat): ReadableStreamDefaultReader<Uint8Array> {
    const raw = this.raw;
    const encoded = new ReadableStream<BufferSource>({
      pull: async (controller) => {
        const first = this.#first;
        const piece = first !== undefined ? first : await raw.read();
        this.#first = undefined;
        if (piece === null) controller.close();
        else controller.enqueue(piece as Uint8Array<ArrayBuffer>);
      },
      cancel: () => raw.cancel(),
    }, { highWaterMark: 0 });
    return encoded.pipeThrough(new DecompressionStream(format)).getReader();
  }
}

/** A whole encoded body, decoded. */
export async function decodeWhole(
  coding: Coding,
  bytes: Uint8Array<ArrayBuffer>,
): Promise<Uint8Array<ArrayBuffer>> {
  if (bytes.byteLength === 0) return bytes;
  const stream = new Blob([bytes]).stream().pipeThrough(
    new DecompressionStream(formatOf(coding, bytes)),
  );
  try {
    return await new Response(stream).bytes();
  } catch (err) {
    throw decodeError(coding, err);
  }
}
