import assert from "node:assert/strict";
import {
  normalizeEngineId,
  SUPPORTED_ENGINE_IDS,
  UnknownEngineError,
} from "../../src/core/engines.ts";

Deno.test("the engine list is the 38 Langertha engine ids, sorted, each once", () => {
  assert.equal(SUPPORTED_ENGINE_IDS.length, 38);
  assert.deepEqual([...SUPPORTED_ENGINE_IDS], [...new Set(SUPPORTED_ENGINE_IDS)].sort());
  for (const id of ["openaibase", "vllm", "sglang", "akianthropic", "openairesponses", "xai"]) {
    assert.ok(SUPPORTED_ENGINE_IDS.includes(id), id);
  }
});

Deno.test("engine class names normalize: lowercased, trimmed, class prefix stripped", () => {
  assert.equal(normalizeEngineId("OpenAIBase"), "openaibase");
  assert.equal(normalizeEngineId("  VLLM "), "vllm");
  assert.equal(normalizeEngineId("Langertha::Engine::vLLM"), "vllm");
  assert.equal(normalizeEngineId("LangerthaX::Engine::SGLang"), "sglang");
});

Deno.test("an empty or absent engine normalizes to ''", () => {
  assert.equal(normalizeEngineId(""), "");
  assert.equal(normalizeEngineId("   "), "");
  assert.equal(normalizeEngineId(undefined), "");
  assert.equal(normalizeEngineId(null), "");
});

Deno.test("legacy openai-compatible is rejected with the whole list named", () => {
  assert.throws(() => normalizeEngineId("openai-compatible"), (err: unknown) => {
    assert.ok(err instanceof UnknownEngineError);
    assert.equal(
      err.message,
      `unknown engine 'openai-compatible' (expected one of: ${SUPPORTED_ENGINE_IDS.join(", ")})`,
    );
    return true;
  });
  assert.throws(() => normalizeEngineId({}), UnknownEngineError);
});
