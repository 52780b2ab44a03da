/**
 * Reading token usage off upstream answers (OpenAI, Anthropic, Ollama, Gemini, AKI shapes) and
 * turning it into priced metrics (reference usage-and-cost §1, §3). Unreported counts stay
 * `null` here so "not reported" and "zero" differ; metrics turn them into 0.
 *
 * @module
 */
import type { NormalizedMetrics, PricingRule, Usage } from "./types.ts";
import { costFor } from "./pricing.ts";
import { isJsonObject } from "./json.ts";

type Hash = Record<string, unknown>;

/**
 * A token count: a non-negative safe integer (or a string of such digits); anything else —
 * fractions, negatives, NaN, infinities, 1e308 — is treated as not reported.
 */
function count(value: unknown): number | undefined {
  if (typeof value === "number") return isCount(value) ? value : undefined;
  if (typeof value === "string" && /^\s*\d+\s*$/.test(value)) {
    const n = Number(value);
    return isCount(n) ? n : undefined;
  }
  return undefined;
}

function isCount(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0;
}

/** The first of two or three keys of `hash` holding a count (fixed arity: no rest array). */
function first(hash: Hash, a: string, b: string, c?: string): number | undefined {
  const n = count(hash[a]);
  if (n !== undefined) return n;
  const m = count(hash[b]);
  if (m !== undefined || c === undefined) return m;
  return count(hash[c]);
}

/** A count nested one level down (`prompt_tokens_details.cached_tokens`). */
function nested(hash: Hash, outer: string, inner: string): number | undefined {
  const h = hash[outer];
  return isJsonObject(h) ? count(h[inner]) : undefined;
}

/** Sum of the counts present among two keys, undefined when neither is present. */
function sumOf(hash: Hash, a: string, b: string): number | undefined {
  const x = count(hash[a]);
  const y = count(hash[b]);
  if (x === undefined) return y;
  return y === undefined ? x : x + y;
}

/** The usage block nested in a whole body (`usage` → `usageMetadata` → `response.usage`). */
function nestedBlock(body: Hash): Hash | undefined {
  if (isJsonObject(body.usage)) return body.usage;
  if (isJsonObject(body.usageMetadata)) return body.usageMetadata;
  if (isJsonObject(body.usage_metadata)) return body.usage_metadata;
  if (isJsonObject(body.response) && isJsonObject(body.response.usage)) return body.response.usage;
  return undefined;
}

/** Counts a body carries at its top level: Ollama's final object, AKI's native counters. */
function topLevelBlock(body: Hash): Hash | undefined {
  // Ollama's final `done:true` object; a 0 there means "not reported".
  const ollamaIn = count(body.prompt_eval_count);
  const ollamaOut = count(body.eval_count);
  if ((ollamaIn ?? 0) > 0 || (ollamaOut ?? 0) > 0) {
    return { prompt_eval_count: ollamaIn || undefined, eval_count: ollamaOut || undefined };
  }
  if (count(body.prompt_length) !== undefined || count(body.num_generated_tokens) !== undefined) {
    const block: Hash = {
      input_tokens: body.prompt_length,
      output_tokens: body.num_generated_tokens,
    };
    if (count(body.num_cached_tokens) !== undefined) block.cached_tokens = body.num_cached_tokens;
    return block;
  }
  return undefined;
}

/** Whether a hash looks like a usage hash itself rather than a body around one. */
function looksLikeUsage(hash: Hash): boolean {
  return [
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "prompt_token_count",
    "candidates_token_count",
    "cached_tokens",
    "cache_write_tokens",
  ].some((k) => k in hash);
}

/**
 * Token counts of one usage hash (core `Usage.from_hash` precedence). Each count is the first
 * source present, tried in order (written out, not as a chain of closures: this runs for every
 * forwarded request).
 */
