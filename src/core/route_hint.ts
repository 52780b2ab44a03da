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
import { fnv1a32, keyHash, mix32 } from "./rendezvous.ts";
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

/** Cuts fed text into chained block hashes, up to a bound; counts every character fed. */
class BlockHasher {
  readonly #size: number;
  readonly #max: number;
  readonly #out: number[] = [];
  #h = 0x811c9dc5;
  #fill = 0;
  /** Characters fed, hashed or not. */
  chars = 0;

  constructor(settings: BlockSettings) {
    this.#size = Math.max(16, Math.floor(settings.blockChars));
    this.#max = Math.max(0, Math.floor(settings.maxBlocks));
  }

  get full(): boolean {
    return this.#out.length >= this.#max;
  }

  feed(text: string): void {
    this.chars += text.length;
    let i = 0;
    while (i < text.length && !this.full) {
      const take = Math.min(this.#size - this.#fill, text.length - i);
      this.#h = fnv1a32(text, this.#h, i, i + take);
      this.#fill += take;
      i += take;
      if (this.#fill === this.#size) {
        // The finished block's hash seeds the next one: the chain.
        const block = mix32(this.#h) || 1;
        this.#out.push(block);
        this.#h = block ^ 0x811c9dc5;
        this.#fill = 0;
      }
    }
  }

  /** The hash of everything fed so far (the partial block included). */
  get running(): number {
    return mix32(this.#h) || 1;
  }

  get blocks(): number[] {
    return this.#out;
  }
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
  let lead: number | undefined;
  const leadKey = () =>
    hasher.blocks.length >= PROMPT_KEY_BLOCKS
      ? hasher.blocks[PROMPT_KEY_BLOCKS - 1]
      : hasher.running;
  for (const list of [prompt.messages, prompt.input]) {
    if (typeof list === "string") {
      hasher.feed(list);
      rendered = true;
    } else if (Array.isArray(list)) {
      for (const message of list) {
        if (hasher.full) break;
        feedMessage(hasher, message);
        if (lead === undefined && isJsonObject(message) && message.role === "user") {
          lead = leadKey();
        }
      }
      rendered = true;
    }
  }
  if (!rendered && prompt.prompt !== undefined) feedJson(hasher, prompt.prompt);
  const blocks = Uint32Array.from(hasher.blocks);
  const promptTokens = Math.ceil(hasher.chars / 4);
  const session = sessionKey(body, upstream, headers);
  if (session !== undefined) {
    return { key_kind: session[0], key: keyHash(session[1]), blocks, prompt_tokens: promptTokens };
  }
  if (hasher.chars === 0) return { key_kind: "none", key: 0, blocks, prompt_tokens: 0 };
  return { key_kind: "prompt", key: lead ?? leadKey(), blocks, prompt_tokens: promptTokens };
}
