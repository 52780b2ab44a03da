/**
 * What the clients people point at a gateway send and expect (Claude Code, the AI SDK,
 * LangChain, ollama-js): system turns mid-conversation, documents, thinking, the prompt count
 * in `message_start`, Ollama's tool-choice forms, thinking and local answers.
 */
import { assert, assertEquals, assertMatch, assertThrows } from "../_assert.ts";
import { AnthropicFace } from "../../src/faces/anthropic.ts";
import { OllamaFace } from "../../src/faces/ollama.ts";
import { FaceError, type JsonObject } from "../../src/faces/face.ts";
import { ollamaLoadAnswer, showBody, showResponse } from "../../src/faces/ollama_local.ts";
import { notFoundResponse } from "../../src/faces/not_found.ts";
import { faceFor } from "../../src/faces/index.ts";
import {
  chunk,
  FIXED_NOW,
  parseNdjson,
  parseSse,
  roleChunk,
  run,
  textChunk,
  usageChunk,
} from "./helpers.ts";

const anthropic = new AnthropicFace({ now: () => FIXED_NOW });
const ollama = new OllamaFace({ now: () => FIXED_NOW });
const up = (body: JsonObject) => anthropic.toUpstream("/v1/messages", body);
const base = { model: "house-model", max_tokens: 64 };
const NOW_ISO = new Date(FIXED_NOW).toISOString();

Deno.test("anthropic request: a system turn mid-conversation stays a system message at its place", () => {
  const req = up({
    ...base,
    system: [{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }],
    messages: [
      {
        role: "user",
        content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }],
      },
      { role: "system", content: "Reminder: be brief." },
      { role: "assistant", content: "ok" },
      { role: "system", content: [{ type: "text", text: "A" }, { type: "text", text: "B" }] },
      { role: "user", content: "go" },
    ],
    context_management: { edits: [] },
    top_k: 5,
  });
  assertEquals(req.body.messages, [
    { role: "system", content: "You are Claude Code." },
    { role: "user", content: "hi" },
    { role: "system", content: "Reminder: be brief." },
    { role: "assistant", content: "ok" },
    { role: "system", content: "AB" },
    { role: "user", content: "go" },
  ]);
  assertEquals("context_management" in req.body, false, "fields without a place are dropped");
});

Deno.test("anthropic request: document blocks become text and file parts; a URL document is a 400", () => {
  const pdf = btoa("%PDF-1.4 fake");
  const req = up({
    ...base,
    messages: [{
      role: "user",
      content: [
        { type: "document", source: { type: "text", media_type: "text/plain", data: "notes" } },
        {
          type: "document",
          title: "a.txt",
          source: {
            type: "base64",
            media_type: "text/plain",
            data: btoa("plain ö".replace("ö", "o")),
          },
        },
        { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf } },
        { type: "text", text: "Summarize." },
      ],
    }],
  });
  assertEquals(req.body.messages, [{
    role: "user",
    content: [
      { type: "text", text: "notes" },
      { type: "text", text: "a.txt\n\nplain o" },
      {
        type: "file",
        file: { filename: "document.pdf", file_data: `data:application/pdf;base64,${pdf}` },
      },
      { type: "text", text: "Summarize." },
    ],
  }]);
  const e = assertThrows(
    () =>
      up({
        ...base,
        messages: [{
          role: "user",
          content: [{ type: "document", source: { type: "url", url: "https://x/a.pdf" } }],
        }],
      }),
    FaceError,
  );
  assertEquals(e.status, 400);
  assertMatch(
    e.message,
    /^messages\[0\]\.content\[0\]\.source: a document by URL cannot be carried/,
  );
});

Deno.test("anthropic request: thinking budget and effort → reasoning_effort", () => {
  const effort = (extra: JsonObject) =>
    up({ ...base, messages: [{ role: "user", content: "x" }], ...extra }).body.reasoning_effort;
  assertEquals(effort({ thinking: { type: "enabled", budget_tokens: 1024 } }), "low");
  assertEquals(effort({ thinking: { type: "enabled", budget_tokens: 8000 } }), "medium");
  assertEquals(effort({ thinking: { type: "enabled", budget_tokens: 32000 } }), "high");
  assertEquals(effort({ thinking: { type: "disabled" } }), undefined);
  assertEquals(effort({ output_config: { effort: "high" } }), "high");
  assertEquals(effort({}), undefined);
});

