/**
 * The GenAI conventions as Skeid fills them (operation, provider, request and answer attributes,
 * the buckets) and the quiet telemetry of a gateway without OpenTelemetry.
 */
import { assertEquals } from "../_assert.ts";
import {
  type AttrSink,
  DURATION_BUCKETS_S,
  factsAttributes,
  inputMessages,
  operationName,
  outputMessages,
  providerName,
  requestAttributes,
  responseAttributes,
  serverOf,
  StreamFacts,
  TOKEN_BUCKETS,
  TTFT_BUCKETS_S,
} from "../../src/telemetry/genai.ts";
import { QUIET_TELEMETRY } from "../../src/telemetry/telemetry.ts";
import { otelEnabled } from "../../src/telemetry/otel_settings.ts";
import { telemetryFor } from "../../src/telemetry/otel.ts";
import { memoryLogger } from "../../src/log.ts";

/** Attributes by key name, as a span would carry them. */
type Attributes = Record<string, unknown>;

/** A sink writing into `into` by key name. */
function sink(into: Attributes): AttrSink {
  return { set: (key, value) => into[key.name] = value };
}

Deno.test("genai: the operation of an upstream path", () => {
  assertEquals(operationName("/chat/completions"), "chat");
  assertEquals(operationName("/embeddings"), "embeddings");
  assertEquals(operationName("/responses"), "responses");
  assertEquals(operationName("/completions"), "text_completion");
});

Deno.test("genai: the provider of an engine id — the spec's name when it has one", () => {
  assertEquals(providerName("openai"), "openai");
  assertEquals(providerName("mistral"), "mistral_ai");
  assertEquals(providerName("xai"), "x_ai");
  assertEquals(providerName("vllm"), "vllm");
  assertEquals(providerName("openaibase"), "openaibase");
});

Deno.test("genai: server address and port, the port defaulted by scheme", () => {
  assertEquals(serverOf("http://gpu-1:8000/v1"), { address: "gpu-1", port: 8000 });
  assertEquals(serverOf("https://api.groq.com/openai/v1"), { address: "api.groq.com", port: 443 });
  assertEquals(serverOf("http://[::1]/v1"), { address: "[::1]", port: 80 });
  assertEquals(serverOf("not a url"), { address: "", port: 0 });
});

Deno.test("genai: request parameters only when sent as numbers", () => {
  const a: Attributes = {};
  requestAttributes(
    { max_completion_tokens: 9, max_tokens: 5, temperature: 0, top_p: "x" },
    sink(a),
  );
  assertEquals(a, { "gen_ai.request.max_tokens": 9, "gen_ai.request.temperature": 0 });
  const b: Attributes = {};
  requestAttributes({ messages: [] }, sink(b));
  assertEquals(b, {});
});

Deno.test("genai: what a whole answer says — id, model, finish reasons", () => {
  const a: Attributes = {};
  responseAttributes({
    id: "c1",
    model: "qwen3-32b-awq",
    choices: [{ finish_reason: "stop" }, { finish_reason: "length" }, {}],
  }, sink(a));
  assertEquals(a, {
    "gen_ai.response.id": "c1",
    "gen_ai.response.model": "qwen3-32b-awq",
    "gen_ai.response.finish_reasons": ["stop", "length"],
  });
  const b: Attributes = {};
  responseAttributes("not an object", sink(b));
  responseAttributes(null, sink(b));
  assertEquals(b, {});
});

Deno.test("genai: message content as JSON text", () => {
  assertEquals(
    inputMessages({ messages: [{ role: "user", content: "x" }] }),
    '[{"role":"user","content":"x"}]',
  );
  assertEquals(inputMessages({ model: "m" }), undefined);
  assertEquals(
    outputMessages({ choices: [{ message: { role: "assistant", content: "y" } }] }),
    '[{"role":"assistant","content":"y"}]',
  );
  assertEquals(outputMessages({ output: [{ type: "message" }] }), '[{"type":"message"}]');
  assertEquals(outputMessages(undefined), undefined);
});

