/**
 * The JSON helpers of the whole tree: one object guard, one parse that answers undefined
 * instead of throwing, and the name of a value's kind for error messages. Client bodies,
 * upstream answers and admin requests arrive as text or `unknown`; everything narrows through
 * these.
 *
 * @module
 */

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

/** Whether `v` is a plain JSON object (not null, not an array). */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** What a JSON value is, for an error message: `an array`, `an object`, `null`, `a string`, … */
export function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** The value of JSON text, or undefined when the text is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
