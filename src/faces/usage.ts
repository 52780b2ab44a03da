/**
 * Token counts of an upstream (OpenAI-shaped) `usage` object, as the faces report them to
 * clients in Anthropic and Ollama answers.
 *
 * Why not the core's `readUsage` (`src/core/usage.ts`), which the usage event is priced from:
 * the two agree on what OpenAI-compatible servers send — `prompt_tokens`/`completion_tokens`
 * with `prompt_tokens_details.cached_tokens`/`cache_write_tokens`, or Anthropic's flat
 * `cache_read_input_tokens`/`cache_creation_input_tokens` beside them — but not on every input.
 * The core reads every provider shape (Ollama and Gemini counts, digit strings, an explicit
 * `input_includes_cache`) and prefers `input_tokens` to `prompt_tokens`; this reader takes
 * `prompt_tokens` first, only finite numbers (negative ones too), also
 * `prompt_tokens_details.cache_creation_tokens`, and the flat cache counts only when no nested
 * one is present. Both are pinned by their tests; making the client's numbers follow the
 * ledger's on those inputs is a behaviour change, left to a decision of its own.
 *
 * @module
 */
import { num, obj } from "./json.ts";

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

/** Reads `usage` (OpenAI chat, with the Anthropic and flat spellings some servers use). */
export function readChatTokens(usage: unknown): ChatTokens {
  const u = obj(usage) ?? {};
  const details = obj(u.prompt_tokens_details) ?? obj(u.input_tokens_details);
  const prompt = num(u.prompt_tokens) ?? num(u.input_tokens) ?? 0;
  const completion = num(u.completion_tokens) ?? num(u.output_tokens) ?? 0;
  let cacheRead = num(details?.cached_tokens);
  let cacheWrite = num(details?.cache_write_tokens) ?? num(details?.cache_creation_tokens);
  let promptIncludesCache = true;
  const flatRead = num(u.cache_read_input_tokens);
  const flatWrite = num(u.cache_creation_input_tokens);
  if (cacheRead === undefined && cacheWrite === undefined) {
    if (flatRead !== undefined || flatWrite !== undefined) {
      cacheRead = flatRead;
      cacheWrite = flatWrite;
      promptIncludesCache = false;
    } else {
      cacheRead = num(u.cached_tokens);
    }
  }
  const t: ChatTokens = { prompt, completion, promptIncludesCache };
  if (cacheRead !== undefined) t.cacheRead = cacheRead;
  if (cacheWrite !== undefined) t.cacheWrite = cacheWrite;
  return t;
}

/** Anthropic's split: `input_tokens` excludes cache reads and writes, which are reported beside. */
export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number;
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