Deno.test("genai: the spec's bucket boundaries", () => {
  assertEquals(DURATION_BUCKETS_S.length, 14);
  assertEquals([DURATION_BUCKETS_S[0], DURATION_BUCKETS_S.at(-1)], [0.01, 81.92]);
  assertEquals(TOKEN_BUCKETS.length, 14);
  assertEquals([TOKEN_BUCKETS[0], TOKEN_BUCKETS.at(-1)], [1, 67108864]);
  assertEquals(TTFT_BUCKETS_S.length, 16);
  assertEquals([TTFT_BUCKETS_S[0], TTFT_BUCKETS_S.at(-1)], [0.001, 10.0]);
});

Deno.test("telemetry: off, one frozen no-op for every request, no trace of its own", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  assertEquals(otelEnabled(env({})), false);
  assertEquals(otelEnabled(env({ OTEL_DENO: "true" })), false, "Deno's switch is not Skeid's");
  assertEquals(otelEnabled(env({ OTEL_EXPORTER_OTLP_ENDPOINT: " " })), false, "blank");
  assertEquals(otelEnabled(env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })), true);
  assertEquals(otelEnabled(env({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c/t" })), true);
  assertEquals(otelEnabled(env({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://c/m" })), true);
  assertEquals(
    otelEnabled(env({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "TRUE" })),
    false,
  );
  const t = telemetryFor({ env: () => undefined });
  assertEquals(t, QUIET_TELEMETRY);
  // The earlier switch alone: off, and said so (an operator upgrading would get silence).
  const logger = memoryLogger("warn");
  assertEquals(telemetryFor({ env: env({ OTEL_DENO: "true" }), logger }), QUIET_TELEMETRY);
  assertEquals(logger.lines.map((l) => l.event), ["telemetry_off"]);
  assertEquals(String(logger.lines[0].message).includes("OTEL_EXPORTER_OTLP_ENDPOINT"), true);
  // Said once for a group: worker 0 says it, the others leave it to that one.
  const first = memoryLogger("warn");
  telemetryFor({ env: env({ OTEL_DENO: "true" }), logger: first, worker: 0 });
  assertEquals(first.lines.map((l) => l.event), ["telemetry_off"]);
  const second = memoryLogger("warn");
  telemetryFor({ env: env({ OTEL_DENO: "true" }), logger: second, worker: 1 });
  assertEquals(second.lines, []);
  const req = new Request("http://x/v1/chat/completions", { method: "POST" });
  const a = t.request(req, "/v1/chat/completions", "openai");
  const b = t.request(req, "/v1/chat/completions", "openai");
  assertEquals(a === b, true, "the same object: nothing built per request");
  assertEquals(Object.isFrozen(a), true);
  assertEquals(a.trace, undefined);
});

Deno.test("genai: a stream's facts from its chunks — first id and model, every finish reason", () => {
  const chat = new StreamFacts();
  chat.read({ id: "c1", model: "qwen3", choices: [{ index: 0, delta: { content: "a" } }] });
  chat.read({ id: "c1", model: "other", choices: [{ index: 0, finish_reason: "length" }] });
  chat.read({ id: "c1", choices: [], usage: { prompt_tokens: 1 } });
  assertEquals([chat.id, chat.model, chat.finishReasons], ["c1", "qwen3", ["length"]]);
  // One reason a choice, however many chunks say one (or say `""`, as some providers do).
  const n2 = new StreamFacts();
  for (let i = 0; i < 1000; i++) {
    n2.read({ choices: [{ index: 0, finish_reason: "" }, { index: 1, finish_reason: "" }] });
  }
  n2.read({ choices: [{ index: 1, finish_reason: "stop" }] });
  n2.read({ choices: [{ index: 0, finish_reason: "length" }] });
  n2.read({ choices: [{ index: 1, finish_reason: "stop" }] });
  assertEquals(n2.finishReasons, ["stop", "length"]);
  const responses = new StreamFacts();
  responses.read({
    type: "response.created",
    response: { id: "r1", model: "m", status: "in_progress" },
  });
  responses.read({ type: "response.output_text.delta", delta: "x" });
  responses.read({
    type: "response.completed",
    response: { id: "r1", model: "m", status: "completed" },
  });
  assertEquals([responses.id, responses.model, responses.finishReasons], ["r1", "m", [
    "completed",
  ]]);
  const a: Attributes = {};
  factsAttributes(chat, sink(a));
  assertEquals(a, {
    "gen_ai.response.id": "c1",
    "gen_ai.response.model": "qwen3",
    "gen_ai.response.finish_reasons": ["length"],
  });
});
