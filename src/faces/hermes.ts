/**
 * Hermes-style tool calls written as text: `<tool_call>{"name":…,"arguments":{…}}</tool_call>`.
 * Models served without a tool parser (or with a weak one) answer this way; the Anthropic and
 * Ollama faces turn such segments into structured tool calls.
 *
 * @module
 */
import type { JsonObject } from "./face.ts";
import { argumentsObject, parseJsonObject, str } from "./json_narrow.ts";

/** One tool call found in text. */
export interface HermesCall {
  /** The tool's name (required: a segment without one is left as text). */
  name: string;
  /** The call's arguments (`arguments`, or `parameters`), as an object. */
  arguments: JsonObject;
}

/** The text with its tool-call segments removed (trimmed), and the calls in order. */
export interface HermesExtraction {
  /** The answer text without its `<tool_call>` segments, trimmed. */
  text: string;
  /** The tool calls found, in the order they appear. */
  calls: HermesCall[];
}

const OPEN = "<tool_call>";

function parseCall(inner: string): HermesCall | undefined {
  const o = parseJsonObject(inner.trim());
  const name = o && str(o.name);
  if (!o || !name) return undefined;
  return { name, arguments: argumentsObject(o.arguments ?? o.parameters) };
}

/**
 * Finds the `<tool_call>` segments of `text`. A segment that is not a JSON object with a string
 * `name` stays in the text. A last segment left unclosed (the model stopped on its closing tag)
 * counts when the rest parses. Text without calls comes back unchanged.
 */
export function extractHermesToolCalls(text: string): HermesExtraction {
  if (!text.includes(OPEN)) return { text, calls: [] };
  const calls: HermesCall[] = [];
  let rest = text.replace(/<tool_call>([\s\S]*?)<\/tool_call>/g, (whole: string, inner: string) => {
    const call = parseCall(inner);
    if (!call) return whole;
    calls.push(call);
    return "";
  });
  const open = rest.lastIndexOf(OPEN);
  if (open >= 0 && !rest.includes("</tool_call>", open)) {
    const call = parseCall(rest.slice(open + OPEN.length));
    if (call) {
      calls.push(call);
      rest = rest.slice(0, open);
    }
  }
  return calls.length === 0 ? { text, calls } : { text: rest.trim(), calls };
}
