import { deepStrictEqual, match, strictEqual, throws } from "node:assert/strict";
import { FaceError, type JsonObject } from "../../src/faces/face.ts";
import { OllamaFace } from "../../src/faces/ollama.ts";
import { OLLAMA_VERSION, psBody, tagsBody, versionBody } from "../../src/faces/ollama_list.ts";
import {
  finishChunk,
  FIXED_NOW,
  parseNdjson,
  roleChunk,
  run,
  textChunk,
  toolChunk,
  usageChunk,
} from "./helpers.ts";

const face = new OllamaFace({ now: () => FIXED_NOW });
const NOW_ISO = "2025-01-02T03:04:05.678Z";
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB";
const JPEG = "/9j/4AAQSkZJRgABAQ";
const GIF = "R0lGODlhAQABAIAAAP";
const WEBP = "UklGRiQAAABXRUJQVlA4";

function faceError(status: number, pattern: RegExp) {
  return (e: unknown) => {
    strictEqual(e instanceof FaceError, true);
    strictEqual((e as FaceError).status, status);
    match((e as Error).message, pattern);
    return true;
  };
}

Deno.test("ollama request: stream defaults to true and asks the upstream for usage", () => {
  const req = face.toUpstream("/api/chat", {
    model: "llama3",
    messages: [{ role: "user", content: "hi" }],
  });
  deepStrictEqual(req, {
    path: "/chat/completions",
    body: {
      model: "llama3",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    },
    stream: true,
    requestedModel: "llama3",
  });
  const off = face.toUpstream("/api/chat", { model: "llama3", messages: [], stream: false });
  strictEqual(off.stream, false);
  strictEqual("stream" in off.body, false);
  strictEqual("stream_options" in off.body, false);
});

Deno.test("ollama request: carried options, format and think; the rest dropped", () => {
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
  const req = face.toUpstream("/api/chat", {
    model: "m",
    messages: [],
    stream: false,
    format: "json",
    keep_alive: "5m",
    think: true,
    tools,
    options: {
      num_predict: 128,
      temperature: 0.1,
      top_p: 0.8,
      top_k: 20,
      stop: ["\n\n"],
      seed: 42,
      num_ctx: 8192,
      presence_penalty: 0.5,
    },
  });
  deepStrictEqual(req.body, {
    model: "m",
    messages: [],
    max_tokens: 128,
    temperature: 0.1,
    top_p: 0.8,
    seed: 42,
    presence_penalty: 0.5,
    stop: ["\n\n"],
    reasoning_effort: "medium",
    response_format: { type: "json_object" },
    tools,
  });
  const schema = { type: "object", properties: { a: { type: "string" } } };
  const s = face.toUpstream("/api/chat", {
    model: "m",
    messages: [],
    format: schema,
    options: { num_predict: -1 },
  });
  deepStrictEqual(s.body.response_format, {
    type: "json_schema",
    json_schema: { name: "ollama_format", schema },
  });
  strictEqual("max_tokens" in s.body, false);
  const one = face.toUpstream("/api/chat", { model: "m", options: { stop: "END" } });
  deepStrictEqual(one.body.stop, ["END"]);
  const junk = face.toUpstream("/api/chat", { model: "m", options: { stop: [1, null] } });
  strictEqual("stop" in junk.body, false);
  strictEqual(
    "response_format" in face.toUpstream("/api/chat", { model: "m", format: "yaml" }).body,
    false,
  );
});

Deno.test("ollama request: images become content parts with sniffed types; data URLs kept", () => {
  const req = face.toUpstream("/api/chat", {
    model: "m",
    messages: [
      {
        role: "user",
        content: "what is this?",
        images: [PNG, JPEG, GIF, WEBP, "AAAA", "data:image/avif;base64,xyz"],
      },
      { role: "user", content: "", images: [JPEG] },
    ],
  });
  deepStrictEqual(req.body.messages, [
    {
      role: "user",
      content: [
        { type: "text", text: "what is this?" },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
        { type: "image_url", image_url: { url: `data:image/jpeg;base64,${JPEG}` } },
        { type: "image_url", image_url: { url: `data:image/gif;base64,${GIF}` } },
        { type: "image_url", image_url: { url: `data:image/webp;base64,${WEBP}` } },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        { type: "image_url", image_url: { url: "data:image/avif;base64,xyz" } },
      ],
    },
    {
      role: "user",
      content: [{ type: "image_url", image_url: { url: `data:image/jpeg;base64,${JPEG}` } }],
    },
  ]);
});

