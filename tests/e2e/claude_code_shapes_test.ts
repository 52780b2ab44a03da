/**
 * A Messages request shaped the way Claude Code sends it (system blocks with `cache_control`, a
 * system turn mid-conversation, `thinking` with a budget, `anthropic-beta`, tools, metadata), over
 * the wire, streamed: it is answered, with a thinking block, the prompt's tokens in
 * `message_start`, and no Anthropic-only header at the node.
 */
import { assert, assertEquals } from "../_assert.ts";
import { parseSse } from "../faces/helpers.ts";
import { CHAT_MODEL, withGateway } from "./helpers.ts";

Deno.test("Claude Code shapes: system turns, thinking, cache_control, betas; streamed answer", async () => {
  await withGateway(async (e) => {
    const res = await fetch(`${e.base}/v1/messages`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "authorization": "Bearer sk-claude-code",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
        "x-app": "cli",
      },
      body: JSON.stringify({
        model: CHAT_MODEL,
        max_tokens: 32000,
        stream: true,
        thinking: { type: "enabled", budget_tokens: 31999 },
        metadata: { user_id: "user_abc" },
        system: [
          { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
        ],
        messages: [
          {
            role: "user",
            content: [{ type: "text", text: "hello there", cache_control: { type: "ephemeral" } }],
          },
          { role: "system", content: "Reminder: the date is today." },
          { role: "user", content: "go on" },
        ],
        tools: [{
          name: "Bash",
          description: "Run a command",
          input_schema: { type: "object", properties: { command: { type: "string" } } },
          cache_control: { type: "ephemeral" },
        }],
      }),
    });
    assertEquals(res.status, 200);
    const events = parseSse(await res.text());
    const start = events.find((x) => x.event === "message_start")?.data.message as {
      usage: { input_tokens: number };
    };
    assert(start.usage.input_tokens > 0, "message_start carries the prompt's tokens");
    const blocks = events.filter((x) => x.event === "content_block_start").map((x) =>
      (x.data.content_block as { type: string }).type
    );
    assertEquals(blocks, ["thinking", "text"]);
    assertEquals(events.at(-1)?.event, "message_stop");

    const up = e.fake.requests.at(-1)!;
    const body = up.body as { messages: { role: string }[]; reasoning_effort?: string };
    assertEquals(body.messages.map((m) => m.role), ["system", "user", "system", "user"]);
    assertEquals(body.reasoning_effort, "high");
    assertEquals(up.headers["anthropic-beta"], undefined);
    assertEquals(up.headers["anthropic-version"], undefined);
    const [ev] = await e.t.sink.waitFor(1);
    assertEquals(ev.input_tokens, start.usage.input_tokens, "exact from the first chunk");
  });
});
