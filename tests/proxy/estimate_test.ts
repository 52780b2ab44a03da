import { assertEquals, assertThrows } from "../_assert.ts";
import {
  checkOutputFields,
  estimateInputTokens,
  outputAskOf,
  requestTokensEstimate,
} from "../../src/proxy/estimate.ts";
import { FaceError } from "../../src/faces/face.ts";
import type { JsonObject } from "../../src/core/json.ts";

const CAP = 1_000_000;
const chat = (body: JsonObject) => ({ path: "/chat/completions", body });

Deno.test("estimate: message text about 4 characters a token, plus the output limit", () => {
  const text = { messages: [{ role: "user", content: "x".repeat(40) }], max_tokens: 100 };
  assertEquals(requestTokensEstimate(chat(text), 4096, CAP), 10 + 100);
  const parts = { messages: [{ role: "user", content: [{ type: "text", text: "y".repeat(8) }] }] };
  assertEquals(requestTokensEstimate(chat(parts), 50, CAP), 2 + 50, "no limit: the default");
  const prompt = { path: "/completions", body: { prompt: "abcd", max_completion_tokens: 3 } };
  assertEquals(requestTokensEstimate(prompt, 9, CAP), 1 + 3);
  const embed = { path: "/embeddings", body: { input: ["abcdefgh"], max_tokens: 50 } };
  assertEquals(requestTokensEstimate(embed, 4096, CAP), 2, "embeddings: input only");
});

Deno.test("estimate: the largest output limit the node honours, times n or best_of", () => {
  const body = { messages: [], max_tokens: 1, max_completion_tokens: 900 };
  assertEquals(requestTokensEstimate(chat(body), 4096, CAP), 900, "max_completion_tokens wins");
  assertEquals(requestTokensEstimate(chat({ max_tokens: 300, n: 3 }), 4096, CAP), 900);
  assertEquals(requestTokensEstimate(chat({ max_tokens: 10, n: 2, best_of: 5 }), 0, CAP), 50);
  assertEquals(requestTokensEstimate(chat({ n: 4 }), 100, CAP), 400, "the default per completion");
  assertEquals(requestTokensEstimate(chat({ options: { num_predict: 70 } }), 9, CAP), 70);
  assertEquals(requestTokensEstimate(chat({ max_output_tokens: 12 }), 9, CAP), 12);
  const responses = { path: "/responses", body: { input: "abcd", max_output_tokens: 12 } };
  assertEquals(requestTokensEstimate(responses, 9, CAP), 1 + 12, "a Responses body generates");
});

Deno.test("estimate: token ids count one token each (prompt and input as tokens)", () => {
  const ids = Array.from({ length: 900 }, (_, i) => i);
  assertEquals(estimateInputTokens({ prompt: ids }), 900, "a prompt of ids");
  assertEquals(estimateInputTokens({ prompt: [ids, ids.slice(0, 100)] }), 1000, "prompts of ids");
  assertEquals(estimateInputTokens({ input: ids }), 900, "an embedding input of ids");
  assertEquals(estimateInputTokens({ input: [ids, [1, 2]] }), 902, "embedding inputs of ids");
  assertEquals(estimateInputTokens({ input: ["abcdefgh", "abcd"] }), 3, "text still by characters");
});

Deno.test("estimate: absurd output limits and counts are charged at most the cap", () => {
  for (const huge of [1e18, 2 ** 63, Number.MAX_VALUE]) {
    for (const field of ["max_tokens", "max_completion_tokens", "max_output_tokens", "n"]) {
      const body = { max_tokens: 10, [field]: huge };
      assertEquals(requestTokensEstimate(chat(body), 4096, CAP), CAP, `${field}: ${huge}`);
    }
    const options = { options: { num_predict: huge } };
    assertEquals(requestTokensEstimate(chat(options), 4096, CAP), CAP, `num_predict ${huge}`);
    const both = { max_tokens: huge, n: huge, best_of: huge };
    assertEquals(requestTokensEstimate(chat(both), 4096, CAP), CAP, "limit × n overflows to ∞");
  }
  // Values `checkOutputFields` refuses are never charged as limits.
  assertEquals(outputAskOf(chat({ max_tokens: -5, n: "9" }), CAP).outputLimit, null);
  assertEquals(outputAskOf(chat({ max_tokens: -5, n: "9" }), CAP).choices, 1);
});

Deno.test("checkOutputFields: a limit or count that is not a plain integer is a 400 naming it", () => {
  const refused: [JsonObject, string][] = [
    [{ max_tokens: "900" }, 'max_tokens: must be a non-negative integer, got "900"'],
    [
      { max_completion_tokens: 1.5 },
      "max_completion_tokens: must be a non-negative integer, got 1.5",
    ],
    [{ max_output_tokens: -1 }, "max_output_tokens: must be a non-negative integer, got -1"],
    [{ max_tokens: true }, "max_tokens: must be a non-negative integer, got true"],
    [{ n: 0 }, "n: must be a positive integer, got 0"],
    [{ best_of: "2" }, 'best_of: must be a positive integer, got "2"'],
    [{ options: { num_predict: -3 } }, "options.num_predict: must be an integer of at least -2"],
    [{ options: { num_predict: "64" } }, "options.num_predict: must be an integer of at least -2"],
    [
      { max_tokens: "9".repeat(500) },
      `max_tokens: must be a non-negative integer, got "${"9".repeat(39)}…`,
    ],
  ];
  for (const [body, message] of refused) {
    const err = assertThrows(() => checkOutputFields(body), FaceError);
    assertEquals(err.status, 400);
    assertEquals(err.message.slice(0, message.length), message, JSON.stringify(body).slice(0, 80));
  }
  for (
    const body of [
      {},
      { max_tokens: null, n: null },
      { max_tokens: 0, max_completion_tokens: 1e18, n: 1, best_of: 2 },
      { options: { num_predict: -1 } },
      { options: { num_predict: -2 } },
      { options: "not an object" },
    ]
  ) checkOutputFields(body);
});
