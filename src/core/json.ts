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

/**
 * The value of JSON text; a text that is not JSON throws a `SyntaxError` saying where and why
 * (`at line L, column C: <reason>`, from the runtime's parse error) and never quoting the text: a
 * body may hold what a log must not.
 */
export function jsonValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SyntaxError(describeSyntaxError(err instanceof Error ? err.message : String(err)));
  }
}

/**
 * An admin request body's JSON value: undefined for an empty (or blank) body, else `jsonValue`'s,
 * a body that is not JSON a `SyntaxError` of `body is not valid JSON: <where and why>`.
 */
export function bodyJson(text: string): unknown {
  if (text.trim() === "") return undefined;
  try {
    return jsonValue(text);
  } catch (err) {
    throw new SyntaxError(`body is not valid JSON: ${(err as SyntaxError).message}`);
  }
}

/** V8's parse messages, said without the excerpt of the input some of them carry. */
function describeSyntaxError(message: string): string {
  if (message.startsWith("Unexpected end of JSON input")) {
    return "it ends before its JSON value does";
  }
  const token = /^Unexpected token '(.+?)', /.exec(message);
  if (token) return `unexpected ${JSON.stringify(token[1])}`;
  const at = / (?:in JSON )?at position \d+(?: \(line (\d+) column (\d+)\))?/.exec(message);
  if (!at) return "not valid JSON";
  const reason = message.slice(0, at.index);
  const what = reason.charAt(0).toLowerCase() + reason.slice(1);
  return at[1] === undefined ? what : `at line ${at[1]}, column ${at[2]}: ${what}`;
}
