/**
 * Ollama requests (`/api/chat`, `/api/generate`, `/api/embed`, `/api/embeddings`) → the OpenAI
 * request sent upstream.
 *
 * Carried options: `num_predict` (→ `max_tokens`, when not negative), `temperature`, `top_p`,
 * `stop`, `seed`, `presence_penalty`, `frequency_penalty`; `format` (`"json"` or a schema) →
 * `response_format`; `think` (`true` → `reasoning_effort: "medium"`, a level as given); `tools`
 * as given and `tool_choice` in the chat API's form (see `chatToolChoice`). Dropped: the other
 * options (`top_k`, `num_ctx`, …), `think: false` (the node's default stays), `keep_alive`,
 * earlier turns' `thinking`, and generate's `suffix`, `template`, `raw`, `context`.
 *
 * @module
 */
import { fieldMustBe, fieldRequired, type JsonObject, requireModel, streamFlag } from "./face.ts";
import { ollamaImageUrl } from "./images.ts";
import { argumentsText, isJsonObject, num, obj, str } from "./json_narrow.ts";

/** Adds the carried `options` and `format` to an OpenAI chat body. */
export function addOptions(body: JsonObject, out: JsonObject): void {
  const o = obj(body.options) ?? {};
  const predict = num(o.num_predict);
  if (predict !== undefined && predict >= 0) out.max_tokens = predict;
  for (const k of ["temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"]) {
    const v = num(o[k]);
    if (v !== undefined) out[k] = v;
  }
  const stop = typeof o.stop === "string"
    ? [o.stop]
    : Array.isArray(o.stop)
    ? o.stop.filter((s) => typeof s === "string")
    : [];
  if (stop.length > 0) out.stop = stop;
  const think = body.think;
  if (think === true) out.reasoning_effort = "medium";
  else if (think === "low" || think === "medium" || think === "high") out.reasoning_effort = think;
  if (body.format === "json") out.response_format = { type: "json_object" };
  else if (isJsonObject(body.format)) {
    out.response_format = {
      type: "json_schema",
      json_schema: { name: "ollama_format", schema: body.format },
    };
  }
}

/** A user/system message's content: the text, or text + `image_url` parts when it has images. */
function withImages(text: string, images: unknown, path: string): unknown {
  if (images === undefined || images === null) return text;
  if (!Array.isArray(images)) throw fieldMustBe(path, "an array of base64 strings");
  if (images.length === 0) return text;
  const parts: JsonObject[] = text === "" ? [] : [{ type: "text", text }];
  images.forEach((img, i) => {
    if (typeof img !== "string") throw fieldMustBe(`${path}[${i}]`, "a base64 string");
    parts.push({ type: "image_url", image_url: { url: ollamaImageUrl(img) } });
  });
  return parts;
}

interface OpenCall {
  id: string;
  name: string;
}

/**
 * Ollama chat messages → OpenAI messages: assistant tool-call `arguments` objects become JSON
 * text and missing ids `call_skeid_<n>`; a `tool` message without `tool_call_id` answers the
 * previous assistant turn's first unanswered call of its `tool_name` (else the first unanswered
 * one); `images` become content parts.
 */
export function mapChatMessages(messages: unknown[]): JsonObject[] {
  const out: JsonObject[] = [];
  let callNo = 0;
  let open: OpenCall[] = [];
  messages.forEach((raw, i) => {
    const path = `messages[${i}]`;
    if (!isJsonObject(raw)) throw fieldMustBe(path, "an object");
    const role = str(raw.role);
    if (!role) throw fieldRequired(`${path}.role`);
    const content = str(raw.content) ?? "";
    if (role === "assistant") {
      const calls = (Array.isArray(raw.tool_calls) ? raw.tool_calls : []).map((tcRaw) => {
        const tc = obj(tcRaw) ?? {};
        const fn = obj(tc.function) ?? {};
        return {
          id: str(tc.id) || `call_skeid_${++callNo}`,
          type: "function",
          function: { name: str(fn.name) ?? "", arguments: argumentsText(fn.arguments ?? {}) },
        };
      });
      open = calls.map((c) => ({ id: c.id, name: c.function.name }));
      const m: JsonObject = { role, content };
      if (calls.length > 0) m.tool_calls = calls;
      out.push(m);
    } else if (role === "tool") {
      let id = str(raw.tool_call_id);
      if (!id) {
        const name = str(raw.tool_name) ?? str(raw.name);
        id = (open.find((c) => c.name === name) ?? open[0])?.id ?? "";
      }
      open = open.filter((c) => c.id !== id);
      out.push({ role, tool_call_id: id, content });
    } else {
      out.push({ role, content: withImages(content, raw.images, `${path}.images`) });
    }
  });
  return out;
}

