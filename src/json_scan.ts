/**
 * A byte scan of a JSON body before it is parsed: its nesting depth, refused past
 * `MAX_JSON_DEPTH` (a 10 MB body of nested arrays takes seconds to parse and tens of seconds to
 * serialize again, all of it on the one event loop every request shares), and where its top-level
 * `model` string lies, so a face can set the served model in the client's bytes without
 * serializing the whole body again.
 *
 * @module
 */

/** Deepest JSON nesting (objects and arrays) a client body may have. */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const COLON = 0x3a;

/** What one pass over JSON bytes found (see `scanJson`). */
export interface JsonScan {
  /** The nesting depth, counted up to `limit + 1` (the scan stops there). */
  depth: number;
  /** `"model"` keys at any depth: more than one means the raw bytes carry a second `model`. */
  modelKeys: number;
}

/**
 * One pass over JSON bytes before they are parsed: the nesting depth (brackets inside strings do
 * not count; the scan stops one past `limit`) and the `"model"` keys. Invalid JSON gets some
 * answer; `JSON.parse` refuses it after.
 */
export function scanJson(bytes: Uint8Array, limit = MAX_JSON_DEPTH): JsonScan {
  let depth = 0;
  let deepest = 0;
  let modelKeys = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      const start = i;
      i = closingQuote(bytes, i);
      if (i - start === 6 && isModelKey(bytes, start + 1) && isKeyEnd(bytes, i + 1)) modelKeys++;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) break;
      }
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
    }
  }
  return { depth: deepest, modelKeys };
}

/** Whether a string ending before `i` is a key: whitespace, then `:`. */
function isKeyEnd(bytes: Uint8Array, i: number): boolean {
  while (i < bytes.length && isSpace(bytes[i])) i++;
  return bytes[i] === COLON;
}

/** Where a string value lies in JSON bytes: `start` at its opening quote, `end` after its closing one. */
export interface Span {
  start: number;
  end: number;
}

const MODEL_KEY = [0x6d, 0x6f, 0x64, 0x65, 0x6c]; // model

/**
 * The span of the top-level `"model": "…"` string value in JSON object bytes (the last one, as
 * `JSON.parse` keeps the last of duplicate keys), or undefined when there is none as a plain
 * (unescaped) key with a string value. The caller checks the span decodes to the parsed model.
 */
export function topLevelModelSpan(bytes: Uint8Array): Span | undefined {
  let depth = 0;
  let found: Span | undefined;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      const start = i;
      i = closingQuote(bytes, i);
      if (depth === 1 && i - start === 6 && isModelKey(bytes, start + 1)) {
        const value = valueAfterKey(bytes, i + 1);
        if (value !== undefined) {
          found = value;
          i = value.end - 1;
        }
      }
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) depth++;
    else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return found;
}

function isModelKey(bytes: Uint8Array, at: number): boolean {
  for (let k = 0; k < MODEL_KEY.length; k++) if (bytes[at + k] !== MODEL_KEY[k]) return false;
  return true;
}

/** After a key's closing quote: whitespace, `:`, whitespace, then a string value's span. */
function valueAfterKey(bytes: Uint8Array, i: number): Span | undefined {
  const n = bytes.length;
  while (i < n && isSpace(bytes[i])) i++;
  if (bytes[i] !== COLON) return undefined; // a value, not a key
  i++;
  while (i < n && isSpace(bytes[i])) i++;
  if (bytes[i] !== QUOTE) return undefined;
  const end = closingQuote(bytes, i);
  return end < n ? { start: i, end: end + 1 } : undefined;
}

/**
 * The index of the quote that closes the string opening at `open` (the first one no backslash
 * escapes), or at least `bytes.length` when the string does not close.
 */
function closingQuote(bytes: Uint8Array, open: number): number {
  const n = bytes.length;
  let i = open + 1;
  for (; i < n; i++) {
    const s = bytes[i];
    if (s === BACKSLASH) i++;
    else if (s === QUOTE) break;
  }
  return i;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

const encoder = new TextEncoder();

/**
 * `bytes` with the string at `span` replaced by `value` (JSON-encoded): one copy of the body, no
 * serialization of the rest.
 */
export function replaceString(
  bytes: Uint8Array,
  span: Span,
  value: string,
): Uint8Array<ArrayBuffer> {
  const mid = encoder.encode(JSON.stringify(value));
  const out = new Uint8Array(span.start + mid.length + (bytes.length - span.end));
  out.set(bytes.subarray(0, span.start), 0);
  out.set(mid, span.start);
  out.set(bytes.subarray(span.end), span.start + mid.length);
  return out;
}
