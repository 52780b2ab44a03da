import { deepStrictEqual, match, strictEqual, throws } from "node:assert/strict";
import {
  anthropicErrorBody,
  anthropicErrorType,
  readUpstreamError,
} from "../../src/faces/errors.ts";
import { AnthropicFace } from "../../src/faces/anthropic.ts";
import { FaceError } from "../../src/faces/face.ts";
import { extractHermesToolCalls } from "../../src/faces/hermes.ts";
import { anthropicImageUrl, ollamaImageUrl, sniffImageMediaType } from "../../src/faces/images.ts";
import { FACE_MANIFESTS, faceEndpointUrl } from "../../src/faces/face_manifest.ts";
import { faceFor, faceNameFor } from "../../src/faces/index.ts";
import { utf8Length } from "../../src/faces/utf8.ts";
import { anthropicUsage, readChatTokens } from "../../src/faces/chat_tokens.ts";

Deno.test("anthropic error types follow the status table; an upstream type wins only if Anthropic's", () => {
  const table: [number, string][] = [
    [400, "invalid_request_error"],
    [401, "authentication_error"],
    [402, "billing_error"],
    [403, "permission_error"],
    [404, "not_found_error"],
    [409, "conflict_error"],
    [413, "request_too_large"],
    [429, "rate_limit_error"],
    [500, "api_error"],
    [502, "api_error"],
    [503, "api_error"],
    [504, "timeout_error"],
    [529, "overloaded_error"],
    [418, "invalid_request_error"],
  ];
  for (const [status, type] of table) {
    strictEqual(anthropicErrorType(status), type, `status ${status}`);
  }
  strictEqual(anthropicErrorType(503, "model_not_found"), "api_error");
  strictEqual(anthropicErrorType(500, "overloaded_error"), "overloaded_error");
  deepStrictEqual(
    anthropicErrorBody(403, "permission_error", "Model 'x' is not available for this key"),
    {
      type: "error",
      error: { type: "permission_error", message: "Model 'x' is not available for this key" },
    },
  );
  const face = new AnthropicFace();
  deepStrictEqual(face.errorBody(429, "rate_limit_error", "Timed out"), {
    type: "error",
    error: { type: "rate_limit_error", message: "Timed out" },
  });
  deepStrictEqual(
    face.upstreamErrorBody(400, { error: { message: "too long", type: "BadRequestError" } }),
    {
      type: "error",
      error: { type: "invalid_request_error", message: "too long" },
    },
  );
});

Deno.test("upstream error reading: shapes, reason phrase, and key-like words cut", () => {
  deepStrictEqual(readUpstreamError(400, { error: { message: "m", type: "t" } }), {
    message: "m",
    type: "t",
  });
  deepStrictEqual(readUpstreamError(400, { error: "plain" }), { message: "plain" });
  deepStrictEqual(
    readUpstreamError(400, { object: "error", message: "vllm says", type: "BadRequestError" }),
    {
      message: "vllm says",
      type: "BadRequestError",
    },
  );
  deepStrictEqual(readUpstreamError(422, { detail: "fastapi" }), { message: "fastapi" });
  deepStrictEqual(readUpstreamError(503, undefined), {
    message: "Upstream error: Service Unavailable",
  });
  deepStrictEqual(readUpstreamError(599, {}), { message: "Upstream error: HTTP 599" });
  const leaked = readUpstreamError(401, {
    error: {
      message: "Incorrect API key provided: sk-proj-abcdef123456. Or Bearer gsk_zzzzzzzzzz",
    },
  });
  strictEqual(leaked.message.includes("abcdef123456"), false);
  strictEqual(leaked.message.includes("gsk_zzzz"), false);
  match(leaked.message, /Incorrect API key provided: \[redacted\]/);
});

Deno.test("hermes: segments become calls and leave the text; bad segments stay", () => {
  deepStrictEqual(extractHermesToolCalls("plain text"), { text: "plain text", calls: [] });
  deepStrictEqual(
    extractHermesToolCalls(
      'Sure.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n' +
        '<tool_call>{"name":"b","arguments":"{\\"y\\":2}"}</tool_call>',
    ),
    {
      text: "Sure.",
      calls: [{ name: "a", arguments: { x: 1 } }, { name: "b", arguments: { y: 2 } }],
    },
  );
  const bad = '<tool_call>not json</tool_call> and <tool_call>{"arguments":{}}</tool_call>';
  deepStrictEqual(extractHermesToolCalls(bad), { text: bad, calls: [] });
  deepStrictEqual(extractHermesToolCalls('x <tool_call>{"name":"c","parameters":{"z":3}}'), {
    text: "x",
    calls: [{ name: "c", arguments: { z: 3 } }],
  });
  deepStrictEqual(extractHermesToolCalls('<tool_call>{"name":"d"}</tool_call>'), {
    text: "",
    calls: [{ name: "d", arguments: {} }],
  });
});

