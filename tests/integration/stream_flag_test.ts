/**
 * `stream` is a JSON boolean on every face: `"true"` or `1` is a 400 naming `stream`, never
 * relayed as a whole answer that a lenient upstream streams (and Skeid bills $0).
 */
import { startFakeModel } from "../../src/fake/model.ts";
import { assertEquals, assertStringIncludes } from "../_assert.ts";
import { assertNothingForwarded, post, startGateway } from "./helpers.ts";

const messages = [{ role: "user", content: "hello there" }];
const BODIES: [string, Record<string, unknown>][] = [
  ["/v1/chat/completions", { model: "m", messages }],
  ["/v1/completions", { model: "m", prompt: "hello" }],
  ["/v1/messages", { model: "m", max_tokens: 16, messages }],
  ["/api/chat", { model: "m", messages }],
  ["/api/generate", { model: "m", prompt: "hello" }],
  ["/v1/responses", { model: "m", input: "hello" }],
];

Deno.test("stream flag: a string or a number is a 400 naming stream on every face", async () => {
  const fake = startFakeModel();
  const t = await startGateway({ nodes: [{ id: "n", url: fake.url, model: "m" }] });
  try {
    for (const [path, body] of BODIES) {
      for (const stream of ["true", 1]) {
        const r = await post(`${t.base}${path}`, { ...body, stream });
        assertEquals(r.status, 400, `${path} stream=${JSON.stringify(stream)}: ${r.text}`);
        assertStringIncludes(r.text, "stream", path);
      }
    }
    await assertNothingForwarded(t, fake);
    // A JSON boolean (or none) still goes through.
    const ok = await post(`${t.base}/v1/chat/completions`, { model: "m", messages, stream: false });
    assertEquals(ok.status, 200);
  } finally {
    await t.stop();
    await fake.close();
  }
});
