/**
 * Anthropic Messages request → the OpenAI chat request sent upstream.
 *
 * Carried: model, max_tokens, temperature, top_p, stop_sequences (→ stop), metadata.user_id
 * (→ user), system, messages (text, image, document, tool_use, tool_result; `system` messages
 * anywhere in the list stay system messages at their place, as Claude Code sends them), tools,
 * tool_choice (+ disable_parallel_tool_use → parallel_tool_calls:false), thinking and
 * output_config.effort (→ reasoning_effort), output_config.format (structured output, or the
 * beta's top-level `output_format` → response_format json_schema), stream (usage asked for on
 * every chunk, so `message_start` can carry the exact prompt count where the node reports it).
 * Accepted and not carried (the chat wire has no place for them): top_k, cache_control,
 * thinking blocks of earlier turns, service_tier, context_management, container, mcp_servers
 * and the rest.
 *
 * @module
 */
import { FaceError, fieldMustBe, fieldRequired, type JsonObject, requireModel } from "./face.ts";
import { anthropicImageUrl } from "./images.ts";
import { documentPart } from "./anthropic_documents.ts";
import { argumentsText, isJsonObject, num, obj, str } from "./json_narrow.ts";

/** Content blocks that carry nothing upstream and are dropped without complaint. */
const DROPPED_BLOCKS: ReadonlySet<string> = new Set(["thinking", "redacted_thinking"]);

/** Checks the fields every Messages request must have; count_tokens needs no `max_tokens`. */
export function validateMessagesBody(body: JsonObject, needMaxTokens: boolean): void {
  requireModel(body);
  if (body.messages === undefined || body.messages === null) throw fieldRequired("messages");
  if (!Array.isArray(body.messages)) throw fieldMustBe("messages", "an array");
  if (needMaxTokens) {
    if (body.max_tokens === undefined || body.max_tokens === null) {
      throw fieldRequired("max_tokens");
    }
    if (num(body.max_tokens) === undefined) throw fieldMustBe("max_tokens", "a number");
  }
  for (const field of ["temperature", "top_p"]) {
    if (body[field] !== undefined && body[field] !== null && num(body[field]) === undefined) {
      throw fieldMustBe(field, "a number");
    }
  }
}

/** The system prompt as text: a string, or the `text` of its blocks joined without separator. */
export function systemText(system: unknown): string {
  if (typeof system === "string") return system;
  if (!Array.isArray(system)) return "";
  return system.map((b) => (isJsonObject(b) ? str(b.text) ?? "" : "")).join("");
}

/** A tool_result's content as text: a string as is, text blocks joined, anything else as JSON. */
export function toolResultText(content: unknown): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (
    Array.isArray(content) &&
    content.every((b) => isJsonObject(b) && b.type === "text" && typeof b.text === "string")
  ) {
    return content.map((b) => (b as { text: string }).text).join("");
  }
  return JSON.stringify(content);
}

/** The parts of one Anthropic message, sorted into what OpenAI takes. */
interface SortedBlocks {
  tools: JsonObject[];
  toolCalls: JsonObject[];
  /** Text, image and file parts in client order. */
  parts: JsonObject[];
  /** Whether a part is not text (the content must then stay a list of parts). */
  hasMedia: boolean;
}

function sortBlocks(
  content: unknown[],
  role: string,
  path: string,
  newToolId: () => string,
): SortedBlocks {
  const out: SortedBlocks = { tools: [], toolCalls: [], parts: [], hasMedia: false };
  content.forEach((raw, i) => {
    const at = `${path}[${i}]`;
    if (typeof raw === "string") {
      out.parts.push({ type: "text", text: raw });
      return;
    }
    if (!isJsonObject(raw)) throw fieldMustBe(at, "a content block object");
    const type = str(raw.type);
    if (type === "text") {
      out.parts.push({ type: "text", text: str(raw.text) ?? "" });
    } else if (type === "image") {
      if (role === "assistant") {
        throw new FaceError(400, `${at}: image blocks are only accepted in user messages`);
      }
      out.parts.push({ type: "image_url", image_url: { url: anthropicImageUrl(raw.source, at) } });
      out.hasMedia = true;
    } else if (type === "document") {
      if (role === "assistant") {
        throw new FaceError(400, `${at}: document blocks are only accepted in user messages`);
      }
      out.parts.push(documentPart(raw, at));
      // Kept as its own part: joined into one string it would run into the question's text.
      out.hasMedia = true;
    } else if (type === "tool_use") {
      out.toolCalls.push({
        id: str(raw.id) || newToolId(),
        type: "function",
        function: { name: str(raw.name) || "tool", arguments: argumentsText(raw.input ?? {}) },
      });
    } else if (type === "tool_result") {
      out.tools.push({
        role: "tool",
        tool_call_id: str(raw.tool_use_id) ?? str(raw.id) ?? "",
        content: toolResultText(raw.content),
      });
    } else if (type === undefined || !DROPPED_BLOCKS.has(type)) {
      throw new FaceError(
        400,
        `${at}.type: content block type '${type ?? String(raw.type)}' is not supported`,
      );
    }
  });
  return out;
}

