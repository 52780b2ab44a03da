/**
 * Node URL credentials (`http://user:password@host/v1`) reach the node as Basic auth and appear
 * nowhere else: not in events (`route_url`), logs or admin answers.
 */
import { assert, assertEquals } from "../_assert.ts";
import { chat, post, scriptedUpstream, startGateway } from "./helpers.ts";

const ADMIN = { authorization: "Bearer admin-secret" };

Deno.test("node url credentials: sent as Basic auth, never shown", async () => {
  const node = scriptedUpstream(() =>
    Response.json({
      id: "c",
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    })
  );
  const url = node.url.replace("http://", "http://alice:s3cr%40t@");
  const t = await startGateway({
    admin: { api_key: "admin-secret" },
    nodes: [{ id: "n", url, model: "m" }],
  });
  try {
    const r = await post(`${t.base}/v1/chat/completions`, chat("m"), {
      authorization: "Bearer sk-customer",
    });
    assertEquals(r.status, 200);
    assertEquals(
      node.requests[0].headers.get("authorization"),
      `Basic ${btoa("alice:s3cr@t")}`,
      "the node still gets its credentials, and not the client's",
    );
    const [e] = await t.sink.waitFor(1);
    assertEquals(e.route_url, node.url);
    const answers = [
      await (await fetch(`${t.base}/skeid/nodes`, { headers: ADMIN })).text(),
      await (await fetch(`${t.base}/skeid/call/nodes.list`, {
        method: "POST",
        headers: ADMIN,
        body: "{}",
      })).text(),
      await (await fetch(`${t.base}/skeid/metrics/nodes`, { headers: ADMIN })).text(),
      await (await fetch(`${t.base}/skeid/metrics`, { headers: ADMIN })).text(),
      JSON.stringify(t.logger.lines),
      JSON.stringify(e),
    ];
    assert(answers[0].includes(node.url), "the node is listed, without its credentials");
    for (const text of answers) {
      assert(!text.includes("s3cr") && !text.includes("alice"), `no credentials in: ${text}`);
    }
  } finally {
    await t.stop();
    await node.close();
  }
});