Deno.test("anthropic response: reasoning_content becomes a thinking block with an empty signature", () => {
  const out = anthropic.fromUpstream("/v1/messages", {
    id: "x",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "42", reasoning_content: "Let me think." },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 3, completion_tokens: 5 },
  }, "house-model");
  assertEquals(out.content, [
    { type: "thinking", thinking: "Let me think.", signature: "" },
    { type: "text", text: "42" },
  ]);
});

Deno.test("anthropic stream: reasoning deltas become a thinking block and thinking_delta events", () => {
  const t = anthropic.streamTranslator("/v1/messages", "house-model");
  const events = parseSse(run(t, [
    roleChunk(),
    chunk({ reasoning_content: "Hmm" }),
    chunk({ reasoning_content: " ok" }),
    textChunk("Hi"),
    usageChunk(4, 3),
  ]));
  const starts = events.filter((e) => e.event === "content_block_start").map((e) => e.data);
  assertEquals(starts, [
    {
      type: "content_block_start",
      index: 0,
      content_block: { type: "thinking", thinking: "", signature: "" },
    },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
  ]);
  const stops = events.filter((e) => e.event === "content_block_stop").map((e) => e.data.index);
  assertEquals(stops, [0, 1], "the thinking block ends before the text block");
  const order = events.map((e) => e.event);
  assert(
    order.indexOf("content_block_stop") < order.lastIndexOf("content_block_start"),
    "thinking stops before text starts",
  );
  const deltas = events.filter((e) => e.event === "content_block_delta").map((e) => e.data.delta);
  assertEquals(deltas, [
    { type: "thinking_delta", thinking: "Hmm" },
    { type: "thinking_delta", thinking: " ok" },
    { type: "text_delta", text: "Hi" },
  ]);
});

function messageStartUsage(t: ReturnType<AnthropicFace["streamTranslator"]>, first: JsonObject) {
  const events = parseSse(t.chunk(first) + t.end());
  const start = events.find((e) => e.event === "message_start");
  assert(start !== undefined, "message_start sent");
  const delta = events.find((e) => e.event === "message_delta");
  assert(delta !== undefined, "message_delta sent");
  return {
    start: (start.data.message as JsonObject).usage,
    delta: delta.data.usage,
  };
}

Deno.test("anthropic stream: message_start carries the prompt count (exact at the first chunk, else the estimate)", () => {
  const body = {
    ...base,
    stream: true,
    messages: [{ role: "user", content: "a question of forty characters or so ok" }],
  };
  const req = up(body);
  const estimate = req.context?.input_estimate;
  assertEquals(estimate, 10, "count_tokens estimate: 39 characters / 4, rounded up");
  // A node with continuous_usage_stats reports the prompt on its first chunk.
  const exact = messageStartUsage(
    anthropic.streamTranslator("/v1/messages", "house-model", req.context),
    { ...roleChunk(), usage: { prompt_tokens: 12, completion_tokens: 0, total_tokens: 12 } },
  );
  assertEquals(exact.start, { input_tokens: 12, output_tokens: 0 });
  // One that does not: the estimate first, the exact count in message_delta.
  const t = anthropic.streamTranslator("/v1/messages", "house-model", req.context);
  const start = parseSse(t.chunk(roleChunk())).find((e) => e.event === "message_start");
  assertEquals((start?.data.message as JsonObject).usage, { input_tokens: 10, output_tokens: 0 });
  const end = parseSse(t.chunk(usageChunk(12, 2)) + t.end());
  assertEquals(end.find((e) => e.event === "message_delta")?.data.usage, {
    input_tokens: 12,
    output_tokens: 2,
  });
});

Deno.test("ollama request: every tool-choice form becomes the chat call's valid form", () => {
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
  const choice = (tool_choice: unknown, withTools = true) =>
    ollama.toUpstream("/api/chat", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      ...(withTools ? { tools } : {}),
      tool_choice,
    }).body.tool_choice;
  const named = { type: "function", function: { name: "f" } };
  assertEquals(choice({ type: "function", name: "f" }), named, "flat (ollama-ai-provider-v2)");
  assertEquals(choice(named), named, "nested");
  assertEquals(choice("required"), "required");
  assertEquals(choice("auto"), "auto");
  assertEquals(choice("none"), "none");
  assertEquals(choice({ type: "web_search_preview" }), undefined, "a built-in tool is left out");
  assertEquals(choice("required", false), undefined, "no tools, no tool_choice");
});

