/**
 * What the fake model does for clients that cannot send `fake_*` fields: a forced tool choice
 * calls the tool, reasoning on request, and vLLM's `continuous_usage_stats`.
 */
import { assertEquals } from "../_assert.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { chunksOf, postJson } from "./helpers.ts";

const USER = [{ role: "user", content: "weather in Oslo" }];
const TOOLS = [{
  type: "function",
  function: {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city", "days"],
    },
  },
}, { type: "function", function: { name: "other", parameters: { type: "object" } } }];

Deno.test("fake tools: a forced tool choice calls that tool with its required arguments", async () => {
  await withFakeModel(async (fake) => {
    const call = async (tool_choice: unknown, messages: unknown[] = USER) => {
      const res = await postJson(`${fake.url}/chat/completions`, {
        model: "m",
        messages,
        tools: TOOLS,
        tool_choice,
      });
      return (await res.json()).choices[0];
    };
    const required = await call("required");
    assertEquals(required.finish_reason, "tool_calls");
    assertEquals(required.message.tool_calls, [{
      id: "call_fake_0",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"tök","days":1}' },
    }]);
    const named = await call({ type: "function", function: { name: "other" } });
    assertEquals(named.message.tool_calls[0].function, { name: "other", arguments: "{}" });
    const auto = await call("auto");
    assertEquals(auto.finish_reason, "stop", "auto answers text");
    const after = await call("required", [...USER, {
      role: "assistant",
      tool_calls: [{ id: "c", type: "function", function: { name: "get_weather" } }],
    }, { role: "tool", tool_call_id: "c", content: "sunny" }]);
    assertEquals(after.message.content, "The tool said: sunny", "a tool result ends the loop");
  });
});

Deno.test("fake reasoning: reasoning_effort or fake_reasoning → reasoning_content, JSON and SSE", async () => {
  await withFakeModel(async (fake) => {
    const json = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      reasoning_effort: "low",
      fake_tokens: 2,
    })).json();
    assertEquals(json.choices[0].message.reasoning_content, "thinking tök0 tök1");
    assertEquals(json.usage.completion_tokens, 5, "3 reasoning pieces + 2 words");
    const text = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
      fake_reasoning: "a b",
      fake_tokens: 1,
    })).text();
    const deltas = chunksOf(text).map((c) => c.choices[0]?.delta as Record<string, unknown>);
    assertEquals(deltas.map((d) => d.reasoning_content).filter((r) => r !== undefined), [
      "a",
      " b",
    ]);
    const plain = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
    })).json();
    assertEquals("reasoning_content" in plain.choices[0].message, false, "none unless asked");
  });
});

Deno.test("fake continuous_usage_stats: every chunk carries the counts so far", async () => {
  await withFakeModel(async (fake) => {
    const text = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: USER,
      stream: true,
      fake_tokens: 2,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    })).text();
    const usages = chunksOf(text).map((c) => c.usage);
    assertEquals(usages.map((u) => u?.prompt_tokens), [3, 3, 3, 3, 3]);
    assertEquals(usages.map((u) => u?.completion_tokens), [0, 1, 2, 2, 2]);
  });
});
