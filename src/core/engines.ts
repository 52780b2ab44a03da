/**
 * Engine ids: Langertha engine class names, lowercased (reference engines.md §1–2). An engine id
 * is metadata: validation at node add, the `engine` of usage events, tier and route engine
 * constraints, and the round-robin route key. Every node is still called with the OpenAI shape.
 *
 * @module
 */

/** Every engine id a node may name, sorted: the 38 Langertha engine classes (engines.md §2). */
export const SUPPORTED_ENGINE_IDS: readonly string[] = Object.freeze([
  "aki",
  "akianthropic",
  "akiopenai",
  "anthropic",
  "anthropicbase",
  "cerebras",
  "deepseek",
  "gemini",
  "groq",
  "hetzner",
  "huggingface",
  "llamacpp",
  "lmstudio",
  "lmstudioanthropic",
  "lmstudioopenai",
  "minimax",
  "minimaxanthropic",
  "mistral",
  "moonshot",
  "moonshotanthropic",
  "nousresearch",
  "ollama",
  "ollamaopenai",
  "openai",
  "openaibase",
  "openairesponses",
  "openrouter",
  "perplexity",
  "remote",
  "replicate",
  "scaleway",
  "sglang",
  "transcriptionbase",
  "tsystems",
  "vllm",
  "vllmhook",
  "whisper",
  "xai",
]);

/** The engine a node gets when its spec names none. */
export const DEFAULT_ENGINE_ID = "openaibase";

const SUPPORTED = new Set(SUPPORTED_ENGINE_IDS);
const CLASS_PREFIX = /^langerthax?::engine::/;

/** An engine name that is not one of {@link SUPPORTED_ENGINE_IDS}. */
export class UnknownEngineError extends Error {
  /** `raw` is the value as given (trimmed), named in the message. */
  constructor(readonly raw: string) {
    super(`unknown engine '${raw}' (expected one of: ${SUPPORTED_ENGINE_IDS.join(", ")})`);
    this.name = "UnknownEngineError";
  }
}

/**
 * Lowercases, strips a `Langertha::Engine::`/`LangerthaX::Engine::` prefix; `''` for empty.
 * Throws `unknown engine '<raw>' (expected one of: ...)` for an id not in the list — legacy
 * spellings such as `openai-compatible` included, on purpose: they are rejected, not mapped.
 */
export function normalizeEngineId(raw: unknown): string {
  if (raw === undefined || raw === null) return "";
  if (typeof raw !== "string" && typeof raw !== "number") {
    throw new UnknownEngineError(String(raw));
  }
  const trimmed = String(raw).trim();
  if (trimmed === "") return "";
  const id = trimmed.toLowerCase().replace(CLASS_PREFIX, "");
  if (SUPPORTED.has(id)) return id;
  throw new UnknownEngineError(trimmed);
}

/** Whether an already-normalized id is a supported engine id. */
export function isSupportedEngineId(id: string): boolean {
  return SUPPORTED.has(id);
}