function joinedText(parts: JsonObject[]): string {
  return parts.map((p) => (p.type === "text" ? str(p.text) ?? "" : "")).join("");
}

/** Anthropic `messages` → OpenAI messages (tool results first, in block order). */
export function mapMessages(messages: unknown[], newToolId: () => string): JsonObject[] {
  const out: JsonObject[] = [];
  messages.forEach((raw, i) => {
    const path = `messages[${i}]`;
    if (!isJsonObject(raw)) throw fieldMustBe(path, "an object");
    const role = str(raw.role);
    if (role !== "user" && role !== "assistant" && role !== "system") {
      throw fieldMustBe(`${path}.role`, "'user', 'assistant' or 'system'");
    }
    const content = raw.content;
    if (typeof content === "string") {
      out.push({ role, content });
      return;
    }
    if (!Array.isArray(content)) throw fieldMustBe(`${path}.content`, "a string or an array");
    if (role === "system") {
      // A system turn mid-conversation (Claude Code sends them): its text, at its place.
      out.push({ role, content: systemText(content) });
      return;
    }
    const sorted = sortBlocks(content, role, `${path}.content`, newToolId);
    out.push(...sorted.tools);
    const text = joinedText(sorted.parts);
    if (role === "assistant") {
      const m: JsonObject = { role };
      if (text !== "") m.content = text;
      if (sorted.toolCalls.length > 0) m.tool_calls = sorted.toolCalls;
      if (text === "" && sorted.toolCalls.length === 0) m.content = "";
      out.push(m);
    } else if (sorted.hasMedia) {
      out.push({ role, content: sorted.parts.filter((p) => p.type !== "text" || p.text !== "") });
    } else if (text !== "") {
      out.push({ role, content: text });
    }
  });
  return out;
}

/** Anthropic `tools` → OpenAI function tools (OpenAI-shaped and MCP `inputSchema` entries accepted). */
export function mapTools(tools: unknown[]): JsonObject[] {
  return tools.map((raw, i) => {
    if (!isJsonObject(raw)) throw fieldMustBe(`tools[${i}]`, "an object");
    if (raw.type === "function" && isJsonObject(raw.function)) return raw;
    const name = str(raw.name);
    if (!name) throw fieldRequired(`tools[${i}].name`);
    const schema = obj(raw.input_schema) ?? obj(raw.inputSchema) ??
      { type: "object", properties: {} };
    return {
      type: "function",
      function: { name, description: str(raw.description) ?? "", parameters: schema },
    };
  });
}

/** Anthropic `tool_choice` → OpenAI's; undefined = omit. */
export function mapToolChoice(choice: unknown): unknown {
  const c = obj(choice);
  switch (c && str(c.type)) {
    case "auto":
      return "auto";
    case "any":
      return "required";
    case "none":
      return "none";
    case "tool": {
      const name = str(c?.name);
      return name ? { type: "function", function: { name } } : "auto";
    }
    default:
      return undefined;
  }
}

/** What `fromUpstream` and the stream translator need back: the request's stop sequences. */
export function requestContext(body: JsonObject): JsonObject | undefined {
  const stops = stopSequences(body);
  return stops.length > 0 ? { stop_sequences: stops } : undefined;
}

