/** The upstream body carries exactly one `model`, the served one (duplicate keys re-serialized). */
import { assertEquals } from "../_assert.ts";
import { rawServer, readRequest } from "../proxy/http1_helpers.ts";
import { post, startGateway } from "./helpers.ts";

const ANSWER = JSON.stringify({
  id: "c",
  object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
});

Deno.test("one model: a body with model twice reaches the upstream with only the routed one", async () => {
  const seen: string[] = [];
  const node = rawServer(async (conn) => {
    const carry = { text: "" };
    for (;;) {
      const req = await readRequest(conn, carry);
      if (req === "") return;
      seen.push(req.slice(req.indexOf("\r\n\r\n") + 4));
      await conn.write(new TextEncoder().encode(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${ANSWER.length}\r\n\r\n${ANSWER}`,
      ));
    }
  });
  const t = await startGateway({ nodes: [{ id: "n", url: `${node.url}/v1`, model: "m" }] });
  try {
    const body = '{"model":"other","messages":[{"role":"user","content":"hi"}],"model":"m"}';
    const r = await post(`${t.base}/v1/chat/completions`, body);
    assertEquals(r.status, 200);
    assertEquals(seen.length, 1);
    const sent = seen[0];
    assertEquals(sent.split('"model"').length - 1, 1, `one model key upstream: ${sent}`);
    assertEquals(JSON.parse(sent).model, "m", "the routed and served one");
    const [e] = await t.sink.waitFor(1);
    assertEquals([e.model, e.requested_model], ["m", "m"]);
    // An ordinary body still goes as sent (no re-serialization).
    const plain = '{"model": "m",  "messages": [{"role":"user","content":"hi"}]}';
    assertEquals((await post(`${t.base}/v1/chat/completions`, plain)).status, 200);
    assertEquals(seen[1], plain, "the client's bytes, unchanged");
  } finally {
    await t.stop();
    await node.close();
  }
});
