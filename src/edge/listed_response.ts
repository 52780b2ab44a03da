/**
 * A listed response (ADR 0058): a `Response` whose headers stay the checked list they were made
 * from until something reads `headers`. The edge writes a relayed answer's head straight from
 * that list, so the usual answer never builds a `Headers` only to be iterated back into the same
 * pairs (a fifth of the answer's garbage). Reading `headers` (the rate headers of a limited key,
 * a test, Hono) makes the same `Headers` a plain `Response` would have had, and from then on the
 * edge writes from it.
 *
 * @module
 */

/** A header name as `Headers` iterates it: RFC 9110 token characters, lowercase. */
const LOWER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
/** What `Headers` refuses in a value, or would change (it trims spaces and tabs at the ends). */
const NOT_KEPT = /[\0\r\n\u0100-\uffff]|^[\t ]|[\t ]$/;

/**
 * Whether `pairs` are exactly what `Headers` iteration would yield for them: lowercase token
 * names in ascending order, each once (`set-cookie` may repeat), values it keeps unchanged.
 */
function iterationOrder(pairs: readonly (readonly [string, string])[]): boolean {
  let prev = "";
  for (const [name, value] of pairs) {
    if (name < prev || (name === prev && name !== "set-cookie")) return false;
    if (!LOWER_TOKEN.test(name) || NOT_KEPT.test(value)) return false;
    prev = name;
  }
  return true;
}

/** A `Response` with its headers kept as a list until they are read. */
export class ListedResponse extends Response {
  /** The header pairs, until `headers` is read (then the `Headers` holds them). */
  #pairs: readonly (readonly [string, string])[] | undefined;

  /**
   * @param pairs the headers, best in `Headers` iteration order (lowercase, sorted, combined):
   *   any other list, or one `Headers` would refuse, goes into `headers` at once (and throws as
   *   `Headers` does)
   */
  constructor(
    body: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array> | null,
    status: number,
    pairs: readonly (readonly [string, string])[],
  ) {
    super(body, { status });
    this.#pairs = pairs;
    if (!iterationOrder(pairs)) void this.headers;
  }

  /** The response's `Headers`, made from the list on first read. */
  override get headers(): Headers {
    const headers = super.headers;
    const pairs = this.#pairs;
    if (pairs !== undefined) {
      this.#pairs = undefined;
      for (const [name, value] of pairs) headers.append(name, value);
    }
    return headers;
  }

  /** A copy, with the headers (read for it). */
  override clone(): Response {
    void this.headers;
    return super.clone();
  }

  /**
   * The header pairs in `Headers` iteration order while `headers` was never read (the edge
   * writes them as they are); undefined once it was.
   */
  listed(): readonly (readonly [string, string])[] | undefined {
    return this.#pairs;
  }
}
