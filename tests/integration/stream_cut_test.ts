/**
 * An upstream stream cut in the middle of an event: the error that ends the client's stream is
 * its own well-formed frame, never glued onto the truncated bytes (OpenAI face, include_usage:
 * the raw relay).
 */
import { assert, assertEquals } from "../_assert.ts";
import { rawServer, readRequest } from "../proxy/http1_helpers.ts";
import { chat, startGateway } from "./helpers.ts";

const enc = new TextEncoder();

function chunked(text: string): string {
  return `${enc.encode(text).byteLength.toString(16)}\r\n${text}\r\n`;
}

const FRAME = `data: ${
  JSON.stringify({
    id: "c",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta: { content: "Hello" } }],
  })
}\n\n`;

Deno.test("stream cut mid-event: the client's error frame stands on its own", async () => {
  const node = rawServer(async (conn) => {
    if ((await readRequest(conn)) === "") return;
    await conn.write(enc.encode(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
        chunked(FRAME),
    ));
    // Let the whole frame go out on its own, then half of the next one, then cut.
    await new Promise((r) => setTimeout(r, 20));
    await conn.write(enc.encode(chunked('data: {"id":"c","object":"chat.completion.chunk","choi')));
    await new Promise((r) => setTimeout(r, 20));
    conn.close();
  });
  const t = await startGateway({ nodes: [{ id: "n", url: `${node.url}/v1`, model: "m" }] });
  try {
    const res = await fetch(`${t.base}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat("m", { stream: true, stream_options: { include_usage: true } })),
    });
    assertEquals(res.status, 200);
    const text = await res.text();
    const frames = text.split("\n\n").filter((f) => f.trim() !== "");
    for (const f of frames) {
      assert(f.startsWith("data: "), `a data frame: ${JSON.stringify(f)}`);
      const data = f.slice(6);
      if (data === "[DONE]") continue;
      JSON.parse(data); // every frame the client gets parses
    }
    assertEquals(frames.length, 2, `the whole frame and the error frame: ${text}`);
    const error = JSON.parse(frames[1].slice(6)).error;
    assertEquals(error.type, "upstream_error");
    const [e] = await t.sink.waitFor(1);
    assertEquals(e.status_code, 502);
  } finally {
    await t.stop();
    await node.close();
  }
});