Deno.test("ollama request: tool history — argument objects to JSON text, ids filled, tool answers matched", () => {
  const req = face.toUpstream("/api/chat", {
    model: "m",
    messages: [
      { role: "user", content: "weather and time in Oslo?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { function: { name: "get_weather", arguments: { city: "Oslo" } } },
          { function: { name: "get_time", arguments: { tz: "CET" } } },
        ],
      },
      { role: "tool", tool_name: "get_time", content: "12:00" },
      { role: "tool", content: "-3C" },
      {
        role: "assistant",
        content: "ok",
        tool_calls: [{ id: "given", function: { index: 0, name: "again", arguments: '{"x":1}' } }],
      },
      { role: "tool", tool_call_id: "given", content: "done" },
    ],
  });
  deepStrictEqual(req.body.messages, [
    { role: "user", content: "weather and time in Oslo?" },
    {
      role: "assistant",
      content: "",
      tool_calls: [
        {
          id: "call_skeid_1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
        },
        {
          id: "call_skeid_2",
          type: "function",
          function: { name: "get_time", arguments: '{"tz":"CET"}' },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_skeid_2", content: "12:00" },
    { role: "tool", tool_call_id: "call_skeid_1", content: "-3C" },
    {
      role: "assistant",
      content: "ok",
      tool_calls: [{
        id: "given",
        type: "function",
        function: { name: "again", arguments: '{"x":1}' },
      }],
    },
    { role: "tool", tool_call_id: "given", content: "done" },
  ]);
});

Deno.test("ollama request: generate → system + user message; template/raw/context dropped", () => {
  const req = face.toUpstream("/api/generate", {
    model: "m",
    system: "Be terse.",
    prompt: "Describe",
    images: [JPEG],
    template: "{{ .Prompt }}",
    raw: true,
    context: [1, 2],
    suffix: "x",
    options: { temperature: 0 },
    stream: false,
  });
  deepStrictEqual(req.body, {
    model: "m",
    messages: [
      { role: "system", content: "Be terse." },
      {
        role: "user",
        content: [
          { type: "text", text: "Describe" },
          { type: "image_url", image_url: { url: `data:image/jpeg;base64,${JPEG}` } },
        ],
      },
    ],
    temperature: 0,
  });
  strictEqual(req.path, "/chat/completions");
});

Deno.test("ollama request: embed and the older embeddings go to /embeddings", () => {
  deepStrictEqual(
    face.toUpstream("/api/embed", { model: "e", input: ["a", "b"], truncate: true, dimensions: 8 }),
    {
      path: "/embeddings",
      body: { model: "e", input: ["a", "b"], dimensions: 8 },
      stream: false,
      requestedModel: "e",
    },
  );
  deepStrictEqual(face.toUpstream("/api/embeddings", { model: "e", prompt: "a" }).body, {
    model: "e",
    input: "a",
  });
  throws(
    () => face.toUpstream("/api/embed", { model: "e" }),
    faceError(400, /^input: Field required$/),
  );
  throws(
    () => face.toUpstream("/api/embed", { model: "e", input: [1] }),
    faceError(400, /^input: must be/),
  );
});

Deno.test("ollama request: validation names the field", () => {
  throws(
    () => face.toUpstream("/api/chat", { messages: [] }),
    faceError(400, /^model: Field required$/),
  );
  throws(
    () => face.toUpstream("/api/chat", { model: "m", messages: "x" }),
    faceError(400, /^messages: must be an array$/),
  );
  throws(
    () => face.toUpstream("/api/chat", { model: "m", messages: [{ content: "x" }] }),
    faceError(400, /^messages\[0\]\.role: Field required$/),
  );
  throws(
    () =>
      face.toUpstream("/api/chat", {
        model: "m",
        messages: [{ role: "user", content: "x", images: "b64" }],
      }),
    faceError(400, /^messages\[0\]\.images: /),
  );
  throws(() => face.toUpstream("/api/pull", { model: "m" }), faceError(404, /ollama face/));
});

Deno.test("ollama response: the requested model, done a JSON boolean, durations in ns", () => {
  const out = face.fromUpstream(
    "/api/chat",
    {
      id: "x",
      model: "served-model",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "Hi!" },
        finish_reason: "stop",
      }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    },
    "llama3",
    undefined,
    { totalMs: 250, ttftMs: 40 },
  );
  deepStrictEqual(out, {
    model: "llama3",
    created_at: NOW_ISO,
    message: { role: "assistant", content: "Hi!" },
    done: true,
    done_reason: "stop",
    total_duration: 250_000_000,
    load_duration: 0,
    prompt_eval_count: 3,
    prompt_eval_duration: 40_000_000,
    eval_count: 1,
    eval_duration: 210_000_000,
  });
  const bare = face.fromUpstream(
    "/api/chat",
    { choices: [{ message: { content: null } }] },
    "llama3",
  );
  deepStrictEqual(bare, {
    model: "llama3",
    created_at: NOW_ISO,
    message: { role: "assistant", content: "" },
    done: true,
    done_reason: "stop",
    total_duration: 0,
    load_duration: 0,
    prompt_eval_count: 0,
    prompt_eval_duration: 0,
    eval_count: 0,
    eval_duration: 0,
  });
});

