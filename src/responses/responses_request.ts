/**
 * Responses API request (`POST /v1/responses`) → the OpenAI chat request sent upstream (ADR 0028).
 *
 * Carried: `instructions` (a leading system message), `input` (a string, or message,
 * `function_call`, `function_call_output`, `custom_tool_call`, `custom_tool_call_output` items),
 * function and custom tools, `tool_choice`, `parallel_tool_calls`, `max_output_tokens`
 * (→ `max_tokens`), `temperature`, `top_p`, `user`, `metadata`, `text.format`
 * (→ `response_format`), `reasoning.effort` (→ `reasoning_effort`), `prompt_cache_key`, `stream`.
 * Left out: hosted tools a chat node cannot run and their call items, `reasoning` items, `store`,
 * `include`, `truncation` and every other Responses-only field. Refused: `conversation`, and
 * `previous_response_id` unless the response store merged that conversation in (the face's
 * intake step, which then says so in the `echo` it hands `toUpstream`).
 *
 * @module
 */
import {
  FaceError,
  fieldMustBe,
  fieldRequired,
  type JsonObject,
  requireModel,
} from "../faces/face.ts";
import { argumentsText, isJsonObject, num, obj, str } from "../faces/json_narrow.ts";

/** Hosted tools a chat node cannot run: left out of the upstream call, never refused. */
export const HOSTED_TOOLS: ReadonlySet<string> = new Set([
  "web_search",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "file_search",
  "code_interpreter",
  "image_generation",
  "computer_use",
  "computer_use_preview",
  "mcp",
  "namespace",
  "local_shell",
  "shell",
  "apply_patch",
]);

/** Input items the face accepts and does not send upstream (opaque reasoning, hosted calls). */
const DROPPED_ITEMS: ReadonlySet<string> = new Set([
  "reasoning",
  "web_search_call",
  "file_search_call",
  "code_interpreter_call",
  "image_generation_call",
  "computer_call",
  "computer_call_output",
  "local_shell_call",
  "local_shell_call_output",
  "shell_call",
  "shell_call_output",
  "apply_patch_call",
  "apply_patch_call_output",
  "mcp_call",
  "mcp_list_tools",
  "mcp_approval_request",
  "mcp_approval_response",
]);

/** The parameter schema of a custom (free-form) tool as a chat function tool. */
export const CUSTOM_TOOL_PARAMETERS: JsonObject = {
  type: "object",
  properties: { input: { type: "string", description: "The tool's free-form input." } },
  required: ["input"],
  additionalProperties: false,
};

/** Checks the fields the face reads before anything is built. */
export function validateResponsesBody(body: JsonObject): void {
  requireModel(body);
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") {
    throw fieldMustBe("stream", "a JSON boolean (true or false)");
  }
  for (const field of ["previous_response_id", "conversation"]) {
    if (body[field] !== undefined && body[field] !== null) {
      throw new FaceError(
        400,
        `${field}: this gateway keeps no responses (the response store is not enabled: set ` +
          "`responses: {store: true}` with a sqlite or postgresql usage_store); " +
          "send the whole conversation in `input` instead",
      );
    }
  }
  if (body.input === undefined || body.input === null) throw fieldRequired("input");
  if (typeof body.input !== "string" && !Array.isArray(body.input)) {
    throw fieldMustBe("input", "a string or an array of input items");
  }
  for (const field of ["temperature", "top_p", "max_output_tokens"]) {
    if (body[field] !== undefined && body[field] !== null && num(body[field]) === undefined) {
      throw fieldMustBe(field, "a number");
    }
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) {
    throw fieldMustBe("tools", "an array");
  }
}

/** One content part of a message item → a chat content part (text or image or file). */
function contentPart(raw: unknown, at: string): JsonObject {
  if (typeof raw === "string") return { type: "text", text: raw };
  if (!isJsonObject(raw)) throw fieldMustBe(at, "a content part object");
  const type = str(raw.type);
  switch (type) {
    case "input_text":
    case "output_text":
    case "text":
      return { type: "text", text: str(raw.text) ?? "" };
    case "refusal":
      return { type: "text", text: str(raw.refusal) ?? "" };
    case "input_image": {
      const url = str(raw.image_url) ?? str(obj(raw.image_url)?.url);
      if (!url) {
        throw new FaceError(
          400,
          `${at}.image_url: an image URL or data URL is required (file_id images cannot be carried)`,
        );
      }
      const image: JsonObject = { url };
      if (str(raw.detail)) image.detail = raw.detail;
      return { type: "image_url", image_url: image };
    }
    case "input_file": {
      const file: JsonObject = {};
      if (str(raw.file_data)) file.file_data = raw.file_data;
      else if (str(raw.file_id)) file.file_id = raw.file_id;
      else {
        throw new FaceError(
          400,
          `${at}: input_file needs file_data or file_id (file_url cannot be carried to a chat node)`,
        );
      }
      if (str(raw.filename)) file.filename = raw.filename;
      return { type: "file", file };
    }
    default:
      throw new FaceError(
        400,
        `${at}.type: content part type '${type ?? String(raw.type)}' is not supported`,
      );
  }
}

