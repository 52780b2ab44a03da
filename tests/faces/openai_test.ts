import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { FaceError } from "../../src/faces/face.ts";
import { modelsBody, OpenAIFace } from "../../src/faces/openai.ts";
import {
  chunk,
  finishChunk,
  FIXED_NOW,
  roleChunk,
  textChunk,
  toolChunk,
  usageChunk,
} from "./helpers.ts";

const face = new OpenAIFace();

Deno.test("openai request: identity body, upstream path per route, stream flag", () => {
  const body = {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    temperature: 0.3,
    foo: 1,
  };
  const req = face.toUpstream("/v1/chat/completions", body);
  deepStrictEqual(req, { path: "/chat/completions", body, stream: false, requestedModel: "m" });
  strictEqual(req.body, body);
  strictEqual(face.toUpstream("/v1/completions", { model: "m", prompt: "x" }).path, "/completions");
  strictEqual(face.toUpstream("/v1/embeddings", { model: "m", input: "x" }).path, "/embeddings");
  const s = face.toUpstream("/v1/chat/completions", { model: "m", messages: [], stream: true });
  strictEqual(s.stream, true);
  deepStrictEqual(s.context, { include_usage: false });
  strictEqual("stream_options" in s.body, false);
  const asked = face.toUpstream("/v1/chat/completions", {
    model: "m",
    messages: [],
    stream: true,
    stream_options: { include_usage: true },
  });
  deepStrictEqual(asked.context, { include_usage: true });
  // Not a JSON boolean: refused, naming the field (a lenient upstream would stream it).
  throws(
    () => face.toUpstream("/v1/chat/completions", { model: "m", stream: "yes" }),
    (e: unknown) => e instanceof FaceError && e.status === 400 && e.message.startsWith("stream:"),
  );
});

Deno.test("openai request: model missing → 400; unknown route → 404", () => {
  throws(() => face.toUpstream("/v1/chat/completions", { messages: [] }), (e: unknown) => {
    strictEqual(e instanceof FaceError, true);
    strictEqual((e as FaceError).status, 400);
    strictEqual((e as FaceError).type, "invalid_request_error");
    strictEqual((e as Error).message, "model: Field required");
    return true;
  });
  throws(
    () => face.toUpstream("/v1/audio/speech", { model: "m" }),
    (e: unknown) => (e as FaceError).status === 404,
  );
});

Deno.test("openai request: chat messages not a list of message objects → 400 naming where", () => {
  const refused = (
    body: Record<string, unknown>,
    message: string,
    endpoint = "/v1/chat/completions",
  ) =>
    throws(() => face.toUpstream(endpoint, { model: "m", ...body }), (e: unknown) => {
      strictEqual(e instanceof FaceError, true);
      strictEqual((e as FaceError).status, 400);
      strictEqual((e as FaceError).type, "invalid_request_error");
      strictEqual((e as Error).message, message);
      return true;
    });
  refused({}, "messages: Field required");
  refused({ messages: null }, "messages: Field required");
  refused({ messages: "oops" }, "messages: must be an array of message objects, got a string");
  refused(
    { messages: { role: "user" } },
    "messages: must be an array of message objects, got an object",
  );
  refused(
    { messages: [{ role: "user", content: "hi" }, 2] },
    "messages[1]: must be a message object, got a number",
  );
  refused({ messages: [[]] }, "messages[0]: must be a message object, got an array");
  refused({ messages: [{ content: "hi" }] }, "messages[0].role: must be a non-empty string");
  refused(
    { messages: [{ role: 7, content: "hi" }] },
    "messages[0].role: must be a non-empty string",
  );
  refused({}, "input: Field required", "/v1/embeddings");
  // What the field allows stays allowed: any role name, any content shape, an empty list (the
  // node decides), and completions without a prompt.
  const ok = face.toUpstream("/v1/chat/completions", {
    model: "m",
    messages: [{ role: "developer", content: [{ type: "text", text: "x" }] }, { role: "tool" }],
  });
  strictEqual(ok.path, "/chat/completions");
  strictEqual(face.toUpstream("/v1/chat/completions", { model: "m", messages: [] }).stream, false);
  strictEqual(face.toUpstream("/v1/completions", { model: "m" }).path, "/completions");
});

Deno.test("openai response and errors: answers unchanged; error bodies in the OpenAI shape", () => {
  const answer = { id: "x", choices: [], usage: { prompt_tokens: 1 } };
  strictEqual(face.fromUpstream("/v1/chat/completions", answer, "m"), answer);
  deepStrictEqual(face.errorBody(429, "rate_limit_error", "Timed out"), {
    error: { message: "Timed out", type: "rate_limit_error" },
  });
  const upstream = { error: { message: "bad", type: "invalid_request_error", code: "x" } };
  strictEqual(face.upstreamErrorBody(400, upstream), upstream);
  deepStrictEqual(face.upstreamErrorBody(503, "<html>busy</html>"), {
    error: { message: "<html>busy</html>", type: "upstream_error" },
  });
});

Deno.test("openai stream accounting: content bytes (multi-byte UTF-8), usage, tool calls", () => {
  const t = face.streamTranslator("/v1/chat/completions", "m", { include_usage: true });
  const chunks = [
    roleChunk(),
    textChunk("Grüße "), // 8 bytes
    textChunk("👋🏽"), // 8 bytes
    toolChunk(0, { id: "call_1", name: "lookup", args: '{"q":"é"' }), // 9 bytes
    toolChunk(0, { args: "}" }), // 1 byte
    finishChunk("tool_calls"),
    usageChunk(11, 7),
  ];
  let out = "";
  for (const c of chunks) out += t.chunk(c);
  out += t.end();
  strictEqual(t.contentBytes, 8 + 8 + 9 + 1);
  strictEqual(t.contentBytes, new TextEncoder().encode('Grüße 👋🏽{"q":"é"}').length);
  deepStrictEqual(t.usage, { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
  deepStrictEqual(t.toolCalls, [
    { id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"é"}' } },
  ]);
  strictEqual(
    out,
    chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n",
  );
});

Deno.test("openai stream: the usage-only chunk is dropped when the client did not ask for usage", () => {
  const t = face.streamTranslator("/v1/chat/completions", "m", { include_usage: false });
  strictEqual(t.chunk(usageChunk(3, 2)), "");
  deepStrictEqual(t.usage, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
  // usage riding on a chunk that has choices is left as it is.
  const riding = chunk({ content: "x" }, "stop");
  riding.usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
  strictEqual(t.chunk(riding), `data: ${JSON.stringify(riding)}\n\n`);
  strictEqual(t.keepalive(), "");
});

Deno.test("openai stream: completions text counts; fail ends with an error frame", () => {
  const t = face.streamTranslator("/v1/completions", "m");
  t.chunk({
    id: "c",
    object: "text_completion",
    choices: [{ index: 0, text: "ab€", finish_reason: null }],
  });
  strictEqual(t.contentBytes, 5);
  strictEqual(
    t.fail(502, "Upstream error: reset"),
    'data: {"error":{"message":"Upstream error: reset","type":"upstream_error"}}\n\n',
  );
  strictEqual(t.end(), "");
});

Deno.test("openai /v1/models body", () => {
  deepStrictEqual(
    modelsBody([{ model: "a", engine: "vllm" }, { model: "b", engine: "" }], FIXED_NOW),
    {
      object: "list",
      data: [
        { id: "a", object: "model", created: Math.floor(FIXED_NOW / 1000), owned_by: "skeid" },
        { id: "b", object: "model", created: Math.floor(FIXED_NOW / 1000), owned_by: "skeid" },
      ],
    },
  );
});
