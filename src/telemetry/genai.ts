/**
 * The OpenTelemetry GenAI semantic conventions as Skeid fills them: the operation of an upstream
 * path, the provider of a node's engine, what the request and the whole answer say, and the three
 * GenAI metrics with the spec's bucket boundaries.
 *
 * @module
 */
import type { JsonObject } from "../core/json.ts";
import { type AttrKey, attrKey, AttrType, type AttrValue } from "./span_record.ts";

/** Where attributes go: a span record, or (tests) a plain object by key name. */
export interface AttrSink {
  set(key: AttrKey, value: AttrValue): void;
}

/** The GenAI conventions' attribute keys Skeid writes. */
export const GENAI = {
  operation: attrKey("gen_ai.operation.name", AttrType.String),
  provider: attrKey("gen_ai.provider.name", AttrType.String),
  /** The name tools read before `gen_ai.provider.name` replaced it. */
  system: attrKey("gen_ai.system", AttrType.String),
  requestModel: attrKey("gen_ai.request.model", AttrType.String),
  responseModel: attrKey("gen_ai.response.model", AttrType.String),
  responseId: attrKey("gen_ai.response.id", AttrType.String),
  finishReasons: attrKey("gen_ai.response.finish_reasons", AttrType.Strings),
  maxTokens: attrKey("gen_ai.request.max_tokens", AttrType.Int),
  temperature: attrKey("gen_ai.request.temperature", AttrType.Double),
  topP: attrKey("gen_ai.request.top_p", AttrType.Double),
  inputTokens: attrKey("gen_ai.usage.input_tokens", AttrType.Int),
  outputTokens: attrKey("gen_ai.usage.output_tokens", AttrType.Int),
  cacheRead: attrKey("gen_ai.usage.cache_read.input_tokens", AttrType.Int),
  cacheCreation: attrKey("gen_ai.usage.cache_creation.input_tokens", AttrType.Int),
  /** The names of the conventions before 1.37, which tools still read. */
  cacheReadOld: attrKey("gen_ai.usage.cache_read_input_tokens", AttrType.Int),
  cacheCreationOld: attrKey("gen_ai.usage.cache_creation_input_tokens", AttrType.Int),
  inputMessages: attrKey("gen_ai.input.messages", AttrType.String),
  outputMessages: attrKey("gen_ai.output.messages", AttrType.String),
  serverAddress: attrKey("server.address", AttrType.String),
  serverPort: attrKey("server.port", AttrType.Int),
  errorType: attrKey("error.type", AttrType.String),
} as const;

/** `gen_ai.client.operation.duration` buckets, seconds (the spec's advice). */
export const DURATION_BUCKETS_S: readonly number[] = [
  0.01,
  0.02,
  0.04,
  0.08,
  0.16,
  0.32,
  0.64,
  1.28,
  2.56,
  5.12,
  10.24,
  20.48,
  40.96,
  81.92,
];

/** `gen_ai.client.token.usage` buckets, tokens (the spec's advice). */
export const TOKEN_BUCKETS: readonly number[] = [
  1,
  4,
  16,
  64,
  256,
  1024,
  4096,
  16384,
  65536,
  262144,
  1048576,
  4194304,
  16777216,
  67108864,
];

/** `gen_ai.server.time_to_first_token` buckets, seconds (the spec's advice). */
export const TTFT_BUCKETS_S: readonly number[] = [
  0.001,
  0.005,
  0.01,
  0.02,
  0.04,
  0.06,
  0.08,
  0.1,
  0.25,
  0.5,
  0.75,
  1.0,
  2.5,
  5.0,
  7.5,
  10.0,
];

/** `gen_ai.operation.name` of an upstream path (below the node's `/v1`). */
export function operationName(path: string): string {
  if (path.endsWith("/chat/completions")) return "chat";
  if (path.endsWith("/embeddings")) return "embeddings";
  if (path.endsWith("/responses")) return "responses";
  if (path.endsWith("/completions")) return "text_completion";
  if (path.endsWith("/messages")) return "chat";
  return "chat";
}

/** Engine ids whose `gen_ai.provider.name` is a well-known value of the spec. */
const PROVIDERS: Readonly<Record<string, string>> = {
  openai: "openai",
  anthropic: "anthropic",
  groq: "groq",
  mistral: "mistral_ai",
  mistralai: "mistral_ai",
  deepseek: "deepseek",
  xai: "x_ai",
  perplexity: "perplexity",
  gemini: "gcp.gemini",
  cohere: "cohere",
  azureopenai: "azure.ai.openai",
};

/** `gen_ai.provider.name` of a node's engine id: the spec's value when it has one, else the id. */
export function providerName(engine: string): string {
  return PROVIDERS[engine] ?? (engine === "" ? "openai" : engine);
}

/** `server.address` and `server.port` of a node's base URL (the port defaulted by scheme). */
export function serverOf(url: string): { address: string; port: number } {
  try {
    const u = new URL(url);
    const port = u.port !== "" ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
    return { address: u.hostname, port };
  } catch {
    return { address: "", port: 0 };
  }
}