Deno.test("ollama request: think → reasoning_effort; false leaves the node's default", () => {
  const effort = (think: unknown) =>
    ollama.toUpstream("/api/generate", { model: "m", prompt: "x", think }).body.reasoning_effort;
  assertEquals(effort(true), "medium");
  assertEquals(effort("high"), "high");
  assertEquals(effort(false), undefined);
});

Deno.test("ollama response and stream: reasoning becomes thinking; the model is the requested one", () => {
  const answer = {
    model: "served",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "42", reasoning_content: "hmm" },
      finish_reason: "stop",
    }],
  };
  const chat = ollama.fromUpstream("/api/chat", answer, "alias-1");
  assertEquals(chat.model, "alias-1");
  assertEquals(chat.message, { role: "assistant", content: "42", thinking: "hmm" });
  const gen = ollama.fromUpstream("/api/generate", answer, "alias-1");
  assertEquals([gen.response, gen.thinking], ["42", "hmm"]);

  const lines = parseNdjson(run(ollama.streamTranslator("/api/chat", "alias-1"), [
    roleChunk(),
    chunk({ reasoning_content: "hm" }),
    textChunk("42"),
  ]));
  assertEquals(lines.map((l) => l.model), ["alias-1", "alias-1", "alias-1"]);
  assertEquals(lines[0].message, { role: "assistant", content: "", thinking: "hm" });
  assertEquals(lines[1].message, { role: "assistant", content: "42" });
});

Deno.test("ollama load/unload: empty prompt or messages answered locally with done_reason", () => {
  assertEquals(ollamaLoadAnswer("/api/generate", { model: "m" }, FIXED_NOW), {
    model: "m",
    created_at: NOW_ISO,
    response: "",
    done_reason: "load",
    done: true,
  });
  assertEquals(
    ollamaLoadAnswer("/api/chat", { model: "m", messages: [], keep_alive: 0 }, FIXED_NOW),
    {
      model: "m",
      created_at: NOW_ISO,
      message: { role: "assistant", content: "" },
      done_reason: "unload",
      done: true,
    },
  );
  assertEquals(
    ollamaLoadAnswer("/api/generate", { model: "m", prompt: "", keep_alive: "0s" }, FIXED_NOW)
      ?.done_reason,
    "unload",
  );
  assertEquals(
    ollamaLoadAnswer("/api/generate", { model: "m", prompt: "hi" }, FIXED_NOW),
    undefined,
  );
  assertEquals(
    ollamaLoadAnswer("/api/chat", { model: "m", messages: [{ role: "user" }] }, FIXED_NOW),
    undefined,
  );
  assertEquals(ollamaLoadAnswer("/api/generate", { prompt: "" }, FIXED_NOW), undefined);
});

Deno.test("ollama show: details and capabilities from the inventory; 404 for an unlisted model", async () => {
  const body = showBody({ model: "qwen3", engine: "vllm" }, FIXED_NOW);
  assertEquals(body.capabilities, ["completion", "tools"]);
  assertEquals((body.details as JsonObject).family, "vllm");
  const models = [{ model: "qwen3", engine: "vllm" }];
  const ok = showResponse({ model: "qwen3" }, models, FIXED_NOW);
  assertEquals(ok.status, 200);
  assertEquals((await ok.json()).capabilities, ["completion", "tools"]);
  const legacy = showResponse({ name: "qwen3" }, models, FIXED_NOW);
  assertEquals(legacy.status, 200, "the older `name` field");
  const missing = showResponse({ model: "nope" }, models, FIXED_NOW);
  assertEquals(missing.status, 404);
  assertEquals(await missing.json(), { error: "model 'nope' not found" });
});

Deno.test("unknown routes: 404 in the error shape of the face of the prefix", async () => {
  const faces = {
    openai: faceFor("openai"),
    anthropic: faceFor("anthropic"),
    ollama: faceFor("ollama"),
    responses: faceFor("responses"),
  };
  const openai = notFoundResponse("POST", "/v1/nope", faces);
  assertEquals(openai.status, 404);
  assertEquals(await openai.json(), {
    error: { message: "Invalid URL (POST /v1/nope)", type: "invalid_request_error" },
  });
  const api = notFoundResponse("POST", "/api/pull", faces);
  assertEquals(await api.json(), { error: "404 page not found: POST /api/pull" });
  const messages = await notFoundResponse("GET", "/v1/messages/batches", faces).json();
  assertEquals(messages.type, "error");
  assertEquals(notFoundResponse("GET", "/other", faces).status, 404);
});