/** A message item's content → chat content: text joined, or parts when an image/file is in it. */
function messageContent(content: unknown, role: string, at: string): unknown {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw fieldMustBe(at, "a string or an array of content parts");
  const parts = content.map((p, i) => contentPart(p, `${at}[${i}]`));
  const rich = parts.some((p) => p.type !== "text");
  if (rich && role !== "user") {
    throw new FaceError(400, `${at}: images and files are only accepted in user messages`);
  }
  if (rich) return parts;
  return parts.map((p) => str(p.text) ?? "").join("");
}

/** A tool output (`output` of a *_call_output item) as tool-message text. */
function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  if (
    Array.isArray(output) &&
    output.every((p) => isJsonObject(p) && typeof p.text === "string")
  ) {
    return output.map((p) => (p as { text: string }).text).join("");
  }
  return JSON.stringify(output ?? "");
}

const MESSAGE_ROLES: Readonly<Record<string, string>> = {
  user: "user",
  assistant: "assistant",
  system: "system",
  developer: "system",
};

/**
 * Appends a tool call to the assistant message just before it, or starts one: the calls of one
 * turn (and the text the assistant said before them) go upstream as one assistant message.
 */
function pushToolCall(out: JsonObject[], call: JsonObject): void {
  const last = out[out.length - 1];
  if (last && last.role === "assistant") {
    const calls = Array.isArray(last.tool_calls) ? last.tool_calls : [];
    last.tool_calls = [...calls, call];
    if (last.content === "") delete last.content;
    return;
  }
  out.push({ role: "assistant", tool_calls: [call] });
}

/** `input` items → chat messages. */
export function mapInput(input: unknown[]): JsonObject[] {
  const out: JsonObject[] = [];
  input.forEach((raw, i) => {
    const at = `input[${i}]`;
    if (!isJsonObject(raw)) throw fieldMustBe(at, "an input item object");
    const type = str(raw.type) ?? (raw.role !== undefined ? "message" : undefined);
    if (type === "message") {
      const role = MESSAGE_ROLES[str(raw.role) ?? ""];
      if (!role) throw fieldMustBe(`${at}.role`, "'user', 'assistant', 'system' or 'developer'");
      out.push({ role, content: messageContent(raw.content, role, `${at}.content`) });
    } else if (type === "function_call" || type === "custom_tool_call") {
      const callId = str(raw.call_id);
      if (!callId) throw fieldRequired(`${at}.call_id`);
      const name = str(raw.name);
      if (!name) throw fieldRequired(`${at}.name`);
      const args = type === "function_call"
        ? argumentsText(raw.arguments ?? "{}")
        : JSON.stringify({ input: str(raw.input) ?? "" });
      pushToolCall(out, { id: callId, type: "function", function: { name, arguments: args } });
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      const callId = str(raw.call_id);
      if (!callId) throw fieldRequired(`${at}.call_id`);
      out.push({ role: "tool", tool_call_id: callId, content: outputText(raw.output) });
    } else if (type === "item_reference") {
      throw new FaceError(
        400,
        `${at}: item_reference is not supported; send the item itself in input`,
      );
    } else if (type === undefined || !DROPPED_ITEMS.has(type)) {
      throw new FaceError(
        400,
        `${at}.type: input item type '${type ?? String(raw.type)}' is not supported`,
      );
    }
  });
  return out;
}

/** What the tools of a request became upstream. */
export interface MappedTools {
  /** Chat function tools. */
  tools: JsonObject[];
  /** Names of the custom (free-form) tools: their calls go back as `custom_tool_call` items. */
  custom: string[];
}

/** `tools` → chat function tools (flat function tools and custom tools; hosted tools left out). */
export function mapTools(tools: unknown[]): MappedTools {
  const out: MappedTools = { tools: [], custom: [] };
  tools.forEach((raw, i) => {
    const at = `tools[${i}]`;
    if (!isJsonObject(raw)) throw fieldMustBe(at, "an object");
    const type = str(raw.type);
    if (type === "function") {
      const name = str(raw.name);
      if (!name) throw fieldRequired(`${at}.name`);
      const fn: JsonObject = {
        name,
        parameters: obj(raw.parameters) ?? { type: "object", properties: {} },
      };
      if (str(raw.description) !== undefined) fn.description = raw.description;
      if (typeof raw.strict === "boolean") fn.strict = raw.strict;
      out.tools.push({ type: "function", function: fn });
    } else if (type === "custom") {
      const name = str(raw.name);
      if (!name) throw fieldRequired(`${at}.name`);
      const fn: JsonObject = { name, parameters: CUSTOM_TOOL_PARAMETERS };
      if (str(raw.description) !== undefined) fn.description = raw.description;
      out.tools.push({ type: "function", function: fn });
      out.custom.push(name);
    } else if (type === undefined || !HOSTED_TOOLS.has(type)) {
      throw new FaceError(
        400,
        `${at}.type: tool type '${type ?? String(raw.type)}' is not supported`,
      );
    }
  });
  return out;
}

