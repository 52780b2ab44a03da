/**
 * The route hint: what the `affinity` pick reads of a request — its session key (the first
 * present of the kinds below) and the chained hashes of its rendered prompt's blocks — computed
 * once per request, only when a tier's pick needs it, in bounded time.
 *
 * Session key kinds, first present wins:
 * 1. `prompt_cache_key` (OpenAI chat and Responses);
 * 2. `conversation` (Responses: an id, or `{id}`);
 * 3. a session header: `x-session-id`, `session_id` (Codex), `x-claude-code-session-id`;
 * 4. `metadata.user_id` (Anthropic);
 * 5. `user` (OpenAI);
 * 6. `prompt`: the hash of the prompt's leading blocks (tools, system, first messages).
 *
 * The prompt is rendered as a node sees it, in order: tools, system (or instructions), then the
 * messages (or input, or prompt) — role and text of each. It is cut into blocks of
 * `blockChars` characters; block i's hash covers blocks 0..i (chained), so two prompts share a
 * block hash only when they share everything up to it. At most `maxBlocks` blocks are hashed.
 * Nothing is serialized: the parsed body is walked, and the walk stops hashing at the bound.
 *
 * @module
 */
import { keyHash, mix32 } from "./rendezvous.ts";
import { isJsonObject, type JsonObject } from "./json.ts";

/** Which part of a request decided its session key. */
export type KeyKind =
  | "prompt_cache_key"
  | "conversation"
  | "session_header"
  | "metadata_user_id"
  | "user"
  | "prompt"
  | "none";

/** Session headers read, in order (lowercase). */
export const SESSION_HEADERS: readonly string[] = Object.freeze([
  "x-session-id",
  "session_id",
  "x-claude-code-session-id",
]);

/** Leading blocks whose chained hash is the `prompt` session key. */
export const PROMPT_KEY_BLOCKS = 4;

/** What the affinity pick reads of a request. */
export interface RouteHint {
  /** The kind of the session key (`none`: nothing to key on; the pick is then by load). */
  key_kind: KeyKind;
  /** The session key's 32-bit hash (0 with `none`). */
  key: number;
  /** Chained hashes of the rendered prompt's full blocks, in order (at most `maxBlocks`). */
  blocks: Uint32Array;
  /** The prompt's size in tokens, estimated (characters / 4). */
  prompt_tokens: number;
}

/**
 * Where a pick reads a request's route hint: asked only by a pick that reads one (`affinity`),
 * so a `round_robin` request never computes it. The request's walk is one (it keeps the hint
 * once computed): nothing is made per request for a pick that does not read it.
 */
export interface RouteHintSource {
  /** The request's route hint (computed on the first call). */
  routeHint(): RouteHint | undefined;
}

/** A source answering a hint already computed (tests, benchmarks, `GET /skeid/route`). */
export function hintSource(hint: RouteHint | undefined): RouteHintSource {
  return { routeHint: () => hint };
}

/** How prompts are cut into blocks. */
export interface BlockSettings {
  /** Characters per block (default 256: about 64 tokens). */
  blockChars: number;
  /** Blocks hashed at most (default 512: about 32k tokens). */
  maxBlocks: number;
}

/** The default block settings. */
export const DEFAULT_BLOCKS: Readonly<BlockSettings> = Object.freeze({
  blockChars: 256,
  maxBlocks: 512,
});

const encoder = new TextEncoder();

/**
 * The bytes a prompt is rendered into before it is hashed, reused by every hint of this isolate
 * (a hint is computed synchronously, start to end, so no two use it at once); grown once when a
 * setting asks for more.
 */
let scratch = new Uint8Array(DEFAULT_BLOCKS.blockChars * DEFAULT_BLOCKS.maxBlocks + 8);

/**
 * Renders fed text as UTF-8 into the scratch bytes, up to `maxBlocks` blocks, and hashes the
 * full blocks at the end, chained, 32-bit words at a time. Counts every character fed, rendered
 * or not. Rendering is the engine's own `encodeInto` (no string is built or copied per block),
 * hashing touches each word once: a 32k-token prompt costs tens of microseconds.
 */
class BlockHasher {
  /** Bytes per block: a multiple of 4 (words). */
  readonly #size: number;
  readonly #cap: number;
  readonly #bytes: Uint8Array;
  #len = 0;
  /** Characters fed, rendered or not. */
  chars = 0;