function fromHash(u: Hash): Usage {
  let input = first(u, "input_tokens", "prompt_tokens", "prompt_eval_count");
  if (input === undefined) {
    input = sumOf(u, "promptTokenCount", "toolUsePromptTokenCount") ??
      sumOf(u, "prompt_token_count", "tool_use_prompt_token_count");
  }
  let output = first(u, "output_tokens", "completion_tokens", "eval_count");
  if (output === undefined) {
    output = sumOf(u, "candidatesTokenCount", "thoughtsTokenCount") ??
      sumOf(u, "candidates_token_count", "thoughts_token_count");
  }
  let total = first(u, "total_tokens", "totalTokenCount", "total_token_count");
  if (total === undefined && (input !== undefined || output !== undefined)) {
    total = (input ?? 0) + (output ?? 0);
  }

  // Where each cache count was found decides whether input already includes it: nested,
  // Gemini and flat canonical counts sit inside input; Anthropic's flat ones sit beside it.
  let beside = false;
  let cached = nested(u, "prompt_tokens_details", "cached_tokens") ??
    nested(u, "input_tokens_details", "cached_tokens");
  if (cached === undefined) {
    cached = count(u.cache_read_input_tokens);
    if (cached !== undefined) beside = true;
  }
  cached ??= first(u, "cachedContentTokenCount", "cached_content_token_count") ??
    count(u.cached_tokens);
  let cacheWrite = nested(u, "prompt_tokens_details", "cache_write_tokens") ??
    nested(u, "input_tokens_details", "cache_write_tokens");
  if (cacheWrite === undefined) {
    cacheWrite = count(u.cache_creation_input_tokens) ??
      (isJsonObject(u.cache_creation)
        ? sumOf(u.cache_creation, "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        : undefined);
    if (cacheWrite !== undefined) beside = true;
  }
  cacheWrite ??= count(u.cache_write_tokens);

  let includes = !beside;
  const explicit = u.input_includes_cache;
  if (typeof explicit === "boolean") includes = explicit;
  else if (explicit === 0 || explicit === 1) includes = explicit === 1;
  // Cache counts that sit inside the input never exceed it (together): more is the upstream's
  // error, and would price cache reads the input never had.
  if (includes && input !== undefined) {
    if (cached !== undefined && cached > input) cached = input;
    const room = input - (cached ?? 0);
    if (cacheWrite !== undefined && cacheWrite > room) cacheWrite = room;
  }

  return {
    input_tokens: input ?? null,
    output_tokens: output ?? null,
    total_tokens: total ?? null,
    cached_tokens: cached ?? null,
    cache_write_tokens: cacheWrite ?? null,
    input_includes_cache: includes,
  };
}

const NOTHING_REPORTED: Usage = Object.freeze({
  input_tokens: null,
  output_tokens: null,
  total_tokens: null,
  cached_tokens: null,
  cache_write_tokens: null,
  input_includes_cache: true,
});

/**
 * Token counts of a whole body or a usage hash (precedence: reference usage-and-cost §1). A
 * body's usage block is `usage` → `usageMetadata` → `response.usage` → Ollama top-level counts →
 * AKI native counters; a hash that is none of these is read as a usage hash itself.
 */
export function readUsage(bodyOrUsage: unknown): Usage {
  if (!isJsonObject(bodyOrUsage)) return { ...NOTHING_REPORTED };
  const block = nestedBlock(bodyOrUsage) ??
    (looksLikeUsage(bodyOrUsage) ? bodyOrUsage : topLevelBlock(bodyOrUsage));
  return block ? fromHash(block) : { ...NOTHING_REPORTED };
}

/**
 * What is wrong with the counts of a body's or hash's usage block, for a warning: the first count
 * that is not a non-negative safe integer (read as not reported), or cache counts above the input
 * (clamped); undefined when nothing is.
 */
export function usageProblem(bodyOrUsage: unknown): string | undefined {
  if (!isJsonObject(bodyOrUsage)) return undefined;
  const block = nestedBlock(bodyOrUsage) ?? (looksLikeUsage(bodyOrUsage) ? bodyOrUsage : undefined);
  if (block === undefined) return undefined;
  for (const key in block) {
    const v = block[key];
    if (typeof v === "number" && !isCount(v)) return `${key} is ${v}, not a token count`;
  }
  const cached = count(block.cached_tokens) ??
    nested(block, "prompt_tokens_details", "cached_tokens");
  if (cached === undefined) return undefined;
  const u = fromHash(block);
  if (u.input_includes_cache && u.input_tokens !== null && cached > u.input_tokens) {
    return `cached tokens (${cached}) exceed the input (${u.input_tokens})`;
  }
  return undefined;
}

/**
 * Counts tool calls by name (`{function:{name}}`, `{name}` or a string). Every object or
 * non-empty string is one call; a call whose name is not (yet) known counts without a name.
 */
export function countToolCalls(calls: unknown[] | undefined): { count: number; names: string[] } {
  const names: string[] = [];
  let n = 0;
  for (const call of calls ?? []) {
    if (typeof call === "string") {
      if (call === "") continue;
      n++;
      names.push(call);
    } else if (isJsonObject(call)) {
      n++;
      const fn = call.function;
      const name = isJsonObject(fn) && typeof fn.name === "string" ? fn.name : call.name;
      if (typeof name === "string" && name !== "") names.push(name);
    }
  }
  return { count: n, names };
}

/**
 * What a usage event is built from: usage read, priced with `rule`, tool calls counted.
 * Unreported counts become 0; total is the reported total, else input + output.
 */
export function normalizeMetrics(args: {
  model: string;
  usage: Usage;
  rule: PricingRule;
  tool_calls?: unknown[];
  duration_ms?: number;
  engine?: string;
  route?: string;
  provider?: string;
}): NormalizedMetrics {
  const { usage } = args;
  const input = usage.input_tokens ?? 0;
  const output = usage.output_tokens ?? 0;
  const cost = costFor(usage, args.rule);
  const tools = countToolCalls(args.tool_calls);
  return {
    provider: args.provider ?? "",
    engine: args.engine ?? "",
    model: args.model,
    route: args.route ?? "",
    duration_ms: args.duration_ms ?? 0,
    input_tokens: input,
    output_tokens: output,
    total_tokens: usage.total_tokens ?? input + output,
    cached_tokens: usage.cached_tokens ?? 0,
    cache_write_tokens: usage.cache_write_tokens ?? 0,
    tool_calls: tools.count,
    tool_names: tools.names,
    cost_input_usd: cost.input_cost_usd,
    cost_output_usd: cost.output_cost_usd,
    cost_cache_read_usd: cost.cache_read_cost_usd,
    cost_cache_write_usd: cost.cache_write_cost_usd,
    cost_total_usd: cost.total_cost_usd,
    currency: "USD",
  };
}
