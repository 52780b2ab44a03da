/**
 * The headers of an inbound request, over the pairs the edge's parser read (ADR 0057): what
 * `Headers` answers — names case-insensitive, a repeated name's values joined with `, `,
 * iteration sorted by name — without Deno's `Headers` and its per-call checks. The parser already
 * refused every name that is not a token and every value with a control character, so building
 * one is lowercasing the names. Changing one (`set`, `append`, `delete`, nothing on Skeid's
 * request path does) checks the name and value as `Headers` would.
 *
 * @module
 */

/** Checks `name` and `value` as `Headers` does; answers them as it would keep them. */
function checked(name: string, value: string): [string, string] {
  const h = new Headers([[name, value]]);
  let out: [string, string] | undefined;
  h.forEach((v, n) => out = [n, v]);
  return out!;
}

/** The headers of a request as its head said them. */
export class InboundHeaders implements Headers {
  /** Lowercase names, in the order received. */
  readonly #names: string[] = [];
  readonly #values: string[] = [];
  /** What iteration yields (sorted, combined), made on first use. */
  #pairs: [string, string][] | undefined;

  /**
   * @param pairs the head's fields as received, names and values already checked by the parser
   *   (`parseRequestHead`)
   */
  constructor(pairs: readonly (readonly [string, string])[] = []) {
    for (const [name, value] of pairs) {
      this.#names.push(name.toLowerCase());
      this.#values.push(value);
    }
  }

  get(name: string): string | null {
    const n = name.toLowerCase();
    const names = this.#names;
    let out: string | null = null;
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== n) continue;
      const v = this.#values[i];
      out = out === null ? v : `${out}, ${v}`;
    }
    return out;
  }

  has(name: string): boolean {
    return this.#names.includes(name.toLowerCase());
  }

  /** A request's `Set-Cookie` fields, each on its own (a client rarely sends one). */
  getSetCookie(): string[] {
    const out: string[] = [];
    for (let i = 0; i < this.#names.length; i++) {
      if (this.#names[i] === "set-cookie") out.push(this.#values[i]);
    }
    return out;
  }

  set(name: string, value: string): void {
    const [n, v] = checked(name, value);
    this.#remove(n);
    this.#names.push(n);
    this.#values.push(v);
  }

  append(name: string, value: string): void {
    const [n, v] = checked(name, value);
    this.#names.push(n);
    this.#values.push(v);
    this.#pairs = undefined;
  }

  delete(name: string): void {
    this.#remove(checked(name, "")[0]);
  }

  forEach(
    callbackfn: (value: string, key: string, parent: this) => void,
    thisArg?: unknown,
  ): void {
    for (const [name, value] of this.#iterated()) callbackfn.call(thisArg, value, name, this);
  }

  *entries(): IterableIterator<[string, string]> {
    for (const [name, value] of this.#iterated()) yield [name, value];
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.#iterated()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.#iterated()) yield value;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  #remove(n: string): void {
    for (let i = this.#names.length - 1; i >= 0; i--) {
      if (this.#names[i] !== n) continue;
      this.#names.splice(i, 1);
      this.#values.splice(i, 1);
    }
    this.#pairs = undefined;
  }

  /** Sorted by name, a repeated name once with its values joined (`set-cookie` each on its own). */
  #iterated(): [string, string][] {
    if (this.#pairs !== undefined) return this.#pairs;
    const out: [string, string][] = [];
    const at = new Map<string, number>();
    for (let i = 0; i < this.#names.length; i++) {
      const name = this.#names[i];
      const value = this.#values[i];
      const j = name === "set-cookie" ? undefined : at.get(name);
      if (j !== undefined) {
        // As Deno's iteration joins them (its `get` keeps a leading empty value; this drops it).
        const prev = out[j][1];
        out[j][1] = prev.length > 0 ? `${prev}, ${value}` : value;
        continue;
      }
      at.set(name, out.length);
      out.push([name, value]);
    }
    // Stable: `set-cookie` fields keep their order, as `Headers` keeps them.
    out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return this.#pairs = out;
  }
}