Deno.test("images: sniffing and URL building", () => {
  strictEqual(sniffImageMediaType("iVBORw0KGgo="), "image/png");
  strictEqual(sniffImageMediaType("/9j/4AAQ"), "image/jpeg");
  strictEqual(sniffImageMediaType("R0lGODlh"), "image/gif");
  strictEqual(sniffImageMediaType("UklGRiQAAABXRUJQVlA4"), "image/webp");
  strictEqual(sniffImageMediaType("UklGRiQAAABXQVZF"), "image/png"); // RIFF but WAVE
  strictEqual(sniffImageMediaType("!!!not base64"), "image/png");
  strictEqual(ollamaImageUrl("data:image/gif;base64,R0lG"), "data:image/gif;base64,R0lG");
  strictEqual(ollamaImageUrl("/9j/4AAQ"), "data:image/jpeg;base64,/9j/4AAQ");
  strictEqual(
    anthropicImageUrl({ type: "base64", media_type: "image/webp", data: "UklG" }, "p"),
    "data:image/webp;base64,UklG",
  );
  strictEqual(anthropicImageUrl({ type: "url", url: "https://x/y.png" }, "p"), "https://x/y.png");
  throws(
    () => anthropicImageUrl({ type: "base64", data: "x" }, "m[0]"),
    (e: unknown) =>
      e instanceof FaceError && e.status === 400 &&
      e.message === "m[0].source.media_type: Field required",
  );
  throws(
    () => anthropicImageUrl(undefined, "m[0]"),
    (e: unknown) => e instanceof FaceError && e.message === "m[0].source: Field required",
  );
});

Deno.test("utf8Length equals TextEncoder's count, lone surrogates included", () => {
  for (const s of ["", "abc", "é", "€", "日本語", "🙂", "a\uD800b", "\uDC00", "👋🏽x"]) {
    strictEqual(utf8Length(s), new TextEncoder().encode(s).length, JSON.stringify(s));
  }
});

Deno.test("faceFor / faceNameFor pick faces by name and by route", () => {
  strictEqual(faceFor("openai").name, "openai");
  strictEqual(faceFor("anthropic").name, "anthropic");
  strictEqual(faceFor("ollama").name, "ollama");
  strictEqual(faceNameFor("/v1/messages"), "anthropic");
  strictEqual(faceNameFor("/v1/messages/count_tokens"), "anthropic");
  strictEqual(faceNameFor("/api/chat"), "ollama");
  strictEqual(faceNameFor("/v1/chat/completions"), "openai");
  strictEqual(faceNameFor("/v1/messagesx"), "openai");
});

Deno.test("manifest: per-face format, path and capability cut", () => {
  strictEqual(faceEndpointUrl("openai", "https://llm.example.com/"), "https://llm.example.com/v1");
  strictEqual(faceEndpointUrl("anthropic", "https://llm.example.com"), "https://llm.example.com");
  const tc = ["tool_choice_auto", "tool_choice_any", "tool_choice_none", "tool_choice_named"];
  const base = ["chat", "streaming", "system_prompt", "tools_native", "tools_hermes"];
  deepStrictEqual(FACE_MANIFESTS.openai, {
    format: "openai-chat",
    path: "/v1",
    capabilities: [
      ...base,
      ...tc,
      "parallel_tool_use",
      "response_format_json_object",
      "response_format_json_schema",
      "reasoning_effort",
      "temperature",
      "seed",
      "response_size",
      "prompt_cache_key",
      "image_input",
    ],
  });
  deepStrictEqual(FACE_MANIFESTS.anthropic, {
    format: "anthropic-compat",
    path: "",
    capabilities: [...base, ...tc, "temperature", "response_size", "image_input"],
  });
  deepStrictEqual(FACE_MANIFESTS.ollama, {
    format: "ollama",
    path: "",
    capabilities: [
      ...base,
      "temperature",
      "response_size",
      "image_input",
      "response_format_json_object",
      "response_format_json_schema",
    ],
  });
  strictEqual(FACE_MANIFESTS.anthropic.capabilities.includes("response_format_json_schema"), false);
  strictEqual(FACE_MANIFESTS.ollama.capabilities.includes("tool_choice_any"), false);
  strictEqual(FACE_MANIFESTS.openai.capabilities.includes("prompt_cache_key"), true);
});

Deno.test("usage: OpenAI nesting is inside the prompt; flat Anthropic keys sit beside it", () => {
  const nested = readChatTokens({
    prompt_tokens: 65,
    completion_tokens: 10,
    prompt_tokens_details: { cached_tokens: 64 },
  });
  deepStrictEqual(nested, { prompt: 65, completion: 10, cacheRead: 64, promptIncludesCache: true });
  deepStrictEqual(anthropicUsage(nested), {
    input_tokens: 1,
    output_tokens: 10,
    cache_read_input_tokens: 64,
  });
  const flat = readChatTokens({
    prompt_tokens: 5,
    completion_tokens: 2,
    cache_read_input_tokens: 100,
    cache_creation_input_tokens: 7,
  });
  deepStrictEqual(anthropicUsage(flat), {
    input_tokens: 5,
    output_tokens: 2,
    cache_creation_input_tokens: 7,
    cache_read_input_tokens: 100,
  });
  deepStrictEqual(anthropicUsage(readChatTokens(undefined)), { input_tokens: 0, output_tokens: 0 });
  // Never below zero, whatever an upstream claims.
  strictEqual(
    anthropicUsage(
      readChatTokens({ prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 9 } }),
    ).input_tokens,
    0,
  );
});