  constructor(settings: BlockSettings) {
    this.#size = Math.max(16, Math.floor(settings.blockChars / 4) * 4);
    this.#cap = this.#size * Math.max(0, Math.floor(settings.maxBlocks));
    if (scratch.length < this.#cap + 8) scratch = new Uint8Array(this.#cap + 8);
    this.#bytes = scratch;
  }

  /** Whether the bound is reached (within a character's bytes of it). */
  get full(): boolean {
    return this.#len + 4 > this.#cap;
  }

  /** Bytes per block. */
  get blockBytes(): number {
    return this.#size;
  }

  /** Bytes rendered so far. */
  get length(): number {
    return this.#len;
  }

  feed(text: string): void {
    this.chars += text.length;
    if (text.length === 0 || this.full) return;
    const room = this.#bytes.subarray(this.#len, this.#cap);
    this.#len += encoder.encodeInto(text, room).written;
  }

  /** The chained hashes of the full blocks of the first `length` bytes. */
  blocks(length = this.#len): Uint32Array {
    const size = this.#size;
    const n = Math.floor(length / size);
    const out = new Uint32Array(n);
    const words = new Int32Array(this.#bytes.buffer, 0, (n * size) >> 2);
    let h = 0x811c9dc5;
    for (let b = 0; b < n; b++) h = out[b] = hashWords(words, (b * size) >> 2, size >> 2, h);
    return out;
  }

  /** The hash of the first `length` bytes: their full blocks chained, then the partial one. */
  prefixHash(length: number): number {
    const size = this.#size;
    const full = this.blocks(length);
    let h = full.length > 0 ? full[full.length - 1] : 0x811c9dc5;
    const from = full.length * size;
    const bytes = this.#bytes;
    for (let i = from; i < length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
    return mix32(h >>> 0) || 1;
  }
}

/**
 * The hash of `count` words of `w` from `at`, chained onto `seed`: four independent lanes (a
 * lane's multiply does not wait on another's, so the CPU runs them side by side: about 20 µs
 * for the 32k words of a 32k-token prompt), each a multiply-xorshift step per word, then a
 * final avalanche. A hint for placement, not an identity: a crafted collision only sends a
 * request where another's prefix is warm. Never 0 (0 marks a free place in the prefix index).
 * The words are read in the host's byte order, little-endian wherever Deno runs, so every
 * frontend cuts and hashes a prompt alike.
 */
function hashWords(w: Int32Array, at: number, count: number, seed: number): number {
  let a = seed ^ 0x9e3779b9;
  let b = Math.imul(seed, 0x85ebca6b) ^ 0x27d4eb2f;
  let c = seed ^ 0x165667b1;
  let d = Math.imul(seed, 0xc2b2ae35) ^ 0x61c88647;
  const stop = at + count;
  let i = at;
  for (; i + 3 < stop; i += 4) {
    a = Math.imul(a ^ w[i], 0x01000193) ^ (a >>> 15);
    b = Math.imul(b ^ w[i + 1], 0x5bd1e995) ^ (b >>> 13);
    c = Math.imul(c ^ w[i + 2], 0x01000193) ^ (c >>> 15);
    d = Math.imul(d ^ w[i + 3], 0x5bd1e995) ^ (d >>> 13);
  }
  for (; i < stop; i++) a = Math.imul(a ^ w[i], 0xcc9e2d51) ^ (a >>> 15);
  const h = a ^ Math.imul(b, 0x85ebca6b) ^ Math.imul(c, 0xc2b2ae35) ^
    Math.imul(d, 0x27d4eb2f) ^ count;
  return mix32(h >>> 0) || 1;
}

/** Feeds a JSON value's strings and keys, depth-first, until the hasher is full. */
function feedJson(hasher: BlockHasher, value: unknown, depth = 0): void {
  if (typeof value === "string") return hasher.feed(value);
  if (typeof value === "number" || typeof value === "boolean") return hasher.feed(String(value));
  if (depth > 32 || hasher.full) return;
  if (Array.isArray(value)) {
    for (const item of value) {
      feedJson(hasher, item, depth + 1);
      if (hasher.full) return;
    }
  } else if (isJsonObject(value)) {
    for (const key in value) {
      hasher.feed(key);
      feedJson(hasher, value[key], depth + 1);
      if (hasher.full) return;
    }
  }
}

/** Feeds one message: its role, then its content (text or parts), then its tool calls. */
function feedMessage(hasher: BlockHasher, message: unknown): void {
  if (typeof message === "string") return hasher.feed(message);
  if (!isJsonObject(message)) return;
  hasher.feed(`\u0001${typeof message.role === "string" ? message.role : ""}\u0002`);
  feedJson(hasher, message.content);
  if (message.tool_calls !== undefined) feedJson(hasher, message.tool_calls);
}

/** A non-empty string field, or an `{id}` object's id. */
function idOf(value: unknown): string | undefined {
  if (typeof value === "string" && value !== "") return value;
  if (isJsonObject(value) && typeof value.id === "string" && value.id !== "") return value.id;
  return undefined;
}

/** The session key of a request and its kind (before the prompt fallback). */
function sessionKey(
  body: JsonObject,
  upstream: JsonObject | undefined,
  headers: Headers | undefined,
): [KeyKind, string] | undefined {
  const pck = idOf(body.prompt_cache_key) ?? idOf(upstream?.prompt_cache_key);
  if (pck !== undefined) return ["prompt_cache_key", pck];
  const conversation = idOf(body.conversation);
  if (conversation !== undefined) return ["conversation", conversation];
  if (headers !== undefined) {
    for (const name of SESSION_HEADERS) {
      const value = headers.get(name);
      if (value !== null && value !== "") return ["session_header", value];
    }
  }
  const metadata = body.metadata;
  if (isJsonObject(metadata)) {
    const userId = idOf(metadata.user_id);
    if (userId !== undefined) return ["metadata_user_id", userId];
  }
  const user = idOf(body.user) ?? idOf(upstream?.user);
  if (user !== undefined) return ["user", user];
  return undefined;
}

/**
 * The route hint of a request. `body` is the client's JSON body (keys are read there),
 * `upstream` the body as the node will get it (the prompt is rendered from it; default `body`),
 * `headers` the client's headers. Never throws: a body it cannot render gives no blocks, and a
 * request with neither a key nor a prompt gets kind `none`.
 */
export function routeHint(
  body: JsonObject,
  headers?: Headers,
  upstream?: JsonObject,
  settings: BlockSettings = DEFAULT_BLOCKS,
): RouteHint {
  const prompt = upstream ?? body;
  const hasher = new BlockHasher(settings);
  feedJson(hasher, prompt.tools);
  if (typeof prompt.instructions === "string") hasher.feed(prompt.instructions);
  if (prompt.system !== undefined) {
    hasher.feed("\u0001system\u0002");
    feedJson(hasher, prompt.system);
  }
  let rendered = false;
  // The `prompt` key: tools, system and the first user message (or the first few blocks, when
  // they already end before it) — the part of a conversation that stays the same as it grows.
  // Where it ends is noted while rendering; it is hashed with the blocks at the end.
  let leadAt: number | undefined;
  for (const list of [prompt.messages, prompt.input]) {
    if (typeof list === "string") {
      hasher.feed(list);
      rendered = true;
    } else if (Array.isArray(list)) {
      for (const message of list) {
        if (hasher.full) break;
        feedMessage(hasher, message);
        if (leadAt === undefined && isJsonObject(message) && message.role === "user") {
          leadAt = hasher.length;
        }
      }
      rendered = true;
    }
  }
  if (!rendered && prompt.prompt !== undefined) feedJson(hasher, prompt.prompt);
  const blocks = hasher.blocks();
  const promptTokens = Math.ceil(hasher.chars / 4);
  const session = sessionKey(body, upstream, headers);
  if (session !== undefined) {
    return { key_kind: session[0], key: keyHash(session[1]), blocks, prompt_tokens: promptTokens };
  }
  if (hasher.chars === 0) return { key_kind: "none", key: 0, blocks, prompt_tokens: 0 };
  const leadLength = leadAt ?? hasher.length;
  const key = Math.floor(leadLength / hasher.blockBytes) >= PROMPT_KEY_BLOCKS
    ? blocks[PROMPT_KEY_BLOCKS - 1]
    : hasher.prefixHash(leadLength);
  return { key_kind: "prompt", key, blocks, prompt_tokens: promptTokens };
}
