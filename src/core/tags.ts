/**
 * Tag normalization. Tags select nodes (`local`, `cloud`, `gb10`); a hand-written config says
 * `tags: local, gb10` as often as it writes a YAML list, so both spellings are accepted.
 *
 * @module
 */

const SEPARATORS = /[,\s]+/;

/** A tags value of the wrong type (an object, a boolean, a list holding one). */
export class TagsError extends TypeError {
  /** A message naming what was wrong. */
  constructor(message: string) {
    super(message);
    this.name = "TagsError";
  }
}

/**
 * Lowercase, trim, dedupe, first-seen order; a string splits on commas or whitespace;
 * `null`/`undefined` → `[]`. List entries that are not strings (or numbers) throw TagsError.
 */
export function normalizeTags(input: unknown): string[] {
  if (input === undefined || input === null) return [];
  let raw: unknown[];
  if (typeof input === "string") raw = input.split(SEPARATORS);
  else if (Array.isArray(input)) raw = input;
  else if (typeof input === "number") raw = [String(input)];
  else throw new TagsError("tags must be a list of tags or a comma-separated string");

  const tags: string[] = [];
  for (const entry of raw) {
    if (entry === undefined || entry === null) continue;
    if (typeof entry !== "string" && typeof entry !== "number") {
      throw new TagsError("tags must be a list of tags or a comma-separated string");
    }
    const clean = String(entry).trim().toLowerCase();
    if (clean === "" || tags.includes(clean)) continue;
    tags.push(clean);
  }
  return tags;
}
