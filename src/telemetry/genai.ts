/**
 * The OpenTelemetry GenAI semantic conventions as Skeid fills them: the operation of an upstream
 * path, the provider of a node's engine, what the request and the whole answer say, and the three
 * GenAI metrics with the spec's bucket boundaries.
 *
 * @module
 */
import type { Attributes, Histogram, Meter } from "@opentelemetry/api";
import type { JsonObject } from "../core/json.ts";

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

/** The three GenAI histograms of a gateway, made once from its meter. */
export interface GenAiMetrics {
  readonly duration: Histogram;
  readonly tokens: Histogram;
  readonly ttft: Histogram;
}

/** The GenAI histograms on `meter`, each with the spec's buckets. */
export function genAiMetrics(meter: Meter): GenAiMetrics {
  return {
    duration: meter.createHistogram("gen_ai.client.operation.duration", {
      unit: "s",
      description: "Duration of GenAI operations (one upstream attempt)",
      advice: { explicitBucketBoundaries: [...DURATION_BUCKETS_S] },
    }),
    tokens: meter.createHistogram("gen_ai.client.token.usage", {
      unit: "{token}",
      description: "Input and output tokens of GenAI operations",
      advice: { explicitBucketBoundaries: [...TOKEN_BUCKETS] },
    }),
    ttft: meter.createHistogram("gen_ai.server.time_to_first_token", {
      unit: "s",
      description: "Time to the first content chunk of a streamed answer",
      advice: { explicitBucketBoundaries: [...TTFT_BUCKETS_S] },
    }),
  };
}

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
export function requestAttributes(body: JsonObject, into: Attributes): void {
  const max = body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens;
  if (typeof max === "number") into["gen_ai.request.max_tokens"] = max;
  if (typeof body.temperature === "number") into["gen_ai.request.temperature"] = body.temperature;
  if (typeof body.top_p === "number") into["gen_ai.request.top_p"] = body.top_p;
}

/** What a whole answer says of itself: its id, the model served, the finish reasons. */
export function responseAttributes(answer: unknown, into: Attributes): void {
  if (answer === null || typeof answer !== "object" || Array.isArray(answer)) return;
  const a = answer as JsonObject;
  if (typeof a.id === "string") into["gen_ai.response.id"] = a.id;
  if (typeof a.model === "string") into["gen_ai.response.model"] = a.model;
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
  if (reasons.length > 0) into["gen_ai.response.finish_reasons"] = reasons;
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
