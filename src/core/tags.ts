/**
 * Tag normalization. SKELETON — owner: core-routing.
 * @module
 */

/** Lowercase, trim, dedupe, first-seen order; a string splits on commas or whitespace. */
export function normalizeTags(_input: unknown): string[] {
  throw new Error("TODO");
}