/** Streams ask the upstream for usage; `stream` absent means a stream (Ollama's default). */
function addStream(body: JsonObject, out: JsonObject): boolean {
  const stream = streamFlag(body, true);
  if (stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return stream;
}

/** `/api/chat` body → OpenAI chat body, and whether it streams. */
export function chatToOpenAI(body: JsonObject): { body: JsonObject; stream: boolean } {
  const model = requireModel(body);
  const messages = body.messages ?? [];
  if (!Array.isArray(messages)) throw fieldMustBe("messages", "an array");
  const out: JsonObject = { model, messages: mapChatMessages(messages) };
  addOptions(body, out);
  if (Array.isArray(body.tools) && body.tools.length > 0) {
    out.tools = body.tools;
    // OpenAI-compatible servers refuse tool_choice without tools.
    const choice = chatToolChoice(body.tool_choice);
    if (choice !== undefined) out.tool_choice = choice;
  }
  return { body: out, stream: addStream(body, out) };
}

/**
 * A client's `tool_choice` in the chat API's valid form: `auto`, `none`, `required` as given;
 * a function by name, flat (`{"type":"function","name":…}`, what ollama-ai-provider-v2 sends)
 * or nested, as `{"type":"function","function":{"name":…}}`. Anything else (a built-in tool
 * such as `web_search_preview`, which an OpenAI-compatible node cannot run) is left out:
 * undefined, the node's default `auto`.
 */
export function chatToolChoice(choice: unknown): unknown {
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  const c = obj(choice);
  if (c === undefined || c.type !== "function") return undefined;
  const name = str(obj(c.function)?.name) ?? str(c.name);
  return name ? { type: "function", function: { name } } : undefined;
}

/** `/api/generate` body → OpenAI chat body (system message, then the prompt as the user's). */
export function generateToOpenAI(body: JsonObject): { body: JsonObject; stream: boolean } {
  const model = requireModel(body);
  if (body.prompt !== undefined && body.prompt !== null && typeof body.prompt !== "string") {
    throw fieldMustBe("prompt", "a string");
  }
  const messages: JsonObject[] = [];
  const system = str(body.system);
  if (system) messages.push({ role: "system", content: system });
  messages.push({
    role: "user",
    content: withImages(str(body.prompt) ?? "", body.images, "images"),
  });
  const out: JsonObject = { model, messages };
  addOptions(body, out);
  return { body: out, stream: addStream(body, out) };
}

/** `/api/embed` (`input`) or `/api/embeddings` (`prompt`) → OpenAI embeddings body. */
export function embedToOpenAI(body: JsonObject, legacy: boolean): JsonObject {
  const model = requireModel(body);
  const field = legacy ? "prompt" : "input";
  const input = body[field];
  if (input === undefined || input === null) throw fieldRequired(field);
  const ok = typeof input === "string" ||
    (!legacy && Array.isArray(input) && input.every((s) => typeof s === "string"));
  if (!ok) throw fieldMustBe(field, legacy ? "a string" : "a string or an array of strings");
  const out: JsonObject = { model, input };
  const dims = num(body.dimensions);
  if (dims !== undefined) out.dimensions = dims;
  return out;
}