function stopSequences(body: JsonObject): string[] {
  const s = body.stop_sequences;
  if (s === undefined || s === null) return [];
  if (!Array.isArray(s) || !s.every((x) => typeof x === "string")) {
    throw fieldMustBe("stop_sequences", "an array of strings");
  }
  return s;
}

/** The OpenAI chat body for an Anthropic Messages body (already validated). */
export function toChatBody(body: JsonObject, newToolId: () => string): JsonObject {
  const messages: JsonObject[] = [];
  const system = systemText(body.system);
  if (system !== "") messages.push({ role: "system", content: system });
  messages.push(...mapMessages(body.messages as unknown[], newToolId));
  const out: JsonObject = { model: body.model, messages, max_tokens: body.max_tokens };
  if (num(body.temperature) !== undefined) out.temperature = body.temperature;
  if (num(body.top_p) !== undefined) out.top_p = body.top_p;
  const stops = stopSequences(body);
  if (stops.length > 0) out.stop = stops;
  const user = str(obj(body.metadata)?.user_id);
  if (user) out.user = user;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw fieldMustBe("tools", "an array");
    if (body.tools.length > 0) out.tools = mapTools(body.tools);
  }
  // OpenAI-compatible servers refuse tool_choice / parallel_tool_calls without tools.
  if (out.tools !== undefined) {
    const choice = mapToolChoice(body.tool_choice);
    if (choice !== undefined) out.tool_choice = choice;
    if (obj(body.tool_choice)?.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
  const effort = reasoningEffort(body);
  if (effort !== undefined) out.reasoning_effort = effort;
  const format = responseFormat(body);
  if (format !== undefined) out.response_format = format;
  if (body.stream === true) {
    out.stream = true;
    // continuous_usage_stats (vLLM, SGLang) puts the prompt count on the first chunk, so
    // `message_start` carries the exact number; other servers ignore it.
    out.stream_options = { include_usage: true, continuous_usage_stats: true };
  }
  return out;
}

/** Thinking budgets (tokens) at or above which the upstream is asked for more reasoning. */
const MEDIUM_BUDGET = 4096;
const HIGH_BUDGET = 16384;

/**
 * The upstream's `reasoning_effort` for a request's `thinking` / `output_config.effort`:
 * `thinking: {type: "enabled", budget_tokens}` by budget (< 4096 low, < 16384 medium, else
 * high), `adaptive` thinking medium, an explicit effort as given; undefined when the request
 * asks for no reasoning (the node's default stays).
 */
export function reasoningEffort(body: JsonObject): string | undefined {
  const effort = str(obj(body.output_config)?.effort);
  if (effort === "low" || effort === "medium" || effort === "high") return effort;
  if (effort === "max") return "high";
  const thinking = obj(body.thinking);
  const type = thinking && str(thinking.type);
  if (type === "adaptive") return "medium";
  if (type !== "enabled") return undefined;
  const budget = num(thinking?.budget_tokens) ?? MEDIUM_BUDGET;
  return budget < MEDIUM_BUDGET ? "low" : budget < HIGH_BUDGET ? "medium" : "high";
}

/** The schema name OpenAI's `response_format` requires; Anthropic's format has none. */
const SCHEMA_NAME = "output";

/**
 * Anthropic's structured output (`output_config.format`, or the beta's top-level
 * `output_format`: `{type: "json_schema", schema}`) → the node's `response_format`
 * (`{type: "json_schema", json_schema: {name, schema, strict: true}}`: the answer must match the
 * schema, as Anthropic promises); undefined when the request asks for no format. Throws a 400
 * naming the field for any other shape.
 */
export function responseFormat(body: JsonObject): JsonObject | undefined {
  const config = obj(body.output_config);
  const nested = config?.format !== undefined && config.format !== null;
  const field = nested ? "output_config.format" : "output_format";
  const format = nested ? config?.format : body.output_format;
  if (format === undefined || format === null) return undefined;
  if (!isJsonObject(format)) throw fieldMustBe(field, "an object");
  if (format.type !== "json_schema") throw fieldMustBe(`${field}.type`, "'json_schema'");
  if (!isJsonObject(format.schema)) throw fieldMustBe(`${field}.schema`, "a JSON Schema object");
  return {
    type: "json_schema",
    json_schema: { name: SCHEMA_NAME, schema: format.schema, strict: true },
  };
}
