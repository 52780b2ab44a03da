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

import { iteratedPairs } from "../proxy/upstream.ts";

/** Checks `name` and `value` as `Headers` does; answers them as it would keep them. */
function checked(name: string, value: string): [string, string] {
  const h = new Headers([[name, value]]);
  let out: [string, string] | undefined;
  h.forEach((v, n) => out = [n, v]);
  return out!;
}

/** The headers of a request as its head said them. */
export class InboundHeaders implements Headers {
  /** The fields in the order received, names lowercase. */
  readonly #fields: [string, string][] = [];
  /** What iteration yields (sorted, combined), made on first use. */
  #pairs: [string, string][] | undefined;

  /**
   * @param pairs the head's fields as received, names and values already checked by the parser
   *   (`parseRequestHead`)
   */
  constructor(pairs: readonly (readonly [string, string])[] = []) {
    for (const [name, value] of pairs) this.#fields.push([name.toLowerCase(), value]);
  }

  get(name: string): string | null {
    const n = name.toLowerCase();
    let out: string | null = null;
    for (const [k, v] of this.#fields) {
      if (k === n) out = out === null ? v : `${out}, ${v}`;
    }
    return out;
  }

  has(name: string): boolean {
    const n = name.toLowerCase();
    return this.#fields.some(([k]) => k === n);
  }

  /** A request's `Set-Cookie` fields, each on its own (a client rarely sends one). */
  getSetCookie(): string[] {
    return this.#fields.filter(([k]) => k === "set-cookie").map(([, v]) => v);
  }

  set(name: string, value: string): void {
    const field = checked(name, value);
    this.#remove(field[0]);
    this.#fields.push(field);
  }

  append(name: string, value: string): void {
    this.#fields.push(checked(name, value));
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
    for (let i = this.#fields.length - 1; i >= 0; i--) {
      if (this.#fields[i][0] === n) this.#fields.splice(i, 1);
    }
    this.#pairs = undefined;
  }

  /** As Deno's iteration has them (`iteratedPairs`: sorted, a repeated name's values joined). */
  #iterated(): [string, string][] {
    return this.#pairs ??= iteratedPairs(this.#fields);
  }
}
