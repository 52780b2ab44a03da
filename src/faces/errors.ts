/**
 * Error bodies of the three faces, and the reading of an upstream error answer.
 *
 * OpenAI `{"error":{"message","type"}}`; Anthropic `{"type":"error","error":{"type","message"}}`
 * with the type taken from the status; Ollama `{"error":"..."}`.
 *
 * @module
 */
import { isJsonObject, str } from "./json_narrow.ts";
import { reasonPhrase } from "../reason_phrase.ts";

/** Anthropic error types by HTTP status (the Messages API's own table). */
const ANTHROPIC_TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  409: "conflict_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

const ANTHROPIC_TYPES: ReadonlySet<string> = new Set(Object.values(ANTHROPIC_TYPE_BY_STATUS));

/**
 * The Anthropic error type for a status. A given `type` wins only when it is one of Anthropic's
 * own types; otherwise the status decides (other >= 500 → `api_error`, else
 * `invalid_request_error`).
 */
export function anthropicErrorType(status: number, type?: string): string {
  if (type !== undefined && ANTHROPIC_TYPES.has(type)) return type;
  return ANTHROPIC_TYPE_BY_STATUS[status] ??
    (status >= 500 ? "api_error" : "invalid_request_error");
}

/** OpenAI-face error body. */
export function openaiErrorBody(
  type: string,
  message: string,
  code?: string,
): { error: { message: string; type: string; code?: string } } {
  return code === undefined ? { error: { message, type } } : { error: { message, type, code } };
}

/** Anthropic-face error body, type per `anthropicErrorType`. */
export function anthropicErrorBody(
  status: number,
  type: string | undefined,
  message: string,
): { type: "error"; error: { type: string; message: string } } {
  return { type: "error", error: { type: anthropicErrorType(status, type), message } };
}

/** Ollama-face error body. */
export function ollamaErrorBody(message: string): { error: string } {
  return { error: message };
}

// Key-shaped words (sk-…, gsk_…, Bearer …) are cut from upstream messages: a provider that
// echoes the upstream key it was sent must not hand it to the customer.
const KEY_LIKE = String.raw`\b(?:Bearer\s+\S+|(?:sk|gsk|pk|rk|xai)[-_][A-Za-z0-9_*.-]{6,})`;

/** What an upstream error answer says: its message (secrets cut) and its type, when it names them. */
export interface UpstreamErrorInfo {
  /**
   * The upstream's error message with key-shaped words replaced by `[redacted]`, or `Upstream
   * error: <reason phrase>`.
   */
  message: string;
  /** The upstream's error type, when its body named one. */
  type?: string;
}

/**
 * Reads an upstream error body: OpenAI `{error:{message,type}}`, `{error:"..."}`, vLLM
 * `{message,type}`, FastAPI `{detail}`. Without a message: `Upstream error: <reason phrase>`.
 */
export function readUpstreamError(status: number, body: unknown): UpstreamErrorInfo {
  let message: string | undefined;
  let type: string | undefined;
  if (isJsonObject(body)) {
    const e = body.error;
    if (isJsonObject(e)) {
      message = str(e.message);
      type = str(e.type);
    } else if (typeof e === "string") message = e;
    message ??= str(body.message) ?? str(body.detail);
    type ??= str(body.type);
  } else if (typeof body === "string" && body.trim() !== "") message = body.trim();
  const text = message !== undefined && message.trim() !== ""
    ? message.replace(new RegExp(KEY_LIKE, "gi"), "[redacted]")
    : `Upstream error: ${reasonPhrase(status) ?? `HTTP ${status}`}`;
  return type === undefined ? { message: text } : { message: text, type };
}
