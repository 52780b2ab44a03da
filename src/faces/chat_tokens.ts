/**
 * Token counts of an upstream `usage` object, as the faces report them to clients in Anthropic
 * and Ollama answers. Read by the core's `readUsage` — the same reader the usage event is priced
 * from — so the numbers a client sees are the numbers its bill is built from.
 *
 * @module
 */
import { readUsage } from "../core/usage_reading.ts";

/** Token counts; 0 where the upstream reported nothing. */
export interface ChatTokens {
  /** All prompt tokens, cache reads and writes included (`prompt_tokens`). */
  prompt: number;
  /** Generated tokens (`completion_tokens`). */
  completion: number;
  /** Prompt tokens read from a cache; undefined when not reported. */
  cacheRead?: number;
  /** Prompt tokens written to a cache; undefined when not reported. */
  cacheWrite?: number;
  /**
   * Whether `prompt` includes the cache counts (OpenAI nesting) or they sit beside it
   * (Anthropic-style flat `cache_read_input_tokens` an upstream may pass through).
   */
  promptIncludesCache: boolean;
}

/** Reads `usage` (OpenAI chat, with the Anthropic, Ollama and flat spellings some servers use). */
export function readChatTokens(usage: unknown): ChatTokens {
  const u = readUsage(usage ?? {});
  const t: ChatTokens = {
    prompt: u.input_tokens ?? 0,
    completion: u.output_tokens ?? 0,
    promptIncludesCache: u.input_includes_cache,
  };
  if (u.cached_tokens !== null) t.cacheRead = u.cached_tokens;
  if (u.cache_write_tokens !== null) t.cacheWrite = u.cache_write_tokens;
  return t;
}

/** Anthropic's split: `input_tokens` excludes cache reads and writes, which are reported beside. */
export interface AnthropicUsage {
  /** Prompt tokens that were neither read from nor written to the cache. */
  input_tokens: number;
  /** Completion tokens. */
  output_tokens: number;
  /** Prompt tokens written to the cache; present only when the upstream reported them. */
  cache_creation_input_tokens?: number;
  /** Prompt tokens read from the cache; present only when the upstream reported them. */
  cache_read_input_tokens?: number;
}

/**
 * The Anthropic `usage` of upstream counts: input = prompt − cache read − cache write (never
 * below 0), so `input + cache_read + cache_creation` is the prompt the ledger records.
 */
export function anthropicUsage(t: ChatTokens): AnthropicUsage {
  const cached = (t.cacheRead ?? 0) + (t.cacheWrite ?? 0);
  const input = t.promptIncludesCache ? Math.max(0, t.prompt - cached) : t.prompt;
  const u: AnthropicUsage = { input_tokens: input, output_tokens: t.completion };
  if (t.cacheWrite !== undefined) u.cache_creation_input_tokens = t.cacheWrite;
  if (t.cacheRead !== undefined) u.cache_read_input_tokens = t.cacheRead;
  return u;
}
