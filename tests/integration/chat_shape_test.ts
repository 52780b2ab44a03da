/**
 * A chat body whose `messages` is not a list of message objects is refused by the gateway (400
 * naming the place, in the OpenAI error shape) before it takes a slot: the node never sees it
 * and no usage event is written. A well-formed one after it is served as usual.
 */
import { assertEquals } from "../_assert.ts";
import {
  assertNothingForwarded,
  chat,
  chatAnswer,
  post,
  scriptedUpstream,
  startGateway,
} from "./helpers.ts";

Deno.test("chat shape: malformed messages are a 400 naming where; the node sees none", async () => {
  const node = scriptedUpstream(() => chatAnswer());
  const t = await startGateway({ nodes: [{ id: "n1", url: node.url, model: "m1" }] });
  try {
    const cases: [unknown, string][] = [
      [undefined, "messages: Field required"],
      ["oops", "messages: must be an array of message objects, got a string"],
      [
        [{ role: "user", content: "hi" }, "hi"],
        "messages[1]: must be a message object, got a string",
      ],
      [[{ content: "hi" }], "messages[0].role: must be a non-empty string"],
    ];
    for (const [messages, message] of cases) {
      const r = await post(`${t.base}/v1/chat/completions`, { model: "m1", messages });
      assertEquals(r.status, 400, r.text);
      assertEquals(r.json, { error: { message, type: "invalid_request_error" } });
    }
    const embed = await post(`${t.base}/v1/embeddings`, { model: "m1" });
    assertEquals(embed.status, 400, embed.text);
    assertEquals((embed.json.error as { message: string }).message, "input: Field required");
    await assertNothingForwarded(t, node);
    const ok = await post(`${t.base}/v1/chat/completions`, chat("m1"));
    assertEquals(ok.status, 200, ok.text);
    assertEquals(node.requests.length, 1);
  } finally {
    await t.stop();
    await node.close();
  }
});