Deno.test("ollama response: tool calls with object arguments; Hermes text calls extracted", () => {
  const out = face.fromUpstream("/api/chat", {
    choices: [{
      message: {
        content: "",
        tool_calls: [{
          id: "call_1",
          type: "function",
          function: { name: "f", arguments: '{"a":1}' },
        }],
      },
      finish_reason: "tool_calls",
    }],
  }, "m");
  deepStrictEqual(out.message, {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "call_1", function: { name: "f", arguments: { a: 1 } } }],
  });
  strictEqual(out.done_reason, "tool_calls");
  const hermes = face.fromUpstream("/api/chat", {
    choices: [{
      message: { content: '<tool_call>{"name":"g","arguments":{"b":2}}</tool_call>' },
      finish_reason: "stop",
    }],
  }, "m");
  deepStrictEqual(hermes.message, {
    role: "assistant",
    content: "",
    tool_calls: [{ function: { name: "g", arguments: { b: 2 } } }],
  });
});

Deno.test("ollama response: generate and length", () => {
  const out = face.fromUpstream("/api/generate", {
    model: "s",
    choices: [{ message: { content: "abc" }, finish_reason: "length" }],
    usage: { prompt_tokens: 2, completion_tokens: 3 },
  }, "m");
  deepStrictEqual(
    [out.response, out.done, out.done_reason, out.prompt_eval_count, out.eval_count],
    [
      "abc",
      true,
      "length",
      2,
      3,
    ],
  );
  strictEqual("message" in out, false);
});

Deno.test("ollama response: embed answers in input order; the older embeddings answers one vector", () => {
  const answer = {
    model: "served-embed",
    data: [{ index: 1, embedding: [3, 4] }, { index: 0, embedding: [1, 2] }],
    usage: { prompt_tokens: 6, total_tokens: 6 },
  };
  deepStrictEqual(face.fromUpstream("/api/embed", answer, "e", undefined, { totalMs: 2 }), {
    model: "e",
    embeddings: [[1, 2], [3, 4]],
    total_duration: 2_000_000,
    load_duration: 0,
    prompt_eval_count: 6,
  });
  deepStrictEqual(
    face.fromUpstream("/api/embeddings", { data: [{ index: 0, embedding: [5] }] }, "e"),
    {
      embedding: [5],
    },
  );
});

Deno.test("ollama stream: text lines, then the done line with counts; the requested model", () => {
  const t = face.streamTranslator("/api/chat", "llama3");
  strictEqual(t.contentType, "application/x-ndjson");
  let out = "";
  for (
    const c of [
      roleChunk(),
      textChunk("Hel"),
      textChunk("lo"),
      finishChunk("stop"),
      usageChunk(7, 3),
    ]
  ) {
    out += t.chunk(c);
  }
  out += t.end({ totalMs: 100, ttftMs: 25 });
  strictEqual(
    out,
    `{"model":"llama3","created_at":"${NOW_ISO}","message":{"role":"assistant","content":"Hel"},"done":false}\n` +
      `{"model":"llama3","created_at":"${NOW_ISO}","message":{"role":"assistant","content":"lo"},"done":false}\n` +
      `{"model":"llama3","created_at":"${NOW_ISO}","message":{"role":"assistant","content":""},"done":true,` +
      `"done_reason":"stop","total_duration":100000000,"load_duration":0,"prompt_eval_count":7,` +
      `"prompt_eval_duration":25000000,"eval_count":3,"eval_duration":75000000}\n`,
  );
  strictEqual(t.contentBytes, 5);
});

Deno.test("ollama stream: model stays the requested one until the upstream names one", () => {
  const t = face.streamTranslator("/api/chat", "llama3");
  const noModel = textChunk("a");
  delete noModel.model;
  const lines = parseNdjson(run(t, [noModel]));
  deepStrictEqual(lines.map((l) => l.model), ["llama3", "llama3"]);
});

