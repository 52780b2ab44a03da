/**
 * `fake_tool_calls_once`: the fake model makes its `fake_tool_calls` until the conversation ends
 * with a tool result, then answers — an agent that repeats one header on every request ends.
 */
import { assertEquals } from "../_assert.ts";
import { withFakeModel } from "../_helpers/fake.ts";
import { postJson } from "./helpers.ts";

const TOOLS = [{ type: "function", function: { name: "get_weather", parameters: {} } }];
const STEER = {
  fake_tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }],
  fake_tool_calls_once: true,
};

Deno.test("fake model: fake_tool_calls_once calls the tool, then answers its result", async () => {
  await withFakeModel(async (fake) => {
    const user = { role: "user", content: "weather?" };
    const first = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: [user],
      tools: TOOLS,
      ...STEER,
    })).json();
    assertEquals(first.choices[0].finish_reason, "tool_calls");
    const call = first.choices[0].message.tool_calls[0];
    const second = await (await postJson(`${fake.url}/chat/completions`, {
      model: "m",
      messages: [
        user,
        first.choices[0].message,
        { role: "tool", tool_call_id: call.id, content: "cold" },
      ],
      tools: TOOLS,
      ...STEER,
    })).json();
    assertEquals(second.choices[0].finish_reason, "stop");
    assertEquals(second.choices[0].message.content, "The tool said: cold");
  });
});
