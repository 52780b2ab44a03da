/**
 * Anthropic `stop_reason` / `stop_sequence` of an upstream finish.
 *
 * @module
 */
import type { JsonObject } from "./face.ts";

/** The Anthropic stop fields. */
export interface AnthropicStop {
  /** `end_turn`, `max_tokens`, `stop_sequence`, `tool_use` or `refusal`. */
  stop_reason: string;
  /**
   * The request's stop sequence that ended the answer; null unless `stop_reason` is
   * `stop_sequence`.
   */
  stop_sequence: string | null;
}

/**
 * Maps an upstream `finish_reason`: `length` → `max_tokens`; `tool_calls` (or any tool call
 * seen, since some servers finish tool turns with `stop`) → `tool_use`; `content_filter` →
 * `refusal`; `stop` with a matched stop string (vLLM `stop_reason`, SGLang `matched_stop`)
 * that is one of the request's `stop_sequences` → `stop_sequence`; anything else → `end_turn`.
 */
export function anthropicStop(
  finish: string | undefined,
  matched: string | undefined,
  context: JsonObject | undefined,
  hasToolCalls: boolean,
): AnthropicStop {
  if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (finish === "tool_calls" || finish === "function_call" || hasToolCalls) {
    return { stop_reason: "tool_use", stop_sequence: null };
  }
  if (finish === "content_filter") return { stop_reason: "refusal", stop_sequence: null };
  const stops = Array.isArray(context?.stop_sequences) ? context.stop_sequences : [];
  if (finish === "stop" && matched !== undefined && stops.includes(matched)) {
    return { stop_reason: "stop_sequence", stop_sequence: matched };
  }
  return { stop_reason: "end_turn", stop_sequence: null };
}