Deno.test("ollama stream: length → done_reason length; no finish → stop; defaults without usage", () => {
  const len = parseNdjson(
    run(face.streamTranslator("/api/chat", "m"), [textChunk("a"), finishChunk("length")]),
  );
  strictEqual(len[len.length - 1].done_reason, "length");
  const cut = parseNdjson(run(face.streamTranslator("/api/chat", "m"), [textChunk("a")]));
  const last = cut[cut.length - 1];
  deepStrictEqual([
    last.done,
    last.done_reason,
    last.prompt_eval_count,
    last.eval_count,
    last.total_duration,
  ], [
    true,
    "stop",
    0,
    0,
    0,
  ]);
});

Deno.test("ollama stream: tool calls go out assembled in the finish chunk's line", () => {
  const t = face.streamTranslator("/api/chat", "m");
  const lines = parseNdjson(run(t, [
    roleChunk(),
    toolChunk(0, { id: "call_A", name: "search", args: '{"q":' }),
    toolChunk(1, { id: "call_B", name: "lookup", args: '{"id":' }),
    toolChunk(0, { args: '"x"}' }),
    toolChunk(1, { args: "7}" }),
    finishChunk("tool_calls"),
    usageChunk(5, 8),
  ]));
  strictEqual(lines.length, 2);
  deepStrictEqual(lines[0].message, {
    role: "assistant",
    content: "",
    tool_calls: [
      { id: "call_A", function: { name: "search", arguments: { q: "x" } } },
      { id: "call_B", function: { name: "lookup", arguments: { id: 7 } } },
    ],
  });
  strictEqual(lines[0].done, false);
  deepStrictEqual([lines[1].done, lines[1].done_reason, lines[1].eval_count], [
    true,
    "tool_calls",
    8,
  ]);
});

Deno.test("ollama stream: tool calls without a finish chunk go out before the done line", () => {
  const lines = parseNdjson(run(face.streamTranslator("/api/chat", "m"), [
    textChunk("Checking."),
    toolChunk(0, { id: "c1", name: "f", args: "{}" }),
  ]));
  deepStrictEqual(
    lines.map((
      l,
    ) => [(l.message as JsonObject).content, (l.message as JsonObject).tool_calls, l.done]),
    [
      ["Checking.", undefined, false],
      ["", [{ id: "c1", function: { name: "f", arguments: {} } }], false],
      ["", undefined, true],
    ],
  );
});

Deno.test("ollama stream: generate writes response instead of message", () => {
  const lines = parseNdjson(
    run(face.streamTranslator("/api/generate", "m"), [
      textChunk("4"),
      textChunk("2"),
      finishChunk("stop"),
    ]),
  );
  deepStrictEqual(lines.map((l) => [l.response, l.done, "message" in l]), [
    ["4", false, false],
    ["2", false, false],
    ["", true, false],
  ]);
});

Deno.test("ollama stream: a failure ends with an error line; nothing after", () => {
  const t = face.streamTranslator("/api/chat", "m");
  t.chunk(textChunk("a"));
  strictEqual(
    t.fail(502, "Upstream error: connection reset"),
    '{"error":"Upstream error: connection reset"}\n',
  );
  strictEqual(t.end(), "");
  strictEqual(t.keepalive(), "");
});

Deno.test("ollama errors: {error: string}, upstream messages carried", () => {
  deepStrictEqual(
    face.errorBody(503, "model_not_found", "No healthy node available for model 'm'"),
    {
      error: "No healthy node available for model 'm'",
    },
  );
  deepStrictEqual(
    face.upstreamErrorBody(400, {
      error: { message: "context too long", type: "BadRequestError" },
    }),
    {
      error: "context too long",
    },
  );
  deepStrictEqual(face.upstreamErrorBody(502, undefined), { error: "Upstream error: Bad Gateway" });
});

Deno.test("ollama listings: tags, ps, version", () => {
  deepStrictEqual(
    tagsBody(
      [{ model: "qwen3-32b", engine: "vllm" }, { model: "house-model", engine: "" }],
      FIXED_NOW,
    ),
    {
      models: [
        {
          name: "qwen3-32b",
          model: "qwen3-32b",
          modified_at: NOW_ISO,
          size: 0,
          digest: "",
          details: { family: "vllm", parameter_size: "unknown", quantization_level: "unknown" },
        },
        {
          name: "house-model",
          model: "house-model",
          modified_at: NOW_ISO,
          size: 0,
          digest: "",
          details: {
            family: "openaibase",
            parameter_size: "unknown",
            quantization_level: "unknown",
          },
        },
      ],
    },
  );
  deepStrictEqual(psBody(), { models: [] });
  deepStrictEqual(versionBody(), { version: OLLAMA_VERSION });
  strictEqual(OLLAMA_VERSION, "0.13.5", "Codex --oss refuses versions older than 0.13.4");
});
