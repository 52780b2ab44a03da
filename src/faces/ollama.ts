/**
 * The Ollama face: `/api/chat`, `/api/generate`, `/api/embed` (and the older `/api/embeddings`)
 * translated to one OpenAI call and back (streaming in `ollama_stream.ts`; a missing `stream`
 * means a stream). Listing routes are in `ollama_list.ts`.
 *
 * @module
 */
import type { AnswerTimings, Face, JsonObject, StreamTranslator, UpstreamRequest } from "./face.ts";
import { FaceError } from "./face.ts";
import { TranslatingFace } from "./translating_face.ts";
import { ollamaErrorBody, readUpstreamError } from "./errors.ts";
import { extractHermesToolCalls } from "./hermes.ts";
import { firstChoice, isJsonObject, messageText, str } from "./json_narrow.ts";
import { closingFields, isoAt, ollamaToolCalls } from "./ollama_answer.ts";
import { chatToOpenAI, embedToOpenAI, generateToOpenAI } from "./ollama_request.ts";
import { OllamaStreamTranslator } from "./ollama_stream.ts";
import { reasoningText } from "./reasoning.ts";

/** The routes this face proxies. */
export const OLLAMA_ENDPOINTS = [
  "/api/chat",
  "/api/generate",
  "/api/embed",
  "/api/embeddings",
] as const;

/** Embedding vectors of an OpenAI embeddings answer, in input order. */
function vectors(answer: JsonObject): unknown[] {
  const data = Array.isArray(answer.data) ? answer.data.filter(isJsonObject) : [];
  return [...data]
    .sort((a, b) => (Number(a.index) || 0) - (Number(b.index) || 0))
    .map((d) => d.embedding);
}

/** The Ollama face. */
export class OllamaFace extends TranslatingFace implements Face {
  /** The face's name. */
  readonly name = "ollama" as const;

  /** An Ollama body → the OpenAI request. */
  toUpstream(endpoint: string, body: JsonObject): UpstreamRequest {
    switch (endpoint) {
      case "/api/chat":
      case "/api/generate": {
        const r = endpoint === "/api/chat" ? chatToOpenAI(body) : generateToOpenAI(body);
        return {
          path: "/chat/completions",
          body: r.body,
          stream: r.stream,
          requestedModel: r.body.model as string,
        };
      }
      case "/api/embed":
      case "/api/embeddings": {
        const out = embedToOpenAI(body, endpoint === "/api/embeddings");
        return {
          path: "/embeddings",
          body: out,
          stream: false,
          requestedModel: out.model as string,
        };
      }
      default:
        throw new FaceError(
          404,
          `${endpoint} is not proxied by the ollama face`,
          "not_found_error",
        );
    }
  }

  /** An OpenAI answer → the Ollama answer of `endpoint`. */
  fromUpstream(
    endpoint: string,
    answer: JsonObject,
    requestedModel: string,
    _context?: JsonObject,
    timings?: AnswerTimings,
  ): JsonObject {
    // The model the client asked for (an alias stays the alias), as the Anthropic face does.
    const model = requestedModel || str(answer.model) || "";
    if (endpoint === "/api/embeddings") return { embedding: vectors(answer)[0] ?? [] };
    if (endpoint === "/api/embed") {
      const closing = closingFields(answer.usage, timings);
      return {
        model,
        embeddings: vectors(answer),
        total_duration: closing.total_duration,
        load_duration: 0,
        prompt_eval_count: closing.prompt_eval_count,
      };
    }
    const { choice, message } = firstChoice(answer);
    let text = messageText(message.content);
    let calls = ollamaToolCalls(Array.isArray(message.tool_calls) ? message.tool_calls : []);
    if (calls.length === 0) {
      const found = extractHermesToolCalls(text);
      text = found.text;
      calls = found.calls.map((c) => ({ function: { name: c.name, arguments: c.arguments } }));
    }
    const thinking = reasoningText(message);
    const out: JsonObject = { model, created_at: isoAt(this.now()) };
    if (endpoint === "/api/generate") {
      out.response = text;
      if (thinking !== "") out.thinking = thinking;
    } else {
      const m: JsonObject = { role: str(message.role) || "assistant", content: text };
      if (thinking !== "") m.thinking = thinking;
      if (calls.length > 0) m.tool_calls = calls;
      out.message = m;
    }
    out.done = true;
    out.done_reason = str(choice.finish_reason) || "stop";
    return Object.assign(out, closingFields(answer.usage, timings));
  }

  /** A translator to Ollama NDJSON. */
  streamTranslator(
    endpoint: string,
    requestedModel: string,
    _context?: JsonObject,
  ): StreamTranslator {
    return new OllamaStreamTranslator(requestedModel, endpoint === "/api/generate", this.now);
  }

  /** `{"error":"..."}`. */
  errorBody(_status: number, _type: string, message: string): unknown {
    return ollamaErrorBody(message);
  }

  /** The upstream's message as `{"error":"..."}`. */
  upstreamErrorBody(status: number, body: unknown): unknown {
    return ollamaErrorBody(readUpstreamError(status, body).message);
  }
}