/** `tool_choice` in any of its forms → the chat call's; undefined = omit. */
export function mapToolChoice(choice: unknown): unknown {
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  const c = obj(choice);
  if (!c) return undefined;
  const type = str(c.type);
  if (type === "function" || type === "custom") {
    const name = str(c.name) ?? str(obj(c.function)?.name);
    return name ? { type: "function", function: { name } } : "auto";
  }
  if (type === "allowed_tools") {
    const tools = (Array.isArray(c.tools) ? c.tools : [])
      .map((t) => str(obj(t)?.name))
      .filter((n): n is string => n !== undefined)
      .map((name) => ({ type: "function", function: { name } }));
    const mode = c.mode === "required" ? "required" : "auto";
    return { type: "allowed_tools", allowed_tools: { mode, tools } };
  }
  // A hosted tool (web_search, mcp, ...) was left out upstream: let the model choose.
  return "auto";
}

/** `text.format` → `response_format`; undefined = omit (plain text). */
export function mapTextFormat(text: unknown): JsonObject | undefined {
  const format = obj(obj(text)?.format);
  if (!format) return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    const schema: JsonObject = { name: str(format.name) ?? "response", schema: format.schema };
    if (str(format.description) !== undefined) schema.description = format.description;
    if (typeof format.strict === "boolean") schema.strict = format.strict;
    return { type: "json_schema", json_schema: schema };
  }
  return undefined;
}

/** How the response store took a request body (the face's intake step, ADR 0028). */
export interface KeptTurn {
  /** Whether its answer is kept. */
  store: boolean;
  /** The response it continues (merged into `input`, gone from the body). */
  previous?: string;
}

/** The fields a response echoes of a kept turn (`FaceIntake.echo`). */
export function keptEcho(kept: KeptTurn): JsonObject {
  const echo: JsonObject = { store: kept.store };
  if (kept.previous !== undefined) echo.previous_response_id = kept.previous;
  return echo;
}

/**
 * The request fields a response echoes back, plus the custom tool names (see `MappedTools`);
 * `kept`: the fields the intake step echoes (`keptEcho`), first.
 */
export function requestContext(body: JsonObject, custom: string[], kept?: JsonObject): JsonObject {
  const echo: JsonObject = kept === undefined ? {} : { ...kept };
  for (const field of ["instructions", "max_output_tokens", "metadata", "user"]) {
    if (body[field] !== undefined) echo[field] = body[field];
  }
  for (const field of ["temperature", "top_p", "tool_choice", "tools", "parallel_tool_calls"]) {
    if (body[field] !== undefined) echo[field] = body[field];
  }
  if (body.text !== undefined) echo.text = body.text;
  if (body.reasoning !== undefined) echo.reasoning = body.reasoning;
  return { echo, custom_tools: custom };
}

/** The OpenAI chat body for a Responses body (already validated), and the custom tool names. */
export function toChatBody(body: JsonObject): { chat: JsonObject; custom: string[] } {
  const messages: JsonObject[] = [];
  const instructions = str(body.instructions);
  if (instructions) messages.push({ role: "system", content: instructions });
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else messages.push(...mapInput(body.input as unknown[]));
  const chat: JsonObject = { model: body.model, messages };
  const mapped = Array.isArray(body.tools) ? mapTools(body.tools) : { tools: [], custom: [] };
  if (mapped.tools.length > 0) {
    chat.tools = mapped.tools;
    // OpenAI-compatible servers refuse tool_choice / parallel_tool_calls without tools.
    const choice = mapToolChoice(body.tool_choice);
    if (choice !== undefined) chat.tool_choice = choice;
    if (typeof body.parallel_tool_calls === "boolean") {
      chat.parallel_tool_calls = body.parallel_tool_calls;
    }
  }
  if (num(body.max_output_tokens) !== undefined) chat.max_tokens = body.max_output_tokens;
  if (num(body.temperature) !== undefined) chat.temperature = body.temperature;
  if (num(body.top_p) !== undefined) chat.top_p = body.top_p;
  if (str(body.user)) chat.user = body.user;
  if (isJsonObject(body.metadata)) chat.metadata = body.metadata;
  if (str(body.prompt_cache_key)) chat.prompt_cache_key = body.prompt_cache_key;
  const format = mapTextFormat(body.text);
  if (format) chat.response_format = format;
  const effort = str(obj(body.reasoning)?.effort);
  if (effort) chat.reasoning_effort = effort;
  if (body.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return { chat, custom: mapped.custom };
}
