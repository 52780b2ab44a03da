/**
 * Narrowing helpers for parsed JSON: client bodies and upstream answers arrive as `unknown`.
 *
 * @module
 */
import { isJsonObject, type JsonObject, parseJson } from "../core/json.ts";

export { isJsonObject };

/** `v` when it is a string, else undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** `v` when it is a finite number, else undefined. */
export function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** `v` when it is a JSON object, else undefined. */
export function obj(v: unknown): JsonObject | undefined {
  return isJsonObject(v) ? v : undefined;
}

/** The first choice of a chat answer and its message (`{}` for what is missing). */
export function firstChoice(answer: JsonObject): { choice: JsonObject; message: JsonObject } {
  const choices = Array.isArray(answer.choices) ? answer.choices : [];
  const choice = obj(choices[0]) ?? {};
  return { choice, message: obj(choice.message) ?? {} };
}

/** Parses JSON text into an object; anything else (bad JSON, an array, a scalar) → undefined. */
export function parseJsonObject(text: string): JsonObject | undefined {
  return obj(parseJson(text));
}

/**
 * Tool-call arguments as an object: an object is taken as is, JSON text is parsed, anything
 * unparsable becomes `{}` (Anthropic `input` and Ollama `arguments` must be objects).
 */
export function argumentsObject(v: unknown): JsonObject {
  if (isJsonObject(v)) return v;
  if (typeof v === "string") return parseJsonObject(v) ?? {};
  return {};
}

/** Tool-call arguments as JSON text (OpenAI's shape): text is kept, anything else serialized. */
export function argumentsText(v: unknown): string {
  if (typeof v === "string") return v;
  return JSON.stringify(v ?? {});
}

/** The text of an upstream message's `content` (a string, or text parts). */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (isJsonObject(p) ? str(p.text) ?? "" : "")).join("");
}