/** The request parameters the spec names, when the body sent them (numbers only). */
export function requestAttributes(body: JsonObject, into: AttrSink): void {
  const max = body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens;
  if (typeof max === "number") into.set(GENAI.maxTokens, max);
  if (typeof body.temperature === "number") into.set(GENAI.temperature, body.temperature);
  if (typeof body.top_p === "number") into.set(GENAI.topP, body.top_p);
}

/** What an answer says of itself: its id, the model served, the finish reasons. */
export interface AnswerFacts {
  id: string | undefined;
  model: string | undefined;
  finishReasons: string[];
}

/** The facts of a whole answer (a chat completion, a Responses response, Ollama, Anthropic). */
export function answerFacts(answer: unknown): AnswerFacts | undefined {
  if (answer === null || typeof answer !== "object" || Array.isArray(answer)) return undefined;
  const a = answer as JsonObject;
  const reasons: string[] = [];
  if (Array.isArray(a.choices)) {
    for (const c of a.choices) {
      const r = c !== null && typeof c === "object" && !Array.isArray(c)
        ? (c as JsonObject).finish_reason
        : undefined;
      if (typeof r === "string") reasons.push(r);
    }
  } else if (typeof a.stop_reason === "string") reasons.push(a.stop_reason);
  else if (typeof a.done_reason === "string") reasons.push(a.done_reason);
  else if (typeof a.status === "string") reasons.push(a.status);
  return {
    id: typeof a.id === "string" ? a.id : undefined,
    model: typeof a.model === "string" ? a.model : undefined,
    finishReasons: reasons,
  };
}

/** Choices whose finish reason a stream's span keeps (far above any `n` asked). */
const MAX_CHOICES = 128;

/**
 * What a streamed answer says of itself, read off its chunks as the relay parses them (only with
 * OpenTelemetry on): the first id and model, and the finish reasons (chat chunks' `choices`, or
 * the status of a Responses stream's terminal `response`).
 */
export class StreamFacts implements AnswerFacts {
  id: string | undefined = undefined;
  model: string | undefined = undefined;
  finishReasons: string[] = [];
  /** The choice index each of `finishReasons` is of. */
  readonly #choices: number[] = [];

  /** One parsed `data:` object of the upstream's stream. */
  read(chunk: JsonObject): void {
    const r = chunk.response;
    if (r !== null && typeof r === "object" && !Array.isArray(r)) {
      // A Responses event (`response.created`, `response.completed`, …) carrying its response.
      const o = r as JsonObject;
      if (this.id === undefined && typeof o.id === "string") this.id = o.id;
      if (this.model === undefined && typeof o.model === "string") this.model = o.model;
      const status = o.status;
      if (typeof status === "string" && status !== "in_progress" && status !== "queued") {
        this.finishReasons = [status];
      }
      return;
    }
    if (this.id === undefined && typeof chunk.id === "string") this.id = chunk.id;
    if (this.model === undefined && typeof chunk.model === "string") this.model = chunk.model;
    const choices = chunk.choices;
    if (!Array.isArray(choices)) return;
    for (const c of choices) {
      if (c === null || typeof c !== "object" || Array.isArray(c)) continue;
      const o = c as JsonObject;
      const reason = o.finish_reason;
      // One reason a choice: a provider that sends `""` (or repeats it) in every delta must not
      // grow the list with the stream.
      if (typeof reason !== "string" || reason === "") continue;
      const index = typeof o.index === "number" ? o.index : 0;
      const at = this.#choices.indexOf(index);
      if (at >= 0) this.finishReasons[at] = reason;
      else if (this.#choices.length < MAX_CHOICES) {
        this.#choices.push(index);
        this.finishReasons.push(reason);
      }
    }
  }
}

/** An answer's facts as attributes; answers the response model (a metric label) if it said one. */
export function factsAttributes(
  facts: AnswerFacts | undefined,
  into: AttrSink,
): string | undefined {
  if (facts === undefined) return undefined;
  if (facts.id !== undefined) into.set(GENAI.responseId, facts.id);
  if (facts.model !== undefined) into.set(GENAI.responseModel, facts.model);
  if (facts.finishReasons.length > 0) into.set(GENAI.finishReasons, facts.finishReasons);
  return facts.model;
}

/** What a whole answer says of itself: its id, the model served, the finish reasons. */
export function responseAttributes(answer: unknown, into: AttrSink): string | undefined {
  return factsAttributes(answerFacts(answer), into);
}

/** The messages a request sent, as the opt-in content attribute carries them (JSON text). */
export function inputMessages(body: JsonObject): string | undefined {
  const messages = body.messages ?? body.input ?? body.prompt;
  return messages === undefined ? undefined : JSON.stringify(messages);
}

/** The answer's messages (choices' messages, or a Responses `output`), JSON text. */
export function outputMessages(answer: unknown): string | undefined {
  if (answer === null || typeof answer !== "object" || Array.isArray(answer)) return undefined;
  const a = answer as JsonObject;
  if (Array.isArray(a.choices)) {
    return JSON.stringify(
      a.choices.map((c) =>
        c !== null && typeof c === "object" && !Array.isArray(c) ? (c as JsonObject).message : c
      ),
    );
  }
  if (a.output !== undefined) return JSON.stringify(a.output);
  return undefined;
}
