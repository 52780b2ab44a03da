/**
 * The fake model's deterministic content: answer text, its split into streamed pieces, prompt
 * token counts and embedding vectors. Everything here is a pure function of the request, so a
 * test can predict every byte the fake model sends.
 *
 * @module
 */
import { isJsonObject } from "../core/json.ts";

/**
 * The generated answer of `tokens` words: `tök0 tök1 … tök{n-1}`. Every word carries `ö`
 * (U+00F6, two bytes in UTF-8), so byte counts and character counts differ by exactly `tokens`.
 */
export function generatedText(tokens: number): string {
  const words: string[] = [];
  for (let i = 0; i < tokens; i++) words.push(`tök${i}`);
  return words.join(" ");
}

/**
 * Splits `text` into the pieces a stream sends, one per word with its leading whitespace
 * (`"a b"` → `["a", " b"]`). Joining the pieces gives `text` back exactly; trailing whitespace
 * rides on the last piece.
 */
export function textPieces(text: string): string[] {
  const pieces: string[] = text.match(/\s*\S+/g) ?? [];
  const joined = pieces.join("");
  if (joined.length < text.length) {
    const rest = text.slice(joined.length);
    if (pieces.length === 0) pieces.push(rest);
    else pieces[pieces.length - 1] += rest;
  }
  return pieces;
}

/** Number of whitespace-separated words in `text`. */
export function wordCount(text: string): number {
  return text.match(/\S+/g)?.length ?? 0;
}

/** The text of a message `content`: a string, or the `text` of its parts when it is an array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts: string[] = [];
  for (const part of content) {
    if (typeof part === "string") parts.push(part);
    else if (isJsonObject(part) && typeof part.text === "string") parts.push(part.text);
  }
  return parts.join(" ");
}

/** prompt_tokens of a chat request: the word count of every message's content text. */
export function chatPromptTokens(messages: unknown): number {
  if (!Array.isArray(messages)) return 0;
  let n = 0;
  for (const m of messages) if (isJsonObject(m)) n += wordCount(contentText(m.content));
  return n;
}

/**
 * The prompt as the simulated engine tokenizes it: the words of every message's content text in
 * order (a chat), or of the prompt (completions). Its length is `prompt_tokens`.
 */
export function promptWords(kind: "chat" | "completion", body: Record<string, unknown>): string[] {
  const words: string[] = [];
  const add = (text: string) => {
    for (const word of text.match(/\S+/g) ?? []) words.push(word);
  };
  if (kind === "completion") {
    const prompt = body.prompt;
    if (typeof prompt === "string") add(prompt);
    else if (Array.isArray(prompt)) { for (const p of prompt) if (typeof p === "string") add(p); }
    return words;
  }
  if (Array.isArray(body.messages)) {
    for (const m of body.messages) if (isJsonObject(m)) add(contentText(m.content));
  }
  return words;
}

/**
 * prompt_tokens of a completions or embeddings input: words of a string, the sum over a list
 * of strings, or the length of a token array (a list of numbers, or a list of such lists).
 */
export function inputTokens(input: unknown): number {
  if (typeof input === "string") return wordCount(input);
  if (!Array.isArray(input)) return 0;
  let n = 0;
  for (const item of input) {
    if (typeof item === "string") n += wordCount(item);
    else if (typeof item === "number") n += 1;
    else if (Array.isArray(item)) n += item.length;
  }
  return n;
}

/** The inputs of an embeddings request, one string (or token array text) per vector. */
export function embeddingInputs(input: unknown): string[] {
  if (typeof input === "string") return [input];
  if (!Array.isArray(input)) return [];
  if (input.every((x) => typeof x === "number")) return [JSON.stringify(input)];
  return input.map((x) => (typeof x === "string" ? x : JSON.stringify(x)));
}

/** Length of every fake embedding vector. */
export const EMBEDDING_DIMENSIONS = 8;

/**
 * A deterministic unit-free vector for `text`: FNV-1a of its UTF-16 code units seeds an
 * xorshift generator; 8 floats in [-1, 1], rounded to 6 decimals (exact as float32 is not
 * needed: the base64 form rounds them).
 */
export function embeddingVector(text: string): number[] {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  let x = h || 1;
  const out: number[] = [];
  for (let i = 0; i < EMBEDDING_DIMENSIONS; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push(Math.round(((x / 0xffffffff) * 2 - 1) * 1e6) / 1e6);
  }
  return out;
}

/** A vector as OpenAI's `encoding_format: "base64"` sends it: little-endian float32 bytes. */
export function embeddingBase64(vector: number[]): string {
  const bytes = new Uint8Array(new Float32Array(vector).buffer);
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/**
 * Splits tool-call `arguments` into up to `parts` pieces on code-point boundaries (so a
 * multi-byte character is never cut in a JSON string). `""` gives no pieces.
 */
export function argumentPieces(args: string, parts = 3): string[] {
  const chars = Array.from(args);
  if (chars.length === 0) return [];
  const n = Math.min(parts, chars.length);
  const size = Math.ceil(chars.length / n);
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(""));
  return pieces;
}
