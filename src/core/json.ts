/**
 * The JSON helpers of the whole tree: one object guard and one parse that answers undefined
 * instead of throwing. Client bodies, upstream answers and admin requests arrive as text or
 * `unknown`; everything narrows through these.
 *
 * @module
 */

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

/** Whether `v` is a plain JSON object (not null, not an array). */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The value of JSON text, or undefined when the text is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
